// The Sharder: membership, assignment and fences run together, and what a controller asks of them.
import { ConcurrencyLimiter } from '../../transport/index.ts';
import { nonEmptyString, noopLogger, onAbort, positiveInteger, realClock, sleep, toError, type Clock, type Logger, type Timer } from '../../util/index.ts';
import { JITTER_FACTOR, leaseTimings, type LeaseTimingOptions } from '../lease-timings.ts';
import { FenceWriter, type FenceLease } from './fences.ts';
import { HeldFence } from './held.ts';
import { OwnPeerLease, PeerView, type PeerLease } from './membership.ts';
import { checkGroup } from './names.ts';
import { rendezvousOwner, type WeightedPeer } from './rendezvous.ts';
import type { ShardLeaseStore } from './store.ts';
import { TakeLimiter } from './take-limiter.ts';
import { UnownedTracker, type UnownedKey } from './unowned.ts';

/** Keys gained (fence taken: reconcile them now) and lost (this replica stopped acting for them). */
export interface ShardChange {
  readonly gained: readonly string[];
  readonly lost: readonly string[];
}

/** What a controller needs of sharding. */
export interface ShardOwnership {
  /** True while this replica may act for `key` (assigned, fence held, peer Lease fresh). No I/O. */
  owns(key: string): boolean;
  /**
   * Runs `fn` while this replica owns `key`; resolves { owned: false } without calling it otherwise.
   * `signal` aborts when ownership ends (key moved, fence lost, peer Lease not renewed in time). A key
   * moving away has its fence released only after every whileOwned(key) in flight has settled.
   */
  whileOwned<T>(key: string, fn: (signal: AbortSignal) => Promise<T>): Promise<{ readonly owned: true; readonly value: T } | { readonly owned: false }>;
  /** Told of keys gained (fence taken: reconcile them now) and lost (stopped acting). Returns unsubscribe. */
  subscribe(listener: (change: ShardChange) => void): () => void;
}

/** A peer in {@link ShardStatus}. */
export interface ShardPeerStatus {
  readonly identity: string;
  readonly weight: number;
  /** Its peer Lease changed within its lease duration, as this replica saw it (for itself: renewed within renewDeadline). */
  readonly live: boolean;
  readonly self: boolean;
}

/** A Sharder's view, for metrics and the dashboard. */
export interface ShardStatus {
  readonly identity: string;
  /** This replica's peer Lease has been written (it takes part in the assignment). */
  readonly joined: boolean;
  readonly peers: readonly ShardPeerStatus[];
  /** Keys this replica acts for now, sorted. */
  readonly owned: readonly string[];
  /** Keys in handoff here: assigned to this replica but not fenced yet, or leaving (work settling, fence being released). */
  readonly handoff: readonly string[];
  /** Live keys no live replica acts for, group-wide, longest first. */
  readonly unowned: readonly UnownedKey[];
  /** The no-orphan bound this replica checks now (lease duration + 3 × 1.2 retry periods + the rate limit's delay for the live keys). */
  readonly boundMs: number;
  /** Unowned keys past `boundMs`: each is an error. */
  readonly orphaned: readonly string[];
}

/** A key past the no-orphan bound with no acting owner, in a {@link ShardOrphans} report. */
export interface OrphanedKey {
  readonly key: string;
  /** Since when no live replica acted for it, as this replica saw it (its clock, ms since the epoch). */
  readonly since: number;
  /** The bound it crossed (`ShardStatus.boundMs` when it was reported), ms. */
  readonly boundMs: number;
}

/**
 * What {@link Sharder.subscribeOrphans} listeners hear after each read of the group while any key
 * is orphaned, and once more when the last one recovered. Level-triggered: a consumer whose write
 * failed tries again at the next report.
 */
export interface ShardOrphans {
  /** Every orphaned key, group-wide as this replica sees it, longest first. */
  readonly orphaned: readonly OrphanedKey[];
  /**
   * The orphaned keys this replica is the one live replica to report to users (a condition, an
   * Event): each key's runner-up, the live peer rendezvous hashing names once the key's assignee
   * is left out (the assignee itself when it is the only live peer). Not the assignee when there
   * is another: it is the replica most likely failing to act. Every replica computes the same
   * runner-up from the same peers, so each orphan has one reporter; empty while this replica is
   * not fresh.
   */
  readonly reported: readonly OrphanedKey[];
  /** Keys orphaned at the last report and not any more (owned again, or gone). */
  readonly recovered: readonly string[];
}

