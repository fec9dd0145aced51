// The dashboard's state: what the page shows, built from the service's own Pipelines (their
// status only), the registry's caches and the requests made to each cluster. Every string that
// came from an object or a peer is sanitized and bounded here; the page adds it with textContent.
import type { KubeObject } from '../../lib/transport/index.ts';
import type { CacheInfo } from '../../lib/registry/index.ts';
import type { ShardStatus } from '../../lib/manager/index.ts';
import { KubeApiError, sanitizeForDisplay } from '../../lib/util/index.ts';
import { scrubText } from '../logging.ts';
import { capShardView, shardKeyLists, type AssignmentMemo, shardKeysLeftOut, shardView, type ShardView } from './shards.ts';

/** Longest text one field of the state carries, in UTF-16 code units. */
export const MAX_FIELD_TEXT = 1_000;
/** Promotion records shown per Pipeline (newest first); status keeps at most 10 per environment. */
export const MAX_HISTORY = 50;
/** Pipelines shown at most (sorted by namespace and name); `truncated` says when there were more. */
export const MAX_PIPELINES = 200;
/** Names of the Pipelines left out of a truncated document that its marker lists. */
export const MAX_OMITTED_NAMES = 20;
/** The smallest byte bound a document may be given: room for its skeleton and its marker. */
export const MIN_DOCUMENT_BYTES = 64 * 1024;
/** Waves shown per environment: as many as a Pipeline may have (`MAX_WAVES` in lib/pipeline/validate.ts). */
export const MAX_WAVES = 10;

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
  /** Why it is not ready, in the status's fixed vocabulary (anything else is left out). */
  readonly reason?: string;
  readonly error?: string;
}

/** Why a fleet's targets are not ready, as status counts them; only this vocabulary is shown. */
export const FLEET_NOT_READY_REASONS = ['Suspended', 'Progressing', 'NotObserved', 'NotReady', 'Unreadable', 'Loading', 'Missing', 'OtherRevision'] as const;

/** A fleet environment's readiness in counts, as status gives them (bounded whatever the fleet's size). */
export interface FleetView {
  /** The readiness policy, e.g. `Quorum 5`. */
  readonly policy: string;
  readonly total: number;
  readonly readyTargets: number;
  /** Ready targets the policy needs. */
  readonly required: number;
  readonly readable: number;
  /** Not-ready targets by reason, in {@link FLEET_NOT_READY_REASONS} order, zero counts left out. */
  readonly notReady: readonly { readonly reason: string; readonly count: number }[];
  /** Why the membership cannot be read. */
  readonly error?: string;
  /** True while the member list has not loaded (the counts are not the fleet's yet). */
  readonly membershipLoading?: true;
}

/**
 * Where a wave stands in the environment's newest rollout: `NotStarted` (no record), `AwaitingApproval`
 * (`<environment>/<wave>` not approved yet), `Pending` (being carried out), `CarriedOut` (waiting to
 * be ready), `Ready` (its record succeeded; soaking until `soakUntil` when that is later than now), `Failed`.
 */
export type WaveState = 'NotStarted' | 'AwaitingApproval' | 'Pending' | 'CarriedOut' | 'Ready' | 'Failed';

export interface WaveView {
  readonly name: string;
  readonly state: WaveState;
  /** The revision of the rollout the state is about (unset with no rollout). */
  readonly revision?: string;
  /** Ready now at `currentRevision` as the wave's readiness policy counts it. */
  readonly ready: boolean;
  readonly currentRevision?: string;
  readonly total: number;
  readonly readyTargets: number;
  readonly required: number;
  readonly soakSeconds?: number;
  /** Epoch milliseconds the soak ends (`Ready` with `soakSeconds`): the page tells soaking from ready with its clock. */
  readonly soakUntil?: number;
  readonly requireApproval: boolean;
  /** The record's message (why it failed, what was carried out). */
  readonly message?: string;
  /** `Failed` after it was carried out: the rollout stopped here, and a person may retry it (`<environment>/<wave>`). */
  readonly stopped?: true;
}

