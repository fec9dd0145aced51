// The Lease store a Sharder works on: the few calls it needs on one shard group's Leases.
import type { LeaseRecord } from '../leader.ts';

/** A replica's membership Lease, renewed every retry period. */
export interface PeerLeaseDraft {
  readonly role: 'peer';
  readonly name: string;
  /** A positive integer (annotation `fleetcache.io/shard-weight`). */
  readonly weight: number;
  readonly record: LeaseRecord;
}

/** The fence of one shard key: whoever holds it may act for the key. Never renewed. */
export interface FenceLeaseDraft {
  readonly role: 'fence';
  readonly name: string;
  /** The shard key (annotation `fleetcache.io/shard-key`). */
  readonly key: string;
  readonly record: LeaseRecord;
}

/** A Lease of the group as written (labels and annotations are the store's business). */
export type ShardLeaseDraft = PeerLeaseDraft | FenceLeaseDraft;

/** A Lease of the group as stored: `resourceVersion` makes every write conditional. */
export type ShardLease = ShardLeaseDraft & { readonly resourceVersion: string };

/**
 * The subset of the Lease API a Sharder uses, on one group's Leases in one namespace. Every
 * failure rejects (a 409 on create, update or delete means another writer came first); a request
 * stops when its signal aborts.
 */
export interface ShardLeaseStore {
  /** `namespace/group`, for logs. */
  readonly description: string;
  /** Every Lease of the group (peers and fences), read at one point in time. */
  list(signal: AbortSignal): Promise<readonly ShardLease[]>;
  /** Fails if a Lease of that name exists. */
  create(draft: ShardLeaseDraft, signal: AbortSignal): Promise<ShardLease>;
  /** Replaces the Lease if it is still at `resourceVersion`. */
  update(draft: ShardLeaseDraft, resourceVersion: string, signal: AbortSignal): Promise<ShardLease>;
  /** Deletes the Lease if it is still at `resourceVersion`; resolves when it is already gone. */
  delete(name: string, resourceVersion: string, signal: AbortSignal): Promise<void>;
}
