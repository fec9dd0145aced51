import type { KubeConfig } from '@kubernetes/client-node';
import {
  apiVersionOf,
  booleanOption,
  childController,
  ClosedError,
  FleetcacheError,
  functionOption,
  invalidOption,
  KubeApiError,
  nonEmptyString,
  noopLogger,
  positiveInteger,
  positiveNumber,
  raceAbort,
  realClock,
  TransportError,
  UnknownKindError,
  type Clock,
  type GroupVersionKind,
  type Logger,
} from '../util/index.ts';
import { defaultSocketBudget, SocketBudget } from './budget.ts';
import { ConcurrencyLimiter, defaultListLimiter, TokenBucket } from './limiter.ts';
import type { Peek } from './bounded.ts';
import { Transport, type Impersonation } from './transport.ts';
import type {
  KubeList,
  ListOptions,
  ResourceClient,
  ResourceInfo,
  ResourceResolver,
  WatchEvent,
  WatchOptions,
} from './types.ts';
import { checkGvk, checkName, checkNamespace, checkResource } from './segments.ts';
import { parseListDroppingManagedFields } from './strip.ts';
import { decodeWatchStream } from './watch-decoder.ts';

const MiB = 1024 * 1024;

/**
 * Group/versions whose discovery a connection remembers (least recently used re-read beyond). A
 * connection resolves only the kinds its caches watch, a handful in practice.
 */
const DISCOVERY_GROUPS = 64;

/**
 * Bounds on what one answer of an API server may make this process hold. A read stops at its limit
 * and destroys the stream (the excess is never buffered) with a `LimitExceededError` naming the
 * limit; the cache concerned backs off as after any other failure.
 */
export interface ReadLimits {
  /**
   * Largest watch event (one line: one object plus a small envelope). Default 16 MiB: the API
   * server refuses objects above about 1.5 MiB (etcd's request limit), so ten times that is
   * headroom, and a pod's memory limit survives several watches each holding one line.
   */
  readonly maxWatchEventBytes?: number;
  /**
   * Largest LIST response (one page). Default 64 MiB: a page of 500 objects (the informer's default
   * page size) averaging 128 KiB, about twenty times a real page of Pods, while one page being
   * parsed (roughly three times its size in objects) still fits the service's 512 MiB pod limit.
   * Raise it for an unpaginated LIST of a large collection (the fallback after two expired
   * continue tokens).
   */
  readonly maxListBytes?: number;
  /**
   * Largest other successful response: discovery documents and single-object answers of
   * `request()` (GET, PATCH, ...). Default 16 MiB, as for a watch event.
   */
  readonly maxResponseBytes?: number;
  /**
   * Largest error response body read to build a `KubeApiError` (a Status is a few hundred bytes).
   * Default 64 KiB; beyond it the HTTP status alone is reported, with a `LimitExceededError` as `cause`.
   */
  readonly maxErrorBytes?: number;
}

/** The defaults of {@link ReadLimits}, in bytes. */
export const DEFAULT_READ_LIMITS: Readonly<Required<ReadLimits>> = Object.freeze({
  maxWatchEventBytes: 16 * MiB,
  maxListBytes: 64 * MiB,
  maxResponseBytes: 16 * MiB,
  maxErrorBytes: 64 * 1024,
});

