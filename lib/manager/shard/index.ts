/**
 * Sharding on Kubernetes Leases: the replicas of a group split the shard keys among themselves by
 * weighted rendezvous hashing over their peer Leases, and a replica acts for a key only while it
 * holds that key's fence Lease. Kubernetes (Leases, resourceVersion preconditions) is the only
 * coordination engine.
 *
 * Safety (never two acting owners): a replica acts for k only while (a) its peer Lease was renewed
 * by a request that STARTED less than renewDeadline ago on its clock, (b) it holds k's fence by its
 * own last write, (c) its assignment gives k to it. Another replica takes the fence only once the
 * holder's peer Lease has not been seen to change for leaseDuration, timed from when it saw the
 * change, which is after the request started; renewDeadline < leaseDuration, so the old holder has
 * stopped first (clocks must run at the same rate, not agree). A fence write is conditional on its
 * resourceVersion, so of two takers one wins. A key moving away is released only after every
 * whileOwned(key) in flight settled.
 *
 * Liveness (no orphan): every live key is owned by exactly one live replica within
 * leaseDuration + retryPeriod after the change as its observers saw it (a holder dies: its Lease
 * lapses after leaseDuration, the assignee takes at its next tick), plus one retry period of
 * slack for jitter and requests and, when many keys move at once, the take rate's delay: a dead
 * peer's fences at the recovery rate (100/s, burst 250: a few hundred keys in a tick or
 * two), free fences (joins, rolling restarts, cold starts) at the slower rate that keeps the
 * first replica up from taking everything (20/s, burst 50). Each replica checks this from its own
 * reads of the group, a retry period apart, so it reports a key as orphaned (logged at error,
 * `status().orphaned`, `fleetcache_shard_orphaned_keys`, `subscribeOrphans`) only past
 * leaseDuration + 3 × 1.2 retry periods + the slower rate's delay (`ShardStatus.boundMs`).
 * One live replica per orphan (its runner-up) is named to tell users (the service writes a
 * `ShardOwned=False` condition on its Pipelines).
 *
 * Mass handoffs: the peer Lease is renewed on a store of its own (`heartbeat`), so hundreds of
 * fence writes never delay a renewal past the renew deadline; fence releases go 8 at a time.
 */
export { Sharder, type OrphanedKey, type SharderOptions, type ShardChange, type ShardOrphans, type ShardOutcome, type ShardOwnership, type ShardPeerStatus, type ShardStatus } from './sharder.ts';
export type { FenceLeaseDraft, PeerLeaseDraft, ShardLease, ShardLeaseDraft, ShardLeaseStore } from './store.ts';
export { KubeShardLeaseStore, type KubeShardLeaseStoreOptions } from './kube-store.ts';
export { MemoryLeaseClient, MemoryLeases, type MemoryWrite, type PartitionMode } from './memory-store.ts';
export { rendezvousOwner, type WeightedPeer } from './rendezvous.ts';
export { fenceLeaseName, isShardGroup, SHARD_GROUP_LABEL, SHARD_GROUP_MAX_LENGTH, SHARD_KEY_ANNOTATION, peerLeaseName, SHARD_ROLE_LABEL, SHARD_WEIGHT_ANNOTATION } from './names.ts';
export type { UnownedKey } from './unowned.ts';
