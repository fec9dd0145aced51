import type { IncomingMessage, ServerResponse } from 'node:http';
import type { InformerHandler } from '../../lib/informer/index.ts';
import type { Manager, RouteHandler } from '../../lib/manager/index.ts';
import { PIPELINE_GVK, type ApprovalClient } from '../../lib/pipeline/index.ts';
import type { HeldReader, Registry } from '../../lib/registry/index.ts';
import type { RequestObservation } from '../../lib/transport/index.ts';
import { invalidOption, noopLogger, realClock, sleep, toError, type Clock, type Logger } from '../../lib/util/index.ts';
import { ApprovalEndpoint, APPROVE_PATH } from './actions.ts';
import { buildState, MIN_DOCUMENT_BYTES } from './model.ts';
import { appJs, faviconSvg, pageHtml, securityHeaders, styleCss } from './page.ts';
import { RequestTally } from './requests.ts';
import { AssignmentMemo, type ShardSource } from './shards.ts';
import { EventStream, type EventStreamOptions } from './stream.ts';

/** Where the dashboard is served. */
export const DASHBOARD_PATH = '/dashboard/';

/** The part of the registry the dashboard reads: its caches, and a reader of Pipelines. */
export type DashboardRegistry = Pick<Registry, 'caches' | 'reader'>;

/** The part of the registry the dashboard's actions use: the management cluster as the service. */
export type DashboardActionsRegistry = Pick<Registry, 'connectionFor'>;

/** Options of {@link Dashboard}. */
export interface DashboardOptions {
  /** Default: discards everything. */
  readonly logger?: Logger;
  /** Default: the wall clock. */
  readonly clock?: Clock;
  /** The event stream's bounds, pace, shares and lifetime (see {@link EventStreamOptions} for the defaults). */
  readonly stream?: Pick<EventStreamOptions, 'minIntervalMs' | 'refreshMs' | 'heartbeatMs' | 'maxBufferedBytes' | 'maxClients' | 'maxClientsPerIdentity' | 'lifetimeMs' | 'random'>;
  /**
   * Where the actions (approvals) reach the management cluster as the service: set by
   * {@link Dashboard.mount} to the manager's registry. Default: none, and actions answer 503.
   */
  readonly actions?: DashboardActionsRegistry;
  /**
   * Bytes of JSON one document of the state takes at most: beyond it, targets, then history, then
   * whole Pipelines, caches and clusters are left out, and the document says what (a viewer is
   * never dropped for the size of the fleet). At least 65 536. Default 524 288 (512 KiB).
   */
  readonly maxDocumentBytes?: number;
  /**
   * With `--shard`: where the page's Shards section reads this replica's view of its group (the
   * Sharder's status, and every live shard key). Default: none, and the page has no Shards section.
   */
  readonly shards?: ShardSource;
}

/** Backoff while the Pipeline cache cannot be built (the CRD not installed yet, say). */
const PIPELINE_CACHE_RETRY_MS = { initial: 1_000, max: 30_000 } as const;

/** The static files under `/dashboard/`, by path. */
const ASSETS: ReadonlyMap<string, { readonly contentType: string; readonly body: string }> = new Map([
  [DASHBOARD_PATH, { contentType: 'text/html; charset=utf-8', body: pageHtml }],
  [`${DASHBOARD_PATH}app.js`, { contentType: 'text/javascript; charset=utf-8', body: appJs }],
  [`${DASHBOARD_PATH}app.css`, { contentType: 'text/css; charset=utf-8', body: styleCss }],
  [`${DASHBOARD_PATH}favicon.svg`, { contentType: 'image/svg+xml', body: faviconSvg }],
]);

function answer(req: IncomingMessage, res: ServerResponse, status: number, contentType: string, body: string, headers: Readonly<Record<string, string>> = {}): void {
  res.writeHead(status, { ...securityHeaders, ...headers, 'content-type': contentType, 'content-length': String(Buffer.byteLength(body)), 'cache-control': 'no-store' });
  res.end(req.method === 'HEAD' ? undefined : body);
}

