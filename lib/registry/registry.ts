import { Mutex } from 'async-mutex';
import type Bottleneck from 'bottleneck';
import { clusterKey, KubeconfigSecretNotFoundError, type ClusterAccess, type ClusterProvider, type ClusterRef } from '../cluster/index.ts';
import { checkGvk, ClusterConnection, createListLimiter, readLimitsOf, type KubeObject, type ReadLimits, type ResourceClient } from '../transport/index.ts';
import { ResourceInformer, type InformerOptions } from '../informer/index.ts';
import {
  DelayingWorkQueue,
  ItemExponentialRateLimiter,
  RateLimitingWorkQueue,
  defaultControllerRateLimiter,
  type RateLimitingQueue,
} from '../queue/index.ts';
import {
  childController,
  ClosedError,
  KubeApiError,
  noopLogger,
  raceAbort,
  realClock,
  toError,
  TransportError,
  type Clock,
  type GroupVersionKind,
  type Logger,
  type Timer,
} from '../util/index.ts';
import { cacheKeyOf, describeCacheKey, objectKeyOf, ownerKey, type OwnerKey, type OwnerRef, type TargetRef } from './keys.ts';
import { RegistryReader, type CacheReader } from './reader.ts';
import { TargetIndex, type IndexedTarget } from './target-index.ts';

/** Options of {@link Registry}. */
export interface RegistryOptions {
  /** Turns cluster references into credentials. Required. */
  readonly provider: ClusterProvider;
  /**
   * The requeue queue of owner keys every cache event is funnelled into. Default: a new
   * rate-limiting queue with per-item backoff 5 ms doubling to 1000 s under a 10 qps / 100 burst
   * bucket (controller-runtime's default). The registry shuts it down on `close()`.
   */
  readonly queue?: RateLimitingQueue<OwnerKey>;
  /** Per-cluster request limits. Default 20 qps, burst 30 (controller-runtime's). */
  readonly qps?: number;
  readonly burst?: number;
  /** Concurrent LISTs across all clusters. Default 50. */
  readonly maxConcurrentLists?: number;
  /** Bounds on what one answer of an API server may make the process hold (see `ReadLimits` for the defaults). */
  readonly readLimits?: ReadLimits;
  /** Informer settings applied to every cache (page size, transform, inactivity timeout...). */
  readonly informer?: Pick<InformerOptions, 'pageSize' | 'transform' | 'resyncIntervalMs' | 'watchInactivityTimeoutMs' | 'backoff' | 'slowBackoff'>;
  /** First delay between checks of a cache that is still used. Default 2 000. */
  readonly gcInitialDelayMs?: number;
  /** Ceiling of that delay (it doubles at each check that finds the cache used). Default 512 000. */
  readonly gcMaxDelayMs?: number;
  /** How long a cache must have had no owner before it is stopped. Default 30 000. */
  readonly gcGraceMs?: number;
  /**
   * How often each cluster's credentials are resolved again to notice rotation or a deleted
   * Secret. 0 turns periodic checks off (call {@link Registry.checkCluster} instead). Default 60 000.
   */
  readonly credentialCheckIntervalMs?: number;
  /** Bound on building one cache (credentials, connection, discovery). Default 30 000. */
  readonly buildTimeoutMs?: number;
  /** Default: discards everything. */
  readonly logger?: Logger;
  /** Default: the wall clock. */
  readonly clock?: Clock;
}

/** What {@link Registry.caches} reports about one cache. */
export interface CacheInfo {
  readonly cluster: string;
  readonly gvk: GroupVersionKind;
  readonly synced: boolean;
  readonly objects: number;
  readonly owners: number;
  readonly ageMs: number;
  readonly lastError: Error | undefined;
  /** Milliseconds until the garbage collector looks at this cache again. */
  readonly nextGcCheckInMs: number | undefined;
  readonly relists: number;
  readonly watchErrors: number;
}

