import type { ClusterConnection } from '../transport/index.ts';
import type { Identity } from './identity.ts';
import type { ClusterRef } from './providers.ts';

/**
 * The key of one connection of a keeper: a reference's `clusterKey`, plus the identity for an
 * impersonated `local` connection, plus a purpose (`ClusterSet.connectionKey`). Only a keeper
 * makes one, so the compiler tells it from a cluster key, a cache key or an owner key.
 */
export type ConnectionKey = string & { readonly [connectionKeyBrand]: true };
declare const connectionKeyBrand: unique symbol;

/** What {@link Clusters.acquire} needs to know about the caller. */
export interface AcquireOptions {
  /** Namespace of the owner naming the cluster: the provider admits it (its cross-namespace rule). Required. */
  readonly ownerNamespace: string;
  /** Who the owner acts as; see `ClusterSet.connectionKey`. Default `OWN_IDENTITY`. */
  readonly identity?: Identity | undefined;
  /**
   * A connection of its own for this purpose, apart from every other caller's on the same cluster
   * and identity: its own request limiter (rate bucket) and HTTP session. For traffic that must
   * never queue behind caches and reconciles, such as leader election (controller-runtime gives
   * its leader-election client its own rate limiter). Lower-case letters, digits and '-'.
   * Default: none, the shared connection.
   */
  readonly purpose?: string | undefined;
  /**
   * With `purpose`: that connection's request rate instead of the keeper's (sharding writes
   * hundreds of fences at once when a replica dies). Applies to the generations made after the
   * call. Default: the keeper's. Ignored without `purpose`.
   */
  readonly limits?: { readonly qps: number; readonly burst: number } | undefined;
  /** Stops this caller waiting; shared work (connecting) carries on for others. */
  readonly signal?: AbortSignal | undefined;
}

/**
 * A hold on one generation of a cluster: its connection stays open until every lease on it is
 * released, even after the cluster rotated to new credentials. Release exactly once (more is a
 * no-op); never close the connection yourself.
 */
export interface ClusterLease {
  /** The connection key: `ClusterSet.connectionKey`. */
  readonly key: ConnectionKey;
  /** The cluster reference's `clusterKey`. */
  readonly cluster: string;
  /** The identity the connection acts as (`own` except for impersonated `local` connections). */
  readonly identity: Identity;
  readonly connection: ClusterConnection;
  /** Aborted when this generation is closed (after its last lease) or the set closes: derive per-cache signals from it. */
  readonly signal: AbortSignal;
  /** False once the cluster rotated away from this generation or was dropped: move work to a new lease. */
  readonly current: boolean;
  release(): void;
}

/** What {@link Clusters.subscribe} listeners hear. Listeners run in order and are awaited. */
export type ClusterChange =
  /** New credentials: `key` now has a new generation; leases on the old one still work until released. */
  | { readonly type: 'rotated'; readonly key: ConnectionKey }
  /** The cluster's source is gone (its Secret was deleted): `key` has no generation until someone acquires it again. */
  | { readonly type: 'removed'; readonly key: ConnectionKey };

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
  connectionKey(ref: ClusterRef, ownerNamespace: string, identity?: Identity, purpose?: string): ConnectionKey;
  /** A lease on the cluster `ref` names, admitted for this caller's namespace and identity. */
  acquire(ref: ClusterRef, options: AcquireOptions): Promise<ClusterLease>;
  /** A new lease on the current generation of `key`, without admission; undefined when there is none. */
  retain(key: ConnectionKey): ClusterLease | undefined;
  /** Whether `ownerNamespace` (as `identity`) is admitted to the current generation of `key`. No I/O. */
  isAdmitted(key: ConnectionKey, ownerNamespace: string, identity?: Identity): boolean;
  /** Resolves the credentials of `key` again now; resolves after the change's listeners. */
  check(key: ConnectionKey): Promise<void>;
  /** Listens to rotations and removals; returns the unsubscribe function. */
  subscribe(listener: (change: ClusterChange) => void | Promise<void>): () => void;
}
