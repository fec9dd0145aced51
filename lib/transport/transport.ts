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
  TransportError,
  type Clock,
  type GroupVersionKind,
  type KubeStatus,
} from '../util/index.ts';

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

/** Largest error body read to build a `KubeApiError` (a Status is a few hundred bytes). */
const MAX_ERROR_BODY = 64 * 1024;

/** Options of {@link Transport}: the already validated options of the owning connection. */
export interface TransportOptions {
  readonly cluster: string;
  readonly kubeConfig: KubeConfig;
  readonly clock: Clock;
  readonly userAgent: string;
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
      if (value !== undefined) headers[name] = value;
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
   * instead of hanging.
   */
  async json(request: HttpRequest, timeoutMs: number, parse: (body: Buffer) => unknown = parseJson): Promise<unknown> {
    const child = childController(request.signal);
    const controller = child.controller;
    const timer = this.#clock.setTimer(timeoutMs, () => {
      controller.abort(new TransportError({ cluster: this.#cluster, gvk: request.gvk }, `${request.method} ${request.path}: no complete response within ${timeoutMs} ms`));
    });
    try {
      const res = await this.open({ ...request, signal: controller.signal });
      const body = await readBodyBytes(res, Infinity, controller.signal);
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

  async #apiError(request: HttpRequest, res: http.IncomingMessage): Promise<KubeApiError> {
    const statusCode = res.statusCode ?? 0;
    let status: KubeStatus | undefined;
    try {
      const text = await readBody(res, MAX_ERROR_BODY, request.signal);
      const parsed: unknown = text === '' ? undefined : JSON.parse(text);
      if (isStatus(parsed)) status = parsed;
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
    });
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

/** Reads a response body as UTF-8, up to `limit` bytes (then stops and destroys the stream). */
export async function readBody(res: http.IncomingMessage, limit: number, signal: AbortSignal): Promise<string> {
  return (await readBodyBytes(res, limit, signal)).toString('utf8');
}

/** Reads a response body, up to `limit` bytes (then stops and destroys the stream). */
async function readBodyBytes(res: http.IncomingMessage, limit: number, signal: AbortSignal): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of res) {
      const buf = chunk as Buffer;
      chunks.push(buf);
      size += buf.length;
      if (size >= limit) {
        res.destroy();
        break;
      }
    }
  } catch (err) {
    if (signal.aborted) throw abortReason(signal);
    throw err;
  }
  return Buffer.concat(chunks);
}
