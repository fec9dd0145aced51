// Membership: this replica's own peer Lease (renewed, deleted on stop) and the peers it sees.
import { KubeApiError, type Clock } from '../../util/index.ts';
import { microTime } from '../leader.ts';
import { peerLeaseName } from './names.ts';
import type { WeightedPeer } from './rendezvous.ts';
import type { PeerLeaseDraft, ShardLease, ShardLeaseStore } from './store.ts';

/** A peer Lease as stored. */
export type PeerLease = Extract<ShardLease, { readonly role: 'peer' }>;

/** A peer Lease not renewed for this many of its lease durations is garbage anyone may delete. */
export const GARBAGE_AFTER_DURATIONS = 10;

/** A peer as this replica sees it. */
export interface PeerSighting {
  readonly lease: PeerLease;
  /** When (this replica's clock) it first saw `lease.resourceVersion`. */
  readonly since: number;
  /** This replica saw the Lease change (a renewal): its holder was alive while this replica was in the group. */
  readonly renewed: boolean;
}

/**
 * Peers as seen in the group's listings, timed on this replica's clock as LeaderElector times a
 * leader (so clocks need not agree across replicas, only run at the same rate).
 *
 * Invariant: `#seen` has exactly the peer Leases of the last listing, by name; `since` changes
 * only when the resourceVersion does.
 */
export class PeerView {
  readonly #group: string;
  readonly #fallbackMs: number;
  #seen = new Map<string, PeerSighting>();

  /** `fallbackMs`: the validity of a record whose own leaseDurationSeconds is unusable. */
  constructor(group: string, fallbackMs: number) {
    this.#group = group;
    this.#fallbackMs = fallbackMs;
  }

  observe(peers: readonly PeerLease[], now: number): void {
    const next = new Map<string, PeerSighting>();
    for (const lease of peers) {
      const before = this.#seen.get(lease.name);
      const same = before?.lease.resourceVersion === lease.resourceVersion;
      next.set(lease.name, { lease, since: same ? before.since : now, renewed: before !== undefined && (before.renewed || !same) });
    }
    this.#seen = next;
  }

  /** How long a record stays valid: the duration its holder wrote (a longer lease is not cut short by ours). */
  #durationMs(lease: PeerLease): number {
    const seconds = lease.record.leaseDurationSeconds;
    return Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : this.#fallbackMs;
  }

  #sighting(identity: string): PeerSighting | undefined {
    const seen = this.#seen.get(peerLeaseName(this.#group, identity));
    return seen?.lease.record.holderIdentity === identity ? seen : undefined;
  }

  #alive(seen: PeerSighting, now: number): boolean {
    return seen.lease.record.holderIdentity !== '' && now - seen.since < this.#durationMs(seen.lease);
  }

  /** True while `identity`'s peer Lease changed within its lease duration, as seen here. Absent: false. */
  isLive(identity: string, now: number): boolean {
    const seen = this.#sighting(identity);
    return seen !== undefined && this.#alive(seen, now);
  }

  /**
   * True when this replica saw `identity`'s peer Lease change: the peer was alive while this
   * replica was in the group (a peer that died before it joined never changes in its view).
   */
  sawRenewed(identity: string): boolean {
    return this.#sighting(identity)?.renewed === true;
  }

  /** When this replica last saw `identity`'s peer Lease change (undefined when it has none). */
  lastChange(identity: string): number | undefined {
    return this.#sighting(identity)?.since;
  }

  /** Every peer seen, with its liveness. */
  peers(now: number): readonly (WeightedPeer & { readonly live: boolean })[] {
    return [...this.#seen.values()].map((s) => ({ identity: s.lease.record.holderIdentity, weight: s.lease.weight, live: this.#alive(s, now) }));
  }

  /** Peer Leases not renewed for {@link GARBAGE_AFTER_DURATIONS} lease durations: their replicas died without stopping. */
  garbage(now: number): readonly PeerLease[] {
    return [...this.#seen.values()].filter((s) => now - s.since >= GARBAGE_AFTER_DURATIONS * this.#durationMs(s.lease)).map((s) => s.lease);
  }
}

/**
 * This replica's peer Lease. Invariant: `#resourceVersion` is that of our last successful write,
 * or, after a failed one, of the newest copy seen holding our identity (a write whose answer was
 * lost still landed).
 */
export class OwnPeerLease {
  readonly name: string;
  readonly #store: ShardLeaseStore;
  readonly #identity: string;
  readonly #weight: number;
  readonly #leaseDurationSeconds: number;
  readonly #clock: Clock;
  #resourceVersion: string | undefined;
  #acquireTime: string | undefined;
  #lastFailed = false;

  constructor(options: { readonly store: ShardLeaseStore; readonly group: string; readonly identity: string; readonly weight: number; readonly leaseDurationMs: number; readonly clock: Clock }) {
    this.name = peerLeaseName(options.group, options.identity);
    this.#store = options.store;
    this.#identity = options.identity;
    this.#weight = options.weight;
    this.#leaseDurationSeconds = options.leaseDurationMs / 1000;
    this.#clock = options.clock;
  }

  /** Writes the Lease (create the first time, then update at our resourceVersion). Rejects on failure. */
  async renew(signal: AbortSignal): Promise<void> {
    const now = microTime(this.#clock.now());
    this.#acquireTime ??= now;
    const draft: PeerLeaseDraft = {
      role: 'peer',
      name: this.name,
      weight: this.#weight,
      record: { holderIdentity: this.#identity, leaseDurationSeconds: this.#leaseDurationSeconds, acquireTime: this.#acquireTime, renewTime: now, leaseTransitions: 0 },
    };
    try {
      const written = this.#resourceVersion === undefined ? await this.#store.create(draft, signal) : await this.#store.update(draft, this.#resourceVersion, signal);
      this.#resourceVersion = written.resourceVersion;
      this.#lastFailed = false;
    } catch (err) {
      this.#lastFailed = true;
      // A create refused because our Lease exists: left by an earlier run under this identity (a
      // pod restarted under its name). Take its resourceVersion so that the next attempt updates
      // it; otherwise we could not join until the others collect it as garbage (10 lease durations).
      // Likewise an update refused (409) because a renewal whose answer was lost landed after all:
      // a run that has not joined yet reads no group to adopt it from, and would never join.
      if (this.#resourceVersion === undefined || (err instanceof KubeApiError && err.statusCode === 409)) {
        const listed: readonly ShardLease[] = await this.#store.list(signal).catch(() => []);
        this.adopt(listed.find((lease): lease is PeerLease => lease.role === 'peer' && lease.name === this.name));
      }
      throw err;
    }
  }

  /** Our Lease as listed: adopted only after a failed write (else the listing may predate our last write). */
  adopt(listed: PeerLease | undefined): void {
    if (!this.#lastFailed || listed?.record.holderIdentity !== this.#identity) return;
    this.#resourceVersion = listed.resourceVersion;
  }

  /** Deletes our Lease at our resourceVersion (a clean stop: peers see us gone at once). */
  async delete(signal: AbortSignal): Promise<void> {
    if (this.#resourceVersion === undefined) return;
    await this.#store.delete(this.name, this.#resourceVersion, signal);
    this.#resourceVersion = undefined;
  }
}
