// The fleet-snapshot accumulator: merges each query's cache events and own writes into its view.
import type { KubeObject } from '../transport/index.ts';
import { childController, ClosedError, nonNegativeNumber, noopLogger, onAbort, realClock, toError, type Clock, type Logger, type Timer } from '../util/index.ts';
import { checkQuery, type CheckPort } from './check.ts';
import { SnapshotClient } from './client.ts';
import { compareRv, sameState, superseded } from './coherence.ts';
import { Delivery } from './delivery.ts';
import { followQuery, type FollowPort } from './follow.ts';
import { keyOf, QueryState, type Entry, type Overlay } from './query.ts';
import type { SnapshotSource } from './source.ts';
import type { AccumulatorOptions, AccumulatorStatus, FleetSnapshot, QuerySet, QueryStatus, SnapshotQuery, SnapshotsOptions } from './types.ts';

/**
 * A fleet-snapshot accumulator (the kates Accumulator, across clusters): named queries over the
 * registry's shared caches, delivered as consistent snapshots through an async iterator.
 *
 * Guarantees:
 * - **Consistent bootstrap.** No snapshot until every query has completed its initial LIST. A
 *   query whose cluster cannot be reached holds the first snapshot back (its cache is retried
 *   with backoff); {@link status} says which query waits and why.
 * - **Coalescing.** A consumer receives at most one snapshot per `minIntervalMs`, and only when
 *   something changed for it: an object (net of changes undone meanwhile) or a query's freshness
 *   state. A snapshot is built when the consumer asks for it, so it always holds the newest state
 *   however slowly the consumer reads: intermediate states are dropped, never queued.
 * - **Fleet truth.** Each snapshot says per query whether its cluster is `live`, `stale` (watch
 *   down or not synced; objects as last seen) or `gone` (its cache was dropped: its objects were
 *   deleted with `finalStateUnknown`, and it is opened again with backoff, so a cluster that comes
 *   back is followed again). A check every `checkIntervalMs` finds these out.
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
 * query's `members`; a query whose freshness is `gone` shows no object (its cluster left; what it
 * lists on its return is shown once that list is complete). The query's own invariants are on
 * `QueryState`, the consumers' on `Delivery`.
 *
 * Parts: `query.ts` (one query's state), `follow.ts` (opening and following a query's cache),
 * `check.ts` (the periodic check of each cache's freshness and existence),
 * `coherence.ts` (when a cache state replaces an own write), `delivery.ts` (coalescing and deltas
 * per consumer), `client.ts` (the writes).
 */
