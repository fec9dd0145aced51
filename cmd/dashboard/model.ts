// The dashboard's state: what the page shows, built from the service's own Pipelines (their
// status only), the registry's caches and the requests made to each cluster. Every string that
// came from an object or a peer is sanitized and bounded here; the page adds it with textContent.
import type { KubeObject } from '../../lib/transport/index.ts';
import type { CacheInfo } from '../../lib/registry/index.ts';
import { sanitizeForDisplay } from '../../lib/util/index.ts';
import { scrubText } from '../logging.ts';

/** Longest text one field of the state carries, in UTF-16 code units. */
export const MAX_FIELD_TEXT = 1_000;
/** Promotion records shown per Pipeline (newest first); status keeps at most 10 per environment. */
export const MAX_HISTORY = 50;
/** Pipelines shown at most (sorted by namespace and name); `truncated` says when there were more. */
export const MAX_PIPELINES = 200;

/** A condition as the page shows it. */
export interface ConditionView {
  readonly status: string;
  readonly reason: string;
  readonly message: string;
}

export interface TargetView {
  readonly cluster: string;
  readonly namespace: string;
  /** Unset while not known (the cache still loading). */
  readonly readable?: boolean;
  readonly ready: boolean;
  readonly revision?: string;
  readonly error?: string;
}

export interface EnvironmentView {
  readonly name: string;
  readonly ready: boolean;
  readonly revision?: string;
  readonly targets: readonly TargetView[];
}

export interface PromotionView {
  readonly environment: string;
  readonly revision: string;
  readonly strategy: string;
  /** `AwaitingApproval`, `Pending`, `Succeeded`, `Failed`. */
  readonly state: string;
  readonly attempts: number;
  readonly startedAt: string;
  readonly finishedAt?: string;
  readonly message?: string;
}

export interface PipelineView {
  readonly namespace: string;
  readonly name: string;
  /** The `Ready` condition, when the controller has written one. */
  readonly ready?: ConditionView;
  /** True while `metadata.generation` is ahead of `status.observedGeneration`. */
  readonly stale: boolean;
  /** In promotion order, as the status lists them. */
  readonly environments: readonly EnvironmentView[];
  /** Promotions not finished (`Pending`, `Committed`, `AwaitingApproval`): the promotion in flight. */
  readonly inFlight: readonly PromotionView[];
  /** Newest first, at most {@link MAX_HISTORY}. */
  readonly history: readonly PromotionView[];
}

export interface ClusterView {
  /** The cluster as metrics name it (`local`, `secret:ns/name`, ...). */
  readonly name: string;
  /**
   * True when the last request to it got an HTTP answer, false when it got none (refused,
   * timed out, TLS failure); unset before any request.
   */
  readonly reachable?: boolean;
  readonly requests: number;
  /** Requests answered with an error status or not answered at all. */
  readonly failedRequests: number;
  /** `2xx`, an HTTP status, or `<error>` (no answer), of the last request. */
  readonly lastCode?: string;
  readonly caches: number;
  readonly syncedCaches: number;
  readonly objects: number;
  readonly relists: number;
  readonly watchErrors: number;
  /** The newest cache error on this cluster (scrubbed). */
  readonly lastError?: string;
}

export interface CacheView {
  readonly cluster: string;
  /** Unset: every namespace. */
  readonly namespace?: string;
  readonly group: string;
  readonly version: string;
  readonly kind: string;
  readonly synced: boolean;
  readonly objects: number;
  readonly owners: number;
  readonly relists: number;
  readonly watchErrors: number;
  readonly lastError?: string;
  /** Epoch milliseconds when the cache was built, to the second. */
  readonly createdAt: number;
  /** Epoch milliseconds of the garbage collector's next look, when one is scheduled, to the second. */
  readonly nextGcAt?: number;
}

/**
 * Everything the page shows, as one JSON document. It carries no "now": the same fleet gives the
 * same JSON, so an unchanged state is never sent again (the stream stamps the time it sends).
 */
