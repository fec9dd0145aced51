import { clusterKey, identityKey, type ClusterRef, type Identity } from '../cluster/index.ts';
import { deepFreeze, type InformerHandler } from '../informer/index.ts';
import { fieldMatcher, labelMatcher, type ObjectMatcher } from '../registry/index.ts';
import { resourcePath, type KubeObject } from '../transport/index.ts';
import {
  Backoff,
  childController,
  ClosedError,
  nonNegativeNumber,
  noopLogger,
  onAbort,
  oneOf,
  realClock,
  sleep,
  toError,
  type BackoffOptions,
  type Clock,
  type GroupVersionKind,
  type Logger,
  type Timer,
} from '../util/index.ts';
import type { SnapshotSource, SourceQuery, SourceReader } from './source.ts';

/**
 * One named query of a fleet snapshot: a kind in a cluster (the cluster references the registry
 * takes), optionally one namespace, selectors and a predicate. Declare it with
 * {@link snapshotQuery} to type its objects.
 */
export interface SnapshotQuery<T extends KubeObject = KubeObject> {
  readonly cluster: ClusterRef;
  readonly gvk: GroupVersionKind;
  /** Only this namespace. Default: all namespaces. */
  readonly namespace?: string | undefined;
  /**
   * The namespace admitted through the cluster provider (a kubeconfig Secret is read there).
   * Default: `namespace`, else `default`.
   */
  readonly ownerNamespace?: string | undefined;
  /** Who reads and writes. Default: the process's own identity. */
  readonly identity?: Identity | undefined;
  /**
   * Label selector in the API's string form, applied to the shared cache's objects (the cache
   * itself watches the whole kind, so other users share it). Default: everything.
   */
  readonly labelSelector?: string | undefined;
  /** Field selector in the API's string form (dotted JSON paths), applied the same way. Default: everything. */
  readonly fieldSelector?: string | undefined;
  /**
   * Which objects the snapshot holds. Called once per new state of an object (never again for an
   * unchanged one, resyncs included); must not change its argument. Default: every object.
   */
  predicate?(obj: T): boolean;
}

/** The queries of an accumulator, by name. */
export type QuerySet = Readonly<Record<string, SnapshotQuery>>;

/** The object type of a query. */
export type ObjectOf<Q> = Q extends SnapshotQuery<infer T> ? T : KubeObject;

/** Types a query by the shape of its objects: `snapshotQuery<Deployment>({ ... })`. */
export function snapshotQuery<T extends KubeObject>(query: SnapshotQuery<T>): SnapshotQuery<T> {
  return query;
}

/** One change between two snapshots delivered to the same consumer. */
export interface SnapshotDelta<K extends string = string, T extends KubeObject = KubeObject> {
  readonly query: K;
  readonly type: 'add' | 'update' | 'delete';
  /** The new state for add and update; for delete the last state known. */
  readonly object: T;
  /**
   * For delete: true when the deletion was not seen on the watch but inferred by a relist (or a
   * recreation under another UID), so `object` is the last cached state, not the final one.
   */
  readonly finalStateUnknown: boolean;
}

/** Every delta type of a query set. */
export type DeltaOf<Q extends QuerySet> = { [K in keyof Q & string]: SnapshotDelta<K, ObjectOf<Q[K]>> }[keyof Q & string];

/** A consistent view of every query, and what changed since the consumer's previous one. */
export interface FleetSnapshot<Q extends QuerySet> {
  /** Grows with every change applied; equal versions hold equal objects. */
  readonly version: number;
  /** Per query, the objects that match its selectors and predicate. Frozen and shared. */
  readonly objects: { readonly [K in keyof Q]: readonly ObjectOf<Q[K]>[] };
  /**
   * From the previous snapshot this consumer received to this one, one delta per object at most
   * (an object added and deleted in between is left out). The first snapshot: an add per object.
   */
  readonly deltas: readonly DeltaOf<Q>[];
}

/** Where one query stands. */
export interface QueryStatus {
  readonly name: string;
  /** `opening`: its cache could not be had yet; `listing`: its first LIST is not complete; `synced`. */
  readonly phase: 'opening' | 'listing' | 'synced';
  /** Why it is not synced (or the cache's last failure since): typed, with cluster and GVK. */
  readonly lastError: Error | undefined;
  /** Objects the snapshot holds for it now. */
  readonly objects: number;
  /** The cache's last resourceVersion ('' when unknown). */
  readonly resourceVersion: string;
  /** Own writes not yet seen by the cache. */
  readonly pendingWrites: number;
}