/** One finished request to a cluster, for metrics (client-go's `rest_client_*`). */
export interface RequestObservation {
  /** {@link ClusterConnectionOptions.name}. */
  readonly cluster: string;
  /** HTTP method (`GET` for a watch). */
  readonly method: string;
  /**
   * The HTTP status as text when the server answered with an error (`'404'`); `'2xx'` when it
   * succeeded (the transport does not surface which 2xx; PromQL's `code=~"2.."` matches it);
   * `'<error>'`, as client-go writes it, when no status arrived (connection failure, timeout, abort).
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
 * The API path of a resource collection or of one object. `namespace` is ignored for cluster-scoped
 * resources; without it a namespaced resource's path covers all namespaces.
 */
export function resourcePath(info: ResourceInfo, where: { readonly namespace?: string | undefined; readonly name?: string | undefined } = {}): string {
  // Every value is checked as a path segment before it is pasted: a version such as
  // `v1/namespaces/kube-system/secrets/db?` must not reach another resource with our credentials.
  checkGvk(info.gvk);
  checkResource(info.resource);
  if (info.namespaced && where.namespace !== undefined && where.namespace !== '') checkNamespace(where.namespace);
  if (where.name !== undefined) checkName(where.name);
  const { group, version } = info.gvk;
  const root = group === '' ? `/api/${version}` : `/apis/${group}/${version}`;
  const ns = info.namespaced && where.namespace !== undefined && where.namespace !== '' ? `/namespaces/${encodeURIComponent(where.namespace)}` : '';
  const name = where.name === undefined ? '' : `/${encodeURIComponent(where.name)}`;
  return `${root}${ns}/${info.resource}${name}`;
}

interface PortRequest {
  readonly method: string;
  readonly path: string;
  readonly query?: URLSearchParams;
  readonly body?: string | undefined;
  readonly contentType?: string | undefined;
  readonly gvk?: GroupVersionKind | undefined;
  /** Parses the response body; default `JSON.parse` of its text. */
  readonly parse?: ((body: Buffer) => unknown) | undefined;
  /** Sees the start of the body as it arrives. */
  readonly peek?: Peek | undefined;
}

/**
 * A LIST page is read under `maxListBytes`, anything else under `maxResponseBytes`. A continuation
 * page (`continue`) skips the QPS limiter: it is the rest of one LIST already admitted, as
 * client-go's pager does not pay the rate limit per page either; it still takes a LIST slot.
 */
type Sent = 'list' | 'continue' | 'other';

interface WatchRequest {
  readonly path: string;
  readonly query: URLSearchParams;
  readonly gvk: GroupVersionKind;
  readonly dropManagedFields: boolean;
}

/** The private capabilities a connection lends its resource clients. */
interface ConnectionPort {
  send(request: PortRequest, signal: AbortSignal, kind: Sent): Promise<unknown>;
  openWatch(request: WatchRequest, signal: AbortSignal): Promise<AsyncIterable<readonly WatchEvent[]>>;
}

interface DiscoveredGroup {
  /** Kind → resource, for the top-level resources (no subresources) of one group/version. */
  /**
   * The top-level resources (no subresources) of one group/version, in the server's order. An
   * array, searched from the end (a kind listed twice resolves to its last entry, as a Map set in
   * order would): a Map per group/version cost about 130 bytes more for the few kinds of a group.
   */
  readonly kinds: readonly ResourceInfo[];
  /** When it was read (the connection's clock): trusted until `ttlMs` later. */
  readonly readAt: number;
}

/**
 * The discovery results of one connection: at most `max` group/versions, the least recently used
 * dropped first, each trusted for `ttlMs` after it was read (a hit does not extend it). A Map in
 * recency order: lru-cache, used before, allocates its arrays for `max` up front, about 5.6 KiB
 * per cluster for the handful of group/versions a connection uses (issue 12).
 *
 * Invariant: `#groups` iterates from the least to the most recently used and holds at most `max`.
 */
class DiscoveryCache {
  readonly #groups = new Map<string, DiscoveredGroup>();
  readonly #max: number;
  readonly #ttlMs: number;
  readonly #clock: Clock;

  constructor(options: { readonly max: number; readonly ttlMs: number; readonly clock: Clock }) {
    this.#max = options.max;
    this.#ttlMs = options.ttlMs;
    this.#clock = options.clock;
  }