/** The page, its script, style and icon (nothing else under `/dashboard/`: 404). */
const serveAsset: RouteHandler = (req, res, url) => {
  const asset = ASSETS.get(url.pathname);
  if (asset === undefined) answer(req, res, 404, 'text/plain; charset=utf-8', '404 page not found\n');
  else answer(req, res, 200, asset.contentType, asset.body);
};

/** `/dashboard` → `dashboard/` (relative, so that a path prefix in front of the server is kept). */
const redirect: RouteHandler = (req, res) => {
  answer(req, res, 308, 'text/plain; charset=utf-8', 'see /dashboard/\n', { location: 'dashboard/' });
};

/**
 * The service's live dashboard: pipelines (each environment's revision and readiness,
 * the promotion in flight, the history of outcomes) from the service's own Pipelines' status,
 * clusters (reachable, requests, relists, errors) and caches (objects, sync, owners, next GC),
 * with `--shard` this replica's view of its shard group (peers, shares, handoff, unowned keys),
 * pushed to the page as server-sent events. A document is bounded in bytes (cut with a marker
 * beyond), each stream ends after a lifetime so that the page reconnects and is authorised again,
 * and one user holds a bounded share of the streams.
 *
 * The static page (`/dashboard/` and its script, style and icon) carries no data and is public;
 * the state (`/dashboard/events`) is behind the server's `authorize`, which the page passes by
 * sending the bearer token it is given in the Authorization header of a fetch() (EventSource
 * cannot send headers, and a token in a URL ends up in logs and history). The one action,
 * approving a promotion (`POST /dashboard/api/approve`), is decided on the caller's own rights
 * (see actions.ts), whatever the metrics server's authentication.
 */
export class Dashboard {
  readonly #logger: Logger;
  readonly #clock: Clock;
  readonly #stream: EventStream;
  readonly #requests: RequestTally;
  #actions: DashboardActionsRegistry | undefined;
  readonly #maxDocumentBytes: number;
  readonly #shards: ShardSource | undefined;
  readonly #assignment = new AssignmentMemo();
  #registry: DashboardRegistry | undefined;
  #pipelines: HeldReader | undefined;
  #running = false;
  /** Handlers by path, for a metrics server (see {@link mount}); `/dashboard/` is a subtree. */
  readonly handlers: Readonly<Record<string, RouteHandler>>;
  /** The paths of {@link handlers} that carry no data and are served without authentication. */
  readonly publicPaths: ReadonlySet<string> = new Set(['/dashboard', DASHBOARD_PATH]);
  /** The paths of {@link handlers} that take POST and authorise each request on the caller's own rights. */
  readonly actionPaths: ReadonlySet<string> = new Set([APPROVE_PATH]);

