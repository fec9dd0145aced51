import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTlsServer, Server as TlsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { noopLogger, toError, type Logger } from '../util/index.ts';
import type { AuthDecision } from './auth.ts';
import type { ServingCertificate } from './certificate.ts';
import { metricsContentType } from './metrics.ts';

/** Where a server listens: `host` '' means every interface; port 0 picks a free port. */
export interface BindAddress {
  readonly host: string;
  readonly port: number;
}

/** What a route answers. Routes run on every request: keep them cheap. */
export interface RouteAnswer {
  readonly status: number;
  readonly contentType: string;
  readonly body: string;
}

/** A GET/HEAD route. `query` is the request's search parameters. */
export type Route = (query: URLSearchParams) => RouteAnswer | Promise<RouteAnswer>;

/**
 * A GET/HEAD handler that writes its own answer on `res`: for what a {@link Route} cannot say
 * (server-sent events, files), or, at one of `actionPaths`, a handler of any method. It owns `res`
 * until it ends it; a rejection before any header is sent answers 500. `url` is the request's URL,
 * parsed; `user` is who `authorize` allowed, unset for a public path or a server without
 * authentication.
 */
export type RouteHandler = (req: IncomingMessage, res: ServerResponse, url: URL, user?: string) => void | Promise<void>;

/** Options of {@link HttpServer.start}. */
export interface HttpServerOptions {
  /** Names the server in logs ('metrics', 'probes'). Required. */
  readonly name: string;
  /** Where to listen; port 0 picks a free port. Required. */
  readonly address: BindAddress;
  /** Routes by exact path; anything else is 404, any method but GET and HEAD is 405. Required. */
  readonly routes: Readonly<Record<string, Route>>;
  /**
   * Handlers by path, asked after `routes`: a path ending in `/` serves its whole subtree (the
   * longest such path wins, as Go's ServeMux does), any other only itself. Default: none.
   */
  readonly handlers?: Readonly<Record<string, RouteHandler>> | undefined;
  /**
   * Paths of `routes` or `handlers` (as registered: a subtree by its `/`-ending path) answered
   * without asking `authorize`: only for what anyone may read, such as a static page that carries
   * no data. Default: none.
   */
  readonly publicPaths?: ReadonlySet<string> | undefined;
  /**
   * Exact paths of `handlers` that take every method and authenticate and authorise each request
   * themselves, on the caller's own rights (an action such as an approval): never asked
   * `authorize`, never answered 405 by the server. Default: none.
   */
  readonly actionPaths?: ReadonlySet<string> | undefined;
  /** Default: discards everything. */
  readonly logger?: Logger;
  /** Serve HTTPS (TLS 1.2 and up) with this certificate. Default: plain HTTP. */
  readonly tls?: ServingCertificate | undefined;
  /**
   * Asked before a route answers (never for 404 or 405); a refusal answers its status and message.
   * Default: every request is answered.
   */
  readonly authorize?: ((req: IncomingMessage, path: string) => Promise<AuthDecision>) | undefined;
}

/** One listening HTTP server; `close()` ends it and every connection it holds. */
export class HttpServer {
  readonly #server: Server;
  /** The address actually bound (the port is known even when 0 was asked for). */
  readonly host: string;
  readonly port: number;
  readonly #scheme: 'http' | 'https';
  #closed: Promise<void> | undefined;

  private constructor(server: Server, address: AddressInfo, scheme: 'http' | 'https') {
    this.#server = server;
    this.host = address.address;
    this.port = address.port;
    this.#scheme = scheme;
  }

  /** `http(s)://host:port` of the bound address (loopback when bound to every interface). */
  get url(): string {
    const host = this.host === '::' || this.host === '0.0.0.0' ? '127.0.0.1' : this.host;
    return `${this.#scheme}://${host.includes(':') ? `[${host}]` : host}:${this.port}`;
  }