  /** The group/version's result while it is trusted (it becomes the most recently used); undefined otherwise. */
  get(gv: string): DiscoveredGroup | undefined {
    const group = this.#groups.get(gv);
    if (group === undefined) return undefined;
    this.#groups.delete(gv);
    if (this.#clock.now() - group.readAt > this.#ttlMs) return undefined;
    this.#groups.set(gv, group);
    return group;
  }

  set(gv: string, group: DiscoveredGroup): void {
    this.#groups.delete(gv);
    this.#groups.set(gv, group);
    if (this.#groups.size <= this.#max) return;
    for (const oldest of this.#groups.keys()) {
      this.#groups.delete(oldest);
      break;
    }
  }

  clear(): void {
    this.#groups.clear();
  }
}

interface ApiResourceList {
  readonly resources?: readonly { readonly name?: unknown; readonly kind?: unknown; readonly namespaced?: unknown; readonly verbs?: unknown }[];
}

/** Validates the read limits and merges them over the defaults (into a new object). */
export function readLimitsOf(options: ReadLimits, owner: string): Required<ReadLimits> {
  const out = { ...DEFAULT_READ_LIMITS };
  for (const name of Object.keys(DEFAULT_READ_LIMITS) as (keyof ReadLimits)[]) {
    const value = options[name];
    if (value === undefined) continue;
    if (!Number.isSafeInteger(value) || value < 1) invalidOption(owner, name, value, 'a positive integer (bytes)');
    out[name] = value;
  }
  return out;
}

/**
 * The connection to one cluster: its kubeconfig and credentials, one keep-alive HTTP agent, a
 * request limiter (QPS/burst), the shared LIST limiter, and discovery (GVK → resource and scope,
 * cached with a TTL and re-read on a miss so a CRD installed later is found). The constructor
 * does no I/O; `close()` destroys the sockets.
 *
 * Invariants: `#discovery` holds only successful discovery results; `#discovering` holds the one
 * in-flight discovery request per group/version and loses it when it settles.
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
  readonly #discovery: DiscoveryCache;
  /** Created while a discovery is in flight, dropped when none is: most of a connection's life. */
  #discovering: Map<string, Promise<DiscoveredGroup>> | undefined;
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
    this.name = options.name;
    this.#onRequest = options.onRequest;
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
    this.#discovery = new DiscoveryCache({ max: DISCOVERY_GROUPS, ttlMs: settings.discoveryTtlMs, clock: settings.clock });
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
  async resolve(gvk: GroupVersionKind, signal?: AbortSignal): Promise<ResourceInfo> {
    checkGvk(gvk);
    const gv = apiVersionOf(gvk);
    let group = this.#discovery.get(gv);
    let fresh = false;
    if (group === undefined) {
      group = await this.#discover(gv, gvk, signal);
      fresh = true;
    }
    let info = kindIn(group, gvk.kind);
    if (info === undefined && !fresh) {
      group = await this.#discover(gv, gvk, signal);
      info = kindIn(group, gvk.kind);
    }
    if (info === undefined) throw new UnknownKindError({ cluster: this.name, gvk, statusCode: 200 });
    return info;
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
    const go = (): Promise<unknown> => this.#observed(request.method, () => this.#transport.json({ ...request, signal }, this.#requestTimeoutMs, limit, request.parse, request.peek));
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
    const res = await this.#observed('GET', () => this.#transport.open({ method: 'GET', path, query, gvk, signal, long: true }));
    return decodeWatchStream(res.body, { cluster: this.name, gvk }, signal, {
      dropManagedFields: request.dropManagedFields,
      maxEventBytes: this.#limits.maxWatchEventBytes,
      request: { method: 'GET', path },
    });
  }

  /** Runs one request and reports it to `onRequest`. */
  async #observed<R>(method: string, send: () => Promise<R>): Promise<R> {
    if (this.#onRequest === undefined) return send();
    const started = this.#clock.now();
    let code = '<error>';
    try {
      const result = await send();
      code = '2xx';
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

  #discover(gv: string, gvk: GroupVersionKind, signal: AbortSignal | undefined): Promise<DiscoveredGroup> {
    const discovering = this.#discovering ??= new Map<string, Promise<DiscoveredGroup>>();
    let pending = discovering.get(gv);
    if (pending === undefined) {
      pending = this.#fetchGroup(gv, gvk).finally(() => {
        discovering.delete(gv);
        if (discovering.size === 0 && this.#discovering === discovering) this.#discovering = undefined;
      });
      discovering.set(gv, pending);
    }
    return raceAbort(pending, signal);
  }

  async #fetchGroup(gv: string, gvk: GroupVersionKind): Promise<DiscoveredGroup> {
    const path = gvk.group === '' ? `/api/${gvk.version}` : `/apis/${gv}`;
    let body: unknown;
    try {
      body = await this.#send({ method: 'GET', path, gvk }, this.#life.signal, 'other');
    } catch (err) {
      if (err instanceof KubeApiError && err.statusCode === 404) throw new UnknownKindError({ cluster: this.name, gvk, statusCode: 404 }, { cause: err });
      throw err;
    }
    const kinds: ResourceInfo[] = [];
    for (const r of (body as ApiResourceList | undefined)?.resources ?? []) {
      if (typeof r.name !== 'string' || typeof r.kind !== 'string' || r.name.includes('/')) continue;
      // The server names the resource pasted into later URLs: an entry that is not a plain
      // segment (or a kind we would refuse to ask for) is left out, as if not served.
      if (!validDiscovered(gvk, r.name, r.kind)) {
        this.#logger.debug('discovery entry left out: not a valid resource name or kind', { groupVersion: gv });
        continue;
      }
      const verbs = Array.isArray(r.verbs) ? r.verbs.filter((v): v is string => typeof v === 'string') : [];
      kinds.push(Object.freeze({
        gvk: Object.freeze({ group: gvk.group, version: gvk.version, kind: r.kind }),
        resource: r.name,
        namespaced: r.namespaced === true,
        verbs: verbSet(verbs),
      }));
    }
    // A copy of exactly its length: `push` leaves room for more (kept per group/version).
    const group: DiscoveredGroup = { kinds: kinds.slice(), readAt: this.#clock.now() };
    this.#discovery.set(gv, group);
    this.#logger.debug('discovered group version', { groupVersion: gv, kinds: kinds.length });
    return group;
  }
}

/** The kind's entry in a discovered group/version (its last, should the server list it twice). */
function kindIn(group: DiscoveredGroup, kind: string): ResourceInfo | undefined {
  return group.kinds.findLast((info) => info.gvk.kind === kind);
}

/** Distinct verb lists shared by every discovered kind of the process (most kinds have the same few). */
const verbSets = new Map<string, readonly string[]>();
/**
 * Bounds on `verbSets`, which outlives every connection: a server inventing verb lists cannot grow
 * it past `VERB_SETS` entries, nor pin a long list for the process's life (the longest list a
 * kube-apiserver serves, all eight verbs, is 76 characters as JSON).
 */
const VERB_SETS = 256;
const VERB_SET_CHARS = 256;

/**
 * The frozen verb list of a discovered kind, shared with every kind that has the same one: every
 * cluster's discovery repeats a handful of lists, each about 150 bytes per kind if kept apart. A
 * list beyond the bounds is kept by its kind alone (and goes with its connection's discovery).
 */
export function verbSet(verbs: readonly string[]): readonly string[] {
  const key = JSON.stringify(verbs);
  const known = verbSets.get(key);
  if (known !== undefined) return known;
  const set = Object.freeze(verbs.slice());
  if (verbSets.size < VERB_SETS && key.length <= VERB_SET_CHARS) verbSets.set(key, set);
  return set;
}

function validDiscovered(gvk: GroupVersionKind, resource: string, kind: string): boolean {
  try {
    checkResource(resource);
    checkGvk({ group: gvk.group, version: gvk.version, kind });
    return true;
  } catch {
    return false;
  }
}

function selectorQuery(options: { readonly labelSelector?: string | undefined; readonly fieldSelector?: string | undefined }): URLSearchParams {
  const query = new URLSearchParams();
  if (options.labelSelector !== undefined && options.labelSelector !== '') query.set('labelSelector', options.labelSelector);
  if (options.fieldSelector !== undefined && options.fieldSelector !== '') query.set('fieldSelector', options.fieldSelector);
  return query;
}

/** One LIST page asked for, or fetched ahead. */
interface Page {
  /** Path, query and stripping of the request: what a caller must ask for to take it. */
  readonly key: string;
  /** The signal of the caller whose LIST it continues. */
  readonly signal: AbortSignal;
  /** True once a caller took it; only then is the page after it fetched ahead. */
  claimed: boolean;
  /** Its continue token, once seen at the start of its body. */
  next: string | undefined;
  readonly cancel: () => void;
  list: Promise<KubeList>;
}

/**
 * The continue token of a list body from its first bytes: `metadata` comes before `items` in what
 * the API server writes. Undefined while neither is seen; '' for a last page (or a body in another
 * order, which then is simply not fetched ahead).
 */
export function continueTokenOf(head: Buffer): string | undefined {
  const text = head.toString('latin1');
  const items = text.indexOf('"items"');
  const meta = items === -1 ? text : text.slice(0, items);
  const match = /"continue"\s*:\s*"((?:[^"\\]|\\.)*)"/.exec(meta);
  if (match !== null) {
    try {
      return JSON.parse(`"${match[1] ?? ''}"`) as string;
    } catch {
      return '';
    }
  }
  return items === -1 ? undefined : '';
}

