import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { homedir, hostname } from 'node:os';
import path from 'node:path';
import type { Writable } from 'node:stream';
import type { KubeConfig } from '@kubernetes/client-node';
import { CompositeProvider, localKubeConfig, SecretProvider, type ClusterLease, type ClusterSet } from '../lib/cluster/index.ts';
import type { RequestObservation } from '../lib/transport/index.ts';
import { PipelineController } from '../lib/pipeline/index.ts';
import { defaultControllerRateLimiter, RateLimitingWorkQueue, type RateLimitingQueue } from '../lib/queue/index.ts';
import { Registry, type OwnerKey } from '../lib/registry/index.ts';
import { toError, type Clock, type Logger } from '../lib/util/index.ts';
import { parseFlags, usage, UsageError, type Config } from './flags.ts';
import { KubeAuthFilter } from './auth.ts';
import { readCertificate, selfSignedCertificate, watchCertificate, type ServingCertificate } from './certificate.ts';
import { HttpServer, metricsRoutes, probeRoutes, type Check, type HttpServerOptions } from './http.ts';
import { KubeLeaseClient, LeaderElector, type ElectionOutcome } from './leader.ts';
import { createLogger } from './logging.ts';
import { ServiceMetrics, type ControllerStats } from './metrics.ts';

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

/** --leader-election-namespace, else $POD_NAMESPACE, else the service account's, else "default". */
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

/** What {@link serviceRegistry} builds on, besides the flags. */
export interface ServiceRegistryParts {
  /** The management cluster: `local` targets, and the kubeconfig Secrets of the others. */
  readonly kubeConfig: KubeConfig;
  readonly queue: RateLimitingQueue<OwnerKey>;
  readonly logger: Logger;
  /** Default: the wall clock. */
  readonly clock?: Clock;
  /** Told of every request to every cluster (`rest_client_*`). Default: none. */
  readonly onRequest?: (observation: RequestObservation) => void;
}

/**
 * The service's registry, as the flags configure it: a provider for every kind of cluster a
 * Pipeline may name (no clusterRef; `Secret`; Cluster API `Cluster`, through its
 * `<name>-kubeconfig` Secret), kubeconfigs from Secrets held to the `--allow-…` switches, and the
 * registry's periodic credential checks left on. No I/O.
 */
export function serviceRegistry(config: Config, parts: ServiceRegistryParts): Registry {
  const { kubeConfig, queue, logger, clock, onRequest } = parts;
  // The registry's keeper is the process's one keeper of connections (`registry.clusters`): the
  // management cluster's, as the service and as each tenant it impersonates, and every remote
  // one. Kubeconfig Secrets are read through it, as the owner.
  return new Registry({
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
    queue,
    logger,
    gcGraceMs: config.cacheGcGracePeriodMs,
    // Each connection of the keeper (remote clusters, the Lease's, the reviews') gets its own bucket.
    qps: config.kubeApiQps,
    burst: config.kubeApiBurst,
    ...(clock === undefined ? {} : { clock }),
    ...(onRequest === undefined ? {} : { onRequest }),
  });
}

/**
 * How the metrics server is protected: with --metrics-secure (the default) HTTPS (the certificate in
 * --metrics-cert-path, else a self-signed one) and every request authenticated and authorised on
 * the management cluster; otherwise plain HTTP. `close` releases the review connection.
 */
