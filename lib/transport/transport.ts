import { createHash } from 'node:crypto';
import * as http from 'node:http';
import type * as http2 from 'node:http2';
import * as https from 'node:https';
import type { Readable } from 'node:stream';
import { createSecureContext, type SecureContext } from 'node:tls';
import type { KubeConfig } from '@kubernetes/client-node';
import {
  abortReason,
  childController,
  FleetcacheError,
  KubeApiError,
  raceAbort,
  KubeconfigInvalidError,
  LimitExceededError,
  TransportError,
  type Clock,
  type GroupVersionKind,
  type KubeStatus,
  type ReadLimit,
} from '../util/index.ts';
import { BudgetedHttpAgent, BudgetedHttpsAgent, ignoreError, SLOT_SIGNAL, type BudgetedAgent } from './agent.ts';
import type { SocketBudget } from './budget.ts';
import { readBounded, type Peek } from './bounded.ts';
import { applyCredentials } from './credentials.ts';
import { sharedSecureContexts } from './secure-context.ts';
import { checkRequestPath } from './segments.ts';
import { negotiate, type H2Session, type Negotiated, type SessionLiveness } from './session.ts';

/** A response whose status arrived, on either protocol; the caller consumes `body`. */
export interface WireResponse {
  readonly statusCode: number;
  readonly headers: Readonly<Record<string, string | string[] | number | undefined>>;
  readonly body: Readable;
  readonly protocol: 'h2' | 'http/1.1';
}

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
  /** The response is held open (a watch): its socket or session may yield to a waiter of the socket budget. */
  readonly long?: boolean | undefined;
  /**
   * Told the HTTP status as soon as it arrives, on either protocol, before a non-2xx one rejects
   * (for metrics: client-go's `code` label). Synchronous; a throw is ignored. Default: none.
   */
  readonly onStatus?: ((statusCode: number) => void) | undefined;
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
  /** Offer HTTP/2 (ALPN `h2`) to an https server reached without a proxy. */
  readonly http2: boolean;
  /** PING cadence and deadline of an HTTP/2 session. */
  readonly liveness: SessionLiveness;
  /** Every socket this transport opens (HTTP/2 session or HTTP/1.1 socket) takes a slot here first. */
  readonly budget: SocketBudget;
}

/** Who every request of a connection acts as (Kubernetes user impersonation). */
export interface Impersonation {
  readonly user: string;
  readonly groups: readonly string[];
}

/** The TLS material a kubeconfig yields, and the one secure context built from it. */
interface Material {
  readonly fingerprint: string;
  readonly context: SecureContext | undefined;
  readonly servername: string | undefined;
  readonly rejectUnauthorized: boolean;
}

/** An HTTP/2 connection under way, shared by every request that waits for it. */
interface Attempt {
  readonly fingerprint: string;
  readonly done: Promise<Negotiated>;
  readonly abandon: (reason: Error) => void;
  waiters: number;
}

