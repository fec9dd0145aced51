/**
 * fleetcache (the package's root entry): watched, in-memory caches of Kubernetes objects across a
 * fleet of clusters, for controllers that must react when objects in other clusters change. It
 * exports what an operator writes against, by name: the registry and its readers, owner keys and
 * selectors; cluster references, providers, identities, kubeconfig loading and the keeper; the
 * typed errors to catch; the object, handler and GVK types; the work queue and its workers; fleet
 * snapshots; the logger interface; and the options of each. Everything else stays inside its room.
 * The other entries: `fleetcache/manager` (what runs around controllers), `fleetcache/pipeline`
 * (the service's promotion controller and its API) and `fleetcache/testing`.
 */

// The registry: caches built on first use, which owners use them, the readers handed out.
export { CacheGoneError, fieldMatcher, InvalidSelectorError, labelMatcher, MemoryBudgetExceededError, ownerKey, parseOwnerKey, Registry, StatusConflictError, watchOwners, writeStatus } from './registry/index.ts';
export type {
  CacheInfo,
  CacheInformerOptions,
  CacheReader,
  CacheScope,
  HeldReader,
  MemoryBudgetOptions,
  MemoryBudgetStatus,
  NamespacedName,
  ObjectMatcher,
  ObjectTargetRef,
  OwnerKey,
  OwnerRef,
  ReaderOptions,
  RegistryOptions,
  SetTargetRef,
  StatusConnection,
  TargetRef,
  WatchOwnersOptions,
  WriteStatusOptions,
  WriteStatusResult,
} from './registry/index.ts';

// Clusters: references, the providers that resolve them, identities, kubeconfigs, the keeper.
export {
  ClusterChangedError,
  clusterKey,
  clusterRefOf,
  ClusterSet,
  CompositeProvider,
  CoreV1SecretReader,
  InvalidClusterRefError,
  KubeconfigSecretNotFoundError,
  loadKubeconfig,
  LocalProvider,
  localKubeConfig,
  OWN_IDENTITY,
  SecretProvider,
  serviceAccountIdentity,
  StaticProvider,
} from './cluster/index.ts';
export type {
  AcquireOptions,
  ClusterAccess,
  ClusterChange,
  ClusterLease,
  ClusterProvider,
  ClusterRef,
  Clusters,
  ClusterSetOptions,
  CompositeProviderOptions,
  ConnectionKey,
  ConnectionOptions,
  CoreV1SecretReaderOptions,
  Identity,
  LoadKubeconfigOptions,
  LocalKubeConfigOptions,
  LocalProviderOptions,
  ResolveContext,
  SecretData,
  SecretProviderOptions,
  SecretReader,
  StaticProviderOptions,
} from './cluster/index.ts';

// A connection as the keeper lends it (built only by the keeper), the wire types, and its limits.
export { createListLimiter, defaultSocketBudget, SocketBudget, SocketReclaimedError } from './transport/index.ts';
export type {
  ClusterConnection,
  ConcurrencyLimiter,
  KubeList,
  KubeObject,
  ListOptions,
  ObjectMeta,
  ReadLimits,
  RequestObservation,
  RequestOptions,
  ResourceClient,
  ResourceInfo,
  SelectorOptions,
  SocketBudgetOptions,
  WatchEvent,
  WatchOptions,
  Wire,
} from './transport/index.ts';

// What a cache calls and is configured with.
export { identityTransform, stripManagedFields } from './informer/index.ts';
export type { InformerHandler, ListReason, ObjectHead, RelistSummary, Transform } from './informer/index.ts';

// The requeue queue and the workers that drain it.
export { defaultControllerRateLimiter, RateLimitingWorkQueue, runWorkers } from './queue/index.ts';
export type {
  DefaultControllerRateLimiterOptions,
  QueueMetricsProvider,
  QueueStats,
  RateLimiter,
  RateLimitingQueue,
  RateLimitingQueueOptions,
  ReconcileErrorReason,
  ReconcileObservation,
  ReconcileResult,
  RequeueAfter,
  RunWorkersOptions,
  WorkContext,
  WorkHandler,
} from './queue/index.ts';

// Fleet snapshots: consistent multi-kind, multi-cluster views over the registry's caches.
export { FleetAccumulator, registrySource, snapshotQuery } from './snapshot/index.ts';
export type {
  AccumulatorOptions,
  AccumulatorStatus,
  DeltaOf,
  FleetSnapshot,
  Freshness,
  ObjectOf,
  PatchOptions,
  QuerySet,
  QueryStatus,
  SnapshotClient,
  SnapshotDelta,
  SnapshotQuery,
  SnapshotSource,
  SnapshotsOptions,
  SourceQuery,
  SourceReader,
  WriteConnection,
  WriteOptions,
} from './snapshot/index.ts';

// Typed errors (each with a stable `code`), group/version/kind, the logger interface, the clock.
export {
  ClosedError,
  FleetcacheError,
  fromPino,
  fromWinston,
  InvalidPathSegmentError,
  KubeApiError,
  KubeconfigInvalidError,
  KubeconfigRefusedError,
  LimitExceededError,
  noopLogger,
  ObjectSkippedError,
  TransportError,
  UnknownKindError,
  WatchDecodeError,
} from './util/index.ts';
export type {
  BackoffOptions,
  Clock,
  GroupVersionKind,
  KubeconfigRule,
  KubeStatus,
  LogFields,
  PathSegmentField,
  Logger,
  PinoLike,
  ReadLimit,
  Timer,
  WinstonLike,
} from './util/index.ts';