  constructor(options: DashboardOptions = {}) {
    this.#logger = (options.logger ?? noopLogger).child({ component: 'dashboard' });
    this.#clock = options.clock ?? realClock;
    this.#maxDocumentBytes = options.maxDocumentBytes ?? 524_288;
    this.#shards = options.shards;
    if (!Number.isInteger(this.#maxDocumentBytes) || this.#maxDocumentBytes < MIN_DOCUMENT_BYTES) {
      invalidOption('Dashboard', 'maxDocumentBytes', this.#maxDocumentBytes, `an integer of at least ${MIN_DOCUMENT_BYTES}`);
    }
    this.#stream = new EventStream(() => this.#snapshot(), { ...options.stream, headers: securityHeaders, clock: this.#clock, logger: this.#logger });
    this.#requests = new RequestTally(() => { this.#stream.notify(); });
    // Shares are per authenticated user; without authentication (--metrics-secure=false) per peer address.
    const events: RouteHandler = (req, res, _url, user) => {
      this.#stream.attach(res, req.method ?? 'GET', user === undefined ? `address:${req.socket.remoteAddress ?? ''}` : `user:${user}`);
    };
    this.#actions = options.actions;
    const approve = new ApprovalEndpoint({ management: () => this.#management(), logger: this.#logger, clock: this.#clock });
    this.handlers = Object.freeze({ '/dashboard': redirect, [DASHBOARD_PATH]: serveAsset, '/dashboard/events': events, [APPROVE_PATH]: approve.handle });
  }

  /**
   * Puts the dashboard on `manager`'s metrics server (the page public, `/dashboard/events` behind
   * its authentication) and runs it on every replica (a follower shows the Pipelines' status too).
   * Before `manager.start`; needs the manager's `metricsServer`.
   */
  mount(manager: Pick<Manager, 'addHandler' | 'add' | 'registry'>): void {
    this.#actions ??= manager.registry;
    for (const [path, handler] of Object.entries(this.handlers)) manager.addHandler(path, handler, { public: this.publicPaths.has(path), action: this.actionPaths.has(path) });
    manager.add({ name: 'dashboard', needLeaderElection: false, start: (signal) => this.run(manager.registry, signal) });
  }

  /** A `ClusterSetOptions.onRequest` observer: the clusters table counts requests through it. */
  readonly observeRequest = (observation: RequestObservation): void => {
    this.#requests.observe(observation);
  };

  /** Clients of the event stream connected now. */
  get clients(): number {
    return this.#stream.clients;
  }

  /**
   * Shows `registry` until `signal` aborts: holds a reader of Pipelines (the cache the controller
   * shares; retried with backoff while it cannot be built) whose every event updates the page,
   * then releases it and ends every event stream. Rejects only when already running.
   */
  async run(registry: DashboardRegistry, signal: AbortSignal): Promise<void> {
    if (this.#running) throw new Error('Dashboard is already running');
    this.#running = true;
    this.#registry = registry;
    const changed = (): void => { this.#stream.notify(); };
    const handler: InformerHandler = { add: changed, update: changed, delete: changed };
    try {
      let waitMs: number = PIPELINE_CACHE_RETRY_MS.initial;
      let reader: HeldReader | undefined;
      // Read through a call: the compiler would keep a narrowing of `signal.aborted` across awaits.
      const aborted = (): boolean => signal.aborted;
      while (reader === undefined && !aborted()) {
        try {
          reader = await registry.reader({ kind: 'local' }, PIPELINE_GVK, { handler, signal });
          this.#pipelines = reader;
        } catch (err) {
          if (!aborted()) this.#logger.warn('the Pipeline cache could not be built; retrying', { error: toError(err).message, retryInMs: waitMs });
          await sleep(waitMs, signal, this.#clock).catch(() => undefined);
          waitMs = Math.min(waitMs * 2, PIPELINE_CACHE_RETRY_MS.max);
        }
      }
      this.#stream.notify();
      if (!aborted()) {
        await new Promise<void>((resolve) => { signal.addEventListener('abort', () => { resolve(); }, { once: true }); });
      }
    } finally {
      this.#stream.close();
      this.#pipelines?.release();
      this.#pipelines = undefined;
      this.#registry = undefined;
      this.#running = false;
    }
  }

  /** The management cluster as the service, while running. */
  async #management(): Promise<ApprovalClient> {
    if (!this.#running || this.#actions === undefined) throw new Error('the dashboard is not running');
    return this.#actions.connectionFor({ kind: 'local' }, { namespace: 'default', name: 'dashboard-actions' });
  }

  #snapshot(): string {
    const now = this.#clock.now();
    const pipelines = this.#pipelines;
    return JSON.stringify(buildState({
      now,
      pipelines: pipelines?.list() ?? [],
      pipelinesSynced: pipelines?.synced ?? false,
      caches: this.#registry?.caches() ?? [],
      requests: this.#requests.counts(),
      maxBytes: this.#maxDocumentBytes,
      ...(this.#shards === undefined ? {} : { shards: { status: this.#shards.status(), keys: this.#shards.keys(), memo: this.#assignment } }),
    }));
  }
}