/** What {@link FleetAccumulator.status} reports. */
export interface AccumulatorStatus {
  /** True once every query completed its initial list; stays true. */
  readonly bootstrapped: boolean;
  /** The names of the queries the first snapshot waits for (empty once bootstrapped). */
  readonly waitingFor: readonly string[];
  readonly version: number;
  readonly queries: readonly QueryStatus[];
}

/** Options of {@link FleetAccumulator}. */
export interface AccumulatorOptions<Q extends QuerySet> {
  /** Where caches and connections come from: `registrySource(registry)`, or a fake. Required. */
  readonly source: SnapshotSource;
  /** The named queries. At least one. Required. */
  readonly queries: Q;
  /**
   * A consumer receives at most one snapshot per this many milliseconds (the first one excepted);
   * changes in between are coalesced. 0: as soon as anything changed. Default 100.
   */
  readonly minIntervalMs?: number;
  /** Backoff between attempts to open a query's cache. Default 1 s doubling to 30 s, jitter 0.5. */
  readonly openBackoff?: BackoffOptions;
  /** Default: discards everything. */
  readonly logger?: Logger;
  /** Default: the wall clock. */
  readonly clock?: Clock;
}

/** Options of the accumulator's writes. */
export interface WriteOptions {
  readonly signal?: AbortSignal | undefined;
  /** `fieldManager` query parameter. Default: unset (the server's default). */
  readonly fieldManager?: string | undefined;
}

/** Options of {@link SnapshotClient.patch}. */
export interface PatchOptions extends WriteOptions {
  /** Default `merge` (JSON merge patch). `apply` needs `fieldManager`. */
  readonly type?: 'merge' | 'json' | 'strategic' | 'apply' | undefined;
  /** Patch the status subresource. Default false. */
  readonly status?: boolean | undefined;
}

const PATCH_TYPES = {
  merge: 'application/merge-patch+json',
  json: 'application/json-patch+json',
  strategic: 'application/strategic-merge-patch+json',
  apply: 'application/apply-patch+yaml',
} as const;
const PATCH_TYPE_NAMES = Object.keys(PATCH_TYPES) as (keyof typeof PATCH_TYPES)[];

/** An own write the cache has not shown yet. `object` undefined: the write deleted it. */
interface Overlay {
  readonly object: KubeObject | undefined;
  readonly rv: string;
  readonly uid: string | undefined;
  /** The cache's resourceVersion for the key when the write returned (the opaque rule). */
  readonly cacheRvAtWrite: string | undefined;
}

/** One object key of one query. Removed once it holds nothing. */
interface Entry {
  /** The cache's state; undefined when the cache does not hold it. */
  cache: KubeObject | undefined;
  overlay: Overlay | undefined;
  /** The last state selectors and predicate were evaluated on (they never run twice on one). */
  evaluated: KubeObject | undefined;
  /** What the snapshot holds: `evaluated` when it passed, else undefined. */
  view: KubeObject | undefined;
}

/** A key touched since a consumer's last snapshot: what that snapshot held, and how it went. */
interface Touch {
  readonly before: KubeObject | undefined;
  gone: KubeObject | undefined;
  finalStateUnknown: boolean;
}

interface Consumer {
  /** The version of its last snapshot; -1 before the first. */
  version: number;
  lastAt: number;
  /** Keys touched since its last snapshot, by query. Unused before the first snapshot. */
  readonly touched: Map<QueryState, Map<string, Touch>>;
  /** Set while it waits for a change (not while it waits out the interval). */
  wake: (() => void) | undefined;
  /** Set while it waits at all: ends the wait (close). */
  stop: (() => void) | undefined;
}

class QueryState {
  readonly name: string;
  readonly spec: SnapshotQuery;
  readonly source: SourceQuery;
  readonly match: ObjectMatcher;
  /** Queries with the same cache id read the same cache: a write lands in all of them. */
  readonly cacheId: string;
  readonly entries = new Map<string, Entry>();
  phase: 'opening' | 'listing' | 'synced' = 'opening';
  openError: Error | undefined;
  reader: SourceReader | undefined;
  /** The accumulator version of this query's last view change. */
  version = 0;
  /** A catch-up with a replacement cache is scheduled. */
  catchingUp = false;
  members = 0;
  pendingWrites = 0;
  /**
   * Keys of own deletes of objects the cache has never shown (their own create still pending). A
   * relist may skip both events; once the cache's position passes the delete, the tombstone goes.
   */
  readonly unseenDeletes = new Set<string>();
  #array: { version: number; objects: readonly KubeObject[] } | undefined;