export class FleetAccumulator<Q extends QuerySet> {
  readonly #queries: readonly QueryState[];
  readonly #byName: ReadonlyMap<string, QueryState>;
  readonly #logger: Logger;
  readonly #delivery: Delivery<Q>;
  /** How each query follows its cache (`follow.ts`). */
  readonly #follow: FollowPort;
  readonly #client: SnapshotClient<Q>;
  readonly #check: CheckPort;
  readonly #clock: Clock;
  readonly #checkIntervalMs: number;
  /** Armed while running: the next check of every query. */
  #checkTimer: Timer | undefined;
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
    const snapshotSource: SnapshotSource = options.source;
    this.#queries = names.map((name) => new QueryState(name, options.queries[name] as SnapshotQuery));
    this.#byName = new Map(this.#queries.map((q) => [q.name, q]));
    const minIntervalMs = nonNegativeNumber('accumulator', 'minIntervalMs', options.minIntervalMs ?? 100);
    const clock: Clock = options.clock ?? realClock;
    this.#clock = clock;
    const checkIntervalMs = options.checkIntervalMs ?? 1_000;
    if (!Number.isFinite(checkIntervalMs) || checkIntervalMs <= 0) throw new TypeError('accumulator option checkIntervalMs must be a positive number');
    this.#checkIntervalMs = checkIntervalMs;
    this.#logger = options.logger ?? noopLogger;
    this.#delivery = new Delivery<Q>({
      queries: this.#queries,
      version: () => this.#version,
      bootstrapped: () => this.#bootstrapped,
      closed: () => this.#state === 'closed',
    }, clock, minIntervalMs);
    this.#follow = {
      source: snapshotSource,
      backoff: { initialMs: 1_000, maxMs: 30_000, jitter: 0.5, ...options.openBackoff },
      clock,
      logger: this.#logger,
      onCache: (q, obj, present, finalStateUnknown) => { this.#onCache(q, obj, present, finalStateUnknown); },
      synced: (q) => { this.#synced(q); },
      left: (q) => { this.#left(q); },
    };
    this.#check = { freshnessChanged: () => { this.#delivery.notify(); } };
    this.#client = new SnapshotClient<Q>({
      source: snapshotSource,
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
    this.#runs = this.#queries.map((q) => followQuery(q, this.#follow, runSignal));
    this.#scheduleCheck(runSignal);
  }

  /** Arms the next check of every query's cache (freshness, and whether it was dropped). */
  #scheduleCheck(signal: AbortSignal): void {
    this.#checkTimer = this.#clock.setTimer(this.#checkIntervalMs, () => {
      if (this.#state !== 'running') return;
      const now = this.#clock.now();
      for (const q of this.#queries) checkQuery(q, now, this.#check, signal);
      this.#scheduleCheck(signal);
    });
  }

  /**
   * Snapshots as the consumer pulls them: the first once every query is listed, then one each time
   * something changed (an object, or a query's freshness state), at most one per `minIntervalMs`,
   * each built at the moment it is asked for. With `freshWithinMs`, only snapshots whose stale
   * queries were in sync that recently (see {@link SnapshotsOptions}). Starts the accumulator if
   * needed. Ends, without error, when the signal aborts or the accumulator closes. Each iterator is
   * its own consumer with its own deltas. Pass the options, or just the signal.
   */
  async *snapshots(options?: AbortSignal | SnapshotsOptions): AsyncGenerator<FleetSnapshot<Q>, void, undefined> {
    const { signal, freshWithinMs } = options instanceof AbortSignal ? { signal: options, freshWithinMs: undefined } : options ?? {};
    if (freshWithinMs !== undefined) nonNegativeNumber('snapshots', 'freshWithinMs', freshWithinMs);
    this.start();
    const consumer = this.#delivery.join(freshWithinMs);
    try {
      while (await this.#delivery.ready(consumer, signal)) yield this.#delivery.take(consumer);
    } finally {
      this.#delivery.leave(consumer);
    }
  }

  /** Where each query stands, and which ones the first snapshot waits for. */
  status(): AccumulatorStatus {
    const now = this.#clock.now();
    const queries = this.#queries.map((q): QueryStatus => ({
      name: q.name,
      phase: q.phase,
      lastError: q.phase === 'opening' ? q.openError : q.reader?.lastError,
      objects: q.members,
      resourceVersion: q.reader?.resourceVersion ?? '',
      pendingWrites: q.pendingWrites,
      freshness: { state: q.freshness, syncedAt: q.freshness === 'live' ? now : q.syncedAt },
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
    this.#checkTimer?.cancel();
    for (const q of this.#queries) q.left?.(undefined);
    this.#delivery.stopAll();
    await Promise.all(this.#runs);
    for (const q of this.#queries) {
      q.reader?.release();
      q.reader = undefined;
    }
    this.#disposeParent?.();
  }

  /**
   * A query completed a LIST: once every query has, the first snapshot is due. After that, a query
   * listed again after its cache was dropped is live again: its objects are shown now, all at once.
   */
  #synced(q: QueryState): void {
    if (this.#bootstrapped) {
      for (const [key, entry] of [...q.entries]) this.#refresh(q, key, entry, undefined, false);
      this.#delivery.notify();
    } else if (this.#queries.every((other) => other.phase === 'synced')) {
      this.#bootstrapped = true;
      this.#delivery.notify();
    }
  }

  /**
   * A query's cache was dropped (its cluster left the fleet): every object it shows goes, as a
   * delete with `finalStateUnknown` (the last state seen), and own writes not yet seen are dropped
   * with them. Listed again later, its objects come back as adds.
   */
  #left(q: QueryState): void {
    if (this.#state === 'closed') return;
    for (const [key, entry] of [...q.entries]) {
      if (entry.overlay !== undefined) {
        entry.overlay = undefined;
        q.pendingWrites--;
      }
      entry.cache = undefined;
      this.#refresh(q, key, entry, entry.view, true);
    }
    q.unseenDeletes.clear();
    q.freshness = 'gone'; // after the deletes: from now until listed again, its views stand still
    this.#delivery.notify();
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
    if (entry.overlay !== undefined && superseded(q, entry.overlay, entry.cache, present ? undefined : obj, finalStateUnknown)) {
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

  /** Re-evaluates one key after its cache state or overlay changed. */
  #refresh(q: QueryState, key: string, entry: Entry, deleted: KubeObject | undefined, finalStateUnknown: boolean): void {
    if (q.freshness === 'gone') {
      // Its cluster left and is being listed again: nothing is shown before that list is complete
      // (a partial one would be taken for the truth); `#synced` refreshes every key then.
      if (entry.cache === undefined && entry.overlay === undefined && entry.view === undefined) q.entries.delete(key);
      return;
    }
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
        this.#delivery.changed(q, key, before, gone, finalStateUnknown && deleted !== undefined);
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
}
