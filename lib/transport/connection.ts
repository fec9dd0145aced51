// The connection to one cluster: its options, the limiters every request passes, observation and
// close (discovery and the resource client live in their own files).
import type { KubeConfig } from '@kubernetes/client-node';
import type { Readable } from 'node:stream';
import {
  booleanOption,
  ClosedError,
  functionOption,
  KubeApiError,
  nonEmptyString,
  noopLogger,
  positiveInteger,
  positiveNumber,
  realClock,
  type Clock,
  type GroupVersionKind,
  type Logger,
} from '../util/index.ts';
import { defaultSocketBudget, SocketBudget } from './budget.ts';
import { Discovery } from './discovery.ts';
import { ConcurrencyLimiter, defaultListLimiter, TokenBucket } from './limiter.ts';
import { readLimitsOf, type ReadLimits } from './read-limits.ts';
import { HttpResourceClient, type ConnectionPort, type PortRequest, type Sent, type WatchRequest } from './resource-client.ts';
import { Transport, type Impersonation } from './transport.ts';
import type { ResourceClient, ResourceInfo, ResourceResolver, WatchEvent } from './types.ts';
import { decodeWatchStream } from './watch-decoder.ts';

/** One finished request to a cluster, for metrics (client-go's `rest_client_*`). */
export interface RequestObservation {
  /** {@link ClusterConnectionOptions.name}. */
  readonly cluster: string;
  /** HTTP method (`GET` for a watch). */
  readonly method: string;
  /**
   * The HTTP status the server answered with, as text (`'200'`, `'201'`, `'404'`), as client-go's
   * `rest_client_requests_total` labels it; `'<error>'`, as client-go writes it, when no status
   * arrived, or a success's body could not be read (connection failure, timeout, abort, a limit).
   */
  readonly code: string;
  /** From sending to the whole body read (a watch: to its response headers), on the connection's clock. */
  readonly durationMs: number;
}

/** Options of {@link ClusterConnection}. */
export interface ClusterConnectionOptions extends ReadLimits {
  /** The cluster's name in the fleet; it appears in every error and log line. Required, non-empty. */
  readonly name: string;
  /**
   * The kubeconfig of this cluster alone. client-node caches credentials per user name, so one
   * `KubeConfig` must never be shared by two clusters. Required; its current context is used.
   */
  readonly kubeConfig: KubeConfig;
  /** Sustained requests per second to this cluster (token refill rate). Default 20. */
  readonly qps?: number;
  /** Requests that may be sent at once before `qps` applies (bucket size). Default 30. */
  readonly burst?: number;
  /**
   * Limiter on concurrent LISTs shared across connections (see `createListLimiter`). Default: one
   * process-wide limiter of 50. It is not stopped by `close()`: its owner stops it.
   */
  readonly listLimiter?: ConcurrencyLimiter;
  /**
   * How many LIST pages of this cluster may hold or wait for a slot of `listLimiter` at once (its
   * share): an API server that accepts and never answers then holds this many slots until
   * `requestTimeoutMs`, and the other clusters keep the rest. Default 5 (an informer's page and the
   * page fetched ahead of it take two).
   */
  readonly maxListsPerCluster?: number;
  /** How long a discovery result is trusted. Default 300 000 (5 minutes). A miss always re-reads. */
  readonly discoveryTtlMs?: number;
  /** Bound on a non-watch request, body included. Default 60 000. */
  readonly requestTimeoutMs?: number;
  /**
   * Act as this user (and groups) on every request: `Impersonate-User` / `Impersonate-Group`
   * headers on top of the kubeconfig's own credentials, which must be allowed to impersonate.
   * Default: none, the kubeconfig's own identity.
   */
  readonly impersonate?: Impersonation | undefined;
  /**
   * Offer HTTP/2 to an https API server reached without a proxy: every request and watch to the
   * cluster then shares one TLS connection (as client-go does). A server that does not offer h2 is
   * spoken to over HTTP/1.1 with one keep-alive agent, as with `false`. Default true.
   */
  readonly http2?: boolean;
  /**
   * An HTTP/2 connection sends a PING after this long (and closes once idle that long with no
   * stream open). Default 30 000, client-go's ReadIdleTimeout.
   */
  readonly pingIntervalMs?: number;
  /** A PING unanswered this long fails every stream of the connection. Default 15 000 (client-go's PingTimeout). */
  readonly pingTimeoutMs?: number;
  /**
   * The sockets this connection may open, shared with every other connection given the same
   * budget: each HTTP/2 session and each HTTP/1.1 socket takes a slot first, waiting its turn when
   * none is free. Default: the process-wide budget (`defaultSocketBudget()`, sized from the
   * descriptor limit). Not closed by `close()`: it outlives connections.
   */
  readonly socketBudget?: SocketBudget;
  /** User-Agent header. Default `fleetcache`. */
  readonly userAgent?: string;
  /** Default: discards everything. */
  readonly logger?: Logger;
  /** Default: the wall clock. */
  readonly clock?: Clock;
  /**
   * Called once per request after it settles (synchronously, on the request's path: keep it cheap;
   * a throw is ignored). Requests still waiting for the limiter are not requests yet. Default: none.
   */
  readonly onRequest?: ((observation: RequestObservation) => void) | undefined;
  /**
   * Called with each chunk of every watch response as it arrives, before the watch decoder sees it
   * (synchronously, on the stream's path: keep it cheap and do not keep or change the chunk; a throw
   * is ignored). For latency measurements that start where the bytes reach the process
   * (`bench/registry.bench.ts`). Default: none, and then nothing is attached to the stream.
   */
  readonly onWatchChunk?: ((chunk: Buffer) => void) | undefined;
}