  constructor(name: string, spec: SnapshotQuery) {
    this.name = name;
    this.spec = spec;
    if (spec.namespace === '') throw new TypeError(`snapshot query ${name}: namespace must be unset or non-empty`);
    this.source = {
      cluster: spec.cluster,
      gvk: spec.gvk,
      namespace: spec.namespace,
      ownerNamespace: spec.ownerNamespace ?? spec.namespace ?? 'default',
      identity: spec.identity,
    };
    const labels = labelMatcher(spec.labelSelector, `snapshot query option ${name}.labelSelector`);
    const fields = fieldMatcher(spec.fieldSelector, `snapshot query option ${name}.fieldSelector`);
    const namespace = spec.namespace;
    this.match = (obj) => (namespace === undefined || obj.metadata?.namespace === namespace) && labels(obj) && fields(obj);
    const { group, version, kind } = spec.gvk;
    this.cacheId = JSON.stringify([clusterKey(spec.cluster, this.source.ownerNamespace), identityKey(spec.identity), group, version, kind]);
  }

  /** Whether a write to an object in `namespace` lands in this query. */
  covers(namespace: string | undefined): boolean {
    return this.spec.namespace === undefined || this.spec.namespace === (namespace ?? '');
  }

  objects(): readonly KubeObject[] {
    if (this.#array?.version !== this.version) {
      const objects: KubeObject[] = [];
      for (const entry of this.entries.values()) if (entry.view !== undefined) objects.push(entry.view);
      this.#array = { version: this.version, objects: Object.freeze(objects) };
    }
    return this.#array.objects;
  }
}

function keyOf(obj: KubeObject): string {
  const meta = obj.metadata;
  const ns = meta?.namespace ?? '';
  return ns === '' ? meta?.name ?? '' : `${ns}/${meta?.name ?? ''}`;
}

const INTEGER = /^\d+$/;

/** Two copies of one state of one object: same UID and resourceVersion (set, not ''). */
function sameState(a: KubeObject, b: KubeObject): boolean {
  const ma = a.metadata;
  const mb = b.metadata;
  if (ma === undefined || mb === undefined) return false;
  const rv = ma.resourceVersion;
  return rv !== undefined && rv !== '' && rv === mb.resourceVersion && ma.uid === mb.uid;
}

