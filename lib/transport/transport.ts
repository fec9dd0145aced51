import { createHash } from 'node:crypto';
import * as http from 'node:http';
import * as https from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';
import {
  abortReason,
  childController,
  FleetcacheError,
  KubeApiError,
  KubeconfigInvalidError,
  LimitExceededError,
  TransportError,
  type Clock,
  type GroupVersionKind,
  type KubeStatus,
  type ReadLimit,
} from '../util/index.ts';
import { checkRequestPath } from './segments.ts';

/** One HTTP request to the API server. */
export interface HttpRequest {
  readonly method: string;
  /** Absolute API path (`/api/v1/namespaces/x/configmaps`), without the query string. */
  readonly path: string;
  readonly query?: URLSearchParams | undefined;
  /** Request body, already serialized. */
  readonly body?: string | undefined;
  /** Content-Type of the body; default `application/json`. */
  readonly contentType?: string | undefined;
  readonly signal: AbortSignal;
  /** The resource concerned, for the errors this request may raise. */
  readonly gvk?: GroupVersionKind | undefined;
}

/** A read limit: the option that sets it and its value in bytes. */
export interface BodyLimit {
  readonly name: ReadLimit;
  readonly bytes: number;
}

/** Options of {@link Transport}: the already validated options of the owning connection. */
export interface TransportOptions {
  readonly cluster: string;
  readonly kubeConfig: KubeConfig;
  readonly clock: Clock;
  readonly userAgent: string;
  /** Largest error body read to build a `KubeApiError`. */
  readonly maxErrorBytes: number;
  /** Sent as `Impersonate-User` / `Impersonate-Group` on every request when set. */
  readonly impersonate?: Impersonation | undefined;
}

/** Who every request of a connection acts as (Kubernetes user impersonation). */
export interface Impersonation {
  readonly user: string;
  readonly groups: readonly string[];
}

/**
 * HTTP to one API server: one keep-alive agent reused by every request and watch (no TLS handshake
 * per request), fresh auth headers per request from the kubeconfig (which refreshes tokens and
 * caches exec credentials itself). Headers and tokens are never logged nor put in errors.
 *
 * Invariant: `#agent` is built from the TLS material whose fingerprint is `#tlsFingerprint`; when
 * the kubeconfig yields different material (a rotated exec client certificate), a new agent
 * replaces it and the old one moves to `#retired`, destroyed by `close()` (its streams still run).
 */
export class Transport {
  readonly #cluster: string;
  readonly #kc: KubeConfig;
  readonly #clock: Clock;
  readonly #userAgent: string;
  readonly #maxErrorBytes: number;
  readonly #impersonate: Impersonation | undefined;
  readonly #base: URL;
  readonly #secure: boolean;
  readonly #viaProxy: boolean;
  #agent: http.Agent | undefined;
  #tlsFingerprint = '';
  readonly #retired = new Set<http.Agent>();
  #closed = false;

  constructor(options: TransportOptions) {
    this.#cluster = options.cluster;
    this.#kc = options.kubeConfig;
    this.#clock = options.clock;
    this.#userAgent = options.userAgent;
    this.#maxErrorBytes = options.maxErrorBytes;
    this.#impersonate = options.impersonate === undefined ? undefined : { user: options.impersonate.user, groups: [...options.impersonate.groups] };
    const cluster = options.kubeConfig.getCurrentCluster();
    if (cluster === null) throw new KubeconfigInvalidError(options.cluster, 'the current context names no cluster');
    let base: URL;
    try {
      base = new URL(cluster.server);
    } catch (err) {
      throw new KubeconfigInvalidError(options.cluster, `server ${JSON.stringify(cluster.server)} is not a URL`, { cause: err });
    }
    if (base.protocol !== 'https:' && base.protocol !== 'http:') {
      throw new KubeconfigInvalidError(options.cluster, `server ${JSON.stringify(cluster.server)} is neither https nor http`);
    }
    this.#base = base;
    this.#secure = base.protocol === 'https:';
    // Behind a proxy the kubeconfig's own agent is used (it speaks CONNECT/SOCKS); it is cached per
    // cluster and user inside the KubeConfig, so it is reused too, but has no keep-alive.
    this.#viaProxy = cluster.proxyUrl !== undefined && cluster.proxyUrl !== '';
  }

  /** The server URL requests go to (with any path prefix the kubeconfig gives). */
  get server(): string {
    return this.#base.href;
  }