  /** Listens; rejects when the address cannot be bound (in use, not local). */
  static async start(options: HttpServerOptions): Promise<HttpServer> {
    const logger = (options.logger ?? noopLogger).child({ server: options.name });
    const table = new RouteTable(options.routes, options.handlers ?? {}, options.publicPaths ?? new Set(), options.actionPaths ?? new Set());
    const handler = (req: IncomingMessage, res: ServerResponse): void => {
      serve(table, logger, options.authorize, req, res).catch((err: unknown) => {
        logger.error(`request failed: ${toError(err).message}`, { error: toError(err) });
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' });
        res.end();
      });
    };
    const server: Server = options.tls === undefined
      ? createServer(handler)
      : createTlsServer({ cert: options.tls.cert, key: options.tls.key, minVersion: 'TLSv1.2' }, handler);
    // Probes and scrapes are short; never let an idle client hold a socket for long.
    server.keepAliveTimeout = 5_000;
    server.requestTimeout = 30_000;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ port: options.address.port, ...(options.address.host === '' ? {} : { host: options.address.host }) }, () => {
        server.off('error', reject);
        resolve();
      });
    });
    const http = new HttpServer(server, server.address() as AddressInfo, options.tls === undefined ? 'http' : 'https');
    logger.info('listening', { url: http.url, secure: options.tls !== undefined, authenticated: options.authorize !== undefined });
    return http;
  }

  /**
   * Serves `tls` to new connections from now on (a rotated certificate); open connections keep
   * theirs. Throws on a plain HTTP server, or when the certificate and key do not load.
   */
  setCertificate(tls: ServingCertificate): void {
    if (!(this.#server instanceof TlsServer)) throw new Error('setCertificate on a plain HTTP server');
    this.#server.setSecureContext({ cert: tls.cert, key: tls.key });
  }

  /** Stops listening and ends open connections; resolves when the server is closed. Idempotent. */
  close(): Promise<void> {
    this.#closed ??= new Promise<void>((resolve) => {
      this.#server.close(() => { resolve(); });
      this.#server.closeAllConnections();
    });
    return this.#closed;
  }
}

/**
 * The routes and handlers of one server. Invariant: `#subtrees` holds exactly the handler paths
 * ending in `/`, longest first, so the first match is the most specific.
 */
class RouteTable {
  readonly #routes: ReadonlyMap<string, Route>;
  readonly #handlers: ReadonlyMap<string, RouteHandler>;
  readonly #subtrees: readonly string[];
  readonly #public: ReadonlySet<string>;
  readonly #actions: ReadonlySet<string>;

  constructor(routes: Readonly<Record<string, Route>>, handlers: Readonly<Record<string, RouteHandler>>, publicPaths: ReadonlySet<string>, actionPaths: ReadonlySet<string>) {
    this.#routes = new Map(Object.entries(routes));
    this.#handlers = new Map(Object.entries(handlers));
    this.#subtrees = [...this.#handlers.keys()].filter((p) => p.endsWith('/')).sort((a, b) => b.length - a.length);
    this.#public = new Set(publicPaths);
    this.#actions = new Set(actionPaths);
  }

  /** True when `path` is an action handler's: it takes every method and decides on the caller itself. */
  isAction(path: string): boolean {
    return this.#actions.has(path) && this.#handlers.has(path);
  }