/** Orders two resourceVersions when both are integers (etcd's are); undefined otherwise. */
function compareRv(a: string | undefined, b: string | undefined): number | undefined {
  if (a === undefined || b === undefined || !INTEGER.test(a) || !INTEGER.test(b)) return undefined;
  const x = BigInt(a);
  const y = BigInt(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

/** Read through a call: the signal changes across `await`s behind the compiler's back. */
function isAborted(signal: AbortSignal): boolean {
  return signal.aborted;
}

/**
 * A fleet-snapshot accumulator (the kates Accumulator, across clusters): named queries over the
 * registry's shared caches, delivered as consistent snapshots through an async iterator.
 *
 * Guarantees:
 * - **Consistent bootstrap.** No snapshot until every query has completed its initial LIST. A
 *   query whose cluster cannot be reached holds the first snapshot back (its cache is retried
 *   with backoff); {@link status} says which query waits and why.
 * - **Coalescing.** A consumer receives at most one snapshot per `minIntervalMs`, and only when
 *   something changed. A snapshot is built when the consumer asks for it, so it always holds the
 *   newest state however slowly the consumer reads: intermediate states are dropped, never queued.
 * - **Deltas and predicate.** Beside the objects, each snapshot lists what changed since the
 *   previous snapshot that consumer received (adds, updates, deletes with `finalStateUnknown`).
 *   A query's selectors and predicate run once per new state of an object, never on unchanged ones.
 * - **Read/write coherence.** A write made through {@link client} is in the next snapshot even
 *   before the watch delivers it, and stays until the cache catches up: a later cache state with
 *   an older resourceVersion never rolls it back. resourceVersions are compared as integers when
 *   both parse as integers (etcd's do; the API promises only opacity, so this is the one liberty
 *   taken); otherwise the written state stands until the cache shows the same resourceVersion or
 *   changes that object again. A delete stands until the cache drops the object (or holds another
 *   UID under its name).
 *
 * Invariants: `#version` grows by one per change of any query's view and each query's `version`
 * is the accumulator version of its last change; an entry whose `view` is set counts in its
 * query's `members`; every consumer's `touched` holds only keys changed since its last snapshot,
 * with the state that snapshot held.
 */
export class FleetAccumulator<Q extends QuerySet> {
  readonly #source: SnapshotSource;
  readonly #queries: readonly QueryState[];
  readonly #byName: ReadonlyMap<string, QueryState>;
  readonly #minIntervalMs: number;
  readonly #openBackoff: BackoffOptions;
  readonly #logger: Logger;
  readonly #clock: Clock;
  readonly #consumers = new Set<Consumer>();
  readonly #client: SnapshotClient<Q>;
  #version = 0;
  #bootstrapped = false;
  #state: 'new' | 'running' | 'closed' = 'new';
  #controller: AbortController | undefined;
  #disposeParent: (() => void) | undefined;
  #runs: Promise<void>[] = [];
  #closing: Promise<void> | undefined;

  constructor(options: AccumulatorOptions<Q>) {
    const source: unknown = options.source;
    if (typeof source !== 'object' || source === null || typeof (source as { open?: unknown }).open !== 'function') {
      throw new TypeError('accumulator option source must be a SnapshotSource');
    }
    const names = Object.keys(options.queries);
    if (names.length === 0) throw new TypeError('accumulator option queries must name at least one query');
    this.#source = options.source;
    this.#queries = names.map((name) => new QueryState(name, options.queries[name] as SnapshotQuery));
    this.#byName = new Map(this.#queries.map((q) => [q.name, q]));
    this.#minIntervalMs = nonNegativeNumber('accumulator', 'minIntervalMs', options.minIntervalMs ?? 100);
    this.#openBackoff = { initialMs: 1_000, maxMs: 30_000, jitter: 0.5, ...options.openBackoff };
    this.#logger = options.logger ?? noopLogger;
    this.#clock = options.clock ?? realClock;
    this.#client = new SnapshotClient<Q>({
      source: this.#source,
      query: (name) => {
        const q = this.#byName.get(name);
        if (q === undefined) throw new TypeError(`no snapshot query named ${JSON.stringify(name)}`);
        return q;
      },
      applyWrite: (q, key, namespace, object, rv, uid) => { this.#applyWrite(q, key, namespace, object, rv, uid); },
    });
  }

  /** Writes whose results the snapshots show at once (read/write coherence). */
  get client(): SnapshotClient<Q> {
    return this.#client;
  }

  /**
   * Opens every query's cache (no I/O before this). Idempotent; {@link snapshots} calls it.
   * Aborting `signal` closes the accumulator. Throws `ClosedError` after {@link close}.
   */
  start(signal?: AbortSignal): void {
    if (this.#state === 'closed') throw new ClosedError('fleet accumulator');
    if (this.#state === 'running') return;
    this.#state = 'running';
    const child = childController(signal);
    this.#controller = child.controller;
    this.#disposeParent = child.dispose;
    const runSignal = child.controller.signal;
    // A parent abort closes the accumulator as close() would (readers released, consumers ended).
    onAbort(runSignal, () => { void this.close(); });
    this.#runs = this.#queries.map((q) => this.#open(q, runSignal));
  }

  /**
   * Snapshots as the consumer pulls them: the first once every query is listed, then one each time
   * something changed, at most one per `minIntervalMs`, each built at the moment it is asked for.
   * Starts the accumulator if needed. Ends, without error, when `signal` aborts or the accumulator
   * closes. Each iterator is its own consumer with its own deltas.
   */
  async *snapshots(signal?: AbortSignal): AsyncGenerator<FleetSnapshot<Q>, void, undefined> {
    this.start();
    const consumer: Consumer = { version: -1, lastAt: Number.NEGATIVE_INFINITY, touched: new Map(), wake: undefined, stop: undefined };
    this.#consumers.add(consumer);
    try {
      while (await this.#ready(consumer, signal)) yield this.#take(consumer);
    } finally {
      this.#consumers.delete(consumer);
    }
  }

  /** Where each query stands, and which ones the first snapshot waits for. */
  status(): AccumulatorStatus {
    const queries = this.#queries.map((q): QueryStatus => ({
      name: q.name,
      phase: q.phase,
      lastError: q.phase === 'opening' ? q.openError : q.reader?.lastError,
      objects: q.members,
      resourceVersion: q.reader?.resourceVersion ?? '',
      pendingWrites: q.pendingWrites,
    }));
    return {
      bootstrapped: this.#bootstrapped,
      waitingFor: this.#bootstrapped ? [] : queries.filter((q) => q.phase !== 'synced').map((q) => q.name),
      version: this.#version,
      queries,
    };
  }

  /** Releases every cache and ends every consumer's iterator. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#state = 'closed';
    this.#controller?.abort(new ClosedError('fleet accumulator'));
    for (const consumer of this.#consumers) consumer.stop?.();
    await Promise.all(this.#runs);
    for (const q of this.#queries) {
      q.reader?.release();
      q.reader = undefined;
    }
    this.#disposeParent?.();
  }

  /** Opens a query's cache, retrying with backoff, and marks it synced after its first LIST. */
  async #open(q: QueryState, signal: AbortSignal): Promise<void> {
    const backoff = new Backoff(this.#clock, this.#openBackoff);
    const handler: InformerHandler = {
      add: (obj, initial) => {
        this.#onCache(q, obj, true, false);
        // A replacement cache (the registry rebuilt it after a credential rotation) replays its
        // objects as initial adds: what it no longer holds must go too, once it has listed.
        if (initial && q.phase === 'synced') this.#catchUpLater(q, signal);
      },
      update: (_old, obj) => { this.#onCache(q, obj, true, false); },
      delete: (obj, finalStateUnknown) => { this.#onCache(q, obj, false, finalStateUnknown); },
      resync: (obj) => { this.#onCache(q, obj, true, false); },
    };
    while (!signal.aborted) {
      let reader: SourceReader | undefined;
      try {
        q.phase = 'opening';
        reader = await this.#source.open(q.source, handler, signal);
        if (isAborted(signal)) {
          reader.release();
          return;
        }
        q.reader = reader;
        q.openError = undefined;
        q.phase = 'listing';
        await reader.waitForSync(signal);
        this.#catchUp(q, reader);
        q.phase = 'synced';
        if (!this.#bootstrapped && this.#queries.every((other) => other.phase === 'synced')) {
          this.#bootstrapped = true;
          this.#notify();
        }
        return;
      } catch (err) {
        if (isAborted(signal)) return;
        if (reader !== undefined) {
          reader.release();
          if (q.reader === reader) q.reader = undefined;
        }
        q.openError = toError(err);
        const delay = backoff.next();
        this.#logger.warn('snapshot query could not open its cache; retrying', { query: q.name, error: q.openError.message, retryInMs: Math.round(delay) });
        try {
          await sleep(delay, signal, this.#clock);
        } catch {
          return;
        }
      }
    }
  }

  /** Schedules one {@link #catchUp} for the whole replay of a replacement cache. */
  #catchUpLater(q: QueryState, signal: AbortSignal): void {
    if (q.catchingUp) return;
    q.catchingUp = true;
    queueMicrotask(() => {
      const reader = q.reader;
      if (reader === undefined) {
        q.catchingUp = false;
        return;
      }
      reader.waitForSync(signal).then(() => {
        q.catchingUp = false;
        if (q.reader === reader) this.#catchUp(q, reader);
      }, () => { q.catchingUp = false; });
    });
  }

  /**
   * Reconciles a query with its cache's complete contents: after the first LIST (a cache that was
   * already synced replays adds the handler may race), and after a replacement cache listed. What
   * the cache no longer holds is deleted with `finalStateUnknown`.
   */
  #catchUp(q: QueryState, reader: SourceReader): void {
    const listed = new Set<string>();
    for (const obj of reader.list()) {
      listed.add(keyOf(obj));
      if (q.entries.get(keyOf(obj))?.cache !== obj) this.#onCache(q, obj, true, false);
    }
    for (const [key, entry] of [...q.entries]) {
      if (entry.cache !== undefined && !listed.has(key)) this.#onCache(q, entry.cache, false, true);
    }
  }

  /** A cache event: the cache's new state of one object (`present` false: it is gone). */
  #onCache(q: QueryState, obj: KubeObject, present: boolean, finalStateUnknown: boolean): void {
    if (this.#state === 'closed' || !q.covers(obj.metadata?.namespace)) return;
    const key = keyOf(obj);
    let entry = q.entries.get(key);
    if (entry === undefined) {
      if (!present) return;
      entry = { cache: undefined, overlay: undefined, evaluated: undefined, view: undefined };
      q.entries.set(key, entry);
    }
    entry.cache = present ? obj : undefined;
    if (entry.overlay !== undefined && this.#superseded(q, entry.overlay, entry.cache, present ? undefined : obj, finalStateUnknown)) {
      entry.overlay = undefined;
      q.pendingWrites--;
    }
    this.#refresh(q, key, entry, present ? undefined : obj, finalStateUnknown);
    if (q.unseenDeletes.size > 0) this.#settleUnseenDeletes(q);
  }

  /** Lets go of tombstones of never-shown objects the cache's position has passed (see `unseenDeletes`). */
  #settleUnseenDeletes(q: QueryState): void {
    for (const key of q.unseenDeletes) {
      const entry = q.entries.get(key);
      const overlay = entry?.overlay;
      if (entry === undefined || overlay === undefined || overlay.object !== undefined || entry.cache !== undefined) {
        q.unseenDeletes.delete(key); // superseded or shown since: the ordinary rules apply
        continue;
      }
      if ((compareRv(q.reader?.resourceVersion, overlay.rv) ?? -1) < 0) continue;
      q.unseenDeletes.delete(key);
      entry.overlay = undefined;
      q.pendingWrites--;
      this.#refresh(q, key, entry, undefined, false);
    }
  }

  /**
   * Whether the cache has caught up with an own write, so its state may replace the written one.
   * `deleted` is the object of a cache delete (its final or last known state).
   */
  #superseded(q: QueryState, overlay: Overlay, cache: KubeObject | undefined, deleted: KubeObject | undefined, finalStateUnknown: boolean): boolean {
    if (overlay.object === undefined) {
      // A written delete: until the cache drops the object, or holds another incarnation.
      return cache === undefined || (overlay.uid !== undefined && cache.metadata?.uid !== overlay.uid);
    }
    if (cache !== undefined) {
      const rv = cache.metadata?.resourceVersion;
      if (rv === overlay.rv) return true;
      const order = compareRv(rv, overlay.rv);
      if (order !== undefined) return order > 0;
      return rv !== overlay.cacheRvAtWrite;
    }
    // The cache dropped the object: a delete after the write, or one of an older state?
    const order = finalStateUnknown
      // A relist's delete carries the last cached state: the cache's position says how fresh the relist was.
      ? compareRv(q.reader?.resourceVersion, overlay.rv)
      : compareRv(deleted?.metadata?.resourceVersion, overlay.rv);
    if (order !== undefined) return order >= 0;
    return deleted?.metadata?.resourceVersion !== overlay.cacheRvAtWrite || overlay.cacheRvAtWrite === undefined;
  }

  /** Re-evaluates one key after its cache state or overlay changed. */
  #refresh(q: QueryState, key: string, entry: Entry, deleted: KubeObject | undefined, finalStateUnknown: boolean): void {
    const effective = entry.overlay !== undefined ? entry.overlay.object : entry.cache;
    if (effective !== undefined && entry.evaluated !== undefined && effective !== entry.evaluated && sameState(effective, entry.evaluated)) {
      // The same state in another copy (the watch's echo of an own write): nothing changed.
      if (entry.view !== undefined) entry.view = effective;
      entry.evaluated = effective;
    } else if (effective !== entry.evaluated) {
      entry.evaluated = effective;
      const before = entry.view;
      const view = effective !== undefined && this.#passes(q, effective) ? effective : undefined;
      if (view !== before) {
        entry.view = view;
        if (before === undefined) q.members++;
        if (view === undefined) q.members--;
        this.#version++;
        q.version = this.#version;
        const gone = view === undefined ? deleted ?? before : undefined;
        for (const consumer of this.#consumers) {
          if (consumer.version < 0) continue;
          let touched = consumer.touched.get(q);
          if (touched === undefined) {
            touched = new Map();
            consumer.touched.set(q, touched);
          }
          let touch = touched.get(key);
          if (touch === undefined) {
            touch = { before, gone: undefined, finalStateUnknown: false };
            touched.set(key, touch);
          }
          if (gone !== undefined) {
            touch.gone = gone;
            touch.finalStateUnknown = finalStateUnknown && deleted !== undefined;
          }
        }
        this.#notify();
      }
    }
    if (entry.cache === undefined && entry.overlay === undefined && entry.view === undefined) q.entries.delete(key);
  }

  #passes(q: QueryState, obj: KubeObject): boolean {
    try {
      return q.match(obj) && (q.spec.predicate === undefined || q.spec.predicate(obj));
    } catch (err) {
      this.#logger.warn('snapshot predicate threw; object left out', { query: q.name, key: keyOf(obj), error: toError(err).message });
      return false;
    }
  }

  /** Records an own write's result in every query reading the same cache. `object` undefined: deleted. */
  #applyWrite(origin: QueryState, key: string, namespace: string | undefined, object: KubeObject | undefined, rv: string, uid: string | undefined): void {
    if (this.#state === 'closed') return;
    for (const q of this.#queries) {
      if (q.cacheId !== origin.cacheId || !q.covers(namespace)) continue;
      let entry = q.entries.get(key);
      if (entry === undefined) {
        entry = { cache: undefined, overlay: undefined, evaluated: undefined, view: undefined };
        q.entries.set(key, entry);
      }
      const overlay: Overlay = { object, rv, uid: uid ?? entry.cache?.metadata?.uid, cacheRvAtWrite: entry.cache?.metadata?.resourceVersion };
      const hadOverlay = entry.overlay !== undefined;
      // The cache may be ahead of the write already (another writer, or the watch was quicker).
      const stale = entry.cache !== undefined && object !== undefined && (compareRv(entry.cache.metadata?.resourceVersion, rv) ?? -1) >= 0;
      // A delete of an object the cache never showed is settled, unless an own create of it is still
      // pending: then its ADDED may yet arrive, and the tombstone must outlive it.
      const goneAlready = object === undefined && entry.cache === undefined && !hadOverlay;
      if (stale || goneAlready) {
        if (hadOverlay) q.pendingWrites--;
        entry.overlay = undefined;
      } else {
        if (!hadOverlay) q.pendingWrites++;
        entry.overlay = overlay;
        if (object === undefined && entry.cache === undefined) q.unseenDeletes.add(key);
      }
      this.#refresh(q, key, entry, object === undefined ? entry.view ?? entry.cache : undefined, false);
    }
  }

  #notify(): void {
    for (const consumer of this.#consumers) {
      const wake = consumer.wake;
      if (wake === undefined) continue;
      consumer.wake = undefined;
      wake();
    }
  }

  /** Waits until a snapshot is due for `consumer`; false when it should end. */
  async #ready(consumer: Consumer, signal: AbortSignal | undefined): Promise<boolean> {
    for (;;) {
      if (this.#state === 'closed' || signal?.aborted === true) return false;
      if (this.#bootstrapped && this.#version !== consumer.version) {
        const wait = consumer.lastAt + this.#minIntervalMs - this.#clock.now();
        if (consumer.version < 0 || wait <= 0) return true;
        // Waiting out the interval: changes meanwhile do not wake the consumer (they coalesce).
        await this.#wait(consumer, wait, signal);
      } else {
        await this.#wait(consumer, undefined, signal);
      }
    }
  }

  /** Resolves on a change (when `ms` is undefined), after `ms`, on abort, or on close. */
  #wait(consumer: Consumer, ms: number | undefined, signal: AbortSignal | undefined): Promise<void> {
    return new Promise<void>((resolve) => {
      let timer: Timer | undefined;
      let detach: () => void = () => undefined;
      const done = (): void => {
        consumer.wake = undefined;
        consumer.stop = undefined;
        timer?.cancel();
        detach();
        resolve();
      };
      consumer.stop = done;
      if (ms === undefined) consumer.wake = done;
      else timer = this.#clock.setTimer(ms, done);
      if (signal !== undefined) detach = onAbort(signal, done);
    });
  }

  #take(consumer: Consumer): FleetSnapshot<Q> {
    const objects: Record<string, readonly KubeObject[]> = {};
    for (const q of this.#queries) objects[q.name] = q.objects();
    const deltas: SnapshotDelta[] = [];
    if (consumer.version < 0) {
      for (const q of this.#queries) for (const obj of q.objects()) deltas.push({ query: q.name, type: 'add', object: obj, finalStateUnknown: false });
    } else {
      for (const q of this.#queries) {
        const touched = consumer.touched.get(q);
        if (touched === undefined) continue;
        for (const [key, touch] of touched) {
          const now = q.entries.get(key)?.view;
          const before = touch.before;
          if (before === undefined) {
            if (now !== undefined) deltas.push({ query: q.name, type: 'add', object: now, finalStateUnknown: false });
          } else if (now === undefined) {
            deltas.push({ query: q.name, type: 'delete', object: touch.gone ?? before, finalStateUnknown: touch.finalStateUnknown });
          } else if (now !== before) {
            if (now.metadata?.uid !== before.metadata?.uid) {
              // Another incarnation under the same name: the old one went, a new one came.
              deltas.push({ query: q.name, type: 'delete', object: touch.gone ?? before, finalStateUnknown: touch.gone === undefined || touch.finalStateUnknown });
              deltas.push({ query: q.name, type: 'add', object: now, finalStateUnknown: false });
            } else {
              deltas.push({ query: q.name, type: 'update', object: now, finalStateUnknown: false });
            }
          }
        }
      }
    }
    consumer.touched.clear();
    consumer.version = this.#version;
    consumer.lastAt = this.#clock.now();
    return Object.freeze({
      version: this.#version,
      objects: Object.freeze(objects),
      deltas: Object.freeze(deltas),
    }) as unknown as FleetSnapshot<Q>;
  }
}