/** One cluster the registry talks to. Replaced whole on credential rotation, never mutated into another. */
interface ClusterState {
  readonly key: string;
  readonly ref: ClusterRef;
  readonly fingerprint: string;
  readonly connection: ClusterConnection;
  /** Owner namespaces the provider admitted for this cluster (its cross-namespace rule ran for them). */
  readonly admitted: Set<string>;
  /** Keys of published caches on this cluster. */
  readonly caches: Set<string>;
  /** Cache builds under way on this cluster: the connection stays open while any is running. */
  builds: number;
  checkTimer: Timer | undefined;
}

/** One published cache. */
interface CacheEntry {
  readonly key: string;
  readonly cluster: ClusterState;
  readonly gvk: GroupVersionKind;
  readonly informer: ResourceInformer;
  readonly createdAt: number;
  readonly detach: () => void;
  /** When the cache was first seen without owners since it last had some; undefined while used. */
  unusedSince: number | undefined;
  nextGcCheckAt: number | undefined;
  errors: number;
}

function positive(option: string, value: number, allowZero = false): number {
  if (!Number.isFinite(value) || value < 0 || (!allowZero && value === 0)) {
    throw new TypeError(`registry option ${option} must be a ${allowZero ? 'non-negative' : 'positive'} number, got ${value}`);
  }
  return value;
}

/**
 * The multi-cluster registry: one informer cache per ⟨cluster, group/version/kind⟩, built lazily by
 * {@link watchTargetAndGetReader}, an index of which owners use which targets, one requeue queue
 * of owner keys fed by every cache, and a garbage collector for caches nobody uses.
 *
 * Concurrency (JavaScript interleaves only at `await`):
 * - `#caches` holds only published caches; the hot path reads it without taking `#lock`.
 * - `#building` holds the single in-flight build per cache key; it is set before the build's first
 *   `await` and removed when the build settles, so concurrent callers share one build and a failed
 *   build is never remembered.
 * - `#lock` serialises publishing, removing and swapping caches (double check under the lock).
 *   Nothing inside it awaits I/O: credentials, connections, discovery and the first LIST all happen
 *   before it is taken, so a hanging cluster never delays another.
 * - `#clusters` holds one state per cluster key; `#connecting` the single in-flight resolution of a
 *   cluster not yet known.
 */
export class Registry {
  readonly #provider: ClusterProvider;
  readonly #queue: RateLimitingQueue<OwnerKey>;
  readonly #index = new TargetIndex();
  readonly #lock = new Mutex();
  readonly #caches = new Map<string, CacheEntry>();
  readonly #building = new Map<string, Promise<CacheEntry>>();
  readonly #clusters = new Map<string, ClusterState>();
  readonly #connecting = new Map<string, Promise<ClusterState>>();
  readonly #readers = new Map<string, RegistryReader>();
  readonly #listLimiter: Bottleneck;
  readonly #gcQueue: DelayingWorkQueue<string>;
  readonly #gcLimiter: ItemExponentialRateLimiter<string>;
  readonly #root = new AbortController();
  readonly #logger: Logger;
  readonly #clock: Clock;
  readonly #qps: number;
  readonly #readLimits: Required<ReadLimits>;
  readonly #burst: number;
  readonly #informerOptions: NonNullable<RegistryOptions['informer']>;
  readonly #gcGraceMs: number;
  readonly #credentialCheckIntervalMs: number;
  readonly #buildTimeoutMs: number;
  readonly #gcLoop: Promise<void>;
  #closed: Promise<void> | undefined;

