// The registry's face: one cache per ⟨connection, namespace scope, GVK, selection⟩ built on demand, the owners
// each cache wakes, and the readers callers get. The work is done in its rooms: the cache table
// (cache-table.ts), event → owner wiring (wiring.ts), the rotation swap (rotation.ts), the 403
// scope-down (scope-down.ts) and the held readers (holds.ts).
import type { ClusterRef, Clusters, Identity } from '../cluster/index.ts';
import type { InformerHandler } from '../informer/index.ts';
import { RateLimitingWorkQueue, defaultControllerRateLimiter, type RateLimitingQueue } from '../queue/index.ts';
import { checkGvk, type ClusterConnection, type KubeObject } from '../transport/index.ts';
import { ClosedError, nonNegativeNumber, noopLogger, positiveInteger, positiveNumber, realClock, type Clock, type GroupVersionKind, type Logger } from '../util/index.ts';
import { BuildGate } from './build-gate.ts';
import { CacheTable } from './cache-table.ts';
import { HeldReaders } from './holds.ts';
import { MemoryBudget, type MemoryBudgetOptions, type MemoryBudgetStatus } from './memory-budget.ts';
import { cacheKeyOf, ownerKey, type CacheScope, type OwnerKey, type OwnerRef, type TargetRef } from './keys.ts';
import { HeldRegistryReader, type CacheReader, type HeldReader } from './reader.ts';
import { followClusterChange } from './rotation.ts';
import { checkScope, ScopePolicy } from './scope.ts';
import { ScopeDown } from './scope-down.ts';
import { selectionOf } from './selectors.ts';
import { indexedTarget, TargetIndex, targetSelection, type IndexedTarget } from './target-index.ts';
import { CacheWiring, type CacheInformerOptions } from './wiring.ts';

/** Options of {@link Registry}. */
export interface RegistryOptions {
  /**
   * The keeper of clusters the registry gets its connections from (a `ClusterSet`, shared with the
   * rest of the process: leader election, Secret reads). Lent, not owned: `close()` leaves it
   * open, and whoever built it closes it after the registry. Required.
   */
  readonly clusters: Clusters;
  /**
   * The requeue queue of owner keys every cache event is funnelled into. Default: a new
   * rate-limiting queue with per-item backoff 5 ms doubling to 1000 s under a 10 qps / 100 burst
   * bucket (controller-runtime's default). The registry shuts it down on `close()`.
   */
  readonly queue?: RateLimitingQueue<OwnerKey>;
  /**
   * Default namespace scope of a cache when the target does not name one (see {@link CacheScope}).
   * Default `auto`: cluster-wide when the credentials may list the kind at the cluster scope; on a
   * 403 at the cluster scope the cache is dropped for that ⟨connection, kind⟩ and its owners are
   * requeued, and from then on each target's namespace gets a cache of its own.
   */
  readonly scope?: CacheScope;
  /**
   * Informer settings applied to every cache (page size, transform, inactivity timeout...). With
   * `resyncIntervalMs`, every owner of a cache is requeued at each of its resyncs.
   */
  readonly informer?: CacheInformerOptions;
  /** First delay between checks of a cache that is still used. Default 2 000. */
  readonly gcInitialDelayMs?: number;
  /** Ceiling of that delay (it doubles at each check that finds the cache used). Default 512 000. */
  readonly gcMaxDelayMs?: number;
  /** How long a cache must have had no owner before it is stopped. Default 30 000. */
  readonly gcGraceMs?: number;
  /** Bound on building one cache (credentials, connection, discovery). Default 30 000. */
  readonly buildTimeoutMs?: number;
  /**
   * How many caches may be built at once (admission, connection, discovery, start); further calls
   * that need a build wait their turn in order of arrival, for as long as their signal allows
   * (each build ahead takes at most `buildTimeoutMs`, which starts when a call gets its turn).
   * Calls served by a published cache, or joining a build in flight, never wait. Default 32.
   */
  readonly maxConcurrentBuilds?: number;
  /**
   * Refuse new caches for owners' targets while the process's resident memory is at or over
   * `maxRssBytes`: the {@link Registry.watchTargetAndGetReader} call that would build one rejects
   * with `MemoryBudgetExceededError` (cluster, GVK, budget, figure), as a failed build does; calls
   * served by caches already built, or joining a build in flight, carry on, and so do the caches.
   * Held readers ({@link Registry.reader}: the embedder's own objects, the owners themselves) are
   * not refused: without them no owner is reconciled at all. See {@link MemoryBudgetOptions}.
   * Default: no budget.
   */
  readonly memoryBudget?: MemoryBudgetOptions | undefined;
  /** Default: discards everything. */
  readonly logger?: Logger;
  /** Default: the wall clock. */
  readonly clock?: Clock;
}