export interface DashboardState {
  readonly pipelines: readonly PipelineView[];
  /** Pipelines not shown beyond {@link MAX_PIPELINES}. */
  readonly truncatedPipelines: number;
  /** True once the Pipeline cache holds a complete list. */
  readonly pipelinesSynced: boolean;
  readonly clusters: readonly ClusterView[];
  readonly caches: readonly CacheView[];
}

/** Request counts of one cluster, as {@link RequestTally} keeps them. */
export interface RequestCounts {
  readonly requests: number;
  readonly failed: number;
  readonly lastCode: string;
}

/** What {@link buildState} reads. */
export interface StateSources {
  /** Epoch milliseconds, read just before `caches` (their ages are turned into times). */
  readonly now: number;
  /** The Pipelines in the cache (any shape: checked here). */
  readonly pipelines: readonly KubeObject[];
  readonly pipelinesSynced: boolean;
  readonly caches: readonly CacheInfo[];
  /** Request counts by cluster name. */
  readonly requests: ReadonlyMap<string, RequestCounts>;
}

function text(value: string): string {
  return sanitizeForDisplay(value, MAX_FIELD_TEXT);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function str(value: unknown): string | undefined {
  return typeof value === 'string' ? text(value) : undefined;
}

function records(value: unknown): Record<string, unknown>[] {
  return Array.isArray(value) ? value.filter(isRecord) : [];
}

/** The cluster a cache's connection key names: `local[as=…]` is `local`, as metrics name it. */
export function clusterOfConnection(key: string): string {
  return key.replace(/\[[^\]]*\]/, '');
}

/** `{ key: value }`, or `{}` when the value is unset (exactOptionalPropertyTypes: never `key: undefined`). */
function optional<K extends string, V>(key: K, value: V | undefined): Partial<Record<K, V>> {
  return (value === undefined ? {} : { [key]: value }) as Partial<Record<K, V>>;
}

function targetView(raw: Record<string, unknown>): TargetView {
  return {
    cluster: str(raw.cluster) ?? '',
    namespace: str(raw.namespace) ?? '',
    ...optional('readable', typeof raw.readable === 'boolean' ? raw.readable : undefined),
    ready: raw.ready === true,
    ...optional('revision', str(raw.revision)),
    ...optional('error', str(raw.error)),
  };
}

function promotionView(raw: Record<string, unknown>): PromotionView {
  return {
    environment: str(raw.environment) ?? '',
    revision: str(raw.revision) ?? '',
    strategy: str(raw.strategy) ?? '',
    state: str(raw.state) ?? '',
    attempts: typeof raw.attempts === 'number' && Number.isFinite(raw.attempts) ? raw.attempts : 0,
    startedAt: str(raw.startedAt) ?? '',
    ...optional('finishedAt', str(raw.finishedAt)),
    ...optional('message', str(raw.message)),
  };
}

/** One Pipeline as the page shows it: metadata names and status, never spec. */
export function pipelineView(obj: KubeObject): PipelineView {
  const meta: Record<string, unknown> = isRecord(obj.metadata) ? obj.metadata : {};
  const status: Record<string, unknown> = isRecord((obj as { status?: unknown }).status) ? (obj as { status: Record<string, unknown> }).status : {};
  const ready = records(status.conditions).find((c) => c.type === 'Ready');
  const generation = typeof meta.generation === 'number' ? meta.generation : undefined;
  const observed = typeof status.observedGeneration === 'number' ? status.observedGeneration : undefined;
  const promotions = records(status.promotions).map(promotionView);
  return {
    namespace: str(meta.namespace) ?? '',
    name: str(meta.name) ?? '',
    ...optional('ready', ready === undefined ? undefined : { status: str(ready.status) ?? 'Unknown', reason: str(ready.reason) ?? '', message: str(ready.message) ?? '' }),
    stale: generation !== undefined && observed !== generation,
    environments: records(status.environments).map((env) => ({
      name: str(env.name) ?? '',
      ready: env.ready === true,
      ...optional('revision', str(env.revision)),
      targets: records(env.targets).map(targetView),
    })),
    inFlight: promotions.filter((p) => p.state === 'Pending' || p.state === 'Committed' || p.state === 'AwaitingApproval'),
    // Status keeps records oldest first; the page reads newest first. Ties keep status order.
    history: promotions
      .map((p, i) => ({ p, i }))
      .sort((a, b) => (b.p.startedAt < a.p.startedAt ? -1 : b.p.startedAt > a.p.startedAt ? 1 : b.i - a.i))
      .slice(0, MAX_HISTORY)
      .map(({ p }) => p),
  };
}

