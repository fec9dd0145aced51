// The registry's cache table: the published caches, the single build in flight per key, the lock
// that publishes, removes and swaps them, and the leases lent for writes.
import { Mutex } from 'async-mutex';
import { ClusterChangedError, type ClusterLease, type ClusterRef, type Clusters, type Identity } from '../cluster/index.ts';
import type { RateLimitingQueue } from '../queue/index.ts';
import { abortReason, childController, ClosedError, onAbort, raceAbort, TransportError, type Clock, type GroupVersionKind, type Logger, type Timer } from '../util/index.ts';
import type { BuildGate } from './build-gate.ts';
import type { MemoryBudget } from './memory-budget.ts';
import { detach, type Built, type CacheEntry } from './cache-entry.ts';
import { GarbageCollector } from './gc.ts';
import type { HeldReaders } from './holds.ts';
import { describeCacheKey, type CacheKey, type OwnerKey } from './keys.ts';
import type { ScopePolicy } from './scope.ts';
import type { Selection } from './selectors.ts';
import type { TargetIndex } from './target-index.ts';
import type { CacheWiring } from './wiring.ts';

/** How long a lent connection stays held for the caller's writes: a request's default timeout. */
const LEND_MS = 60_000;

/** How many times one call follows a cluster that changed under it before it gives up with `ClusterChangedError`. */
const MAX_ATTEMPTS = 3;

/** Options of {@link CacheTable}: the registry's, already validated, and its other rooms. */
export interface CacheTableOptions {
  readonly clusters: Clusters;
  readonly wiring: CacheWiring;
  readonly readers: HeldReaders;
  readonly index: TargetIndex;
  readonly scopes: ScopePolicy;
  readonly queue: RateLimitingQueue<OwnerKey>;
  /** Bounds the slow path: a slot from before admission until the build this caller started settles. */
  readonly builds: BuildGate;
  /** Checked by {@link CacheTable.checkBudget}: a new cache for an owner's target (not when one is published or being built). */
  readonly budget: MemoryBudget | undefined;
  readonly buildTimeoutMs: number;
  readonly gc: { readonly initialDelayMs: number; readonly maxDelayMs: number; readonly graceMs: number };
  readonly logger: Logger;
  readonly clock: Clock;
}

/**
 * One cache per key (⟨connection, namespace scope, GVK, selection⟩), built once and published under a lock.
 *
 * Invariants (JavaScript interleaves only at `await`):
 * - `#caches` holds only published caches, each on a lease it owns (released when it is dropped);
 *   the hot path reads it without taking `#lock`.
 * - `#building` holds the single in-flight build per key; it is set before the build's first
 *   `await` and removed when the build settles, so concurrent callers share one build and a failed
 *   build is never remembered. A caller joins a build only after its own admission by the keeper.
 * - `#headed` counts, per key, callers that hold a build slot and are being admitted on their way
 *   to build it: while a key is in `#building` or `#headed`, further callers join and take no slot.
 *   A key leaves `#headed` when its count reaches 0, so it holds no zero.
 * - `#lock` serialises publishing, removing and swapping caches (double check under the lock).
 *   Nothing inside it awaits I/O: credentials, connections, discovery and the first LIST all happen
 *   before it is taken, so a hanging cluster never delays another.
 * - A cache is published only on a current cluster generation; a build that finds its generation
 *   replaced moves to the new one (up to {@link MAX_ATTEMPTS} times, then `ClusterChangedError`).
 * - A key is collected only when no owner uses it and it is not in the readers' holds
 *   (`HeldReaders`); its reader is forgotten when its cache is dropped and not replaced, and
 *   otherwise kept, so a reader reads whatever cache `#caches` holds under its key.
 * - `#lingering` holds each lease lent by {@link lend} until its timer fires or the table closes;
 *   no cache uses those leases.
 */
export class CacheTable {
  readonly #options: CacheTableOptions;
  readonly #lock = new Mutex();
  readonly #caches = new Map<CacheKey, CacheEntry>();
  readonly #building = new Map<CacheKey, Promise<Built>>();
  readonly #headed = new Map<CacheKey, number>();
  readonly #lingering = new Map<Timer, ClusterLease>();
  readonly #gc: GarbageCollector<CacheKey, CacheEntry>;
  readonly #root = new AbortController();

