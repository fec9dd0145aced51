import type { AcquireOptions, ClusterChange, ClusterLease } from './cluster-set.ts';
import type { Identity } from './identity.ts';
import type { ClusterRef } from './providers.ts';

/**
 * What a consumer of clusters needs from their keeper: the subset the registry, leader election
 * and the metrics reviews use. `ClusterSet` implements it over real connections; `FakeClusters`
 * (`lib/cluster/testing.ts`) implements it in memory for tests. The consumer is given a keeper, never
 * builds one, and never closes one it was lent.
 *
 * Delivery: listeners given to {@link Clusters.subscribe} run one after another and are awaited; a
 * rotation's new generation is current before its listeners run, and leases on the old one keep
 * working until released.
 */
export interface Clusters {
  /**
   * The key of the connection a caller gets (see `ClusterSet.connectionKey`).
   *
   * @throws InvalidClusterRefError for a malformed reference; TypeError for a malformed purpose.
   */
  connectionKey(ref: ClusterRef, ownerNamespace: string, identity?: Identity, purpose?: string): string;
  /** A lease on the cluster `ref` names, admitted for this caller's namespace and identity. */
  acquire(ref: ClusterRef, options: AcquireOptions): Promise<ClusterLease>;
  /** A new lease on the current generation of `key`, without admission; undefined when there is none. */
  retain(key: string): ClusterLease | undefined;
  /** Whether `ownerNamespace` (as `identity`) is admitted to the current generation of `key`. No I/O. */
  isAdmitted(key: string, ownerNamespace: string, identity?: Identity): boolean;
  /** Resolves the credentials of `key` again now; resolves after the change's listeners. */
  check(key: string): Promise<void>;
  /** Listens to rotations and removals; returns the unsubscribe function. */
  subscribe(listener: (change: ClusterChange) => void | Promise<void>): () => void;
}