  /**
   * Sends a request and resolves with the response once its status is 2xx; the caller consumes the
   * body. A non-2xx status rejects with a `KubeApiError` carrying the Status body.
   */
  async open(request: HttpRequest): Promise<http.IncomingMessage> {
    if (this.#closed) throw new TransportError({ cluster: this.#cluster, gvk: request.gvk }, 'connection is closed');
    // Whoever built the path, nothing with a query, fragment or dot segment leaves with our credentials.
    checkRequestPath(request.path);
    const signal = request.signal;
    if (signal.aborted) throw abortReason(signal);
    const scratch: https.RequestOptions = {};
    try {
      await this.#kc.applyToHTTPSOptions(scratch);
    } catch (err) {
      if (isAborted(signal)) throw abortReason(signal);
      throw new TransportError({ cluster: this.#cluster, gvk: request.gvk }, `cannot obtain credentials: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
    if (isAborted(signal)) throw abortReason(signal);
    const agent = this.#agentFor(scratch);
    const headers: http.OutgoingHttpHeaders = {};
    for (const [name, value] of Object.entries(scratch.headers ?? {})) {
      // The connection's identity replaces any impersonation the kubeconfig itself asks for.
      if (value !== undefined && !(this.#impersonate !== undefined && /^impersonate-/i.test(name))) headers[name] = value;
    }
    if (this.#impersonate !== undefined) {
      headers['impersonate-user'] = this.#impersonate.user;
      // An array is sent as one header line per group, as the API server expects.
      if (this.#impersonate.groups.length > 0) headers['impersonate-group'] = [...this.#impersonate.groups];
    }
    headers.accept = 'application/json';
    headers['user-agent'] = this.#userAgent;
    let body: Buffer | undefined;
    if (request.body !== undefined) {
      body = Buffer.from(request.body, 'utf8');
      headers['content-type'] = request.contentType ?? 'application/json';
      headers['content-length'] = body.length;
    }
    const prefix = this.#base.pathname.endsWith('/') ? this.#base.pathname.slice(0, -1) : this.#base.pathname;
    const query = request.query === undefined ? '' : request.query.toString();
    const options: https.RequestOptions = {
      protocol: this.#base.protocol,
      hostname: this.#base.hostname.startsWith('[') ? this.#base.hostname.slice(1, -1) : this.#base.hostname,
      port: this.#base.port === '' ? undefined : Number(this.#base.port),
      path: `${prefix}${request.path}${query === '' ? '' : `?${query}`}`,
      method: request.method,
      headers,
      agent,
      signal,
    };
    if (scratch.auth !== undefined) options.auth = scratch.auth;

    const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
      const req = (this.#secure ? https : http).request(options, resolve);
      req.on('error', (err) => {
        reject(signal.aborted
          ? abortReason(signal)
          : new TransportError({ cluster: this.#cluster, gvk: request.gvk }, `${request.method} ${request.path}: ${err.message}`, { cause: err }));
      });
      req.end(body);
    });
    const status = res.statusCode ?? 0;
    if (status >= 200 && status < 300) return res;
    throw await this.#apiError(request, res);
  }

  /**
   * Sends a request and parses its JSON body (with `parse`, default `JSON.parse` of the UTF-8
   * text). `timeoutMs` bounds the whole exchange, body included: a silently dead connection fails
   * instead of hanging. A body longer than `limit` rejects with a `LimitExceededError` once the
   * limit is reached (the rest is not read).
   */
  async json(request: HttpRequest, timeoutMs: number, limit: BodyLimit, parse: (body: Buffer) => unknown = parseJson): Promise<unknown> {
    const child = childController(request.signal);
    const controller = child.controller;
    const timer = this.#clock.setTimer(timeoutMs, () => {
      controller.abort(new TransportError({ cluster: this.#cluster, gvk: request.gvk }, `${request.method} ${request.path}: no complete response within ${timeoutMs} ms`));
    });
    try {
      const res = await this.open({ ...request, signal: controller.signal });
      const body = await readBounded(res, limit.bytes, controller.signal);
      if (body === undefined) throw this.#limitError(request, limit);
      if (body.length === 0) return undefined;
      try {
        return parse(body);
      } catch (err) {
        throw new TransportError({ cluster: this.#cluster, gvk: request.gvk }, `${request.method} ${request.path}: response is not JSON`, { cause: err });
      }
    } catch (err) {
      // The timeout's reason is a TransportError; a caller's abort keeps the caller's reason.
      if (controller.signal.aborted && !request.signal.aborted) throw abortReason(controller.signal);
      if (err instanceof FleetcacheError || request.signal.aborted) throw err;
      throw new TransportError({ cluster: this.#cluster, gvk: request.gvk }, `${request.method} ${request.path}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    } finally {
      timer.cancel();
      child.dispose();
    }
  }

  /** Destroys every socket of this connection; requests still running fail. Idempotent. */
  close(): void {
    this.#closed = true;
    this.#agent?.destroy();
    this.#agent = undefined;
    for (const agent of this.#retired) agent.destroy();
    this.#retired.clear();
  }

  #agentFor(scratch: https.RequestOptions): http.Agent {
    if (this.#viaProxy) {
      if (scratch.agent instanceof http.Agent) return scratch.agent;
      throw new TransportError({ cluster: this.#cluster }, 'the kubeconfig built no agent for its proxy');
    }
    const hash = createHash('sha256');
    for (const part of [scratch.ca, scratch.cert, scratch.key, scratch.pfx, scratch.passphrase, scratch.servername, String(scratch.rejectUnauthorized)]) {
      hash.update(part === undefined ? '-' : Array.isArray(part) ? part.map(String).join('\n') : typeof part === 'string' || Buffer.isBuffer(part) ? part : JSON.stringify(part));
      hash.update('\0');
    }
    const fingerprint = hash.digest('hex');
    if (this.#agent !== undefined && fingerprint === this.#tlsFingerprint) return this.#agent;
    if (this.#agent !== undefined) this.#retired.add(this.#agent);
    const common = { keepAlive: true, keepAliveMsecs: 30_000, scheduling: 'lifo' as const };
    this.#agent = this.#secure
      ? new https.Agent({
        ...common,
        ...(scratch.ca === undefined ? {} : { ca: scratch.ca }),
        ...(scratch.cert === undefined ? {} : { cert: scratch.cert }),
        ...(scratch.key === undefined ? {} : { key: scratch.key }),
        ...(scratch.pfx === undefined ? {} : { pfx: scratch.pfx }),
        ...(scratch.passphrase === undefined ? {} : { passphrase: scratch.passphrase }),
        ...(scratch.servername === undefined ? {} : { servername: scratch.servername }),
        ...(scratch.rejectUnauthorized === undefined ? {} : { rejectUnauthorized: scratch.rejectUnauthorized }),
      })
      : new http.Agent(common);
    this.#tlsFingerprint = fingerprint;
    return this.#agent;
  }

  #limitError(request: HttpRequest, limit: BodyLimit): LimitExceededError {
    return new LimitExceededError({ cluster: this.#cluster, gvk: request.gvk, limit: limit.name, limitBytes: limit.bytes, request: { method: request.method, path: request.path } });
  }

  async #apiError(request: HttpRequest, res: http.IncomingMessage): Promise<KubeApiError> {
    const statusCode = res.statusCode ?? 0;
    let status: KubeStatus | undefined;
    let cause: Error | undefined;
    try {
      const body = await readBounded(res, this.#maxErrorBytes, request.signal);
      if (body === undefined) {
        // The HTTP status still decides how the failure is handled; the oversized body is why no message.
        cause = this.#limitError(request, { name: 'maxErrorBytes', bytes: this.#maxErrorBytes });
      } else {
        const text = body.toString('utf8');
        const parsed: unknown = text === '' ? undefined : JSON.parse(text);
        if (isStatus(parsed)) status = parsed;
      }
    } catch {
      // A body that is not a Status (or a broken one) still leaves the HTTP status to report.
      res.destroy();
    }
    return new KubeApiError({
      cluster: this.#cluster,
      gvk: request.gvk,
      statusCode,
      status,
      retryAfterSeconds: parseRetryAfter(res.headers['retry-after'], this.#clock.now()),
      request: { method: request.method, path: request.path },
    }, cause === undefined ? undefined : { cause });
  }
}

/** Reads the flag afresh: TypeScript would otherwise assume it unchanged across an `await`. */
function isAborted(signal: AbortSignal): boolean {
  return signal.aborted;
}

function isStatus(value: unknown): value is KubeStatus {
  return typeof value === 'object' && value !== null && (value as { kind?: unknown }).kind === 'Status';
}

/** `Retry-After` as seconds: either delay-seconds or an HTTP date. */
export function parseRetryAfter(header: string | undefined, now: number): number | undefined {
  if (header === undefined || header === '') return undefined;
  if (/^\d+$/.test(header.trim())) return Number(header.trim());
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - now) / 1000));
}

function parseJson(body: Buffer): unknown {
  return JSON.parse(body.toString('utf8'));
}

/**
 * Reads a whole response body of at most `limit` bytes; undefined when it is longer (a
 * Content-Length above the limit is refused before reading). The stream is destroyed as soon as
 * the limit is passed, so at most `limit` bytes plus one chunk are ever held.
 */
export async function readBounded(res: http.IncomingMessage, limit: number, signal: AbortSignal): Promise<Buffer | undefined> {
  const declared = Number(res.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) {
    res.destroy();
    return undefined;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of res) {
      const buf = chunk as Buffer;
      size += buf.length;
      if (size > limit) {
        chunks.length = 0;
        res.destroy();
        return undefined;
      }
      chunks.push(buf);
    }
  } catch (err) {
    if (signal.aborted) throw abortReason(signal);
    throw err;
  }
  return Buffer.concat(chunks, size);
}