/** LIST and WATCH of one resource over a {@link ClusterConnection}. */
class HttpResourceClient implements ResourceClient {
  readonly cluster: string;
  readonly info: ResourceInfo;
  readonly #port: ConnectionPort;
  /** The page fetched ahead of the caller, if any (at most one). */
  #ahead: Page | undefined;

  constructor(cluster: string, info: ResourceInfo, port: ConnectionPort) {
    this.cluster = cluster;
    this.info = info;
    this.#port = port;
  }

  /**
   * One LIST page. The next page is asked for as soon as this page's continue token is known (the
   * API server writes `metadata` before `items`), so it travels while this one is read and parsed;
   * it is kept for the caller's next `list()` with that token. At most one page is fetched ahead,
   * and only for a page the caller asked for; a next call that asks for anything else drops it.
   */
  async list(options: ListOptions): Promise<KubeList> {
    const query = selectorQuery(options);
    if (options.limit !== undefined) query.set('limit', String(options.limit));
    if (options.continue !== undefined && options.continue !== '') query.set('continue', options.continue);
    if (options.resourceVersion !== undefined) query.set('resourceVersion', options.resourceVersion);
    const path = resourcePath(this.info, { namespace: options.namespace });
    const drop = options.dropManagedFields === true;
    const key = `${path}?${query.toString()}#${String(drop)}`;
    let page = this.#ahead;
    this.#ahead = undefined;
    if (page !== undefined && (page.key !== key || page.signal.aborted)) {
      page.cancel();
      page = undefined;
    }
    page ??= this.#fetch(path, query, drop, key, options.signal);
    page.claimed = true;
    if (page.next !== undefined) this.#fetchAhead(page, page.next);
    return raceAbort(page.list, options.signal);
  }