function toSecond(ms: number): number {
  return Math.round(ms / 1000) * 1000;
}

function cacheView(info: CacheInfo, now: number): CacheView {
  return {
    cluster: text(info.cluster),
    ...optional('namespace', info.namespace === undefined ? undefined : text(info.namespace)),
    group: text(info.gvk.group),
    version: text(info.gvk.version),
    kind: text(info.gvk.kind),
    synced: info.synced,
    objects: info.objects,
    owners: info.owners,
    relists: info.relists,
    watchErrors: info.watchErrors,
    ...optional('lastError', info.lastError === undefined ? undefined : text(scrubText(info.lastError.message))),
    // To the second: ages are read a moment after `now`, and a millisecond of jitter is no change.
    createdAt: toSecond(now - info.ageMs),
    ...optional('nextGcAt', info.nextGcCheckInMs === undefined ? undefined : toSecond(now + info.nextGcCheckInMs)),
  };
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The whole state, sorted so that the same inputs always give the same JSON. No I/O. */
export function buildState(sources: StateSources): DashboardState {
  const { now } = sources;
  const pipelines = sources.pipelines
    .map(pipelineView)
    .sort((a, b) => compare(a.namespace, b.namespace) || compare(a.name, b.name));
  const caches = sources.caches
    .map((info) => cacheView(info, now))
    .sort((a, b) => compare(a.cluster, b.cluster) || compare(a.group, b.group) || compare(a.kind, b.kind) || compare(a.version, b.version) || compare(a.namespace ?? '', b.namespace ?? ''));

  const clusters = new Map<string, { name: string; caches: CacheInfo[]; counts: RequestCounts | undefined }>();
  const clusterEntry = (name: string): { name: string; caches: CacheInfo[]; counts: RequestCounts | undefined } => {
    let entry = clusters.get(name);
    if (entry === undefined) {
      entry = { name, caches: [], counts: undefined };
      clusters.set(name, entry);
    }
    return entry;
  };
  for (const info of sources.caches) clusterEntry(clusterOfConnection(info.cluster)).caches.push(info);
  for (const [name, counts] of sources.requests) clusterEntry(name).counts = counts;
  const clusterViews = [...clusters.values()]
    .sort((a, b) => compare(a.name, b.name))
    .map(({ name, caches: of, counts }): ClusterView => {
      // The error of the youngest failing cache: the likeliest to describe the cluster now.
      const failing = of.filter((c) => c.lastError !== undefined).sort((a, b) => a.ageMs - b.ageMs)[0];
      return {
        name: text(name),
        ...optional('reachable', counts === undefined ? undefined : counts.lastCode !== '<error>'),
        requests: counts?.requests ?? 0,
        failedRequests: counts?.failed ?? 0,
        ...optional('lastCode', counts?.lastCode),
        caches: of.length,
        syncedCaches: of.filter((c) => c.synced).length,
        objects: of.reduce((sum, c) => sum + c.objects, 0),
        relists: of.reduce((sum, c) => sum + c.relists, 0),
        watchErrors: of.reduce((sum, c) => sum + c.watchErrors, 0),
        ...optional('lastError', failing?.lastError === undefined ? undefined : text(scrubText(failing.lastError.message))),
      };
    });

  return {
    pipelines: pipelines.slice(0, MAX_PIPELINES),
    truncatedPipelines: Math.max(0, pipelines.length - MAX_PIPELINES),
    pipelinesSynced: sources.pipelinesSynced,
    clusters: clusterViews,
    caches,
  };
}