  /** What answers `path`, if anything, and whether it is answered without `authorize`. */
  find(path: string): ({ readonly route: Route } | { readonly handler: RouteHandler }) & { readonly public: boolean } | undefined {
    const route = this.#routes.get(path);
    if (route !== undefined) return { route, public: this.#public.has(path) };
    const exact = this.#handlers.get(path);
    if (exact !== undefined) return { handler: exact, public: this.#public.has(path) };
    for (const subtree of this.#subtrees) {
      const handler = path.startsWith(subtree) ? this.#handlers.get(subtree) : undefined;
      if (handler !== undefined) return { handler, public: this.#public.has(subtree) };
    }
    return undefined;
  }
}

async function serve(table: RouteTable, logger: Logger, authorize: HttpServerOptions['authorize'], req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://localhost');
  const found = table.find(url.pathname);
  const action = table.isAction(url.pathname);
  const readable = action || req.method === 'GET' || req.method === 'HEAD';
  const decision = found === undefined || authorize === undefined || !readable || found.public || action ? undefined : await authorize(req, url.pathname);
  let answer: RouteAnswer;
  if (found === undefined) {
    answer = text(404, `404 page not found\n`);
  } else if (!readable) {
    answer = text(405, `method ${req.method ?? ''} not allowed\n`);
    res.setHeader('allow', 'GET, HEAD');
  } else if (decision !== undefined && !decision.allowed) {
    answer = text(decision.status, `${decision.message}\n`);
    if (decision.status === 429) res.setHeader('retry-after', String(decision.retryAfterSeconds));
  } else if ('handler' in found) {
    // The handler answers on `res` itself; a rejection reaches the server's 500.
    await found.handler(req, res, url, decision?.allowed === true ? decision.user : undefined);
    return;
  } else {
    try {
      answer = await found.route(url.searchParams);
    } catch (err) {
      logger.error(`${url.pathname} failed: ${toError(err).message}`, { path: url.pathname, error: toError(err) });
      answer = text(500, 'internal error\n');
    }
  }
  res.writeHead(answer.status, { 'content-type': answer.contentType, 'content-length': Buffer.byteLength(answer.body), 'cache-control': 'no-store' });
  res.end(req.method === 'HEAD' ? undefined : answer.body);
}

function text(status: number, body: string): RouteAnswer {
  return { status, contentType: 'text/plain; charset=utf-8', body };
}

/**
 * One health or readiness check: resolves `undefined` (or nothing) when passing, else a short
 * reason; a throw or rejection fails it with the error's message. Checks run on every probe:
 * keep them cheap (read state, do no I/O).
 */
export type CheckFunction = () => string | undefined | Promise<string | undefined>;

/** A named {@link CheckFunction}. */
export interface Check {
  readonly name: string;
  readonly check: CheckFunction;
}

async function runCheck(check: CheckFunction): Promise<string | undefined> {
  try {
    return await check();
  } catch (err) {
    return toError(err).message;
  }
}

/**
 * `/healthz` or `/readyz` in controller-runtime's style: 200 `ok`, or 500 listing each check as
 * `[+]name ok` / `[-]name failed: reason`. `?verbose` lists the checks on success too. `checks`
 * is read on every request, so checks added later count.
 */
export function checksRoute(checks: () => readonly Check[], what: string): Route {
  return async (query) => {
    const results = await Promise.all(checks().map(async ({ name, check }) => ({ name, reason: await runCheck(check) })));
    const failed = results.some((r) => r.reason !== undefined);
    if (!failed && !query.has('verbose')) return text(200, 'ok');
    const lines = results.map((r) => (r.reason === undefined ? `[+]${r.name} ok` : `[-]${r.name} failed: ${r.reason}`));
    return text(failed ? 500 : 200, `${lines.join('\n')}\n${what} check ${failed ? 'failed' : 'passed'}\n`);
  };
}

/** Routes of a probe server. `/healthz` passes while the process runs; `/readyz` runs `ready`. */
export function probeRoutes(ready: readonly Check[]): Record<string, Route> {
  return {
    '/healthz': checksRoute(() => [{ name: 'ping', check: () => undefined }], 'healthz'),
    '/readyz': checksRoute(() => ready, 'readyz'),
  };
}

/** `/metrics`: Prometheus text 0.0.4, rendered by `render` (a prom-client registry's `metrics()`). */
export function metricsRoute(render: () => Promise<string>): Route {
  return async () => ({ status: 200, contentType: metricsContentType, body: await render() });
}