/**
 * HTTP to one API server. Over https without a proxy it offers HTTP/2 first: one TLS connection
 * carries every request and watch to the cluster, as client-go does. A server that answers ALPN
 * with `http/1.1` (or `http2: false`, a proxy, plain http) gets one keep-alive agent reused by
 * every request and watch instead. Either way one secure context is built per TLS material, not
 * per socket. Auth headers are fresh per request from the kubeconfig (which refreshes tokens and
 * caches exec credentials itself). Headers and tokens are never logged nor put in errors.
 *
 * Invariants: `#material` is the TLS material last seen, `#agent` and `#session` were built from
 * it; when the kubeconfig yields different material (a rotated exec client certificate), the agent
 * and session move to `#retired` (their streams still run, nothing new goes there) and `close()`
 * destroys them. `#h1` holds the fingerprints whose server chose HTTP/1.1. `#connecting` is the one
 * HTTP/2 connection under way.
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
  readonly #http2: boolean;
  readonly #liveness: SessionLiveness;
  readonly #budget: SocketBudget;
  #material: Material | undefined;
  #agent: http.Agent | undefined;
  #session: H2Session | undefined;
  #connecting: Attempt | undefined;
  // Both created with their first entry: most connections never need them (issue 12).
  #h1: Set<string> | undefined;
  #retired: Set<http.Agent | H2Session> | undefined;
  #closed = false;

  constructor(options: TransportOptions) {
    this.#cluster = options.cluster;
    this.#kc = options.kubeConfig;
    this.#clock = options.clock;
    this.#userAgent = options.userAgent;
    this.#maxErrorBytes = options.maxErrorBytes;
    this.#impersonate = options.impersonate === undefined ? undefined : { user: options.impersonate.user, groups: [...options.impersonate.groups] };
    this.#http2 = options.http2;
    this.#liveness = options.liveness;
    this.#budget = options.budget;
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

  /** The protocol the next request would use, once known (for tests and stats). */
  get protocol(): 'h2' | 'http/1.1' | undefined {
    if (!this.#http2 || !this.#secure || this.#viaProxy) return 'http/1.1';
    const material = this.#material;
    if (material === undefined) return undefined;
    if (this.#h1?.has(material.fingerprint) === true) return 'http/1.1';
    return this.#session?.usable === true ? 'h2' : undefined;
  }

  /**
   * Sends a request and resolves with the response once its status is 2xx; the caller consumes the
   * body. A non-2xx status rejects with a `KubeApiError` carrying the Status body.
   */
  async open(request: HttpRequest): Promise<WireResponse> {
    if (this.#closed) throw new TransportError({ cluster: this.#cluster, gvk: request.gvk }, 'connection is closed');
    // Whoever built the path, nothing with a query, fragment or dot segment leaves with our credentials.
    checkRequestPath(request.path);
    const signal = request.signal;
    if (signal.aborted) throw abortReason(signal);
    const scratch: https.RequestOptions = {};
    try {
      // The kubeconfig's own agent only behind a proxy (it speaks CONNECT/SOCKS); see credentials.ts.
      await applyCredentials(this.#kc, scratch, this.#viaProxy);
    } catch (err) {
      if (isAborted(signal)) throw abortReason(signal);
      throw new TransportError({ cluster: this.#cluster, gvk: request.gvk }, `cannot obtain credentials: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
    if (isAborted(signal)) throw abortReason(signal);
    const headers: Record<string, string | string[] | number> = {};
    for (const [name, value] of Object.entries(scratch.headers ?? {})) {
      // HTTP/2 wants lower-case names; HTTP/1.1 does not care. The connection's identity replaces
      // any impersonation the kubeconfig itself asks for.
      if (value !== undefined && !(this.#impersonate !== undefined && /^impersonate-/i.test(name))) headers[name.toLowerCase()] = value;
    }
    if (this.#impersonate !== undefined) {
      headers['impersonate-user'] = this.#impersonate.user;
      // An array is sent as one header line per group (one header field each on HTTP/2), as the API server expects.
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
    const path = `${prefix}${request.path}${query === '' ? '' : `?${query}`}`;

    let res: WireResponse | undefined;
    if (this.#http2 && this.#secure && !this.#viaProxy) {
      const material = this.#materialOf(scratch);
      // Basic auth rides in a header on HTTP/2 (there is no `auth` option).
      const h2Headers = typeof scratch.auth === 'string' && headers.authorization === undefined
        ? { ...headers, authorization: `Basic ${Buffer.from(scratch.auth, 'utf8').toString('base64')}` }
        : headers;
      // A session found dead at request time (GOAWAY raced us) is replaced once.
      for (let attempt = 0; attempt < 2 && res === undefined; attempt++) {
        const session = await this.#sessionFor(material, request);
        if (session === undefined) break;
        res = await this.#openH2(session, request, path, h2Headers, body, attempt === 1);
      }
      if (res === undefined && this.#h1?.has(material.fingerprint) !== true) throw new TransportError({ cluster: this.#cluster, gvk: request.gvk }, `${request.method} ${request.path}: the HTTP/2 session closed before the request could start`);
    }
    res ??= await this.#openH1(request, path, headers, body, scratch);
    const status = res.statusCode;
    try {
      request.onStatus?.(status);
    } catch {
      // An observer's failure must not fail the request it observed.
    }
    if (status >= 200 && status < 300) return res;
    throw await this.#apiError(request, res);
  }

  async #openH1(request: HttpRequest, path: string, headers: http.OutgoingHttpHeaders, body: Buffer | undefined, scratch: https.RequestOptions): Promise<WireResponse> {
    const signal = request.signal;
    const options: https.RequestOptions = {
      protocol: this.#base.protocol,
      hostname: this.#hostname(),
      port: this.#base.port === '' ? undefined : Number(this.#base.port),
      path,
      method: request.method,
      headers,
      agent: this.#agentFor(scratch),
      signal,
    };
    if (scratch.auth !== undefined) options.auth = scratch.auth;
    // The agent waits for the socket budget under this request's signal.
    Object.assign(options, { [SLOT_SIGNAL]: signal });
    const agent = options.agent;
    const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
      const req = (this.#secure ? https : http).request(options, resolve);
      if (request.long === true && isBudgeted(agent)) req.once('socket', (socket) => { agent.markLong(socket); });
      req.on('error', (err) => {
        reject(signal.aborted
          ? abortReason(signal)
          : new TransportError({ cluster: this.#cluster, gvk: request.gvk }, `${request.method} ${request.path}: ${err.message}`, { cause: err }));
      });
      req.end(body);
    });
    return { statusCode: res.statusCode ?? 0, headers: res.headers, body: res, protocol: 'http/1.1' };
  }

  /**
   * One stream on the session; undefined when the session refused it synchronously (closing) and
   * `last` is false, so the caller tries a fresh session.
   */
  #openH2(session: H2Session, request: HttpRequest, path: string, headers: Record<string, string | string[] | number>, body: Buffer | undefined, last: boolean): Promise<WireResponse | undefined> {
    const signal = request.signal;
    const fail = (err: Error): Error => (signal.aborted
      ? abortReason(signal)
      : new TransportError({ cluster: this.#cluster, gvk: request.gvk }, `${request.method} ${request.path}: ${err.message}`, { cause: err }));
    let stream: http2.ClientHttp2Stream;
    try {
      stream = session.request(rawHeaders(request.method, path, headers), { endStream: body === undefined, signal }, request.long === true);
    } catch (err) {
      if (!last) return Promise.resolve(undefined);
      return Promise.reject(fail(err instanceof Error ? err : new Error(String(err))));
    }
    // Errors after the response reach the body's reader through `errored`/iteration; this listener
    // only keeps an unread stream's error from being unhandled. A module-level function: a closure
    // made here would keep this call's context (request, headers, signal) for the stream's life.
    stream.on('error', ignoreError);
    return new Promise<WireResponse>((resolve, reject) => {
      // Both go once the response arrived: a watch's stream lives for minutes, and nothing here is
      // of use after its headers (nor is an error built for every stream that closes).
      const onError = (err: Error): void => {
        stream.off('close', onClose);
        reject(fail(err));
      };
      const onClose = (): void => {
        stream.off('error', onError);
        reject(fail(new Error(`the stream closed before a response (code ${stream.rstCode})`)));
      };
      stream.once('error', onError);
      stream.once('close', onClose);
      stream.once('response', (h) => {
        stream.off('error', onError);
        stream.off('close', onClose);
        resolve({ statusCode: h[':status'] ?? 0, headers: h, body: stream, protocol: 'h2' });
      });
      if (body !== undefined) stream.end(body);
    });
  }

  #hostname(): string {
    return this.#base.hostname.startsWith('[') ? this.#base.hostname.slice(1, -1) : this.#base.hostname;
  }

  /** The session for this material: the live one, one being connected, or a new one. Undefined: HTTP/1.1. */
  async #sessionFor(material: Material, request: HttpRequest): Promise<H2Session | undefined> {
    if (this.#h1?.has(material.fingerprint) === true) return undefined;
    const live = this.#session;
    if (live?.usable === true) return live;
    let attempt = this.#connecting;
    if (attempt?.fingerprint !== material.fingerprint) {
      attempt?.abandon(new Error('the TLS material changed'));
      attempt = this.#connect(material);
    }
    attempt.waiters += 1;
    const held = attempt;
    try {
      const negotiated = await raceAbort(held.done, request.signal);
      return negotiated.protocol === 'h2' ? negotiated.session : undefined;
    } catch (err) {
      if (request.signal.aborted) throw abortReason(request.signal);
      throw new TransportError({ cluster: this.#cluster, gvk: request.gvk }, `${request.method} ${request.path}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    } finally {
      held.waiters -= 1;
      // Nobody waits for a connection still handshaking: it goes, as an HTTP/1.1 socket would.
      if (held.waiters === 0 && this.#connecting === held) held.abandon(new Error('every request waiting for the connection was aborted'));
    }
  }

  /**
   * One TLS connection offering h2, inside a slot of the socket budget: it waits its turn there
   * (abandoned with its last waiter) and gives the slot back when its socket closes.
   */
  #connect(material: Material): Attempt {
    const port = this.#base.port === '' ? 443 : Number(this.#base.port);
    const target = {
      host: this.#hostname(),
      port,
      servername: material.servername,
      secureContext: material.context ?? createSecureContext(),
      rejectUnauthorized: material.rejectUnauthorized,
    };
    const life = new AbortController();
    let handshake: ReturnType<typeof negotiate> | undefined;
    const done = this.#budget.open(life.signal, async (slot) => {
      handshake = negotiate(target, this.#liveness, slot.release);
      const negotiated = await handshake.done;
      if (negotiated.protocol === 'h2') slot.hold(negotiated.session);
      return negotiated;
    });
    const abandon = (reason: Error): void => {
      life.abort(reason);
      handshake?.abandon(reason);
    };
    const attempt: Attempt = { fingerprint: material.fingerprint, done, abandon, waiters: 0 };
    this.#connecting = attempt;
    done.then((negotiated) => { this.#connected(attempt, negotiated); }, () => {
      if (this.#connecting === attempt) this.#connecting = undefined;
    });
    return attempt;
  }

  /**
   * A connection attempt's outcome. A method of its own, and the socket's 'close' gets
   * `slot.release` itself: what outlives the handshake (the session's `ended` reaction, the
   * socket's 'close' listener) then closes over the session or the slot alone, not over
   * `#connect`'s whole context (the attempt, its controller, the handshake and its socket), which a
   * cluster kept for its connection's life.
   */
  #connected(attempt: Attempt, negotiated: Negotiated): void {
    if (this.#connecting === attempt) this.#connecting = undefined;
    if (negotiated.protocol === 'http/1.1') {
      (this.#h1 ??= new Set()).add(attempt.fingerprint);
      return;
    }
    const session = negotiated.session;
    if (this.#closed || this.#material?.fingerprint !== attempt.fingerprint) {
      session.destroy();
      return;
    }
    const old = this.#session;
    if (old !== undefined) this.#retire(old);
    this.#session = session;
    void session.ended.then(() => { if (this.#session === session) this.#session = undefined; });
  }

  #retire(session: H2Session): void {
    session.drain();
    const retired = this.#retired ??= new Set();
    retired.add(session);
    void session.ended.then(() => { retired.delete(session); });
  }

  /**
   * Sends a request and parses its JSON body (with `parse`, default `JSON.parse` of the UTF-8
   * text). `timeoutMs` bounds the whole exchange, body included: a silently dead connection fails
   * instead of hanging. A body longer than `limit` rejects with a `LimitExceededError` once the
   * limit is reached (the rest is not read).
   */
  async json(request: HttpRequest, timeoutMs: number, limit: BodyLimit, parse: (body: Buffer) => unknown = parseJson, peek?: Peek): Promise<unknown> {
    const child = childController(request.signal);
    const controller = child.controller;
    const timer = this.#clock.setTimer(timeoutMs, () => {
      controller.abort(new TransportError({ cluster: this.#cluster, gvk: request.gvk }, `${request.method} ${request.path}: no complete response within ${timeoutMs} ms`));
    });
    try {
      const res = await this.open({ ...request, signal: controller.signal });
      const body = await readResponse(res, limit.bytes, controller.signal, peek);
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
    this.#connecting?.abandon(new Error('connection is closed'));
    this.#connecting = undefined;
    this.#agent?.destroy();
    this.#agent = undefined;
    this.#session?.destroy();
    this.#session = undefined;
    for (const old of this.#retired ?? []) old.destroy();
    this.#retired?.clear();
  }

  /**
   * The material the kubeconfig yields now, with its secure context (one per material in the
   * process, see `sharedSecureContexts`). New material (a rotated certificate) retires the agent
   * and session built from the old one.
   */
  #materialOf(scratch: https.RequestOptions): Material {
    const hash = createHash('sha256');
    for (const part of [scratch.ca, scratch.cert, scratch.key, scratch.pfx, scratch.passphrase, scratch.servername, String(scratch.rejectUnauthorized)]) {
      hash.update(part === undefined ? '-' : Array.isArray(part) ? part.map(String).join('\n') : typeof part === 'string' || Buffer.isBuffer(part) ? part : JSON.stringify(part));
      hash.update('\0');
    }
    const fingerprint = hash.digest('hex');
    if (this.#material?.fingerprint === fingerprint) return this.#material;
    if (this.#agent !== undefined) (this.#retired ??= new Set()).add(this.#agent);
    this.#agent = undefined;
    if (this.#session !== undefined) this.#retire(this.#session);
    this.#session = undefined;
    this.#material = {
      fingerprint,
      // Shared with every other connection of the process built from the same material.
      context: this.#secure ? sharedSecureContexts.get(scratch) : undefined,
      servername: scratch.servername,
      rejectUnauthorized: scratch.rejectUnauthorized !== false,
    };
    return this.#material;
  }

  #agentFor(scratch: https.RequestOptions): http.Agent {
    if (this.#viaProxy) {
      if (scratch.agent instanceof http.Agent) return scratch.agent;
      throw new TransportError({ cluster: this.#cluster }, 'the kubeconfig built no agent for its proxy');
    }
    const material = this.#materialOf(scratch);
    if (this.#agent !== undefined) return this.#agent;
    const common = { keepAlive: true, keepAliveMsecs: 30_000, scheduling: 'lifo' as const };
    this.#agent = material.context !== undefined
      ? new BudgetedHttpsAgent(this.#budget, {
        ...common,
        // Every socket of the agent shares this one context (the agent would build one per socket).
        secureContext: material.context,
        ...(material.servername === undefined ? {} : { servername: material.servername }),
        rejectUnauthorized: material.rejectUnauthorized,
      })
      : new BudgetedHttpAgent(this.#budget, common);
    return this.#agent;
  }

  #limitError(request: HttpRequest, limit: BodyLimit): LimitExceededError {
    return new LimitExceededError({ cluster: this.#cluster, gvk: request.gvk, limit: limit.name, limitBytes: limit.bytes, request: { method: request.method, path: request.path } });
  }

  async #apiError(request: HttpRequest, res: WireResponse): Promise<KubeApiError> {
    const statusCode = res.statusCode;
    let status: KubeStatus | undefined;
    let cause: Error | undefined;
    try {
      const body = await readResponse(res, this.#maxErrorBytes, request.signal);
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
      res.body.destroy();
    }
    return new KubeApiError({
      cluster: this.#cluster,
      gvk: request.gvk,
      statusCode,
      status,
      retryAfterSeconds: parseRetryAfter(headerText(res.headers['retry-after']), this.#clock.now()),
      request: { method: request.method, path: request.path },
    }, cause === undefined ? undefined : { cause });
  }
}

/**
 * Request headers as the raw list of HTTP/2 fields (name, value, name, value...), an array value
 * as one field per element as before. The stream keeps what it sent for its life: Node copies a
 * headers object into a dictionary-mode object (about 450 bytes per watch, issue 12), and keeps a
 * raw list as a flat array. Same fields on the wire (Node adds `:authority` and `:scheme` to both).
 */
function rawHeaders(method: string, path: string, headers: Readonly<Record<string, string | string[] | number>>): string[] {
  const raw = [':method', method, ':path', path];
  for (const name of Object.keys(headers)) {
    const value = headers[name];
    if (value === undefined) continue;
    if (Array.isArray(value)) {
      for (const item of value) raw.push(name, item);
    } else {
      raw.push(name, String(value));
    }
  }
  return raw;
}

function isBudgeted(agent: https.RequestOptions['agent']): agent is BudgetedAgent {
  return agent instanceof BudgetedHttpAgent || agent instanceof BudgetedHttpsAgent;
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

function headerText(value: string | string[] | number | undefined): string | undefined {
  if (value === undefined) return undefined;
  return Array.isArray(value) ? value[0] : String(value);
}

function parseJson(body: Buffer): unknown {
  return JSON.parse(body.toString('utf8'));
}

/** A whole response body of at most `limit` bytes ({@link readBounded}); undefined when it is longer. */
function readResponse(res: WireResponse, limit: number, signal: AbortSignal, peek?: Peek): Promise<Buffer | undefined> {
  return readBounded(res.body, { limit, declaredLength: res.headers['content-length'], signal, peek });
}