  constructor(options: RegistryOptions) {
    const provider: unknown = options.provider;
    if (typeof provider !== 'object' || provider === null || typeof (provider as { resolve?: unknown }).resolve !== 'function') {
      throw new TypeError('registry option provider must be a ClusterProvider');
    }
    this.#provider = options.provider;
    this.#logger = options.logger ?? noopLogger;
    this.#clock = options.clock ?? realClock;
    this.#qps = positive('qps', options.qps ?? 20);
    this.#readLimits = readLimitsOf(options.readLimits ?? {}, 'registry readLimits');
    this.#burst = positive('burst', options.burst ?? 30);
    this.#informerOptions = { ...options.informer };
    this.#gcGraceMs = positive('gcGraceMs', options.gcGraceMs ?? 30_000, true);
    this.#credentialCheckIntervalMs = positive('credentialCheckIntervalMs', options.credentialCheckIntervalMs ?? 60_000, true);
    this.#buildTimeoutMs = positive('buildTimeoutMs', options.buildTimeoutMs ?? 30_000);
    this.#queue = options.queue ?? new RateLimitingWorkQueue<OwnerKey>({
      name: 'owners',
      clock: this.#clock,
      rateLimiter: defaultControllerRateLimiter({ clock: this.#clock }),
    });
    this.#listLimiter = createListLimiter(positive('maxConcurrentLists', options.maxConcurrentLists ?? 50));
    this.#gcLimiter = new ItemExponentialRateLimiter({
      baseDelayMs: positive('gcInitialDelayMs', options.gcInitialDelayMs ?? 2_000),
      maxDelayMs: positive('gcMaxDelayMs', options.gcMaxDelayMs ?? 512_000),
    });
    this.#gcQueue = new DelayingWorkQueue<string>({ name: 'cache-gc', clock: this.#clock });
    // Started here but does no I/O: it only waits for keys the registry schedules.
    this.#gcLoop = this.#runGc();
  }

  /** The requeue queue every cache event feeds: consume it with `runWorkers`. */
  get queue(): RateLimitingQueue<OwnerKey> {
    return this.#queue;
  }

  /**
   * Returns a reader of `target`'s kind in the cluster `ref` names, building and starting its cache
   * on first use, and records that `owner` uses `target`, so that any change to it requeues the
   * owner. The reader may not be synced yet: the owner is requeued when it is.
   *
   * @throws the provider's errors (`KubeconfigRefusedError`, `KubeconfigSecretNotFoundError`, ...),
   *   `UnknownKindError` when the cluster does not serve the kind, `KubeApiError`/`TransportError`
   *   when discovery fails, `ClosedError` after `close()`, or the signal's reason. Nothing failed is
   *   remembered: the next call tries again.
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
    const cluster = clusterKey(ref, owner.namespace);
    const key = cacheKeyOf(cluster, target.gvk);
    this.#index.add(ownerKey(owner), { cacheKey: key, objectKey: objectKeyOf(key, target.namespace, target.name) });

    // Hot path: published, and this owner's namespace already admitted to the cluster. No lock.
    // A build shared with another owner admitted only that owner's namespace: go round again
    // until this one's is admitted too (its own build runs the provider's checks for it).
    while (this.#caches.get(key)?.cluster.admitted.has(owner.namespace) !== true) {
      let building = this.#building.get(key);
      if (building === undefined) {
        building = this.#build(key, cluster, ref, target.gvk, owner.namespace);
        this.#building.set(key, building);
        const forget = (): void => { this.#building.delete(key); };
        building.then(forget, forget);
      }
      await raceAbort(building, signal);
    }
    // T is the caller's claim about the kind's shape: the cache holds the JSON the server sent.
    return this.#reader(key, cluster, target.gvk) as unknown as CacheReader<T>;
  }

  /**
   * The connection to the cluster `ref` names, for the writes an owner makes there (reads go
   * through the caches). The cluster is resolved and connected on first use, sharing the single
   * flight and the provider's admission checks of {@link watchTargetAndGetReader}, so an owner
   * can write only where it may watch.
   *
   * The connection belongs to the registry: never close it. It is replaced when credentials
   * rotate and closed once the cluster has no cache left (after a collection or a failed build),
   * so ask for it at each use rather than keeping it; a request on a closed connection fails with
   * `ClosedError`, to be retried.
   *
   * @throws the provider's errors, `ClosedError` after `close()`, or the signal's reason.
   */
  async connectionFor(ref: ClusterRef, ownerNamespace: string, signal?: AbortSignal): Promise<ClusterConnection> {
    if (this.#closed !== undefined) throw new ClosedError('registry');
    const cluster = clusterKey(ref, ownerNamespace);
    const known = this.#clusters.get(cluster);
    if (known?.admitted.has(ownerNamespace) === true) return known.connection;
    // As a build does: bounded, on the registry's own signal (the resolution may be shared with
    // other callers), while this caller stops waiting when its own signal aborts.
    const { controller, dispose } = childController(this.#root.signal);
    const deadline = this.#clock.setTimer(this.#buildTimeoutMs, () => {
      controller.abort(new TransportError({ cluster }, `connecting took longer than ${this.#buildTimeoutMs} ms`));
    });
    const admitted = this.#admit(cluster, ref, ownerNamespace, controller.signal).finally(() => {
      deadline.cancel();
      dispose();
    });
    return (await raceAbort(admitted, signal)).connection;
  }

  /**
   * Declares the complete set of targets `owner` uses now, each with its cluster. Targets it no
   * longer names are released, and caches left without owners become eligible for collection
   * after the grace period. No I/O: call it at the start of a reconcile, then
   * {@link watchTargetAndGetReader} for each target.
   */
  setOwnerTargets(owner: OwnerRef, targets: readonly { readonly cluster: ClusterRef; readonly target: TargetRef }[]): void {
    const indexed: IndexedTarget[] = targets.map(({ cluster, target }) => {
      const key = cacheKeyOf(clusterKey(cluster, owner.namespace), target.gvk);
      return { cacheKey: key, objectKey: objectKeyOf(key, target.namespace, target.name) };
    });
    this.#released(this.#index.set(ownerKey(owner), indexed));
  }

  /** Forgets an owner that was deleted: its caches become eligible for collection. */
  forgetOwner(owner: OwnerRef): void {
    this.#released(this.#index.forget(ownerKey(owner)));
  }

  /** Owners using at least one target in this cache. */
  ownersOf(ref: ClusterRef, ownerNamespace: string, gvk: GroupVersionKind): OwnerKey[] {
    return this.#index.ownersOfCache(cacheKeyOf(clusterKey(ref, ownerNamespace), gvk));
  }

  /**
   * Resolves a cluster's credentials again now: a changed fingerprint rebuilds its connection and
   * caches, a deleted Secret stops them; either way their owners are requeued. Periodic checks do
   * the same every `credentialCheckIntervalMs`; call this when you know sooner (a Secret event).
   */
  async checkCluster(ref: ClusterRef, ownerNamespace: string): Promise<void> {
    const state = this.#clusters.get(clusterKey(ref, ownerNamespace));
    if (state !== undefined) await this.#check(state);
  }

  /** Every published cache, for the debug endpoint and metrics. */
  caches(): CacheInfo[] {
    const now = this.#clock.now();
    return [...this.#caches.values()].map((entry) => {
      const stats = entry.informer.stats();
      return {
        cluster: entry.cluster.key,
        gvk: entry.gvk,
        synced: stats.synced,
        objects: stats.objects,
        owners: this.#index.ownerCount(entry.key),
        ageMs: now - entry.createdAt,
        lastError: stats.lastError,
        nextGcCheckInMs: entry.nextGcCheckAt === undefined ? undefined : Math.max(0, entry.nextGcCheckAt - now),
        relists: stats.relists,
        watchErrors: entry.errors,
      };
    });
  }

  /**
   * Stops every cache, closes every connection and the queues; resolves when all of it is
   * released. Idempotent.
   */
  close(): Promise<void> {
    this.#closed ??= this.#close();
    return this.#closed;
  }

  async #close(): Promise<void> {
    this.#root.abort(new ClosedError('registry'));
    this.#gcQueue.shutDown();
    await this.#gcLoop;
    // Builds in flight see the abort; wait for them so none publishes after this.
    await Promise.allSettled([...this.#building.values(), ...this.#connecting.values()]);
    const entries = await this.#lock.runExclusive(() => {
      const all = [...this.#caches.values()];
      this.#caches.clear();
      return all;
    });
    for (const entry of entries) entry.detach();
    await Promise.all(entries.map((entry) => entry.informer.stop()));
    const clusters = [...this.#clusters.values()];
    this.#clusters.clear();
    for (const state of clusters) state.checkTimer?.cancel();
    await Promise.all(clusters.map((state) => state.connection.close()));
    await this.#listLimiter.stop({ dropWaitingJobs: true }).catch(() => undefined);
    this.#queue.shutDown();
  }

  #reader(key: string, cluster: string, gvk: GroupVersionKind): RegistryReader {
    let reader = this.#readers.get(key);
    if (reader === undefined) {
      reader = new RegistryReader(cluster, gvk, () => this.#caches.get(key)?.informer);
      this.#readers.set(key, reader);
    }
    return reader;
  }

  /** The slow path: everything that does I/O happens here, before `#lock` is taken. */
  async #build(key: string, cluster: string, ref: ClusterRef, gvk: GroupVersionKind, ownerNamespace: string): Promise<CacheEntry> {
    // Bounded on the injected clock, and released when the build settles: close() leaves no timer.
    const { controller, dispose } = childController(this.#root.signal);
    const deadline = this.#clock.setTimer(this.#buildTimeoutMs, () => {
      controller.abort(new TransportError({ cluster, gvk }, `building the cache took longer than ${this.#buildTimeoutMs} ms`));
    });
    try {
      return await this.#buildWithin(key, cluster, ref, gvk, ownerNamespace, controller.signal);
    } finally {
      deadline.cancel();
      dispose();
    }
  }

  async #buildWithin(key: string, cluster: string, ref: ClusterRef, gvk: GroupVersionKind, ownerNamespace: string, signal: AbortSignal): Promise<CacheEntry> {
    const state = await this.#admit(cluster, ref, ownerNamespace, signal);
    const published = this.#caches.get(key);
    if (published?.cluster === state) return published;

    state.builds += 1;
    let informer: ResourceInformer | undefined;
    try {
      const info = await state.connection.resolve(gvk, signal);
      const created = this.#newInformer(state, key, gvk, state.connection.resourceClient(info));
      informer = created.informer;
      const entry = created;
      return await this.#lock.runExclusive(() => {
        if (this.#root.signal.aborted) throw new ClosedError('registry');
        const existing = this.#caches.get(key);
        if (existing !== undefined && existing.cluster === this.#clusters.get(cluster)) return existing;
        if (this.#clusters.get(cluster) !== state) throw new Error(`cluster ${cluster} was rebuilt while this cache was being built; try again`);
        entry.informer.start(this.#root.signal);
        this.#publish(entry);
        informer = undefined; // published: no longer ours to stop
        return entry;
      });
    } finally {
      state.builds -= 1;
      if (informer !== undefined) await informer.stop();
      await this.#closeClusterIfUnused(state);
    }
  }

  /** Creates (not starts) an informer for a cache and wires its events to the owners' queue. */
  #newInformer(state: ClusterState, key: string, gvk: GroupVersionKind, client: ResourceClient): CacheEntry {
    const informer = new ResourceInformer({
      ...this.#informerOptions,
      client,
      logger: this.#logger.child({ cluster: state.key, gvk: describeCacheKey(state.key, gvk) }),
      clock: this.#clock,
    });
    const requeueObject = (obj: KubeObject): void => {
      const meta = obj.metadata;
      if (meta?.name === undefined) return;
      for (const owner of this.#index.ownersOf(objectKeyOf(key, meta.namespace, meta.name))) this.#queue.add(owner);
    };
    const requeueAll = (): void => {
      for (const owner of this.#index.ownersOfCache(key)) this.#queue.add(owner);
    };
    let lastErrorMessage: string | undefined;
    const detachers: (() => void)[] = [];
    const entry: CacheEntry = {
      key,
      cluster: state,
      gvk,
      informer,
      createdAt: this.#clock.now(),
      unusedSince: undefined,
      nextGcCheckAt: undefined,
      errors: 0,
      detach: () => { for (const detach of detachers) detach(); },
    };
    detachers.push(
      informer.addHandler({
        add: requeueObject,
        update: (_old, current) => { requeueObject(current); },
        delete: requeueObject,
      }),
      // Owners whose target does not exist get no object event: wake them when the answer is known.
      informer.on('synced', () => { lastErrorMessage = undefined; requeueAll(); }),
      informer.on('error', (err) => {
        entry.errors += 1;
        // Requeue owners when the failure changes (so status can say why), not on every retry.
        if (err.message !== lastErrorMessage) requeueAll();
        lastErrorMessage = err.message;
      }),
      // A watch that resumes without a relist sends no object event: owners that saw the error
      // would otherwise wait for their next resync to see it gone.
      informer.on('recovered', () => { lastErrorMessage = undefined; requeueAll(); }),
    );
    return entry;
  }

  /** Under `#lock`: makes a started cache visible and schedules its first GC check. */
  #publish(entry: CacheEntry): void {
    this.#caches.set(entry.key, entry);
    entry.cluster.caches.add(entry.key);
    this.#scheduleGc(entry, this.#gcLimiter.when(entry.key));
  }

  /**
   * The cluster's state, resolving and connecting it on first use (single flight), and running the
   * provider's checks for an owner namespace not yet admitted to it.
   */
  async #admit(cluster: string, ref: ClusterRef, ownerNamespace: string, signal: AbortSignal): Promise<ClusterState> {
    const known = this.#clusters.get(cluster);
    if (known !== undefined) {
      if (!known.admitted.has(ownerNamespace)) {
        const access = await this.#provider.resolve(ref, { ownerNamespace, signal });
        known.admitted.add(ownerNamespace);
        if (access.fingerprint !== known.fingerprint) void this.#check(known).catch((err: unknown) => { this.#logCheckFailure(known, err); });
      }
      return known;
    }
    let connecting = this.#connecting.get(cluster);
    if (connecting === undefined) {
      connecting = this.#connect(cluster, ref, ownerNamespace, signal);
      this.#connecting.set(cluster, connecting);
      const forget = (): void => { this.#connecting.delete(cluster); };
      connecting.then(forget, forget);
      return connecting;
    }
    // Another owner is connecting this cluster: share its connection, but run our own admission.
    await raceAbort(connecting, signal);
    return this.#admit(cluster, ref, ownerNamespace, signal);
  }

  async #connect(cluster: string, ref: ClusterRef, ownerNamespace: string, signal: AbortSignal): Promise<ClusterState> {
    const access = await this.#provider.resolve(ref, { ownerNamespace, signal });
    const state = this.#newClusterState(cluster, ref, access, ownerNamespace);
    await this.#lock.runExclusive(() => {
      if (this.#root.signal.aborted) throw new ClosedError('registry');
      this.#clusters.set(cluster, state);
    }).catch(async (err: unknown) => {
      await state.connection.close();
      throw err;
    });
    this.#scheduleCheck(state);
    return state;
  }

  #newClusterState(cluster: string, ref: ClusterRef, access: ClusterAccess, ownerNamespace: string): ClusterState {
    const connection = new ClusterConnection({
      name: cluster,
      kubeConfig: access.kubeConfig,
      qps: this.#qps,
      burst: this.#burst,
      listLimiter: this.#listLimiter,
      ...this.#readLimits,
      logger: this.#logger.child({ cluster }),
      clock: this.#clock,
    });
    return { key: cluster, ref, fingerprint: access.fingerprint, connection, admitted: new Set([ownerNamespace]), caches: new Set(), builds: 0, checkTimer: undefined };
  }

  #scheduleCheck(state: ClusterState): void {
    if (this.#credentialCheckIntervalMs === 0 || this.#root.signal.aborted) return;
    state.checkTimer = this.#clock.setTimer(this.#credentialCheckIntervalMs, () => {
      state.checkTimer = undefined;
      this.#check(state)
        .catch((err: unknown) => { this.#logCheckFailure(state, err); })
        .finally(() => { if (this.#clusters.get(state.key) === state) this.#scheduleCheck(state); });
    });
  }

  #logCheckFailure(state: ClusterState, err: unknown): void {
    if (this.#root.signal.aborted) return;
    this.#logger.warn('credential check failed; keeping the current connection', { cluster: state.key, error: toError(err).message });
  }

  /** Re-resolves a cluster: rotates on a new fingerprint, drops it when its Secret is gone. */
  async #check(state: ClusterState): Promise<void> {
    const [ownerNamespace] = state.admitted;
    if (ownerNamespace === undefined || this.#clusters.get(state.key) !== state) return;
    let access: ClusterAccess;
    try {
      access = await this.#provider.resolve(state.ref, { ownerNamespace, signal: this.#root.signal });
    } catch (err) {
      if (err instanceof KubeconfigSecretNotFoundError || (err instanceof KubeApiError && err.statusCode === 404)) {
        this.#logger.info('kubeconfig Secret is gone: stopping the cluster\'s caches', { cluster: state.key });
        await this.#replaceCluster(state, undefined);
        return;
      }
      throw err;
    }
    if (access.fingerprint === state.fingerprint) return;
    this.#logger.info('credentials changed: rebuilding the cluster\'s connection and caches', { cluster: state.key });
    await this.#replaceCluster(state, access);
  }

  /**
   * Swaps a cluster's connection and every cache on it for ones built from `access` (rotation), or
   * removes them all (`access` undefined). New caches are built and started outside the lock; the
   * swap itself is one step under the lock, so no reader ever sees a mix. Owners are requeued.
   */
  async #replaceCluster(old: ClusterState, access: ClusterAccess | undefined): Promise<void> {
    const [firstNamespace] = old.admitted;
    const fresh = access === undefined || firstNamespace === undefined ? undefined : this.#newClusterState(old.key, old.ref, access, firstNamespace);
    if (fresh !== undefined) for (const ns of old.admitted) fresh.admitted.add(ns);
    const rebuilt: CacheEntry[] = [];
    if (fresh !== undefined) {
      for (const key of old.caches) {
        const entry = this.#caches.get(key);
        if (entry === undefined) continue;
        try {
          const info = await fresh.connection.resolve(entry.gvk, this.#root.signal);
          rebuilt.push(this.#newInformer(fresh, key, entry.gvk, fresh.connection.resourceClient(info)));
        } catch (err) {
          // Not rebuilt: dropped below; its owners are requeued and rebuild it on their next call.
          this.#logger.warn('could not rebuild a cache with the new credentials', { cluster: old.key, gvk: describeCacheKey(old.key, entry.gvk), error: toError(err).message });
        }
      }
    }
    const { removed, owners } = await this.#lock.runExclusive(() => {
      const gone: CacheEntry[] = [];
      const toWake = new Set<OwnerKey>();
      if (this.#clusters.get(old.key) !== old) return { removed: gone, owners: toWake };
      for (const key of old.caches) {
        const entry = this.#caches.get(key);
        if (entry !== undefined) gone.push(entry);
        this.#caches.delete(key);
        for (const owner of this.#index.ownersOfCache(key)) toWake.add(owner);
      }
      old.caches.clear();
      if (fresh === undefined) {
        this.#clusters.delete(old.key);
      } else {
        this.#clusters.set(old.key, fresh);
        for (const entry of rebuilt) {
          entry.informer.start(this.#root.signal);
          this.#publish(entry);
        }
        rebuilt.length = 0;
      }
      return { removed: gone, owners: toWake };
    });
    // Whatever was not published (the cluster changed again meanwhile) is ours to release.
    await Promise.all(rebuilt.map((entry) => entry.informer.stop()));
    if (fresh !== undefined && this.#clusters.get(old.key) !== fresh) await fresh.connection.close();
    else if (fresh !== undefined) this.#scheduleCheck(fresh);
    old.checkTimer?.cancel();
    for (const entry of removed) {
      entry.detach();
      // Keys not rebuilt are gone for good (as after GC): their readers need not be kept.
      if (!this.#caches.has(entry.key)) this.#readers.delete(entry.key);
    }
    await Promise.all(removed.map((entry) => entry.informer.stop()));
    await old.connection.close();
    for (const owner of owners) this.#queue.add(owner);
  }

  async #closeClusterIfUnused(state: ClusterState): Promise<void> {
    const unused = await this.#lock.runExclusive(() => {
      if (state.caches.size > 0 || state.builds > 0 || this.#clusters.get(state.key) !== state) return false;
      this.#clusters.delete(state.key);
      return true;
    });
    if (!unused) return;
    state.checkTimer?.cancel();
    await state.connection.close();
  }

  /** Caches that lost their last owner become eligible after the grace period, not at the next backoff step. */
  #released(keys: readonly string[]): void {
    const now = this.#clock.now();
    for (const key of keys) {
      const entry = this.#caches.get(key);
      if (entry === undefined) continue;
      entry.unusedSince ??= now;
      this.#scheduleGc(entry, this.#gcGraceMs);
    }
  }

  #scheduleGc(entry: CacheEntry, delayMs: number): void {
    const at = this.#clock.now() + delayMs;
    // An earlier check wins (the delaying queue keeps the earliest time for an item).
    if (entry.nextGcCheckAt === undefined || at < entry.nextGcCheckAt || entry.nextGcCheckAt <= this.#clock.now()) entry.nextGcCheckAt = at;
    this.#gcQueue.addAfter(entry.key, delayMs);
  }

  /** The garbage collector: one worker, since checks are cheap and removal is serialised anyway. */
  async #runGc(): Promise<void> {
    for (;;) {
      const next = await this.#gcQueue.get();
      if (next === undefined) return;
      const key = next.item;
      try {
        await this.#gcCheck(key);
      } catch (err) {
        // Never stuck: a failed check is retried with backoff.
        this.#logger.warn('cache garbage-collection check failed; retrying', { key, error: toError(err).message });
        const entry = this.#caches.get(key);
        if (entry !== undefined) this.#scheduleGc(entry, this.#gcLimiter.when(key));
      } finally {
        this.#gcQueue.done(key);
      }
    }
  }

  async #gcCheck(key: string): Promise<void> {
    const entry = this.#caches.get(key);
    if (entry === undefined) {
      this.#gcLimiter.forget(key);
      return;
    }
    entry.nextGcCheckAt = undefined;
    const now = this.#clock.now();
    if (this.#index.ownerCount(key) > 0) {
      entry.unusedSince = undefined;
      this.#scheduleGc(entry, this.#gcLimiter.when(key));
      return;
    }
    entry.unusedSince ??= now;
    const idle = now - entry.unusedSince;
    if (idle < this.#gcGraceMs) {
      this.#scheduleGc(entry, this.#gcGraceMs - idle);
      return;
    }
    const removed = await this.#lock.runExclusive(() => {
      // Double check: an owner may have come back, or the cache been swapped, since the check began.
      if (this.#caches.get(key) !== entry || this.#index.ownerCount(key) > 0) return false;
      this.#caches.delete(key);
      entry.cluster.caches.delete(key);
      return true;
    });
    if (!removed) {
      this.#scheduleGc(this.#caches.get(key) ?? entry, this.#gcLimiter.when(key));
      return;
    }
    this.#gcLimiter.forget(key);
    this.#readers.delete(key);
    this.#logger.info('stopping unused cache', { cluster: entry.cluster.key, gvk: describeCacheKey(entry.cluster.key, entry.gvk) });
    entry.detach();
    await entry.informer.stop();
    await this.#closeClusterIfUnused(entry.cluster);
  }
}