/** What the client needs of its accumulator. */
interface ClientPort {
  readonly source: SnapshotSource;
  query(name: string): QueryState;
  applyWrite(q: QueryState, key: string, namespace: string | undefined, object: KubeObject | undefined, rv: string, uid: string | undefined): void;
}

interface ObjectName {
  /** Unset for cluster-scoped kinds; default the query's namespace. */
  readonly namespace?: string | undefined;
  readonly name: string;
}

function isStatus(body: unknown): boolean {
  return typeof body !== 'object' || body === null || (body as KubeObject).kind === 'Status' || typeof (body as KubeObject).metadata?.name !== 'string';
}

/**
 * Writes to a query's cluster and kind whose results the accumulator's snapshots show at once,
 * before the watch delivers them (read/write coherence). Each resolves with the object the server
 * returned; failures reject with the server's typed errors (`KubeApiError` with status and reason,
 * `TransportError`), and then change nothing in the snapshots.
 */
export class SnapshotClient<Q extends QuerySet> {
  readonly #port: ClientPort;

  /** Made by the accumulator: use `accumulator.client`. */
  constructor(port: ClientPort) {
    this.#port = port;
  }

  /** POST: creates `obj` (namespace: its own, else the query's). */
  async create<K extends keyof Q & string>(query: K, obj: ObjectOf<Q[K]>, options: WriteOptions = {}): Promise<ObjectOf<Q[K]>> {
    const q = this.#port.query(query);
    const namespace = obj.metadata?.namespace ?? q.spec.namespace;
    return this.#send(q, 'POST', { namespace }, { ...obj, metadata: { ...obj.metadata, namespace } }, options) as Promise<ObjectOf<Q[K]>>;
  }