async function metricsProtection(config: Config, clusters: ClusterSet, logger: Logger): Promise<Pick<HttpServerOptions, 'tls' | 'authorize'> & {
  /** Starts following certificate rotation in --metrics-cert-path, once the server is up. */
  readonly watch: (server: HttpServer) => void;
  readonly close: () => Promise<void>;
}> {
  if (!config.metricsSecure) {
    logger.warn('metrics are served over plain HTTP to anyone who can reach them (--metrics-secure=false)');
    return { watch: () => undefined, close: () => Promise.resolve() };
  }
  let tls: ServingCertificate;
  if (config.metricsCert === undefined) {
    const bound = config.metricsBindAddress?.host ?? '';
    tls = selfSignedCertificate({ commonName: 'fleetcache-metrics', hosts: ['localhost', hostname(), '127.0.0.1', '::1', ...(bound === '' ? [] : [bound])] });
    logger.info('metrics: serving a self-signed certificate (pass --metrics-cert-path to use your own)');
  } else {
    tls = await readCertificate(config.metricsCert);
    logger.info('metrics: serving the certificate from --metrics-cert-path', { path: config.metricsCert.dir, cert: config.metricsCert.certName });
  }
  const files = config.metricsCert;
  let stopWatching = (): void => undefined;
  // The management cluster's own-identity connection, held from the keeper while the server runs.
  // A connection of its own: scrapes are never held behind the controller's rate bucket.
  const lease = await clusters.acquire({ kind: 'local' }, { ownerNamespace: 'default', purpose: 'metrics-auth' });
  const filter = new KubeAuthFilter({ reviews: (apiPath, body) => lease.connection.request({ method: 'POST', path: apiPath, body }), logger });
  return {
    tls,
    authorize: (req, urlPath) => filter.check(req, urlPath),
    watch: (server) => {
      if (files !== undefined) stopWatching = watchCertificate({ files, current: tls, onChange: (next) => { server.setCertificate(next); }, logger });
    },
    close: () => {
      stopWatching();
      lease.release();
      return Promise.resolve();
    },
  };
}

/**
 * Runs the service until `io.signal` aborts (→ 0) or something fatal happens (→ 1): leadership
 * lost, the controller failing, a server that cannot bind.
 *
 * Shutdown order: readiness fails, the controller stops taking work and its in-flight reconciles
 * finish, the lease is released, the registry closes (caches, connections), then the servers.
 */