/** How {@link Sharder.run} ended. */
export type ShardOutcome =
  /** Stopped by its signal: fences released after in-flight work settled, then the peer Lease deleted. */
  | 'released'
  /** The peer Lease could not be renewed within renewDeadline: this replica stopped acting; others take its keys after leaseDuration. */
  | 'lost';

/** Options of {@link Sharder}. Durations in milliseconds; leader election's rules apply: lease > renew deadline > 1.2 × retry. */
export interface SharderOptions extends LeaseTimingOptions {
  /** The group's Leases. Required. */
  readonly leases: ShardLeaseStore;
  /**
   * Where this replica's own peer Lease is written: a store on a connection of its own, so that
   * renewals never queue behind a burst of fence writes (hundreds of releases when a replica joins)
   * and miss the renew deadline. Default `leases`.
   */
  readonly heartbeat?: ShardLeaseStore | undefined;
  /** The shard group (a DNS label of at most 40 characters). Required. */
  readonly group: string;
  /** This replica's identity, unique in the group (`hostname_uuid`). Required. */
  readonly identity: string;
  /** This replica's share relative to the others': a positive integer. Default 1. */
  readonly weight?: number | undefined;
  /** Every live key, group-wide (not only this replica's); read on each tick and after {@link Sharder.keysChanged}. Required. */
  readonly keys: () => Iterable<string>;
  /**
   * Free fences (keys new, or released by a live replica: a join, a rolling restart, a cold start)
   * this replica takes per second at most, so that the first replica up does not take every key
   * only to hand most of them on as the others join (the cold-start stampede). Default 20.
   */
  readonly maxFenceTakesPerSecond?: number | undefined;
  /** Free fences taken at once before the rate applies. Default 50. */
  readonly fenceTakeBurst?: number | undefined;
  /**
   * Fences of a peer that died while this replica was in the group (its peer Lease seen renewed,
   * then not for a lease duration) taken per second at most: nobody acts for those keys, so they
   * are taken faster than keys moving between live replicas, and the survivors' assignment is
   * stable, so nothing taken is handed on again. A holder never seen renewed (dead before this
   * replica joined, as after a whole Deployment crashed) is taken at the rate of free fences.
   * Default 100.
   */
  readonly maxRecoveryTakesPerSecond?: number | undefined;
  /** Recovery takes at once before their rate applies. Default 250 (a dead replica's share at ~1,000 keys over 4). */
  readonly recoveryTakeBurst?: number | undefined;
  /** Default: discards everything. */
  readonly logger?: Logger | undefined;
  /** Default: the wall clock. */
  readonly clock?: Clock | undefined;
  /** Jitter source in [0, 1). Default Math.random. */
  readonly random?: (() => number) | undefined;
}

/** Fence DELETEs in flight at once (a join can move hundreds of keys away from one replica). */
const RELEASES_AT_ONCE = 8;
/**
 * Fence writes of takes in flight at once: a recovery burst of hundreds is pipelined rather than
 * sent at once (an API server admits about 200 mutating requests in flight by default).
 */
const TAKES_AT_ONCE = 32;
/** Attempts at each fence's release on a clean stop. */
const RELEASE_ROUNDS = 3;

/** A few keys for a log line. */
function sample(keys: readonly string[]): string {
  return keys.length <= 10 ? keys.join(', ') : `${keys.slice(0, 10).join(', ')} and ${keys.length - 10} more`;
}

/**
 * Shards keys over the replicas of a group on Kubernetes Leases (see this folder's index.ts for
 * the bound and the safety argument). `run(signal)` joins, then two loops run until it stops: one
 * renews this replica's peer Lease every retry period, the other reads the group (one LIST), moves
 * to the assignment of the live peers (weighted rendezvous hashing), releases the fences of keys
 * that moved away and takes those of keys that moved here. The constructor does no I/O.
 *
 * Invariants: `#held` has an entry for exactly the keys whose fence our last write made ours and
 * that we have neither released nor seen taken (its `leaving` entries are being released);
 * `#owners` is the assignment of the peers named by `#peersSignature`, for keys of `#keys` only.
 * One `run` at a time.
 */