  /** PUT: replaces `obj` (its resourceVersion is the precondition, as the API does). */
  async update<K extends keyof Q & string>(query: K, obj: ObjectOf<Q[K]>, options: WriteOptions = {}): Promise<ObjectOf<Q[K]>> {
    const q = this.#port.query(query);
    return this.#send(q, 'PUT', this.#nameOf(q, obj), obj, options) as Promise<ObjectOf<Q[K]>>;
  }

  /** PUT to the status subresource. */
  async updateStatus<K extends keyof Q & string>(query: K, obj: ObjectOf<Q[K]>, options: WriteOptions = {}): Promise<ObjectOf<Q[K]>> {
    const q = this.#port.query(query);
    return this.#send(q, 'PUT', this.#nameOf(q, obj), obj, options, '/status') as Promise<ObjectOf<Q[K]>>;
  }

  /** PATCH (merge patch by default; `status: true` for the status subresource). */
  async patch<K extends keyof Q & string>(query: K, target: ObjectName, patch: unknown, options: PatchOptions = {}): Promise<ObjectOf<Q[K]>> {
    const q = this.#port.query(query);
    const type = oneOf('patch', 'type', options.type ?? 'merge', PATCH_TYPE_NAMES);
    if (type === 'apply' && options.fieldManager === undefined) throw new TypeError('patch option fieldManager is required for an apply patch');
    return this.#send(q, 'PATCH', { namespace: target.namespace ?? q.spec.namespace, name: target.name }, patch, options, options.status === true ? '/status' : '', PATCH_TYPES[type]) as Promise<ObjectOf<Q[K]>>;
  }