/** What {@link Registry.caches} reports about one cache. */
export interface CacheInfo {
  /** The connection key: the cluster, plus the identity on the management cluster (`local[as=…]`). */
  readonly cluster: string;
  /** The one namespace the cache watches, or undefined for all namespaces. */
  readonly namespace?: string | undefined;
  readonly gvk: GroupVersionKind;
  /** The label selector the cache's LIST and WATCH send (canonical), or undefined for none. */
  readonly labelSelector?: string | undefined;
  /** The field selector the cache's LIST and WATCH send (canonical), or undefined for none. */
  readonly fieldSelector?: string | undefined;
  readonly synced: boolean;
  readonly objects: number;
  readonly owners: number;
  readonly ageMs: number;
  readonly lastError: Error | undefined;
  /** Milliseconds until the garbage collector looks at this cache again. */
  readonly nextGcCheckInMs: number | undefined;
  readonly relists: number;
  readonly watchErrors: number;
  /** Estimated bytes the cache's objects hold (the informer's `stats().retainedBytes`); unset: not known. */
  readonly retainedBytes?: number | undefined;
  /** Objects the cache holds deflated (`objects: 'compressed'`); unset: not known. */
  readonly compressed?: number | undefined;
}

/** Options of {@link Registry.reader}. */
export interface ReaderOptions {
  /** Who reads; see `ClusterSet.connectionKey`. Default `OWN_IDENTITY`. */
  readonly identity?: Identity | undefined;
  /** Watch this namespace only. Default: all namespaces. */
  readonly namespace?: string | undefined;
  /** The namespace admitted through the provider (the cross-namespace rule). Default `namespace`, else `default`. */
  readonly ownerNamespace?: string | undefined;
  /**
   * Handler of the cache's events, attached when the cache is published (replaying what it holds)
   * and re-attached to the cache that replaces it after a credential rotation. Default none.
   */
  readonly handler?: InformerHandler | undefined;
  /**
   * Label selector sent with the cache's LIST and WATCH, as for a set target: the cache (shared
   * with set targets of the same selection) holds only what it selects, and an object that stops
   * matching arrives as a delete. Default: every object.
   */
  readonly labelSelector?: string | undefined;
  /** Field selector (`metadata.name`, `metadata.namespace`), as {@link labelSelector}. Default: none. */
  readonly fieldSelector?: string | undefined;
  readonly signal?: AbortSignal | undefined;
}

/**
 * How many forgotten owners the registry remembers as forgotten (oldest dropped first): a
 * reconcile still in flight for one of them cannot register it again (see `forgetOwner`).
 */
const FORGOTTEN_OWNERS_KEPT = 65_536;

/** Options of the keeper the registry once built for itself: refused by name rather than silently ignored. */
const KEEPER_OPTIONS = ['provider', 'local', 'qps', 'burst', 'maxConcurrentLists', 'readLimits', 'connection', 'credentialCheckIntervalMs', 'onRequest'] as const;

/**
 * The multi-cluster registry: one informer cache per ⟨connection (cluster, identity), namespace
 * scope, group/version/kind, selectors⟩, built lazily by {@link watchTargetAndGetReader}, an index of which
 * owners use which targets, one requeue queue of owner keys fed by every cache, and a garbage
 * collector (gc.ts) for caches nobody uses. Connections come from the keeper it is lent
 * ({@link Clusters}): each cache holds a lease on the generation of the cluster it reads.
 *
 * Concurrency: the cache table (cache-table.ts) states the invariants of the caches, builds,
 * holds and lent leases; which namespace a cache watches is the {@link ScopePolicy}'s answer
 * (scope.ts). The face itself keeps only the forgotten-owner ring.
 */