export class Sharder implements ShardOwnership {
  readonly identity: string;
  readonly #store: ShardLeaseStore;
  readonly #weight: number;
  readonly #leaseDurationMs: number;
  readonly #renewDeadlineMs: number;
  readonly #retryPeriodMs: number;
  readonly #keysOf: () => Iterable<string>;
  readonly #logger: Logger;
  readonly #clock: Clock;
  readonly #random: () => number;
  readonly #self: OwnPeerLease;
  readonly #view: PeerView;
  readonly #fences: FenceWriter;
  /** Takes of free fences. */
  readonly #limiter: TakeLimiter;
  /** Takes of fences whose holder died while we were in the group. */
  readonly #recoveryLimiter: TakeLimiter;
  readonly #takeSlots = new ConcurrencyLimiter({ maxConcurrent: TAKES_AT_ONCE, what: 'shard fence takes' });
  readonly #unowned = new UnownedTracker();
  readonly #held = new Map<string, HeldFence>();
  readonly #listeners = new Set<(change: ShardChange) => void>();
  readonly #orphanListeners = new Set<(orphans: ShardOrphans) => void>();
  /** The keys of the last orphan report (so the next one names those recovered). */
  #orphanedBefore: ReadonlySet<string> = new Set();
  /** Releases in flight (each waits for its key's work to settle); `run` awaits them before resolving. */
  readonly #releases = new Set<Promise<void>>();
  /** Fence DELETEs at once: a mass handoff must not flood the connection the group is read on. */
  readonly #releaseSlots = new ConcurrencyLimiter({ maxConcurrent: RELEASES_AT_ONCE, what: 'shard fence releases' });
  #keys: ReadonlySet<string> = new Set();
  #peers: readonly WeightedPeer[] = [];
  #peersSignature = '';
  #owners = new Map<string, string | undefined>();
  /** When the last successful renewal of our peer Lease started (our clock); undefined until joined. */
  #renewedAt: number | undefined;
  #expiry: Timer | undefined;
  /** Set once the renew deadline passed: this run acts for nothing any more. */
  #expired = false;
  #running = false;
  /** The run's inner controller: aborted by the caller's signal or by expiry. */
  #inner: AbortController | undefined;
  #wake: (() => void) | undefined;
  #nudged = false;
  #gained: string[] = [];
  #lost: string[] = [];

  constructor(options: SharderOptions) {
    const leases: unknown = options.leases;
    if (typeof leases !== 'object' || leases === null || typeof (leases as Partial<ShardLeaseStore>).list !== 'function') throw new TypeError('Sharder option leases must be a ShardLeaseStore');
    const group = checkGroup(options.group);
    nonEmptyString('Sharder', 'identity', options.identity);
    if (typeof options.keys !== 'function') throw new TypeError('Sharder option keys must be a function returning the live keys');
    const weight = positiveInteger('Sharder', 'weight', options.weight ?? 1);
    const { leaseDurationMs: lease, renewDeadlineMs: renew, retryPeriodMs: retry } = leaseTimings('Sharder', options);
    this.identity = options.identity;
    this.#store = options.leases;
    this.#weight = weight;
    this.#leaseDurationMs = lease;
    this.#renewDeadlineMs = renew;
    this.#retryPeriodMs = retry;
    this.#keysOf = options.keys;
    this.#logger = (options.logger ?? noopLogger).child({ shardGroup: options.leases.description, identity: options.identity });
    this.#clock = options.clock ?? realClock;
    this.#random = options.random ?? Math.random;
    this.#self = new OwnPeerLease({ store: options.heartbeat ?? options.leases, group, identity: options.identity, weight, leaseDurationMs: lease, clock: this.#clock });
    this.#view = new PeerView(group, lease);
    this.#fences = new FenceWriter({ store: options.leases, group, identity: options.identity, leaseDurationMs: lease, clock: this.#clock });
    this.#limiter = new TakeLimiter({ perSecond: options.maxFenceTakesPerSecond ?? 20, burst: options.fenceTakeBurst ?? 50, rateOption: 'maxFenceTakesPerSecond', burstOption: 'fenceTakeBurst' }, this.#clock);
    this.#recoveryLimiter = new TakeLimiter({ perSecond: options.maxRecoveryTakesPerSecond ?? 100, burst: options.recoveryTakeBurst ?? 250, rateOption: 'maxRecoveryTakesPerSecond', burstOption: 'recoveryTakeBurst' }, this.#clock);
  }