  /**
   * DELETE. The snapshot drops the object at once, unless finalizers keep it (then it holds the
   * returned object with its deletionTimestamp). Resolves with what the server returned.
   */
  async delete(query: keyof Q & string, target: ObjectName, options: WriteOptions = {}): Promise<unknown> {
    const q = this.#port.query(query);
    return this.#send(q, 'DELETE', { namespace: target.namespace ?? q.spec.namespace, name: target.name }, undefined, options);
  }

  #nameOf(q: QueryState, obj: KubeObject): ObjectName {
    const name = obj.metadata?.name;
    if (name === undefined || name === '') throw new TypeError('the object to write has no metadata.name');
    return { namespace: obj.metadata?.namespace ?? q.spec.namespace, name };
  }

  async #send(q: QueryState, method: 'POST' | 'PUT' | 'PATCH' | 'DELETE', where: { readonly namespace?: string | undefined; readonly name?: string }, body: unknown, options: WriteOptions, subresource = '', contentType?: string): Promise<unknown> {
    const signal = options.signal;
    const connection = await this.#port.source.connection(q.source, signal);
    const info = await connection.resolve(q.spec.gvk, signal);
    const path = resourcePath(info, where) + subresource;
    const result = await connection.request({
      method,
      path,
      body,
      gvk: q.spec.gvk,
      query: { fieldManager: options.fieldManager },
      ...(contentType === undefined ? {} : { contentType }),
      ...(signal === undefined ? {} : { signal }),
    });
    if (method === 'DELETE') {
      const name = where.name ?? '';
      const namespace = info.namespaced ? where.namespace : undefined;
      const key = namespace === undefined || namespace === '' ? name : `${namespace}/${name}`;
      const returned = isStatus(result) ? undefined : (result as KubeObject);
      const kept = returned?.metadata?.deletionTimestamp !== undefined && (returned.metadata.finalizers?.length ?? 0) > 0;
      const rv = returned?.metadata?.resourceVersion ?? '';
      this.#port.applyWrite(q, key, namespace, kept ? deepFreeze(returned) : undefined, rv, returned?.metadata?.uid);
      return result;
    }
    if (!isStatus(result)) {
      const obj = result as KubeObject;
      this.#port.applyWrite(q, keyOf(obj), obj.metadata?.namespace, deepFreeze(obj), obj.metadata?.resourceVersion ?? '', obj.metadata?.uid);
    }
    return result;
  }
}