/** A request made through {@link ClusterConnection.request}. */
export interface RequestOptions {
  readonly method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** Absolute API path, e.g. from {@link resourcePath}. */
  readonly path: string;
  /** Query parameters; undefined values are left out. */
  readonly query?: Readonly<Record<string, string | number | boolean | undefined>>;
  /** Serialized as JSON. */
  readonly body?: unknown;
  /**
   * Content-Type of the body. Default `application/json`; use `application/merge-patch+json`,
   * `application/json-patch+json` or `application/apply-patch+yaml` for PATCH.
   */
  readonly contentType?: string;
  readonly signal?: AbortSignal;
  /** The resource concerned, carried by the errors. */
  readonly gvk?: GroupVersionKind;
}


/**
 * The connection to one cluster: its kubeconfig and credentials, one keep-alive HTTP agent, a
 * request limiter (QPS/burst), the shared LIST limiter, and discovery (GVK → resource and scope,
 * cached with a TTL and re-read on a miss so a CRD installed later is found). The constructor
 * does no I/O; `close()` destroys the sockets.
 */
export class ClusterConnection implements ResourceResolver {
  readonly name: string;
  readonly #transport: Transport;
  readonly #requests: TokenBucket;
  readonly #lists: ConcurrencyLimiter;
  readonly #share: ConcurrencyLimiter;
  readonly #requestTimeoutMs: number;
  readonly #limits: Required<ReadLimits>;
  readonly #logger: Logger;
  readonly #clock: Clock;
  readonly #onRequest: ((observation: RequestObservation) => void) | undefined;
  readonly #onWatchChunk: ((chunk: Buffer) => void) | undefined;
  /** GVK → resource and scope (`discovery.ts`: its invariants are stated there). */
  readonly #discovery: Discovery;
  /** Aborted by `close()`: ends shared work (discovery) no single caller owns. */
  readonly #life = new AbortController();
  /** What the resource clients may do with this connection (kept off the public surface). */
  readonly #port: ConnectionPort = {
    send: (request, signal, kind) => this.#send(request, signal, kind),
    openWatch: (request, signal) => this.#openWatch(request, signal),
  };

  constructor(options: ClusterConnectionOptions) {
    nonEmptyString('ClusterConnection', 'name', options.name);
    if (typeof options.kubeConfig !== 'object' || typeof options.kubeConfig.getCurrentCluster !== 'function') {
      throw new TypeError(`ClusterConnection option kubeConfig must be a KubeConfig, got ${typeof options.kubeConfig}`);
    }
    const impersonate = options.impersonate;
    if (impersonate !== undefined && (typeof impersonate.user !== 'string' || impersonate.user === '' || !Array.isArray(impersonate.groups) || impersonate.groups.some((g) => typeof g !== 'string' || g === ''))) {
      throw new TypeError(`ClusterConnection option impersonate must name a non-empty user and non-empty groups, got ${JSON.stringify(impersonate)}`);
    }
    const settings = {
      qps: positiveNumber('ClusterConnection', 'qps', options.qps ?? 20),
      burst: positiveInteger('ClusterConnection', 'burst', options.burst ?? 30),
      discoveryTtlMs: positiveNumber('ClusterConnection', 'discoveryTtlMs', options.discoveryTtlMs ?? 300_000),
      requestTimeoutMs: positiveNumber('ClusterConnection', 'requestTimeoutMs', options.requestTimeoutMs ?? 60_000),
      pingIntervalMs: positiveNumber('ClusterConnection', 'pingIntervalMs', options.pingIntervalMs ?? 30_000),
      pingTimeoutMs: positiveNumber('ClusterConnection', 'pingTimeoutMs', options.pingTimeoutMs ?? 15_000),
      userAgent: options.userAgent ?? 'fleetcache',
      clock: options.clock ?? realClock,
      limits: readLimitsOf(options, 'ClusterConnection'),
    };
    if (options.onRequest !== undefined) functionOption('ClusterConnection', 'onRequest', options.onRequest);
    if (options.onWatchChunk !== undefined) functionOption('ClusterConnection', 'onWatchChunk', options.onWatchChunk);
    this.name = options.name;
    this.#onRequest = options.onRequest;
    this.#onWatchChunk = options.onWatchChunk;
    this.#clock = settings.clock;
    this.#limits = settings.limits;
    this.#logger = (options.logger ?? noopLogger).child({ cluster: options.name });
    this.#requestTimeoutMs = settings.requestTimeoutMs;
    if (options.socketBudget !== undefined && !(options.socketBudget instanceof SocketBudget)) throw new TypeError('ClusterConnection option socketBudget must be a SocketBudget');
    if (options.http2 !== undefined) booleanOption('ClusterConnection', 'http2', options.http2);
    this.#transport = new Transport({
      cluster: options.name,
      kubeConfig: options.kubeConfig,
      clock: settings.clock,
      userAgent: settings.userAgent,
      maxErrorBytes: settings.limits.maxErrorBytes,
      impersonate,
      http2: options.http2 ?? true,
      liveness: { pingIntervalMs: settings.pingIntervalMs, pingTimeoutMs: settings.pingTimeoutMs },
      budget: options.socketBudget ?? defaultSocketBudget(),
    });
    this.#requests = new TokenBucket({ qps: settings.qps, burst: settings.burst, clock: settings.clock });
    this.#lists = options.listLimiter ?? defaultListLimiter();
    this.#share = new ConcurrencyLimiter({ maxConcurrent: positiveInteger('ClusterConnection', 'maxListsPerCluster', options.maxListsPerCluster ?? 5), what: `LIST share of cluster ${options.name}` });
    this.#discovery = new Discovery({
      cluster: options.name,
      ttlMs: settings.discoveryTtlMs,
      clock: settings.clock,
      logger: this.#logger,
      fetch: (path, gvk) => this.#send({ method: 'GET', path, gvk }, this.#life.signal, 'other'),
    });
  }

  /** The API server URL. */
  get server(): string {
    return this.#transport.server;
  }

  /** The protocol requests travel on (`h2` or `http/1.1`); undefined before the first request settled it. */
  get protocol(): 'h2' | 'http/1.1' | undefined {
    return this.#transport.protocol;
  }

  /**
   * Resolves a GVK to its resource name and scope. A cached group/version that lacks the kind is
   * re-read once before giving up, so a CRD installed after the first look is found. Rejects with
   * `UnknownKindError` when the server does not serve the kind, `KubeApiError`/`TransportError`
   * when discovery itself failed, `InvalidPathSegmentError` (before any request) when the GVK
   * cannot be part of a URL.
   */
  resolve(gvk: GroupVersionKind, signal?: AbortSignal): Promise<ResourceInfo> {
    return this.#discovery.resolve(gvk, signal);
  }

  /** A LIST/WATCH client for one resource of this cluster (cheap; holds no resources of its own). */
  resourceClient(info: ResourceInfo): ResourceClient {
    return new HttpResourceClient(this.name, info, this.#port);
  }

  /**
   * Sends one JSON request (get/create/update/patch/delete) through the request limiter and
   * resolves with the parsed response body (undefined when empty). A non-2xx status rejects with a
   * `KubeApiError` carrying the Status body; a broken connection with a `TransportError`.
   */
  async request(options: RequestOptions): Promise<unknown> {
    const signal = options.signal ?? this.#life.signal;
    const query = new URLSearchParams();
    for (const [key, value] of Object.entries(options.query ?? {})) {
      if (value !== undefined) query.set(key, String(value));
    }
    return this.#send({
      method: options.method,
      path: options.path,
      query,
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
      contentType: options.contentType,
      gvk: options.gvk,
    }, signal, 'other');
  }

  /** Releases every socket; requests waiting for a token or a LIST share fail. Idempotent; later requests fail. */
  close(): Promise<void> {
    if (!this.#life.signal.aborted) {
      this.#life.abort(new ClosedError(`connection to cluster ${this.name}`));
      this.#transport.close();
      this.#discovery.clear();
      this.#requests.close();
      void this.#share.stop();
    }
    return Promise.resolve();
  }

  /** One JSON request through the request limiter (and the LIST limiter for a LIST page). */
  #send(request: PortRequest, signal: AbortSignal, kind: Sent): Promise<unknown> {
    if (this.#life.signal.aborted) return Promise.reject(new ClosedError(`connection to cluster ${this.name}`));
    const limit = kind === 'other'
      ? { name: 'maxResponseBytes' as const, bytes: this.#limits.maxResponseBytes }
      : { name: 'maxListBytes' as const, bytes: this.#limits.maxListBytes };
    const go = (): Promise<unknown> => this.#observed(request.method, (onStatus) => this.#transport.json({ ...request, signal, onStatus }, this.#requestTimeoutMs, limit, request.parse, request.peek));
    // A LIST page takes the cluster's share first: its pages wait there, not in the shared queue.
    if (kind === 'continue') return this.#share.run(signal, () => this.#lists.run(signal, go));
    const run = async (): Promise<unknown> => {
      await this.#requests.take(signal);
      return go();
    };
    return kind === 'list' ? this.#share.run(signal, () => this.#lists.run(signal, run)) : run();
  }

  /** Opens a watch stream through the request limiter. */
  async #openWatch(request: WatchRequest, signal: AbortSignal): Promise<AsyncIterable<readonly WatchEvent[]>> {
    if (this.#life.signal.aborted) throw new ClosedError(`connection to cluster ${this.name}`);
    const { path, query, gvk } = request;
    await this.#requests.take(signal);
    const res = await this.#observed('GET', (onStatus) => this.#transport.open({ method: 'GET', path, query, gvk, signal, long: true, onStatus }));
    if (this.#onWatchChunk !== undefined) observeChunks(res.body, this.#onWatchChunk);
    return decodeWatchStream(res.body, { cluster: this.name, gvk }, signal, {
      dropManagedFields: request.dropManagedFields,
      objectText: request.objectText,
      maxEventBytes: this.#limits.maxWatchEventBytes,
      request: { method: 'GET', path },
    });
  }

  /** Runs one request and reports it to `onRequest`, with the status `send` is told of. */
  async #observed<R>(method: string, send: (onStatus: ((statusCode: number) => void) | undefined) => Promise<R>): Promise<R> {
    if (this.#onRequest === undefined) return send(undefined);
    const started = this.#clock.now();
    let code = '<error>';
    let status = 0;
    try {
      const result = await send((statusCode) => { status = statusCode; });
      // Every success went through the transport's `open`, which reported its status.
      if (status > 0) code = String(status);
      return result;
    } catch (err) {
      if (err instanceof KubeApiError && err.statusCode > 0) code = String(err.statusCode);
      throw err;
    } finally {
      try {
        this.#onRequest({ cluster: this.name, method, code, durationMs: this.#clock.now() - started });
      } catch {
        // An observer's failure must not fail the request it observed.
      }
    }
  }
}

/**
 * Puts `observer` ahead of the watch decoder on `body`. The stream is paused first so that this
 * listener does not start the flow before the decoder listens (chunks would reach only the
 * observer); the decoder resumes a paused stream at its first read, and from then on each chunk
 * reaches the observer, then the decoder, in one emit.
 */
function observeChunks(body: Readable, observer: (chunk: Buffer) => void): void {
  body.pause();
  body.on('data', (chunk: Buffer) => {
    try {
      observer(chunk);
    } catch {
      // An observer's failure must not fail the watch it observed.
    }
  });
}
