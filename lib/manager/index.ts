/**
 * The manager kit (`fleetcache/manager`): what runs around an operator's controllers in
 * production, after controller-runtime's manager: Lease leader election or sharding on Leases, health and readiness
 * probes, Prometheus metrics with controller-runtime's and client-go's names, an authenticated
 * metrics server that embedders can add routes to, signal handling and graceful shutdown.
 */
export { ManagerMetrics, metricsContentType, type ManagerMetricsOptions, type MetricsSources } from './metrics.ts';
export {
  Manager,
  syncedCheck,
  type Controller,
  type LeaderElectionOptions,
  type ManagerOptions,
  type MetricsServerOptions,
  type ReconcileContext,
  type ClustersWiring,
  type ManagedClusters,
  type RegistryWiring,
  type Runnable,
  type ShardingOptions,
} from './manager.ts';
export { LeadershipLostError, RunnableFailedError, ShardGroupLostError, ShutdownTimeoutError } from './errors.ts';
export {
  fenceLeaseName,
  isShardGroup,
  KubeShardLeaseStore,
  MemoryLeaseClient,
  MemoryLeases,
  peerLeaseName,
  rendezvousOwner,
  Sharder,
  SHARD_GROUP_LABEL,
  SHARD_GROUP_MAX_LENGTH,
  SHARD_KEY_ANNOTATION,
  SHARD_ROLE_LABEL,
  SHARD_WEIGHT_ANNOTATION,
  type FenceLeaseDraft,
  type KubeShardLeaseStoreOptions,
  type MemoryWrite,
  type OrphanedKey,
  type PartitionMode,
  type PeerLeaseDraft,
  type ShardChange,
  type SharderOptions,
  type ShardLease,
  type ShardLeaseDraft,
  type ShardLeaseStore,
  type ShardOrphans,
  type ShardOutcome,
  type ShardOwnership,
  type ShardPeerStatus,
  type ShardStatus,
  type UnownedKey,
  type WeightedPeer,
} from './shard/index.ts';
export { signalHandler, type SignalHandlerOptions } from './signals.ts';
export {
  KubeLeaseClient,
  LeaderElector,
  type ElectionOutcome,
  type KubeLeaseClientOptions,
  type LeaderCallbacks,
  type LeaderElectorOptions,
  type LeadershipState,
  type LeaseClient,
  type LeaseRecord,
  type StoredLease,
} from './leader.ts';
export type { LeaseTimingOptions } from './lease-timings.ts';
export { KubeAuthFilter, type AuthDecision, type KubeAuthFilterOptions, type ReviewClient } from './auth.ts';
export { readCertificate, selfSignedCertificate, watchCertificate, type CertificateFiles, type ServingCertificate } from './certificate.ts';
export {
  checksRoute,
  HttpServer,
  metricsRoute,
  probeRoutes,
  type BindAddress,
  type Check,
  type CheckFunction,
  type HttpServerOptions,
  type Route,
  type RouteAnswer,
  type RouteHandler,
} from './server.ts';