  constructor(options: CacheTableOptions) {
    this.#options = options;
    this.#gc = new GarbageCollector<CacheKey, CacheEntry>({
      host: {
        entry: (key) => this.#caches.get(key),
        used: (key) => this.#used(key),
        collect: (key, entry) => this.#collect(key, entry),
      },
      ...options.gc,
      clock: options.clock,
      logger: options.logger,
    });
  }

  /** Aborted by {@link close}. */
  get signal(): AbortSignal {
    return this.#root.signal;
  }

  /** The published cache under `key`. */
  get(key: CacheKey): CacheEntry | undefined {
    return this.#caches.get(key);
  }

  /** Whether a cache is published under `key`. */
  has(key: CacheKey): boolean {
    return this.#caches.has(key);
  }

  /** Every published cache. */
  entries(): IterableIterator<CacheEntry> {
    return this.#caches.values();
  }

  /** Keys whose users went away: their caches become eligible for collection after the grace period. */
  released(keys: readonly CacheKey[]): void {
    this.#gc.released(keys);
  }

  /**
   * The slow path: a build slot (FIFO, bounded by `maxConcurrentBuilds`), this caller's own
   * admission (a lease), then the single build of `key`, started with that lease or joined. The
   * slot is held until the build this caller started settles; a caller joining a build gives it
   * back at once, and one that finds the build already in flight takes no slot at all (joining
   * runs no setup, and must not queue behind other clusters' builds).
   */
  async admitAndBuild(
    ref: ClusterRef,
    ownerNamespace: string,
    identity: Identity | undefined,
    key: CacheKey,
    namespace: string,
    selection: Selection,
    gvk: GroupVersionKind,
    auto: boolean,
    signal: AbortSignal | undefined,
  ): Promise<Built> {
    // Joining a build in flight (or a caller headed for one) takes no slot; a free slot is taken
    // without an await (nor a timer).
    const joining = this.#building.has(key) || this.#headed.has(key);
    const release = joining ? undefined : this.#options.builds.tryAcquire() ?? await this.#buildSlot(signal);
    if (release !== undefined) this.#headed.set(key, (this.#headed.get(key) ?? 0) + 1);
    const arrived = (): void => {
      if (release === undefined) return;
      const left = (this.#headed.get(key) ?? 1) - 1;
      if (left > 0) this.#headed.set(key, left);
      else this.#headed.delete(key);
    };
    let building: Promise<Built> | undefined;
    try {
      let lease: ClusterLease;
      try {
        lease = await this.acquire(ref, ownerNamespace, identity, signal);
      } finally {
        arrived();
      }
      building = this.#building.get(key);
      if (building === undefined && release === undefined) {
        // The build this caller came to join settled (or its caller was refused) while this one was
        // admitted: take its cache, or start one in turn like any other caller.
        lease.release();
        return this.#caches.get(key) ?? await this.admitAndBuild(ref, ownerNamespace, identity, key, namespace, selection, gvk, auto, signal);
      }
      if (building === undefined) {
        // The build takes over the lease: a published cache keeps it, a failed build releases it.
        const reacquire = (signal: AbortSignal): Promise<ClusterLease> => this.acquire(ref, ownerNamespace, identity, signal);
        const started = this.#build(key, namespace, selection, gvk, auto, lease, reacquire);
        building = started;
        this.#building.set(key, started);
        const forget = (): void => {
          if (this.#building.get(key) === started) this.#building.delete(key);
          release?.();
        };
        started.then(forget, forget);
      } else {
        lease.release();
        release?.();
      }
    } catch (err) {
      release?.();
      throw err;
    }
    return raceAbort(building, signal);
  }

  /**
   * Throws `MemoryBudgetExceededError` when the memory budget is exceeded and a call for `key` now
   * would start a new cache: none is published under it, built or headed for. Synchronous: call it
   * right before {@link admitAndBuild}, with no `await` in between.
   */
  checkBudget(key: CacheKey, cluster: string, gvk: GroupVersionKind): void {
    const budget = this.#options.budget;
    if (budget === undefined || this.#caches.has(key) || this.#building.has(key) || this.#headed.has(key)) return;
    budget.check(cluster, gvk);
  }

  /** A lease for this caller, admitted for its own namespace and identity, within the build deadline. */
  async acquire(ref: ClusterRef, ownerNamespace: string, identity: Identity | undefined, signal: AbortSignal | undefined): Promise<ClusterLease> {
    const { clusters, clock, buildTimeoutMs } = this.#options;
    const { controller, dispose } = childController(this.#root.signal);
    const deadline = clock.setTimer(buildTimeoutMs, () => {
      controller.abort(new TransportError({ cluster: clusters.connectionKey(ref, ownerNamespace, identity) }, `connecting took longer than ${buildTimeoutMs} ms`));
    });
    // The caller's signal ends this caller's wait too (one fan-out listener per signal, not one per call).
    const detachSignal = signal === undefined ? () => undefined : onAbort(signal, () => { controller.abort(abortReason(signal)); });
    try {
      return await clusters.acquire(ref, { ownerNamespace, identity, signal: controller.signal });
    } catch (err) {
      // The registry's own abort is a close(), whatever the keeper says about it.
      if (this.#root.signal.aborted) throw new ClosedError('registry');
      throw err;
    } finally {
      detachSignal();
      deadline.cancel();
      dispose();
    }
  }

  /** Holds `lease` for a while for the caller's writes (the cluster's caches usually hold it anyway), then lets it go. */
  lend(lease: ClusterLease): void {
    const linger = this.#options.clock.setTimer(LEND_MS, () => {
      this.#lingering.delete(linger);
      lease.release();
    });
    this.#lingering.set(linger, lease);
  }

  /**
   * Removes `entry` if it is still the one published under its key, then drops it (owners in
   * `wake` requeued). Resolves true when it removed it.
   */
  async remove(entry: CacheEntry, wake: () => ReadonlySet<OwnerKey>): Promise<boolean> {
    const removed = await this.#lock.runExclusive(() => {
      if (this.#caches.get(entry.key) !== entry) return false;
      this.#caches.delete(entry.key);
      return true;
    });
    if (removed) await this.#drop([entry], wake());
    return removed;
  }

  /**
   * One step under the lock: each of `stale` still published is replaced by its rebuilt cache
   * (when there is one on a current generation) or removed; the old ones are then dropped and the
   * owners of every key touched requeued. Rebuilt caches not published are stopped and released.
   */
  async swap(stale: readonly CacheEntry[], rebuilt: Map<CacheEntry, CacheEntry>): Promise<void> {
    const { gone, wake } = await this.#lock.runExclusive(() => {
      const removed: CacheEntry[] = [];
      const owners = new Set<OwnerKey>();
      for (const old of stale) {
        if (this.#caches.get(old.key) !== old) continue;
        removed.push(old);
        for (const owner of this.#options.index.ownersOfCache(old.key)) owners.add(owner);
        const fresh = rebuilt.get(old);
        if (fresh !== undefined && !this.#root.signal.aborted && fresh.lease.current) {
          this.#publish(fresh);
          rebuilt.delete(old);
        } else {
          this.#caches.delete(old.key);
        }
      }
      return { gone: removed, wake: owners };
    });
    // Whatever was not published (removed or swapped meanwhile) is ours to release.
    for (const fresh of rebuilt.values()) await this.discard(fresh);
    await this.#drop(gone, wake);
  }

  /** Stops and releases a cache that was never published. */
  async discard(entry: CacheEntry): Promise<void> {
    detach(entry);
    await entry.informer.stop();
    entry.lease.release();
  }

  /** Stops every cache and lent lease; later builds fail with `ClosedError`. Call once. */
  async close(): Promise<void> {
    this.#root.abort(new ClosedError('registry'));
    await this.#gc.shutDown();
    // Builds in flight see the abort; wait for them so none publishes after this.
    await Promise.allSettled([...this.#building.values()]);
    const entries = await this.#lock.runExclusive(() => {
      const all = [...this.#caches.values()];
      this.#caches.clear();
      return all;
    });
    for (const entry of entries) detach(entry);
    await Promise.all(entries.map((entry) => entry.informer.stop()));
    for (const entry of entries) entry.lease.release();
    for (const [timer, lease] of this.#lingering) {
      timer.cancel();
      lease.release();
    }
    this.#lingering.clear();
  }

  /**
   * Waits for a build slot, in order of arrival, for as long as the caller's signal and the
   * registry's life allow. No deadline of its own: every build ahead holds its slot for at most
   * `buildTimeoutMs`, so the turn comes, and a fleet asked for at once is built in order instead
   * of failing at the back of the queue (`buildTimeoutMs` bounds each build once it has its slot).
   */
  async #buildSlot(signal: AbortSignal | undefined): Promise<() => void> {
    try {
      return await this.#options.builds.acquire(this.#root.signal, signal);
    } catch (err) {
      if (this.#root.signal.aborted) throw new ClosedError('registry');
      throw err;
    }
  }

  async #build(
    key: CacheKey,
    namespace: string,
    selection: Selection,
    gvk: GroupVersionKind,
    auto: boolean,
    first: ClusterLease,
    reacquire: (signal: AbortSignal) => Promise<ClusterLease>,
  ): Promise<Built> {
    const { clock, buildTimeoutMs, scopes, wiring } = this.#options;
    // Bounded on the injected clock, and released when the build settles: close() leaves no timer.
    const { controller, dispose } = childController(this.#root.signal);
    const deadline = clock.setTimer(buildTimeoutMs, () => {
      controller.abort(new TransportError({ cluster: first.key, gvk }, `building the cache took longer than ${buildTimeoutMs} ms`));
    });
    let lease: ClusterLease | undefined = first;
    try {
      for (let attempt = 1; ; attempt++) {
        if (!lease.current) {
          // Rotated (or dropped) under us: build on the cluster as it is now, admitted afresh
          // (a dropped cluster's Secret is gone, and the provider says so).
          lease.release();
          lease = undefined;
          lease = await reacquire(controller.signal);
        }
        if (auto && namespace === '' && scopes.isNarrowed(lease.key, gvk)) return 'scoped-down';
        const info = await lease.connection.resolve(gvk, controller.signal);
        const entry = wiring.create(key, lease, namespace, selection, gvk, auto && info.namespaced, lease.connection.resourceClient(info));
        const published = await this.#lock.runExclusive((): CacheEntry | undefined => {
          if (this.#root.signal.aborted) throw new ClosedError('registry');
          const existing = this.#caches.get(key);
          // Published meanwhile (a rotation swaps it if it is on an old generation).
          if (existing !== undefined) return existing;
          if (lease?.current !== true) return undefined;
          this.#publish(entry);
          return entry;
        });
        if (published === entry) {
          lease = undefined; // the cache holds it now
          return entry;
        }
        detach(entry);
        await entry.informer.stop();
        if (published !== undefined) return published;
        if (attempt >= MAX_ATTEMPTS) throw new ClusterChangedError(first.key, `the cluster's credentials changed ${attempt} times while a cache was being built`);
      }
    } catch (err) {
      if (this.#root.signal.aborted) throw new ClosedError('registry');
      throw err;
    } finally {
      lease?.release();
      deadline.cancel();
      dispose();
    }
  }

  /** Under `#lock`: makes a built cache visible, starts it on its cluster's signal, schedules its first GC check. */
  #publish(entry: CacheEntry): void {
    this.#caches.set(entry.key, entry);
    entry.informer.start(entry.lease.signal);
    this.#gc.published(entry.key, entry);
  }

  /** Drops removed caches: their informers are stopped and leases released. Owners in `wake` are requeued. */
  async #drop(entries: readonly CacheEntry[], wake: ReadonlySet<OwnerKey>): Promise<void> {
    for (const entry of entries) {
      detach(entry);
      // Keys not rebuilt are gone for good (as after GC): their readers need not be kept.
      if (!this.#caches.has(entry.key)) this.#options.readers.forget(entry.key);
    }
    await Promise.all(entries.map((entry) => entry.informer.stop()));
    for (const entry of entries) entry.lease.release();
    for (const owner of wake) this.#options.queue.add(owner);
  }

  /** Whether an owner or a held reader uses the cache under `key`. */
  #used(key: CacheKey): boolean {
    return this.#options.index.ownerCount(key) > 0 || this.#options.readers.isHeld(key);
  }

  /** The GC's removal: double-checked under the lock. */
  async #collect(key: CacheKey, entry: CacheEntry): Promise<boolean> {
    const removed = await this.#lock.runExclusive(() => {
      // Double check: an owner may have come back, or the cache been swapped, since the check began.
      if (this.#caches.get(key) !== entry || this.#used(key)) return false;
      this.#caches.delete(key);
      return true;
    });
    if (!removed) return false;
    this.#options.logger.info('stopping unused cache', { cluster: entry.lease.key, gvk: describeCacheKey(entry.lease.key, entry.gvk, entry.namespace, entry.selection) });
    await this.#drop([entry], new Set());
    return true;
  }
}