  /** True once this replica's peer Lease has been written (readiness). */
  get joined(): boolean {
    return this.#renewedAt !== undefined;
  }

  /** Read through a method: `#expired` changes across awaits, which flow analysis does not see. */
  #hasExpired(): boolean {
    return this.#expired;
  }

  /** Our peer Lease was renewed by a request that started less than renewDeadline ago. */
  #fresh(): boolean {
    return this.#running && !this.#expired && this.#renewedAt !== undefined && this.#clock.now() - this.#renewedAt < this.#renewDeadlineMs;
  }

  #ownerOf(key: string): string | undefined {
    if (this.#owners.has(key)) return this.#owners.get(key);
    const owner = rendezvousOwner(key, this.#peers);
    if (this.#keys.has(key)) this.#owners.set(key, owner);
    return owner;
  }

  owns(key: string): boolean {
    const held = this.#held.get(key);
    return held !== undefined && !held.leaving && this.#fresh() && this.#ownerOf(key) === this.identity;
  }

  async whileOwned<T>(key: string, fn: (signal: AbortSignal) => Promise<T>): Promise<{ readonly owned: true; readonly value: T } | { readonly owned: false }> {
    const held = this.#held.get(key);
    if (held === undefined || !this.owns(key)) return { owned: false };
    held.enter();
    try {
      return { owned: true, value: await fn(held.ownership.signal) };
    } finally {
      held.exit();
    }
  }

  subscribe(listener: (change: ShardChange) => void): () => void {
    if (typeof listener !== 'function') throw new TypeError('Sharder.subscribe: listener must be a function');
    // A wrapper, so subscribing the same function twice is two subscriptions.
    const entry = (change: ShardChange): void => { listener(change); };
    this.#listeners.add(entry);
    return () => { this.#listeners.delete(entry); };
  }

  /**
   * Told, after each read of the group, of keys past the no-orphan bound: every one, the ones this
   * replica reports to users, and those recovered since the last report. Returns unsubscribe.
   */
  subscribeOrphans(listener: (orphans: ShardOrphans) => void): () => void {
    if (typeof listener !== 'function') throw new TypeError('Sharder.subscribeOrphans: listener must be a function');
    const entry = (orphans: ShardOrphans): void => { listener(orphans); };
    this.#orphanListeners.add(entry);
    return () => { this.#orphanListeners.delete(entry); };
  }

  /** Re-read the keys now rather than at the next tick (a key appeared or vanished). */
  keysChanged(): void {
    this.#nudged = true;
    this.#wake?.();
  }

  status(): ShardStatus {
    const now = this.#clock.now();
    const fresh = this.#fresh();
    const peers: ShardPeerStatus[] = this.#view.peers(now)
      .filter((p) => p.identity !== this.identity)
      .map((p) => ({ ...p, self: false }));
    if (this.#renewedAt !== undefined) peers.push({ identity: this.identity, weight: this.#weight, live: fresh, self: true });
    peers.sort((a, b) => (a.identity < b.identity ? -1 : a.identity > b.identity ? 1 : 0));
    const owned = [...this.#held.keys()].filter((k) => this.owns(k)).sort();
    const handoff = new Set([...this.#keys].filter((k) => this.#ownerOf(k) === this.identity && !this.owns(k)));
    for (const [key, held] of this.#held) if (held.leaving) handoff.add(key);
    const boundMs = this.#boundMs();
    const unowned = this.#unowned.unowned(now);
    return { identity: this.identity, joined: this.joined, peers, owned, handoff: [...handoff].sort(), unowned, boundMs, orphaned: unowned.filter((u) => u.forMs > boundMs).map((u) => u.key) };
  }

  /**
   * Measured from the holder's last renewal as this replica saw it: a lease duration for it to
   * lapse, then up to a retry period (with jitter) until the assignee reads the group, one for its
   * write to land, and one until this replica reads the group again and sees it.
   */
  #boundMs(): number {
    return this.#leaseDurationMs + 3 * this.#retryPeriodMs * (1 + JITTER_FACTOR) + this.#limiter.delayMs(this.#keys.size);
  }

  /**
   * Joins the group and shards until `signal` aborts (→ 'released': ownership ends, fences are
   * released once the work under them settled, then the peer Lease is deleted) or the peer Lease
   * could not be renewed within renewDeadline (→ 'lost': nothing is released; others take the keys
   * after leaseDuration). Never rejects.
   */
  async run(signal: AbortSignal): Promise<ShardOutcome> {
    if (this.#running) throw new Error('Sharder.run is already running');
    this.#running = true;
    this.#expired = false;
    const inner = new AbortController();
    this.#inner = inner;
    const detach = onAbort(signal, () => { inner.abort(signal.reason); });
    // The peer Lease is renewed until the fences are released on a clean stop (hundreds of
    // releases can take longer than the renew deadline), not only until `signal` aborts.
    const beating = new AbortController();
    const renewing = this.#renewLoop(beating.signal);
    try {
      await this.#reconcileLoop(inner.signal);
      if (this.#hasExpired()) {
        await this.#settleReleases();
        return 'lost';
      }
      await this.#releaseAll();
      if (this.#hasExpired()) return 'lost';
      beating.abort();
      await renewing;
      await this.#leaveGroup();
      return 'released';
    } finally {
      beating.abort();
      await renewing;
      detach();
      this.#expiry?.cancel();
      this.#running = false;
      this.#inner = undefined;
      this.#renewedAt = undefined;
      this.#held.clear();
    }
  }

  /** A request on its own deadline: never cut by the run's signal, so a write's outcome is known. */
  async #bounded<T>(ms: number, op: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const controller = new AbortController();
    const timer = this.#clock.setTimer(ms, () => { controller.abort(new Error(`shard Lease request timed out after ${Math.round(ms)} ms`)); });
    try {
      return await op(controller.signal);
    } finally {
      timer.cancel();
    }
  }

  async #renewLoop(signal: AbortSignal): Promise<void> {
    while (!signal.aborted && !this.#expired) {
      const started = this.#clock.now();
      const budget = this.#renewedAt === undefined ? this.#renewDeadlineMs : this.#renewedAt + this.#renewDeadlineMs - started;
      if (budget <= 0) {
        this.#expire();
        return;
      }
      try {
        await this.#bounded(budget, (s) => this.#self.renew(s));
        if (this.#hasExpired()) return;
        const first = this.#renewedAt === undefined;
        // Measured from the request's START: others saw the write later, so they count our
        // lease from later still, and we stop acting (renewDeadline) before they take (leaseDuration).
        this.#renewedAt = started;
        this.#armExpiry(started);
        if (first) {
          this.#logger.info('joined the shard group', { weight: this.#weight });
          this.keysChanged();
        }
      } catch (err) {
        if (this.#renewedAt !== undefined && this.#clock.now() - this.#renewedAt >= this.#renewDeadlineMs) {
          this.#expire();
          return;
        }
        this.#logger.warn(`could not renew the peer Lease; retrying: ${toError(err).message}`, { error: toError(err) });
      }
      try {
        await sleep(this.#retryPeriodMs * (1 + JITTER_FACTOR * this.#random()), signal, this.#clock);
      } catch {
        return;
      }
    }
  }

  /** Ends every ownership the moment the renew deadline passes, not at the next tick. */
  #armExpiry(renewedAt: number): void {
    this.#expiry?.cancel();
    this.#expiry = this.#clock.setTimer(renewedAt + this.#renewDeadlineMs - this.#clock.now(), () => { this.#expire(); });
  }

  /** The peer Lease went unrenewed for renewDeadline: stop acting for everything, end the run. */
  #expire(): void {
    if (this.#expired || !this.#running) return;
    this.#expired = true;
    this.#expiry?.cancel();
    const reason = new Error(`the peer Lease was not renewed within ${this.#renewDeadlineMs} ms`);
    for (const [key, held] of this.#held) {
      if (held.leaving) continue; // its release runs on: deleting our own fence is always safe
      held.leave(reason);
      this.#held.delete(key);
      this.#lost.push(key);
    }
    this.#logger.error(`lost the shard group: ${reason.message}; stopped acting for every key`);
    this.#flush();
    this.#inner?.abort(reason);
  }

  async #reconcileLoop(signal: AbortSignal): Promise<void> {
    while (await this.#pause(signal)) {
      if (this.#renewedAt === undefined) continue;
      try {
        await this.#tick();
      } catch (err) {
        this.#logger.error(`shard tick failed: ${toError(err).message}`, { error: toError(err) });
      }
    }
  }

  /** Waits a retry period, or until nudged; false once `signal` aborted. */
  #pause(signal: AbortSignal): Promise<boolean> {
    if (signal.aborted) return Promise.resolve(false);
    if (this.#nudged) {
      this.#nudged = false;
      return Promise.resolve(true);
    }
    return new Promise((resolve) => {
      let detach = (): void => undefined;
      const done = (): void => {
        timer.cancel();
        detach();
        this.#wake = undefined;
        this.#nudged = false;
        resolve(!signal.aborted);
      };
      const timer = this.#clock.setTimer(this.#retryPeriodMs * (1 + JITTER_FACTOR * this.#random()), done);
      detach = onAbort(signal, done);
      this.#wake = done;
    });
  }

  /** One read of the group and the moves it calls for. */
  async #tick(): Promise<void> {
    let leases;
    try {
      leases = await this.#bounded(this.#renewDeadlineMs, (s) => this.#store.list(s));
    } catch (err) {
      this.#logger.warn(`could not read the shard group; retrying: ${toError(err).message}`, { error: toError(err) });
      return;
    }
    if (this.#expired) return;
    const now = this.#clock.now();
    const peers: PeerLease[] = [];
    const fences = new Map<string, FenceLease>();
    for (const lease of leases) {
      if (lease.role === 'peer') peers.push(lease);
      else fences.set(lease.key, lease);
    }
    this.#self.adopt(peers.find((p) => p.name === this.#self.name));
    this.#view.observe(peers, now);
    this.#assign(now);
    this.#checkHeld(fences);
    await this.#take(fences, now);
    await this.#collectGarbage(fences, now);
    this.#account(fences, this.#clock.now());
    this.#flush();
  }

  /** The assignment of the live peers (ourselves while fresh) to the keys read now. */
  #assign(now: number): void {
    this.#keys = new Set(this.#keysOf());
    const live: WeightedPeer[] = this.#view.peers(now)
      .filter((p) => p.live && p.identity !== this.identity)
      .map((p) => ({ identity: p.identity, weight: p.weight }));
    if (this.#fresh()) live.push({ identity: this.identity, weight: this.#weight });
    live.sort((a, b) => (a.identity < b.identity ? -1 : 1));
    const signature = live.map((p) => `${p.identity}=${p.weight}`).join(',');
    if (signature !== this.#peersSignature) this.#logger.info('shard peers changed', { peers: signature });
    this.#peers = live;
    this.#peersSignature = signature;
    this.#owners = new Map();
  }

  /** Checks our fences against the listing: lost ones are dropped, moved ones released. */
  #checkHeld(fences: ReadonlyMap<string, FenceLease>): void {
    for (const [key, held] of this.#held) {
      const fence = fences.get(key);
      const ours = fence?.record.holderIdentity === this.identity;
      if (held.leaving) {
        if (held.releasing) continue;
        if (ours) this.#release(key, held); // the last release failed: again
        else this.#held.delete(key);
        continue;
      }
      if (!ours) {
        // Not while we are fresh, by the safety argument; seen only if the store was tampered with.
        this.#logger.error(`shard key ${key}: the fence was taken or deleted by someone else`, { key });
        held.leave(new Error(`shard key ${key}: the fence was taken or deleted by someone else`));
        this.#held.delete(key);
        this.#lost.push(key);
        continue;
      }
      held.resourceVersion = fence.resourceVersion;
      if (!this.#keys.has(key)) this.#leave(key, held, 'the key is gone');
      else if (this.#ownerOf(key) !== this.identity) this.#leave(key, held, 'the key moved to another replica');
    }
  }

  #leave(key: string, held: HeldFence, why: string): void {
    held.leave(new Error(`shard key ${key}: ${why}`));
    this.#lost.push(key);
    this.#release(key, held);
  }

  /** Deletes the fence once every whileOwned(key) in flight has settled. */
  #release(key: string, held: HeldFence): void {
    held.releasing = true;
    const done = (async (): Promise<void> => {
      await held.idle();
      try {
        await this.#releaseSlots.run(undefined, () => this.#bounded(this.#renewDeadlineMs, (s) => this.#fences.release(held, s)));
        if (this.#held.get(key) === held) this.#held.delete(key);
      } catch (err) {
        this.#logger.warn(`could not release the fence of ${key}; retrying: ${toError(err).message}`, { key, error: toError(err) });
      } finally {
        held.releasing = false;
      }
    })();
    this.#releases.add(done);
    void done.finally(() => { this.#releases.delete(done); });
  }

  async #settleReleases(): Promise<void> {
    while (this.#releases.size > 0) await Promise.all(this.#releases);
  }

  /**
   * Takes the fences of keys assigned here that are free or held by a peer that is not live, each
   * kind within its own rate (see `maxRecoveryTakesPerSecond`), at most TAKES_AT_ONCE in flight.
   */
  async #take(fences: Map<string, FenceLease>, now: number): Promise<void> {
    if (!this.#fresh()) return;
    const takes: Promise<void>[] = [];
    const spent = { free: false, recovery: false };
    for (const key of [...this.#keys].sort()) {
      if (spent.free && spent.recovery) break;
      if (this.#held.has(key) || this.#ownerOf(key) !== this.identity) continue;
      const fence = fences.get(key);
      const holder = fence?.record.holderIdentity ?? '';
      if (fence !== undefined && holder === this.identity) {
        // Ours already: a take whose answer was lost.
        this.#held.set(key, new HeldFence(fence.name, fence.resourceVersion));
        this.#gained.push(key);
        continue;
      }
      if (holder !== '' && this.#view.isLive(holder, now)) continue; // its holder lets go when it sees the move
      const recovery = holder !== '' && this.#view.sawRenewed(holder);
      if (recovery ? spent.recovery : spent.free) continue;
      if (!(recovery ? this.#recoveryLimiter : this.#limiter).tryTake()) {
        if (recovery) spent.recovery = true;
        else spent.free = true;
        continue;
      }
      takes.push(this.#takeSlots.run(undefined, () => this.#takeOne(key, fence, fences)));
    }
    await Promise.all(takes);
  }

  async #takeOne(key: string, fence: FenceLease | undefined, fences: Map<string, FenceLease>): Promise<void> {
    try {
      const taken = await this.#bounded(this.#renewDeadlineMs, (s) => this.#fences.take(key, fence, s));
      fences.set(key, taken);
      // Taken after the run ended: left for the others, who take it once our peer Lease lapses.
      if (this.#expired || !this.#running) return;
      this.#held.set(key, new HeldFence(taken.name, taken.resourceVersion));
      this.#gained.push(key);
      this.#logger.debug(fence === undefined ? 'took a free fence' : 'took the fence of a peer that is not live', { key, from: fence?.record.holderIdentity });
    } catch (err) {
      this.#logger.debug(`could not take the fence of ${key}: ${toError(err).message}`, { key });
    }
  }

  /**
   * Deletes peer Leases dead for 10 lease durations, fences of gone keys whose holder is not live,
   * and fences that name us but that this run does not hold and is not assigned (left by an earlier
   * run with the same identity: no one else would take them while we are live).
   */
  async #collectGarbage(fences: ReadonlyMap<string, FenceLease>, now: number): Promise<void> {
    const garbage: { readonly name: string; readonly resourceVersion: string }[] = this.#view.garbage(now).filter((p) => p.name !== this.#self.name);
    for (const fence of fences.values()) {
      const holder = fence.record.holderIdentity;
      if (holder === this.identity && !this.#held.has(fence.key) && (!this.#keys.has(fence.key) || this.#ownerOf(fence.key) !== this.identity)) {
        garbage.push(fence);
        continue;
      }
      if (this.#keys.has(fence.key) || holder === this.identity || (holder !== '' && this.#view.isLive(holder, now))) continue;
      // One collector per fence: the replica the key would go to.
      if (rendezvousOwner(fence.key, this.#peers) === this.identity) garbage.push(fence);
    }
    await Promise.all(garbage.map(async (lease) => {
      try {
        await this.#bounded(this.#renewDeadlineMs, (s) => this.#store.delete(lease.name, lease.resourceVersion, s));
        this.#logger.info('deleted an abandoned shard Lease', { lease: lease.name });
      } catch (err) {
        this.#logger.debug(`could not delete the abandoned shard Lease ${lease.name}: ${toError(err).message}`);
      }
    }));
  }

  /** Feeds the no-orphan check: keys whose fence is free, or held by a peer not acting. */
  #account(fences: ReadonlyMap<string, FenceLease>, now: number): void {
    const unowned = new Map<string, number | undefined>();
    for (const key of this.#keys) {
      const holder = fences.get(key)?.record.holderIdentity ?? '';
      const acting = holder === this.identity ? this.owns(key) : holder !== '' && this.#view.isLive(holder, now);
      if (!acting) unowned.set(key, holder === '' || holder === this.identity ? undefined : this.#view.lastChange(holder));
    }
    const boundMs = this.#boundMs();
    for (const key of this.#unowned.update(unowned, now, boundMs)) {
      this.#logger.error(`shard key ${key} has had no owner for longer than the bound (${boundMs} ms)`, { key, boundMs });
    }
    this.#reportOrphans(now, boundMs);
  }

  /** Tells the orphan listeners (see {@link ShardOrphans}); nothing while none is or was orphaned. */
  #reportOrphans(now: number, boundMs: number): void {
    const orphaned: OrphanedKey[] = this.#unowned.unowned(now).filter((u) => u.forMs > boundMs).map((u) => ({ key: u.key, since: now - u.forMs, boundMs }));
    const keys = new Set(orphaned.map((o) => o.key));
    const recovered = [...this.#orphanedBefore].filter((k) => !keys.has(k)).sort();
    this.#orphanedBefore = keys;
    if (orphaned.length === 0 && recovered.length === 0) return;
    const reported = this.#fresh() ? orphaned.filter((o) => this.#reporterOf(o.key) === this.identity) : [];
    const report: ShardOrphans = { orphaned, reported, recovered };
    for (const listener of this.#orphanListeners) {
      try {
        listener(report);
      } catch (err) {
        this.#logger.error(`a shard orphan listener failed: ${toError(err).message}`, { error: toError(err) });
      }
    }
  }

  /** Who reports `key` orphaned: its runner-up among the live peers (see {@link ShardOrphans.reported}). */
  #reporterOf(key: string): string | undefined {
    const assignee = this.#ownerOf(key);
    const others = this.#peers.filter((p) => p.identity !== assignee);
    return others.length === 0 ? assignee : rendezvousOwner(key, others);
  }

  /** Tells the subscribers what this tick changed. */
  #flush(): void {
    const gained = [...new Set(this.#gained)].filter((k) => this.owns(k)).sort();
    const lost = [...new Set(this.#lost)].sort();
    this.#gained = [];
    this.#lost = [];
    if (gained.length > 0) this.#logger.info(`gained ${gained.length} shard key(s): ${sample(gained)}`, { gained: gained.length });
    if (lost.length > 0) this.#logger.info(`lost ${lost.length} shard key(s): ${sample(lost)}`, { lost: lost.length });
    if (gained.length === 0 && lost.length === 0) return;
    const change: ShardChange = { gained, lost };
    for (const listener of this.#listeners) {
      try {
        listener(change);
      } catch (err) {
        this.#logger.error(`a shard change listener failed: ${toError(err).message}`, { error: toError(err) });
      }
    }
  }

  /** A clean stop: end every ownership, release every fence once its work settled, delete the peer Lease. */
  /** A clean stop, first half: lets go of every key and releases its fence once its work settled. */
  async #releaseAll(): Promise<void> {
    for (const [key, held] of this.#held) if (!held.leaving) this.#leave(key, held, 'this replica is stopping');
    this.#flush();
    await this.#settleReleases();
    // A release that failed (a timeout behind a queue) is tried again, as a tick would; what is
    // left after that lapses with our peer Lease, which we delete next.
    for (let round = 1; round < RELEASE_ROUNDS && this.#held.size > 0 && !this.#expired; round++) {
      for (const [key, held] of this.#held) if (!held.releasing) this.#release(key, held);
      await this.#settleReleases();
    }
  }

  /** A clean stop, second half: deletes the peer Lease, so the others see us gone at once. */
  async #leaveGroup(): Promise<void> {
    try {
      await this.#bounded(this.#renewDeadlineMs, (s) => this.#self.delete(s));
      this.#logger.info('left the shard group');
    } catch (err) {
      this.#logger.warn(`could not delete the peer Lease; it will lapse: ${toError(err).message}`, { error: toError(err) });
    }
  }
}
