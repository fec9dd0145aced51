import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTlsServer, Server as TlsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { CacheInfo } from '../lib/registry/index.ts';
import { formatGvk, noopLogger, toError, type Logger } from '../lib/util/index.ts';
import type { AuthDecision } from './auth.ts';
import type { ServingCertificate } from './certificate.ts';
import type { BindAddress } from './flags.ts';
import { scrubText } from './logging.ts';
import { metricsContentType } from './metrics.ts';

/** What a route answers. Routes run on every request: keep them cheap. */
export interface RouteAnswer {
  readonly status: number;
  readonly contentType: string;
  readonly body: string;
}

/** A GET/HEAD route. `query` is the request's search parameters. */
export type Route = (query: URLSearchParams) => RouteAnswer | Promise<RouteAnswer>;

/** Options of {@link HttpServer.start}. */
export interface HttpServerOptions {
  /** Names the server in logs ('metrics', 'probes'). Required. */
  readonly name: string;
  /** Where to listen; port 0 picks a free port. Required. */
  readonly address: BindAddress;
  /** Routes by exact path; anything else is 404, any method but GET and HEAD is 405. Required. */
  readonly routes: Readonly<Record<string, Route>>;
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
    const routes = new Map(Object.entries(options.routes));
    const handler = (req: IncomingMessage, res: ServerResponse): void => {
      serve(routes, logger, options.authorize, req, res).catch((err: unknown) => {
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

async function serve(routes: ReadonlyMap<string, Route>, logger: Logger, authorize: HttpServerOptions['authorize'], req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://localhost');
  const route = routes.get(url.pathname);
  const decision = route === undefined || authorize === undefined || (req.method !== 'GET' && req.method !== 'HEAD') ? undefined : await authorize(req, url.pathname);
  let answer: RouteAnswer;
  if (route === undefined) {
    answer = text(404, `404 page not found\n`);
  } else if (req.method !== 'GET' && req.method !== 'HEAD') {
    answer = text(405, `method ${req.method ?? ''} not allowed\n`);
    res.setHeader('allow', 'GET, HEAD');
  } else if (decision !== undefined && !decision.allowed) {
    answer = text(decision.status, `${decision.message}\n`);
  } else {
    try {
      answer = await route(url.searchParams);
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

/** One readiness check: `undefined` when passing, else why not. */
export interface Check {
  readonly name: string;
  readonly check: () => string | undefined;
}

/**
 * `/healthz` and `/readyz` in controller-runtime's style: 200 `ok`, or 500 listing each check as
 * `[+]name ok` / `[-]name failed: reason`. `?verbose` lists the checks on success too.
 */
function checksRoute(checks: readonly Check[], what: string): Route {
  return (query) => {
    const results = checks.map(({ name, check }) => ({ name, reason: check() }));
    const failed = results.some((r) => r.reason !== undefined);
    if (!failed && !query.has('verbose')) return text(200, 'ok');
    const lines = results.map((r) => (r.reason === undefined ? `[+]${r.name} ok` : `[-]${r.name} failed: ${r.reason}`));
    return text(failed ? 500 : 200, `${lines.join('\n')}\n${what} check ${failed ? 'failed' : 'passed'}\n`);
  };
}

/** Routes of the probe server. `/healthz` passes while the process runs; `/readyz` runs `ready`. */
export function probeRoutes(ready: readonly Check[]): Record<string, Route> {
  return {
    '/healthz': checksRoute([{ name: 'ping', check: () => undefined }], 'healthz'),
    '/readyz': checksRoute(ready, 'readyz'),
  };
}

/** {@link CacheInfo} as `/debug/caches` shows it: JSON-ready, errors as (scrubbed) messages. */
export function describeCache(info: CacheInfo): Record<string, unknown> {
  return {
    cluster: info.cluster,
    gvk: formatGvk(info.gvk),
    group: info.gvk.group,
    version: info.gvk.version,
    kind: info.gvk.kind,
    synced: info.synced,
    objects: info.objects,
    owners: info.owners,
    ageSeconds: Math.round(info.ageMs / 1000),
    lastError: info.lastError === undefined ? null : scrubText(info.lastError.message),
    nextGcCheckInSeconds: info.nextGcCheckInMs === undefined ? null : Math.round(info.nextGcCheckInMs / 1000),
    relists: info.relists,
    watchErrors: info.watchErrors,
  };
}

/** Routes of the metrics server: `/metrics` (Prometheus text 0.0.4, from prom-client) and `/debug/caches` (JSON). */
export function metricsRoutes(sources: { readonly metrics: () => Promise<string>; readonly caches: () => readonly CacheInfo[] }): Record<string, Route> {
  return {
    '/metrics': async () => ({ status: 200, contentType: metricsContentType, body: await sources.metrics() }),
    '/debug/caches': () => {
      const caches = [...sources.caches()]
        .sort((a, b) => a.cluster.localeCompare(b.cluster) || formatGvk(a.gvk).localeCompare(formatGvk(b.gvk)))
        .map(describeCache);
      return { status: 200, contentType: 'application/json', body: `${JSON.stringify({ caches }, null, 2)}\n` };
    },
  };
}