export interface EnvironmentView {
  readonly name: string;
  readonly ready: boolean;
  readonly revision?: string;
  /** When not ready: the first not-ready target's reason (fixed vocabulary). */
  readonly reason?: string;
  readonly targets: readonly TargetView[];
  /** Targets of this environment left out to keep the document within its bound (the first ones are shown). */
  readonly omittedTargets?: number;
  /** A fleet environment's counts; its `targets` are then the first not-ready ones status lists. */
  readonly fleet?: FleetView;
  /** A fleet environment's waves, in order (at most {@link MAX_WAVES}). */
  readonly waves?: readonly WaveView[];
}

export interface PromotionView {
  readonly environment: string;
  /** The wave of a fleet environment (approved as `<environment>/<wave>`). */
  readonly wave?: string;
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
  /** History records left out to keep the document within its bound (the newest are shown). */
  readonly omittedHistory?: number;
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
  /** The HTTP status (`200`, `404`, …) or `<error>` (no answer) of the last request. */
  readonly lastCode?: string;
  readonly caches: number;
  readonly syncedCaches: number;
  readonly objects: number;
  /** What its caches hold, in bytes: the sum of theirs ({@link CacheView.heldBytes}). */
  readonly heldBytes: number;
  readonly relists: number;
  readonly watchErrors: number;
  /**
   * The newest cache error on this cluster, as its typed reason only (`ERR_KUBE_API HTTP 403
   * Forbidden`, `ERR_WATCH_TIMEOUT`, ...): never the text a peer sent.
   */
  readonly lastError?: string;
  /**
   * Set when a Pipeline's target names this cluster and its kubeconfig Secret is missing
   * (`SecretNotFound`) or lacks the key (`KeyNotFound`); the cluster then has no connection.
   */
  readonly credentialsMissing?: CredentialsMissing;
}

/** Why a cluster has no credentials, as the Pipelines naming it report. */
export type CredentialsMissing = 'SecretNotFound' | 'KeyNotFound';