  #fetch(path: string, query: URLSearchParams, drop: boolean, key: string, signal: AbortSignal): Page {
    const child = childController(signal);
    const parse = drop ? parseListDroppingManagedFields : undefined;
    const kind: Sent = query.has('continue') ? 'continue' : 'list';
    const page: Page = {
      key,
      signal,
      claimed: false,
      next: undefined,
      cancel: () => { child.controller.abort(new TransportError({ cluster: this.cluster, gvk: this.info.gvk }, 'a page fetched ahead was not asked for')); },
      list: Promise.resolve(undefined as unknown as KubeList),
    };
    const peek: Peek = (head) => {
      const seen = continueTokenOf(head);
      if (seen === undefined) return false;
      if (seen !== '') {
        page.next = seen;
        if (page.claimed) this.#fetchAhead(page, seen);
      }
      return true;
    };
    page.list = this.#port.send({ method: 'GET', path, query, gvk: this.info.gvk, parse, peek }, child.controller.signal, kind).then((body) => {
      const list = body as Partial<KubeList> | undefined;
      if (typeof list !== 'object' || !Array.isArray(list.items) || typeof list.metadata !== 'object') {
        throw new TransportError({ cluster: this.cluster, gvk: this.info.gvk }, `GET ${path}: the response is not a list`);
      }
      return list as KubeList;
    }).finally(() => { child.dispose(); });
    // A page fetched ahead may never be asked for: its failure is nobody's unhandled rejection.
    page.list.catch(() => undefined);
    return page;
  }

  /** Starts fetching the page after `page` (token `next`), unless one is already ahead. */
  #fetchAhead(page: Page, next: string): void {
    if (this.#ahead !== undefined || page.signal.aborted) return;
    const [path, rest = ''] = page.key.split('?', 2);
    const hash = rest.lastIndexOf('#');
    const query = new URLSearchParams(rest.slice(0, hash));
    query.set('continue', next);
    const drop = rest.slice(hash + 1) === 'true';
    this.#ahead = this.#fetch(path ?? '', query, drop, `${path ?? ''}?${query.toString()}#${String(drop)}`, page.signal);
  }

  async watch(options: WatchOptions): Promise<AsyncIterable<readonly WatchEvent[]>> {
    const query = selectorQuery(options);
    query.set('watch', 'true');
    query.set('resourceVersion', options.resourceVersion);
    query.set('timeoutSeconds', String(options.timeoutSeconds));
    if (options.allowWatchBookmarks) query.set('allowWatchBookmarks', 'true');
    const path = resourcePath(this.info, { namespace: options.namespace });
    try {
      return await this.#port.openWatch({ path, query, gvk: this.info.gvk, dropManagedFields: options.dropManagedFields === true }, options.signal);
    } catch (err) {
      if (err instanceof FleetcacheError || options.signal.aborted) throw err;
      throw new TransportError({ cluster: this.cluster, gvk: this.info.gvk }, `GET ${path} (watch): ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
  }
}