async function runService(config: Config, io: ProcessIo, logger: Logger): Promise<number> {
  logger.info('starting', { version: version(), concurrency: config.concurrency, leaderElect: config.leaderElect });
  const kubeConfig = await loadManagementKubeConfig(config, io.env, logger);

  const metrics = new ServiceMetrics();
  metrics.addController('pipeline', { workers: config.concurrency, queue: 'owners' });
  const onRequest = metrics.observeRequest;
  const queue = new RateLimitingWorkQueue<OwnerKey>({ name: 'owners', metrics: metrics.queueMetrics('pipeline'), rateLimiter: defaultControllerRateLimiter() });
  const registry = serviceRegistry(config, { kubeConfig, queue, logger, onRequest });
  const clusters = registry.clusters;
  const controller: Controller = new PipelineController({
    registry,
    logger,
    workers: config.concurrency,
    allowPrivateWebhooks: config.allowPrivateWebhooks,
    git: { allowPrivateNetworks: config.allowPrivateGitHosts, allowHttp: config.allowInsecureGitHttp },
    onReconcile: metrics.observeReconcile,
    allowCrossNamespaceTargets: config.allowCrossNamespaceTargets,
    ...(config.defaultServiceAccount === undefined ? {} : { defaultServiceAccount: config.defaultServiceAccount }),
  });
  logger.info('tenancy', {
    crossNamespaceTargets: config.allowCrossNamespaceTargets,
    crossNamespaceSecrets: config.allowCrossNamespaceSecrets,
    // Without a default, Pipelines that name no ServiceAccount act with the service's own identity.
    defaultServiceAccount: config.defaultServiceAccount ?? '',
  });

  let elector: LeaderElector | undefined;
  let leaseHold: ClusterLease | undefined;
  if (config.leaderElect) {
    const namespace = await leaseNamespace(config, io.env);
    // Held for the process's life: the management cluster's own-identity connection, from the keeper.
    // A connection of its own, as controller-runtime gives leader election its own client: renewals
    // never queue behind caches and reconciles in the shared rate bucket.
    leaseHold = await clusters.acquire({ kind: 'local' }, { ownerNamespace: namespace, purpose: 'leader-election' });
    elector = new LeaderElector({
      leases: new KubeLeaseClient({ connection: leaseHold.connection, namespace, name: config.leaderElectionId }),
      identity: `${hostname()}_${randomUUID()}`,
      leaseDurationMs: config.leaseDurationMs,
      renewDeadlineMs: config.renewDeadlineMs,
      retryPeriodMs: config.retryPeriodMs,
      logger,
    });
  }

  metrics.bind({ caches: () => registry.caches(), controller: () => controller.stats(), leader: () => elector?.isLeader ?? true, leaseName: config.leaderElectionId });

  let stopping = false;
  const readiness: Check[] = [
    { name: 'shutdown', check: () => (stopping ? 'shutting down' : undefined) },
    { name: 'leader-election', check: () => (elector?.state === 'unknown' ? 'the Lease has not been read yet' : undefined) },
    {
      name: 'pipelines',
      // A follower is ready: it serves probes and metrics, and would take over when needed.
      check: () => ((elector === undefined || elector.isLeader) && !controller.synced ? 'the Pipeline cache has not synced' : undefined),
    },
  ];
  const servers: HttpServer[] = [];
  let closeReviews = (): Promise<void> => Promise.resolve();
  const closeServers = async (): Promise<void> => {
    await Promise.all(servers.map((s) => s.close()));
    await closeReviews();
  };
  try {
    if (config.healthProbeBindAddress !== undefined) {
      servers.push(await HttpServer.start({ name: 'probes', address: config.healthProbeBindAddress, routes: probeRoutes(readiness), logger }));
    }
    if (config.metricsBindAddress !== undefined) {
      const protection = await metricsProtection(config, clusters, logger);
      closeReviews = () => protection.close();
      const server = await HttpServer.start({ name: 'metrics', address: config.metricsBindAddress, routes: metricsRoutes({ metrics: () => metrics.metrics(), caches: () => registry.caches() }), logger, tls: protection.tls, authorize: protection.authorize });
      servers.push(server);
      protection.watch(server);
    }
  } catch (err) {
    await closeServers();
    leaseHold?.release();
    await registry.close();
    throw err;
  }

  // `fatal` settles when something ends the service on its own; the signal is the normal end.
  const work = new AbortController();
  const election = new AbortController();
  let running: Promise<void> | undefined;
  let reportFatal: (reason: string) => void = () => undefined;
  const fatal = new Promise<string>((resolve) => { reportFatal = resolve; });
  const startController = (): void => {
    logger.info('starting the controller', { workers: config.concurrency });
    running = controller.run(work.signal).then(
      () => { if (!work.signal.aborted) reportFatal('the controller stopped on its own'); },
      (err: unknown) => {
        logger.error(`controller failed: ${toError(err).message}`, { error: toError(err) });
        reportFatal('the controller failed');
      },
    );
  };
  let electing: Promise<ElectionOutcome> | undefined;
  if (elector === undefined) {
    startController();
  } else {
    electing = elector.run(election.signal, { onStartedLeading: startController });
    electing.then((outcome) => { if (outcome === 'lost') reportFatal('leader election lost'); }, () => undefined);
  }

  const onSignal = new Promise<string>((resolve) => {
    if (io.signal.aborted) resolve('signal');
    io.signal.addEventListener('abort', () => { resolve('signal'); }, { once: true });
  });
  const reason = await Promise.race([onSignal, fatal]);
  stopping = true;
  const graceful = reason === 'signal';
  logger.info(graceful ? 'shutting down: stopping work, waiting for reconciles in flight' : `shutting down: ${reason}`);
  work.abort(new Error(`shutting down: ${reason}`));
  // After a lost election another replica may already lead: do not wait on reconciles then.
  if (reason !== 'leader election lost') await running;
  election.abort();
  await electing;
  leaseHold?.release();
  await registry.close(); // and the keeper: every connection
  await closeServers();
  logger.info('stopped', { graceful });
  return graceful ? 0 : 1;
}