export interface CacheView {
  readonly cluster: string;
  /** Unset: every namespace. */
  readonly namespace?: string;
  readonly group: string;
  readonly version: string;
  readonly kind: string;
  readonly synced: boolean;
  readonly objects: number;
  /**
   * Estimated bytes its objects hold (the informer's `stats().retainedBytes`, the figure of the
   * `fleetcache_cache_retained_bytes` metric), rounded up to the KiB so that a small change is not
   * a new document; 0 when not known.
   */
  readonly heldBytes: number;
  /** Objects held packed (`--cache-objects=compressed`); absent when none. */
  readonly packed?: number;
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
 * What a document left out to stay within its byte bound: the shard view's key lists first, then
 * targets (the same number per environment at most), then history, then whole Pipelines, caches and clusters, in that order.
 */
export interface TruncationView {
  /** The bound, in bytes of JSON. */
  readonly maxBytes: number;
  /** Targets left out, over every environment (each says how many of its own). */
  readonly targets: number;
  /** History records left out (each Pipeline says how many of its own). */
  readonly history: number;
  /** Pipelines left out (beyond those {@link MAX_PIPELINES} already leaves out). */
  readonly pipelines: number;
  /** `namespace/name` of the first {@link MAX_OMITTED_NAMES} Pipelines left out. */
  readonly pipelineNames: readonly string[];
  readonly caches: number;
  readonly clusters: number;
  /** Keys left out of the shard view's lists (each list keeps its count); set only with a shard view. */
  readonly shardKeys?: number;
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
  /** This replica's view of its shard group; only when the service runs with `--shard`. */
  readonly shards?: ShardView;
  /** Set when the document was cut to its byte bound: what was left out. */
  readonly truncated?: TruncationView;
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
  /** With `--shard`: the Sharder's status and every live shard key this replica knows. Default: no shard view. */
  readonly shards?: { readonly status: ShardStatus; readonly keys: Iterable<string>; readonly memo?: AssignmentMemo };
  /**
   * Bytes of JSON the document may take at most (at least {@link MIN_DOCUMENT_BYTES}): beyond it,
   * parts are left out and `truncated` says which. Default: unbounded.
   */
  readonly maxBytes?: number;
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

function count(value: unknown): number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : 0;
}

/** A reason from the fixed vocabulary, or undefined: a value outside it is never echoed. */
function reason(value: unknown): string | undefined {
  return typeof value === 'string' && (FLEET_NOT_READY_REASONS as readonly string[]).includes(value) ? value : undefined;
}

function targetView(raw: Record<string, unknown>): TargetView {
  return {
    cluster: str(raw.cluster) ?? '',
    namespace: str(raw.namespace) ?? '',
    ...optional('readable', typeof raw.readable === 'boolean' ? raw.readable : undefined),
    ready: raw.ready === true,
    ...optional('revision', str(raw.revision)),
    ...optional('reason', reason(raw.reason)),
    ...optional('error', str(raw.error)),
  };
}

function fleetView(raw: Record<string, unknown>): FleetView {
  const notReady: Record<string, unknown> = isRecord(raw.notReady) ? raw.notReady : {};
  return {
    policy: str(raw.policy) ?? '',
    total: count(raw.total),
    readyTargets: count(raw.readyTargets),
    required: count(raw.required),
    readable: count(raw.readable),
    notReady: FLEET_NOT_READY_REASONS.map((r) => ({ reason: r, count: count(notReady[r]) })).filter((r) => r.count > 0),
    ...optional('error', str(raw.error)),
    ...(raw.membership === 'Loading' ? { membershipLoading: true as const } : {}),
  };
}

/**
 * The waves of environment `env` in its newest rollout: the revision of the last wave record status
 * holds for it (records are kept in the order they began), each wave's state from its record.
 */
function waveViews(env: string, waves: readonly Record<string, unknown>[], records: readonly Record<string, unknown>[]): WaveView[] {
  const revision = str(records.findLast((r) => str(r.environment) === env && typeof r.wave === 'string')?.revision);
  return waves.slice(0, MAX_WAVES).map((w): WaveView => {
    const name = str(w.name) ?? '';
    const record = revision === undefined ? undefined : records.findLast((r) => str(r.environment) === env && str(r.wave) === name && str(r.revision) === revision);
    const soakSeconds = typeof w.soakSeconds === 'number' && Number.isSafeInteger(w.soakSeconds) && w.soakSeconds > 0 ? w.soakSeconds : undefined;
    const readyAt = typeof record?.readyAt === 'string' ? Date.parse(record.readyAt) : NaN;
    const state: WaveState = record === undefined ? 'NotStarted'
      : record.state === 'AwaitingApproval' ? 'AwaitingApproval'
      : record.state === 'Pending' ? 'Pending'
      : record.state === 'Committed' ? 'CarriedOut'
      : record.state === 'Succeeded' ? 'Ready'
      : 'Failed';
    return {
      name,
      state,
      ...optional('revision', revision),
      ready: w.ready === true,
      ...optional('currentRevision', str(w.revision)),
      total: count(w.total),
      readyTargets: count(w.readyTargets),
      required: count(w.required),
      ...optional('soakSeconds', soakSeconds),
      ...optional('soakUntil', state === 'Ready' && soakSeconds !== undefined && !Number.isNaN(readyAt) ? readyAt + soakSeconds * 1_000 : undefined),
      requireApproval: w.requireApproval === true,
      ...optional('message', str(record?.message)),
      ...(state === 'Failed' && typeof record?.committedAt === 'string' ? { stopped: true as const } : {}),
    };
  });
}

function promotionView(raw: Record<string, unknown>): PromotionView {
  return {
    environment: str(raw.environment) ?? '',
    ...optional('wave', str(raw.wave)),
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
  const raw = records(status.promotions);
  const promotions = raw.map(promotionView);
  return {
    namespace: str(meta.namespace) ?? '',
    name: str(meta.name) ?? '',
    ...optional('ready', ready === undefined ? undefined : { status: str(ready.status) ?? 'Unknown', reason: str(ready.reason) ?? '', message: str(ready.message) ?? '' }),
    stale: generation !== undefined && observed !== generation,
    environments: records(status.environments).map((env) => ({
      name: str(env.name) ?? '',
      ready: env.ready === true,
      ...optional('revision', str(env.revision)),
      ...optional('reason', reason(env.reason)),
      targets: records(env.targets).map(targetView),
      ...optional('fleet', isRecord(env.fleet) ? fleetView(env.fleet) : undefined),
      ...optional('waves', Array.isArray(env.waves) ? waveViews(str(env.name) ?? '', records(env.waves), raw) : undefined),
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

/**
 * An error as its typed reason, never its message (which may carry a peer's text): the
 * `FleetcacheError` code, with the HTTP status and Status reason of an API server's answer.
 */
export function errorReason(err: Error): string {
  const code = (err as { code?: unknown }).code;
  if (err instanceof KubeApiError) return text(`${err.code} HTTP ${err.statusCode}${err.reason === '' ? '' : ` ${err.reason}`}`);
  if (typeof code === 'string' && /^ERR_[A-Z0-9_]{1,60}$/.test(code)) return code;
  return text(err.name);
}

/**
 * Whether a target's error says its cluster's kubeconfig Secret is missing. The controller writes
 * the message of the provider's `KubeconfigSecretNotFoundError` (`cluster <key>: Secret <ns>/<name>
 * not found`, or `... has no key ...`); only the kind is taken from it, never the key names.
 */
export function credentialsMissingOf(target: TargetView): CredentialsMissing | undefined {
  if (target.readable !== false || target.error === undefined) return undefined;
  const prefix = `cluster ${target.cluster}: Secret `;
  if (!target.error.startsWith(prefix)) return undefined;
  const rest = target.error.slice(prefix.length);
  if (/^[a-z0-9.-]+\/[a-z0-9.-]+ not found$/.test(rest)) return 'SecretNotFound';
  if (/^[a-z0-9.-]+\/[a-z0-9.-]+ has no key /.test(rest)) return 'KeyNotFound';
  return undefined;
}

function toSecond(ms: number): number {
  return Math.round(ms / 1000) * 1000;
}

/** `bytes` rounded up to the KiB. */
function kibibytes(bytes: number | undefined): number {
  return Math.ceil((bytes ?? 0) / 1024) * 1024;
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
    heldBytes: kibibytes(info.retainedBytes),
    ...optional('packed', info.compressed === undefined || info.compressed === 0 ? undefined : info.compressed),
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
  // Clusters without credentials have no cache and get no request: the Pipelines naming them say so.
  const missing = new Map<string, CredentialsMissing>();
  for (const p of pipelines) {
    for (const env of p.environments) {
      for (const target of env.targets) {
        const why = credentialsMissingOf(target);
        if (why === undefined || missing.get(target.cluster) === 'SecretNotFound') continue;
        missing.set(target.cluster, why);
        clusterEntry(target.cluster);
      }
    }
  }
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
        heldBytes: of.reduce((sum, c) => sum + kibibytes(c.retainedBytes), 0),
        relists: of.reduce((sum, c) => sum + c.relists, 0),
        watchErrors: of.reduce((sum, c) => sum + c.watchErrors, 0),
        ...optional('lastError', failing?.lastError === undefined ? undefined : errorReason(failing.lastError)),
        ...optional('credentialsMissing', missing.get(name)),
      };
    });

  const state: DashboardState = {
    pipelines: pipelines.slice(0, MAX_PIPELINES),
    truncatedPipelines: Math.max(0, pipelines.length - MAX_PIPELINES),
    pipelinesSynced: sources.pipelinesSynced,
    clusters: clusterViews,
    caches,
    ...optional('shards', sources.shards === undefined ? undefined : shardView(sources.shards.status, sources.shards.keys, now, sources.shards.memo)),
  };
  if (sources.maxBytes === undefined) return state;
  if (!Number.isInteger(sources.maxBytes) || sources.maxBytes < MIN_DOCUMENT_BYTES) {
    throw new TypeError(`buildState maxBytes must be an integer of at least ${MIN_DOCUMENT_BYTES}, got ${sources.maxBytes}`);
  }
  return fitState(state, sources.maxBytes);
}

function bytes(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value));
}

/** How many of each list are kept: `Infinity` keeps all. */
interface Caps {
  readonly shardKeys: number;
  readonly targets: number;
  readonly history: number;
  readonly pipelines: number;
  readonly caches: number;
  readonly clusters: number;
}

const ALL: Caps = { shardKeys: Infinity, targets: Infinity, history: Infinity, pipelines: Infinity, caches: Infinity, clusters: Infinity };

/** `state` with each list cut to its cap, every cut counted where it happened and in the marker. */
function capState(state: DashboardState, caps: Caps, maxBytes: number): DashboardState {
  let targets = 0;
  let history = 0;
  const shown = state.pipelines.slice(0, caps.pipelines).map((p): PipelineView => {
    history += Math.max(0, p.history.length - caps.history);
    return {
      ...p,
      environments: p.environments.map((env): EnvironmentView => {
        const left = Math.max(0, env.targets.length - caps.targets);
        targets += left;
        return left === 0 ? env : { ...env, targets: env.targets.slice(0, caps.targets), omittedTargets: left };
      }),
      history: p.history.slice(0, caps.history),
      ...optional('omittedHistory', p.history.length > caps.history ? p.history.length - caps.history : undefined),
    };
  });
  const omitted = state.pipelines.slice(shown.length);
  const shards = state.shards === undefined || caps.shardKeys === Infinity ? state.shards : capShardView(state.shards, caps.shardKeys);
  // Targets and history of the Pipelines left out are counted with them, not again.
  const truncated: TruncationView = {
    maxBytes,
    targets,
    history,
    pipelines: omitted.length,
    pipelineNames: omitted.slice(0, MAX_OMITTED_NAMES).map((p) => `${p.namespace}/${p.name}`),
    caches: Math.max(0, state.caches.length - caps.caches),
    clusters: Math.max(0, state.clusters.length - caps.clusters),
    ...optional('shardKeys', state.shards === undefined || shards === undefined ? undefined : shardKeysLeftOut(state.shards, shards)),
  };
  return {
    ...state,
    ...optional('shards', shards),
    pipelines: shown,
    clusters: state.clusters.slice(0, caps.clusters),
    caches: state.caches.slice(0, caps.caches),
    truncated,
  };
}

/**
 * The largest cap `k` such that `base` plus the first `k` items of every list (each costing its
 * size and a comma) stays within `limit`. `lists` holds the items' sizes.
 */
function largestCap(base: number, lists: readonly (readonly number[])[], limit: number): number {
  const longest = lists.reduce((max, l) => Math.max(max, l.length), 0);
  const prefix = lists.map((l) => {
    const sums = [0];
    for (const size of l) sums.push((sums.at(-1) ?? 0) + size + 1);
    return sums;
  });
  const cost = (k: number): number => base + prefix.reduce((sum, sums) => sum + (sums[Math.min(k, sums.length - 1)] ?? 0), 0);
  let low = 0;
  let high = longest;
  while (low < high) {
    const mid = Math.ceil((low + high) / 2);
    if (cost(mid) <= limit) low = mid;
    else high = mid - 1;
  }
  return low;
}

/**
 * `state` within `maxBytes` of JSON, cutting in order: the shard view's key lists (the same number
 * per list at most; their counts stay), targets (the same number per environment
 * at most, so that every Pipeline shows some), history, whole Pipelines, caches, clusters. Each
 * stage sizes its items once and finds the cap by arithmetic: the document is serialised a few
 * times, never once per candidate. The estimate is an upper bound (an item adds at most its size
 * and a comma; the marker's counts only shrink), so the result always fits.
 */
function fitState(state: DashboardState, maxBytes: number): DashboardState {
  if (bytes(state) <= maxBytes) return state;
  let caps: Caps = ALL;
  const stages: readonly { readonly key: keyof Caps; readonly lists: (s: DashboardState) => readonly (readonly unknown[])[] }[] = [
    { key: 'shardKeys', lists: (s) => (s.shards === undefined ? [] : shardKeyLists(s.shards)) },
    { key: 'targets', lists: (s) => s.pipelines.flatMap((p) => p.environments.map((e) => e.targets)) },
    { key: 'history', lists: (s) => s.pipelines.map((p) => p.history) },
    { key: 'pipelines', lists: (s) => [s.pipelines] },
    { key: 'caches', lists: (s) => [s.caches] },
    { key: 'clusters', lists: (s) => [s.clusters] },
  ];
  for (const stage of stages) {
    // Earlier stages stay cut to nothing: this one gets what room is left.
    caps = { ...caps, [stage.key]: 0 };
    const base = bytes(capState(state, caps, maxBytes));
    if (base > maxBytes) continue;
    const lists = stage.lists(capState(state, { ...caps, [stage.key]: Infinity }, maxBytes)).map((l) => l.map(bytes));
    let cap = largestCap(base, lists, maxBytes);
    // The marker names other Pipelines as more are shown: the estimate may be off by a few bytes.
    let fitted = capState(state, { ...caps, [stage.key]: cap }, maxBytes);
    while (cap > 0 && bytes(fitted) > maxBytes) {
      cap -= 1;
      fitted = capState(state, { ...caps, [stage.key]: cap }, maxBytes);
    }
    return fitted;
  }
  return capState(state, caps, maxBytes);
}
