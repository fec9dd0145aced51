import { existsSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import path from 'node:path';
import type { Writable } from 'node:stream';
import type { KubeConfig } from '@kubernetes/client-node';
import { ClusterSet, CompositeProvider, localKubeConfig, SecretProvider, type Clusters } from '../lib/cluster/index.ts';
import { Manager, syncedCheck } from '../lib/manager/index.ts';
import type { RequestObservation } from '../lib/transport/index.ts';
import { PipelineController } from '../lib/pipeline/index.ts';
import type { RateLimitingQueue } from '../lib/queue/index.ts';
import { Registry, type OwnerKey } from '../lib/registry/index.ts';
import { toError, type Clock, type Logger } from '../lib/util/index.ts';
import { parseFlags, usage, UsageError, type Config } from './flags.ts';
import { Dashboard } from './dashboard/index.ts';
import { cachesRoute, shardsRoute } from './http.ts';
import { createLogger } from './logging.ts';
import { registerServiceMetrics, type ControllerStats } from './metrics.ts';

/** The process's surroundings, passed in so that main() itself reads no globals. */
export interface ProcessIo {
  /** Arguments after the script. */
  readonly argv: readonly string[];
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly stdout: Writable;
  readonly stderr: Writable;
  /** Aborts on the first SIGTERM/SIGINT: stop taking work and shut down cleanly. */
  readonly signal: AbortSignal;
}

/** What the process needs of the controller (the PipelineController's public surface). */
export interface Controller {
  run(signal: AbortSignal): Promise<void>;
  readonly synced: boolean;
  stats(): ControllerStats;
  /** The shard keys of the Pipelines it sees (what the Sharder's `keys` reads); empty unsharded. */
  shardKeys(): Iterable<string>;
}

const serviceAccountDir = '/var/run/secrets/kubernetes.io/serviceaccount';

/** The package version, from the package.json above this file (sources or dist/). */
export function version(): string {
  for (const relative of ['../package.json', '../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(relative, import.meta.url), 'utf8')) as { name?: unknown; version?: unknown };
      if (pkg.name === 'fleetcache' && typeof pkg.version === 'string') return pkg.version;
    } catch {
      // not this one
    }
  }
  return 'unknown';
}

/** Parses the command line and runs the service; resolves with the exit status. */
export async function main(io: ProcessIo): Promise<number> {
  let config: Config;
  try {
    const invocation = parseFlags(io.argv);
    if (invocation.kind === 'help') {
      io.stdout.write(usage());
      return 0;
    }
    if (invocation.kind === 'version') {
      io.stdout.write(`fleetcache ${version()}\n`);
      return 0;
    }
    config = invocation.config;
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    io.stderr.write(`fleetcache: ${err.message}\nsee fleetcache --help\n`);
    return 2;
  }
  const logger = createLogger({ level: config.logLevel, format: config.logFormat, stream: io.stderr });
  try {
    return await runService(config, io, logger);
  } catch (err) {
    logger.error(`fatal: ${toError(err).message}`, { error: toError(err) });
    return 1;
  } finally {
    // winston hands lines to its transport on a later tick: let the last ones out before exit.
    for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
  }
}

/** --kubeconfig, else $KUBECONFIG (first file), else in-cluster, else ~/.kube/config. */
async function loadManagementKubeConfig(config: Config, env: ProcessIo['env'], logger: Logger): Promise<KubeConfig> {
  const fromEnv = (env.KUBECONFIG ?? '').split(path.delimiter).find((p) => p !== '');
  const file = config.kubeconfig ?? fromEnv;
  if (file !== undefined) {
    logger.info('using kubeconfig file', { path: file, source: config.kubeconfig === undefined ? 'KUBECONFIG' : '--kubeconfig' });
    return localKubeConfig({ kubeconfigPath: file });
  }
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (host !== undefined && host !== '' && port !== undefined && port !== '') {
    logger.info('using the in-cluster service account', { host, port });
    return localKubeConfig({ inCluster: { host, port } });
  }
  const home = path.join(homedir(), '.kube', 'config');
  if (existsSync(home)) {
    logger.info('using kubeconfig file', { path: home, source: 'home' });
    return localKubeConfig({ kubeconfigPath: home });
  }
  throw new Error('no kubeconfig: pass --kubeconfig, set KUBECONFIG, or run in a pod');
}

/**
 * Where the Leases live (the leader's, or with --shard the peer and fence Leases):
 * --leader-election-namespace, else $POD_NAMESPACE, else the service account's, else "default".
 */
async function leaseNamespace(config: Config, env: ProcessIo['env']): Promise<string> {
  if (config.leaderElectionNamespace !== undefined) return config.leaderElectionNamespace;
  if (env.POD_NAMESPACE !== undefined && env.POD_NAMESPACE !== '') return env.POD_NAMESPACE;
  try {
    const ns = (await readFile(path.join(serviceAccountDir, 'namespace'), 'utf8')).trim();
    if (ns !== '') return ns;
  } catch {
    // not in a pod
  }
  return 'default';
}

/** What {@link serviceClusters} builds on, besides the flags. */
export interface ServiceClustersParts {
  /** The management cluster: `local` targets, and the kubeconfig Secrets of the others. */
  readonly kubeConfig: KubeConfig;
  readonly logger: Logger;
  /** Default: the wall clock. */
  readonly clock?: Clock;
  /** Told of every request to every cluster (`rest_client_*`). Default: none. */
  readonly onRequest?: (observation: RequestObservation) => void;
}

/**
 * The service's keeper of clusters, as the flags configure it: the process's one keeper of
 * connections (the management cluster's, as the service and as each tenant it impersonates, and
 * every remote one), lent to the registry, leader election and the metrics reviews. A provider
 * for every kind of cluster a Pipeline may name (no clusterRef; `Secret`; Cluster API `Cluster`,
 * through its `<name>-kubeconfig` Secret), kubeconfigs from Secrets held to the `--allow-…`
 * switches, read through the keeper as the owner; periodic credential checks left on. No I/O.
 */
export function serviceClusters(config: Config, parts: ServiceClustersParts): ClusterSet {
  const { kubeConfig, logger, clock, onRequest } = parts;
  return new ClusterSet({
    local: kubeConfig,
    provider: (secretReader) => {
      const secrets = new SecretProvider({
        secrets: secretReader,
        allowExec: config.allowExecKubeconfigs,
        allowAuthProvider: config.allowAuthProviderKubeconfigs,
        allowLocalFiles: config.allowFileKubeconfigs,
        allowCrossNamespace: config.allowCrossNamespaceSecrets,
        allowInsecureTls: config.insecureKubeconfigTls,
      });
      return new CompositeProvider({ byKind: { secret: secrets, 'cluster-api': secrets } });
    },
    logger,
    // Each connection of the keeper (remote clusters, the Lease's, the reviews') gets its own bucket.
    qps: config.kubeApiQps,
    burst: config.kubeApiBurst,
    connection: { requestTimeoutMs: config.kubeApiRequestTimeoutMs },
    ...(clock === undefined ? {} : { clock }),
    ...(onRequest === undefined ? {} : { onRequest }),
  });
}

/** What {@link serviceRegistry} builds on, besides the flags. */
export interface ServiceRegistryParts {
  /** The keeper it is lent ({@link serviceClusters}); closed by whoever built it, after the registry. */
  readonly clusters: Clusters;
  readonly queue: RateLimitingQueue<OwnerKey>;
  readonly logger: Logger;
  /** Default: the wall clock. */
  readonly clock?: Clock;
}

/** The service's registry, as the flags configure it, on the keeper it is lent. No I/O. */
export function serviceRegistry(config: Config, parts: ServiceRegistryParts): Registry {
  const { clusters, queue, logger, clock } = parts;
  return new Registry({
    clusters,
    queue,
    logger,
    gcGraceMs: config.cacheGcGracePeriodMs,
    informer: { objects: config.cacheObjects, compressAfterMs: config.cacheCompressAfterMs },
    ...(config.memoryBudgetBytes === undefined ? {} : { memoryBudget: { maxRssBytes: config.memoryBudgetBytes } }),
    ...(clock === undefined ? {} : { clock }),
  });
}

/**
 * Runs the service until `io.signal` aborts (→ 0) or something fatal happens (→ 1): leadership
 * lost, the controller failing, a server that cannot bind. The manager kit does the running:
 * leader election, probes, metrics and their server, the shutdown order.
 */
async function runService(config: Config, io: ProcessIo, logger: Logger): Promise<number> {
  logger.info('starting', {
    version: version(),
    concurrency: config.concurrency,
    leaderElect: config.leaderElect,
    shard: config.shard,
    ...(config.shard ? { shardBy: config.shardBy, shardWeight: config.shardWeight, shardGroup: config.shardGroup, shardTakeRate: config.shardTakeRate, shardRecoveryTakeRate: config.shardRecoveryTakeRate } : {}),
  });
  const kubeConfig = await loadManagementKubeConfig(config, io.env, logger);
  const namespace = config.leaderElect || config.shard ? await leaseNamespace(config, io.env) : undefined;
  // With --shard the dashboard also shows this replica's view of its shard group: the manager's
  // Sharder (built just below, read only once running) and the controller's shard keys.
  const dashboard = new Dashboard({
    logger,
    ...(config.shard ? {
      shards: {
        status: () => {
          if (manager.sharder === undefined) throw new Error('--shard: the manager has no Sharder');
          return manager.sharder.status();
        },
        keys: () => controller.shardKeys(),
      },
    } : {}),
  });
  const manager = new Manager({
    clusters: ({ onRequest }) => serviceClusters(config, { kubeConfig, logger, onRequest: (o) => { onRequest(o); dashboard.observeRequest(o); } }),
    registry: ({ queue, clusters }) => serviceRegistry(config, { clusters, queue, logger }),
    // With --shard every replica acts, each for the Pipelines whose shard keys it holds the fences
    // of; the keys are read from the controller's Pipeline cache (built below, read once running).
    ...(config.shard && namespace !== undefined ? {
      sharding: {
        group: config.shardGroup,
        namespace,
        weight: config.shardWeight,
        keys: () => controller.shardKeys(),
        maxFenceTakesPerSecond: config.shardTakeRate,
        maxRecoveryTakesPerSecond: config.shardRecoveryTakeRate,
        leaseDurationMs: config.leaseDurationMs,
        renewDeadlineMs: config.renewDeadlineMs,
        retryPeriodMs: config.retryPeriodMs,
      },
    } : {}),
    leaderElection: {
      enabled: config.leaderElect,
      name: config.leaderElectionId,
      namespace,
      leaseDurationMs: config.leaseDurationMs,
      renewDeadlineMs: config.renewDeadlineMs,
      retryPeriodMs: config.retryPeriodMs,
    },
    healthProbeBindAddress: config.healthProbeBindAddress,
    metricsServer: config.metricsBindAddress === undefined ? undefined : {
      bindAddress: config.metricsBindAddress,
      secure: config.metricsSecure,
      certificate: config.metricsCert,
    },
    logger,
  });
  if (config.metricsBindAddress !== undefined && !config.metricsSecure) logger.warn('--metrics-secure=false: /metrics, /debug/caches and /dashboard/ are plain HTTP, unauthenticated');
  const registry = manager.registry;
  const sharder = manager.sharder;
  const controller: Controller = new PipelineController({
    registry,
    ...(sharder === undefined ? {} : { shard: { ownership: sharder, by: config.shardBy } }),
    logger,
    workers: config.concurrency,
    allowPrivateWebhooks: config.allowPrivateWebhooks,
    git: { allowPrivateNetworks: config.allowPrivateGitHosts, allowHttp: config.allowInsecureGitHttp },
    onReconcile: manager.metrics.observeReconcile,
    allowCrossNamespaceTargets: config.allowCrossNamespaceTargets,
    appKinds: config.appKinds,
    ...(config.defaultServiceAccount === undefined ? {} : { defaultServiceAccount: config.defaultServiceAccount }),
    allowFleetSelectorsAsService: config.allowFleetSelectorsAsService,
  });
  logger.info('tenancy', {
    crossNamespaceTargets: config.allowCrossNamespaceTargets,
    crossNamespaceSecrets: config.allowCrossNamespaceSecrets,
    appKinds: config.appKinds.join(','),
    // Without a default, Pipelines that name no ServiceAccount act with the service's own identity.
    defaultServiceAccount: config.defaultServiceAccount ?? '',
    fleetSelectorsAsService: config.allowFleetSelectorsAsService,
  });
  // Sharded, the controller runs on every replica (each acts only for what it holds the fences of).
  manager.add({ name: 'pipeline', start: (signal) => controller.run(signal), controller: { workers: config.concurrency }, needLeaderElection: sharder === undefined });
  registerServiceMetrics(manager.metrics.registry, () => controller.stats());
  // A follower is ready: it serves probes and metrics, and would take over when needed.
  const pipelinesSynced = syncedCheck(controller);
  manager.addReadyzCheck('pipelines', () => (manager.isLeader || sharder !== undefined ? pipelinesSynced() : undefined));
  if (config.metricsBindAddress !== undefined) {
    manager.addRoute('/debug/caches', cachesRoute(() => registry.caches()));
    if (sharder !== undefined) manager.addRoute('/debug/shards', shardsRoute(() => sharder.status()));
    dashboard.mount(manager); // /dashboard/ on the metrics server, behind its authentication
  }
  try {
    await manager.start(io.signal);
  } catch (err) {
    logger.error(`stopped: ${toError(err).message}`, { error: toError(err) });
    return 1;
  }
  return 0;
}