export class Registry {
  readonly #clusters: Clusters;
  readonly #unsubscribe: () => void;
  readonly #queue: RateLimitingQueue<OwnerKey>;
  readonly #index = new TargetIndex();
  /** Owners `forgetOwner` removed and no `setOwnerTargets` registered since, oldest first (bounded). */
  readonly #forgotten = new Set<OwnerKey>();
  readonly #scopes = new ScopePolicy();
  readonly #readers: HeldReaders;
  readonly #table: CacheTable;
  readonly #scopeDown: ScopeDown;
  readonly #clock: Clock;
  readonly #scope: CacheScope;
  readonly #budget: MemoryBudget | undefined;
  #closed: Promise<void> | undefined;

  constructor(options: RegistryOptions) {
    const logger = options.logger ?? noopLogger;
    this.#clock = options.clock ?? realClock;
    this.#scope = checkScope('registry option scope', options.scope ?? 'auto');
    const buildTimeoutMs = positiveNumber('registry', 'buildTimeoutMs', options.buildTimeoutMs ?? 30_000);
    const maxConcurrentBuilds = positiveInteger('registry', 'maxConcurrentBuilds', options.maxConcurrentBuilds ?? 32);
    this.#budget = options.memoryBudget === undefined ? undefined : new MemoryBudget(options.memoryBudget);
    const gc = {
      graceMs: nonNegativeNumber('registry', 'gcGraceMs', options.gcGraceMs ?? 30_000),
      initialDelayMs: positiveNumber('registry', 'gcInitialDelayMs', options.gcInitialDelayMs ?? 2_000),
      maxDelayMs: positiveNumber('registry', 'gcMaxDelayMs', options.gcMaxDelayMs ?? 512_000),
    };
    for (const option of KEEPER_OPTIONS) {
      // JavaScript callers, and options objects built for the registry before it was lent its keeper.
      if ((options as unknown as Record<string, unknown>)[option] !== undefined) throw new TypeError(`registry option ${option} configures the keeper: set it on the ClusterSet passed as clusters`);
    }
    const clusters: unknown = options.clusters;
    if (typeof clusters !== 'object' || clusters === null || typeof (clusters as { acquire?: unknown }).acquire !== 'function' || typeof (clusters as { subscribe?: unknown }).subscribe !== 'function') {
      throw new TypeError('registry option clusters must be a keeper of clusters (a ClusterSet)');
    }
    this.#clusters = options.clusters;
    this.#queue = options.queue ?? new RateLimitingWorkQueue<OwnerKey>({
      name: 'owners',
      clock: this.#clock,
      rateLimiter: defaultControllerRateLimiter({ clock: this.#clock }),
    });
    this.#readers = new HeldReaders({
      entry: (key) => this.#table.get(key),
      closed: () => this.#closed !== undefined,
      released: (keys) => { this.#table.released(keys); },
    });
    const wiring = new CacheWiring({
      informer: { ...options.informer },
      index: this.#index,
      queue: this.#queue,
      holds: (key) => this.#readers.holdsOf(key),
      forbidden: (entry) => { this.#scopeDown.refused(entry); },
      logger,
      clock: this.#clock,
    });
    this.#table = new CacheTable({
      clusters: this.#clusters,
      wiring,
      readers: this.#readers,
      index: this.#index,
      scopes: this.#scopes,
      queue: this.#queue,
      builds: new BuildGate(maxConcurrentBuilds),
      budget: this.#budget,
      buildTimeoutMs,
      gc,
      logger,
      clock: this.#clock,
    });
    this.#scopeDown = new ScopeDown({ table: this.#table, index: this.#index, scopes: this.#scopes, logger });
    const rotation = { table: this.#table, clusters: this.#clusters, wiring, scopes: this.#scopes, logger };
    this.#unsubscribe = this.#clusters.subscribe((change) => followClusterChange(rotation, change));
  }

  /** The requeue queue every cache event feeds: consume it with `runWorkers`. */
  get queue(): RateLimitingQueue<OwnerKey> {
    return this.#queue;
  }

  /**
   * Returns a reader of `target`'s kind in the cluster `ref` names, as `owner.identity`, building
   * and starting its cache on first use, and records that `owner` uses `target`, so that any change
   * to it requeues the owner: to the one object, or for a set target (no `name`: a namespace, the
   * whole cluster, or a selector) to any object entering, changing in or leaving the set.
   *
   * A set target's selectors go to the API server: its cache is keyed by ⟨cluster, identity,
   * namespace scope, GVK, selectors in canonical form⟩ and its LIST and WATCH send them, so the cache
   * (and the reader returned) holds only what they select, and targets with equal selectors
   * (`a=1,b=2` and `b=2, a=1`) share one cache. An object whose labels change so that it leaves the
   * selection arrives as a delete. Object targets and sets without selectors share the kind's
   * whole cache. The reader may not be synced yet: the owner is requeued when it is,
   * and when an `auto`-scoped cache is scoped down (call again then: the new reader watches the
   * target's namespace).
   *
   * For an owner {@link forgetOwner} removed, and that no {@link setOwnerTargets} registered
   * since, nothing is recorded: the reader is returned (and works while its cache lives) but the
   * owner is not registered again, so a reconcile still in flight when its owner was deleted
   * leaves no owner behind.
   *
   * Every caller is admitted by the keeper for its own namespace and identity before it may share
   * a cache or a build in flight; a credential rotation or a collection racing the call is followed
   * internally.
   *
   * @throws TypeError for a target with both a name and selectors; `InvalidSelectorError` for a
   *   malformed selector, a field other than `metadata.name`/`metadata.namespace`, or one over the
   *   bounds (its message lists what is accepted);
   *   the provider's errors (`KubeconfigRefusedError`, `KubeconfigSecretNotFoundError`,
   *   `KubeApiError` 403 when the owner's identity may not read the kubeconfig Secret, ...),
   *   `UnknownKindError` when the cluster does not serve the kind, `KubeApiError`/`TransportError`
   *   when discovery fails, `ClusterChangedError` (retryable) when the cluster kept changing under
   *   the call, `MemoryBudgetExceededError` when a new cache is refused by `memoryBudget`,
   *   `ClosedError` after `close()` and only then, or the signal's reason. Nothing
   *   failed is remembered: the next call tries again.
   */
  async watchTargetAndGetReader<T extends KubeObject = KubeObject>(
    ref: ClusterRef,
    target: TargetRef,
    owner: OwnerRef,
    signal?: AbortSignal,
  ): Promise<CacheReader<T>> {
    if (this.#closed !== undefined) throw new ClosedError('registry');
    // Before anything is recorded or requested: the GVK ends up in URLs sent with the cluster's credentials.
    checkGvk(target.gvk);
    const connection = this.#clusters.connectionKey(ref, owner.namespace, owner.identity);
    const scope = checkScope('target scope', target.scope ?? this.#scope);
    const selection = targetSelection(target);
    for (;;) {
      const namespace = this.#scopes.namespaceOf(connection, scope, target);
      const key = cacheKeyOf(connection, namespace, target.gvk, selection);
      // Recorded first, as after any call, so the cache counts as used from the moment it is published;
      // never for a forgotten owner (a reconcile that was in flight when it was deleted).
      const keyOfOwner = ownerKey(owner);
      const indexed = indexedTarget(this.#index, key, target, selection);
      if (!this.#forgotten.has(keyOfOwner)) this.#index.add(keyOfOwner, indexed);
      // Hot path: published, and this owner's namespace and identity already admitted. No lock.
      if (this.#table.has(key) && this.#clusters.isAdmitted(connection, owner.namespace, owner.identity)) {
        this.#scopeDown.probeIfRefused(key, target);
        return this.#readers.reader(key, connection, target.gvk, selection) as unknown as CacheReader<T>;
      }
      // Over the memory budget, a new cache for a target is refused before anything is requested.
      this.#table.checkBudget(key, connection, target.gvk);
      const built = await this.#table.admitAndBuild(ref, owner.namespace, owner.identity, key, namespace, selection, target.gvk, scope === 'auto', signal);
      if (built === 'scoped-down') continue;
      this.#scopeDown.probeIfRefused(key, target);
      // T is the caller's claim about the kind's shape: the cache holds the JSON the server sent.
      return this.#readers.reader(key, connection, target.gvk, selection) as unknown as CacheReader<T>;
    }
  }

  /**
   * A reader of one kind that does not register an owner: for the embedder's own objects (the
   * service's Pipelines). The cache is held, never collected, until `release()`; with a `handler`,
   * the caller sees every event. Same admission, sharing and errors as {@link watchTargetAndGetReader}
   * (`InvalidSelectorError` for a selector refused, before anything is requested).
   */
  async reader<T extends KubeObject = KubeObject>(ref: ClusterRef, gvk: GroupVersionKind, options: ReaderOptions = {}): Promise<HeldReader<T>> {
    if (this.#closed !== undefined) throw new ClosedError('registry');
    checkGvk(gvk);
    const selection = selectionOf(options.labelSelector, options.fieldSelector);
    const namespace = options.namespace ?? '';
    const ownerNamespace = options.ownerNamespace ?? (namespace === '' ? 'default' : namespace);
    const connection = this.#clusters.connectionKey(ref, ownerNamespace, options.identity);
    const key = cacheKeyOf(connection, namespace, gvk, selection);
    const { attach, release } = this.#readers.hold(key, options.handler);
    try {
      if (!(this.#table.has(key) && this.#clusters.isAdmitted(connection, ownerNamespace, options.identity))) {
        await this.#table.admitAndBuild(ref, ownerNamespace, options.identity, key, namespace, selection, gvk, false, options.signal);
      }
    } catch (err) {
      release();
      throw err;
    }
    // Published by another build before this hold was registered: attach its handler now.
    attach();
    return new HeldRegistryReader<T>(this.#readers.reader(key, connection, gvk, selection) as unknown as CacheReader<T>, release);
  }

  /**
   * The connection to the cluster `ref` names, as `owner.identity`, for the writes an owner makes
   * there (reads go through the caches). The owner is admitted by the keeper as for
   * {@link watchTargetAndGetReader}, so an owner can write only where it may watch, and on the
   * management cluster an impersonated owner writes as its ServiceAccount.
   *
   * The connection belongs to the keeper: never close it. It stays open at least 60 s after the
   * call (longer while caches on the cluster use it), is replaced when credentials rotate and
   * closed once nothing uses the cluster, so ask for it at each use rather than keeping it.
   *
   * @throws the provider's errors, `ClosedError` after `close()`, or the signal's reason.
   */
  async connectionFor(ref: ClusterRef, owner: OwnerRef, signal?: AbortSignal): Promise<ClusterConnection> {
    if (this.#closed !== undefined) throw new ClosedError('registry');
    const lease = await this.#table.acquire(ref, owner.namespace, owner.identity, signal);
    this.#table.lend(lease);
    return lease.connection;
  }

  /**
   * Declares the complete set of targets `owner` uses now (objects and sets), each with its
   * cluster. Targets it no longer names are released, and caches left without owners become
   * eligible for collection after the grace period. No I/O: call it at the start of a reconcile,
   * then {@link watchTargetAndGetReader} for each target. Throws, recording nothing, for a
   * malformed target: a TypeError, or `InvalidSelectorError` for a selector refused.
   *
   * This is what (re-)registers an owner that {@link forgetOwner} removed: call it right after
   * reading the owner as present (from a synced cache), with no `await` in between, so that a
   * delete seen later is ordered after it.
   */
  setOwnerTargets(owner: OwnerRef, targets: readonly { readonly cluster: ClusterRef; readonly target: TargetRef }[]): void {
    const indexed: IndexedTarget[] = targets.map(({ cluster, target }) => {
      const connection = this.#clusters.connectionKey(cluster, owner.namespace, owner.identity);
      const selection = targetSelection(target);
      const key = cacheKeyOf(connection, this.#scopes.namespaceOf(connection, target.scope ?? this.#scope, target), target.gvk, selection);
      return indexedTarget(this.#index, key, target, selection);
    });
    const key = ownerKey(owner);
    this.#forgotten.delete(key);
    this.#table.released(this.#index.set(key, indexed));
  }

  /**
   * Forgets an owner that was deleted: its caches become eligible for collection.
   *
   * The rule against reconciles in flight: a forgotten owner stays forgotten until
   * {@link setOwnerTargets} is called for it again. {@link watchTargetAndGetReader} calls for it
   * meanwhile (a reconcile that began before the delete and is still running) record nothing, so
   * they cannot re-register it and keep its caches alive. The last 65,536 forgotten owners are
   * remembered as such; an owner forgotten longer ago is simply unknown again.
   */
  forgetOwner(owner: OwnerRef): void {
    const key = ownerKey(owner);
    this.#forgotten.delete(key);
    this.#forgotten.add(key);
    if (this.#forgotten.size > FORGOTTEN_OWNERS_KEPT) {
      for (const oldest of this.#forgotten) {
        this.#forgotten.delete(oldest);
        break;
      }
    }
    this.#table.released(this.#index.forget(key));
  }

  /** Owners using at least one target in the cluster-wide whole-kind cache of this kind (own identity; selector caches are not counted). */
  ownersOf(ref: ClusterRef, ownerNamespace: string, gvk: GroupVersionKind): OwnerKey[] {
    return this.#index.ownersOfCache(cacheKeyOf(this.#clusters.connectionKey(ref, ownerNamespace), '', gvk));
  }

  /**
   * Resolves a cluster's credentials again now: a changed fingerprint rebuilds its connection and
   * caches, a deleted Secret stops them; either way their owners are requeued. The keeper's
   * periodic checks (`ClusterSetOptions.credentialCheckIntervalMs`) do the same; call this when
   * you know sooner (a Secret event).
   */
  async checkCluster(ref: ClusterRef, ownerNamespace: string, identity?: Identity): Promise<void> {
    await this.#clusters.check(this.#clusters.connectionKey(ref, ownerNamespace, identity));
  }

  /** Every published cache, for the debug endpoint and metrics. */
  caches(): CacheInfo[] {
    const now = this.#clock.now();
    return [...this.#table.entries()].map((entry) => {
      const stats = entry.informer.stats();
      return {
        cluster: entry.lease.key,
        namespace: entry.namespace === '' ? undefined : entry.namespace,
        gvk: entry.gvk,
        labelSelector: entry.selection.labels === '' ? undefined : entry.selection.labels,
        fieldSelector: entry.selection.fields === '' ? undefined : entry.selection.fields,
        synced: stats.synced,
        objects: stats.objects,
        owners: this.#index.ownerCount(entry.key),
        ageMs: now - entry.createdAt,
        lastError: stats.lastError,
        nextGcCheckInMs: entry.nextGcCheckAt === undefined ? undefined : Math.max(0, entry.nextGcCheckAt - now),
        relists: stats.relists,
        watchErrors: entry.errors,
        retainedBytes: stats.retainedBytes,
        compressed: stats.compressed,
      };
    });
  }

  /** The memory budget (`memoryBudget`) and how many new caches it refused; undefined without one. */
  memoryBudget(): MemoryBudgetStatus | undefined {
    return this.#budget?.status();
  }

  /**
   * Stops every cache, releases its connections (the keeper, lent, stays open: close it after)
   * and the queues; resolves when all of it is released. Idempotent.
   */
  close(): Promise<void> {
    this.#closed ??= this.#close();
    return this.#closed;
  }

  async #close(): Promise<void> {
    this.#unsubscribe();
    await this.#table.close();
    this.#queue.shutDown();
  }
}
