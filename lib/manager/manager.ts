// The Manager: what runs around an embedder's controllers (leader election or sharding, probes,
// metrics and their server, shutdown), after controller-runtime's manager.
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { ClusterLease, Clusters } from '../cluster/index.ts';
import { defaultControllerRateLimiter, RateLimitingWorkQueue, runWorkers, type RateLimitingQueue, type RequeueAfter, type WorkContext } from '../queue/index.ts';
import { Registry, type OwnerKey } from '../registry/index.ts';
import type { RequestObservation } from '../transport/index.ts';
import { childController, nonEmptyString, nonNegativeNumber, noopLogger, onAbort, realClock, toError, type Clock, type Logger } from '../util/index.ts';
import { KubeAuthFilter } from './auth.ts';
import type { LeaseTimingOptions } from './lease-timings.ts';
import { readCertificate, selfSignedCertificate, watchCertificate, type CertificateFiles, type ServingCertificate } from './certificate.ts';
import { LeadershipLostError, RunnableFailedError, ShardGroupLostError, ShutdownTimeoutError } from './errors.ts';
import { KubeLeaseClient, LeaderElector, type ElectionOutcome, type LeaseClient, type LeaseRecord, type StoredLease } from './leader.ts';
import { ManagerMetrics, type ManagerMetricsOptions } from './metrics.ts';
import { checksRoute, HttpServer, metricsRoute, type BindAddress, type Check, type CheckFunction, type Route, type RouteHandler } from './server.ts';
import { DeferredShardLeaseStore } from './shard/deferred-store.ts';
import { KubeShardLeaseStore, Sharder } from './shard/index.ts';

/** Leader election on a coordination.k8s.io/v1 Lease in the management cluster (client-go's timings). */
export interface LeaderElectionOptions extends LeaseTimingOptions {
  /** Run leader election. Default true; false keeps `name` as the label of `leader_election_master_status` (always 1). */
  readonly enabled?: boolean | undefined;
  /** The Lease's name. Required. */
  readonly name: string;
  /** The Lease's namespace (usually the pod's). Required when enabled. */
  readonly namespace?: string | undefined;
  /** This replica's identity, unique among replicas. Default `<hostname>_<random UUID>`. */
  readonly identity?: string | undefined;
  /**
   * Empty the Lease's holder when stopping while leading, so a follower takes over within its
   * retry period instead of a lease duration. Default true.
   */
  readonly releaseOnCancel?: boolean | undefined;
  /** Jitter source in [0, 1). Default Math.random. */
  readonly random?: (() => number) | undefined;
}

/**
 * Sharding: every replica runs the controllers, and each acts only for the shard keys it owns
 * (see `Sharder`). Peer and fence Leases live in `namespace` of the management cluster.
 */
export interface ShardingOptions extends LeaseTimingOptions {
  /** The shard group: replicas with the same group split the keys. A DNS label of at most 40 characters. Required. */
  readonly group: string;
  /** Where the group's Leases live (usually the pod's namespace). Required. */
  readonly namespace: string;
  /** Every live shard key, group-wide; read each retry period and after `manager.sharder.keysChanged()`. Required. */
  readonly keys: () => Iterable<string>;
  /** This replica's identity, unique among replicas. Default `<hostname>_<random UUID>`. */
  readonly identity?: string | undefined;
  /** This replica's share of the keys relative to the others' (a positive integer). Default 1. */
  readonly weight?: number | undefined;
  /** Takes of free fences (a join, a rolling restart, a cold start) per second at most (`SharderOptions`). Default 20. */
  readonly maxFenceTakesPerSecond?: number | undefined;
  /** Free fences taken at once before the rate applies. Default 50. */
  readonly fenceTakeBurst?: number | undefined;
  /** Takes of the fences of a replica that died per second at most (`SharderOptions`). Default 100. */
  readonly maxRecoveryTakesPerSecond?: number | undefined;
  /** Recovery takes at once before their rate applies. Default 250. */
  readonly recoveryTakeBurst?: number | undefined;
  /** Jitter source in [0, 1). Default Math.random. */
  readonly random?: (() => number) | undefined;
}

/** The metrics server: `/metrics` and every route added with {@link Manager.addRoute}. */
export interface MetricsServerOptions {
  /** Where to listen. Required. */
  readonly bindAddress: BindAddress;
  /**
   * HTTPS, and every request authenticated (bearer token → TokenReview) and authorised
   * (SubjectAccessReview for the path and verb) on the management cluster, as kubebuilder v4's
   * scaffold does. Default true; false serves plain HTTP to anyone who can reach it.
   */
  readonly secure?: boolean | undefined;
  /**
   * The serving certificate: files (re-read every 10 s, so rotation is picked up) or a PEM pair.
   * Default: a self-signed certificate for localhost, this host name, loopback and the bound host.
   */
  readonly certificate?: CertificateFiles | ServingCertificate | undefined;
}

/** The keeper of clusters a manager is given and closes when it stops (a `ClusterSet`). */
export interface ManagedClusters extends Clusters {
  close(): Promise<void>;
}

/** What {@link ManagerOptions.clusters}'s factory gets: pass it to `new ClusterSet`. */
export interface ClustersWiring {
  /** Counts every request to every cluster (`rest_client_*{cluster}`). */
  readonly onRequest: (observation: RequestObservation) => void;
}

/** What {@link ManagerOptions.registry}'s factory gets: pass both to `new Registry`. */
export interface RegistryWiring {
  /** The requeue queue (`workqueue_*{name="owners"}`, labelled with the controller that consumes it). */
  readonly queue: RateLimitingQueue<OwnerKey>;
  /** The manager's keeper of clusters (built from {@link ManagerOptions.clusters}). */
  readonly clusters: ManagedClusters;
}

/** Options of {@link Manager}. */
export interface ManagerOptions {
  /**
   * The keeper of clusters (a `ClusterSet`): lent to the registry, and its management cluster
   * (`{ kind: 'local' }`) holds the Lease and makes the metrics reviews, each on a connection of
   * its own. The manager closes it when it stops, after the registry. Pass a factory to have its
   * requests counted in the manager's metrics. Required.
   */
  readonly clusters: ManagedClusters | ((wiring: ClustersWiring) => ManagedClusters);
  /**
   * The registry the manager's controllers use, on the keeper above; the manager closes it when
   * it stops. Pass a factory to have its queue counted in the manager's metrics. Required.
   */
  readonly registry: Registry | ((wiring: RegistryWiring) => Registry);
  /** Default: off (every replica runs every controller). Not with `sharding`. */
  readonly leaderElection?: LeaderElectionOptions | undefined;
  /** Default: off. Not with an enabled `leaderElection`: one active replica, or a share each. */
  readonly sharding?: ShardingOptions | undefined;
  /** The prom-client registry and runtime metrics. Default: a new registry with the Node runtime metrics. */
  readonly metrics?: ManagerMetricsOptions | undefined;
  /** Default: no metrics server. */
  readonly metricsServer?: MetricsServerOptions | undefined;
  /** Where `/healthz` and `/readyz` are served (plain HTTP, unauthenticated). Default: no probe server. */
  readonly healthProbeBindAddress?: BindAddress | undefined;
  /** How long stopping waits for in-flight reconciles before closing anyway. Default 30 000 (controller-runtime's). */
  readonly gracefulShutdownTimeoutMs?: number | undefined;
  /** Default: discards everything. */
  readonly logger?: Logger | undefined;
  /** Times leader election and the grace period. Default: the wall clock. */
  readonly clock?: Clock | undefined;
}

/** What a controller's `reconcile` gets besides the key. */
export interface ReconcileContext extends WorkContext {
  /** Aborts when the manager stops: return soon after (the item is retried by the next leader). */
  readonly signal: AbortSignal;
}

/**
 * A controller: keys from a queue handed to `reconcile` by `workers` concurrent loops, with
 * controller-runtime's semantics (success forgets the key's backoff; a throw retries it with
 * backoff, forever unless `maxRetries` is set; `{ requeueAfterMs }` looks again later).
 */
export interface Controller<K = OwnerKey> {
  /** Names it in metrics (`controller` label) and logs. Required, unique in the manager. */
  readonly name: string;
  /** Handles one key; resolve with nothing on success. */
  // eslint-disable-next-line @typescript-eslint/no-invalid-void-type -- an async reconcile that returns nothing resolves to void
  reconcile(key: K, context: ReconcileContext): Promise<void | RequeueAfter | undefined>;
  /** Concurrent reconciles (distinct keys). Default 1. */
  readonly workers?: number | undefined;
  /** Run only while this replica leads. Default true. */
  readonly needLeaderElection?: boolean | undefined;
  /** Where keys come from. Default: the registry's queue (then `K` is `OwnerKey`). */
  readonly queue?: RateLimitingQueue<K> | undefined;
  /** See `RunWorkersOptions.maxRetries`. Default: never drop a key. */
  readonly maxRetries?: number | undefined;
  /**
   * With sharding: the shard key a queue key belongs to. `reconcile` then runs only inside
   * `manager.sharder.whileOwned(shardKeyOf(key))`, its signal aborting when ownership ends; a key
   * this replica does not own is dropped quietly (success). Its owner reconciles it: subscribe
   * to `manager.sharder` and enqueue the keys of every shard key gained. Default: not sharded.
   */
  readonly shardKeyOf?: ((key: K) => string) | undefined;
}

/** Anything else the manager runs until it stops (a controller with its own loop, a cache warmer). */
export interface Runnable {
  /** Names it in logs. Required. */
  readonly name: string;
  /**
   * Runs until `signal` aborts, then resolves once stopped. Resolving earlier is fine (logged);
   * rejecting stops the manager ({@link RunnableFailedError}).
   */
  start(signal: AbortSignal): Promise<void>;
  /** Run only while this replica leads. Default true. */
  readonly needLeaderElection?: boolean | undefined;
  /**
   * Set when the runnable is a controller running its own workers on the registry's queue: its
   * `controller_runtime_*` series are declared (`workers` concurrent reconciles) and the queue's
   * `workqueue_*` carry its name. It reports each reconcile to `manager.metrics.observeReconcile`.
   * Default: not a controller.
   */
  readonly controller?: { readonly workers: number } | undefined;
}

/** The elector's Lease API before start: the connection to the management cluster is made by `start`. */
class DeferredLeaseClient implements LeaseClient {
  readonly description: string;
  #client: LeaseClient | undefined;

  constructor(description: string) {
    this.description = description;
  }

  connect(client: LeaseClient): void {
    this.#client = client;
  }

  get #connected(): LeaseClient {
    if (this.#client === undefined) throw new Error('the Lease client is not connected yet');
    return this.#client;
  }

  get(signal: AbortSignal): Promise<StoredLease | undefined> {
    return this.#connected.get(signal);
  }

  create(record: LeaseRecord, signal: AbortSignal): Promise<StoredLease> {
    return this.#connected.create(record, signal);
  }

  update(record: LeaseRecord, resourceVersion: string, signal: AbortSignal): Promise<StoredLease> {
    return this.#connected.update(record, resourceVersion, signal);
  }
}

/** A controller or runnable as the manager runs it. */
interface Managed {
  readonly name: string;
  readonly needLeaderElection: boolean;
  readonly run: (signal: AbortSignal) => Promise<void>;
}

/** Why the manager is stopping: the caller's signal, or a failure. */
type StopReason = { readonly kind: 'signal' } | { readonly kind: 'failed'; readonly error: Error };

function bindAddress(option: string, value: BindAddress | undefined, required: boolean): void {
  if (value === undefined && !required) return;
  if (value === undefined || typeof value !== 'object' || typeof value.host !== 'string' || !Number.isInteger(value.port) || value.port < 0 || value.port > 65_535) {
    throw new TypeError(`Manager option ${option} must be { host, port } with a port in 0..65535, got ${JSON.stringify(value)}`);
  }
}

function isCertificateFiles(value: CertificateFiles | ServingCertificate): value is CertificateFiles {
  return 'dir' in value;
}

/**
 * Runs an embedder's controllers with what a production operator needs around them, as
 * controller-runtime's manager does: opt-in Lease leader election (controllers run only on the
 * leader; the Lease is released on stop so a follower takes over at once) or opt-in sharding on
 * Leases (every replica runs, each acting for its share of the keys), `/healthz` and
 * `/readyz` with added checks, `/metrics` with controller-runtime's and client-go's names in a
 * prom-client registry (the embedder's own, if given), served over HTTPS behind TokenReview +
 * SubjectAccessReview together with any added routes, and a graceful stop.
 *
 * Construct, `add` controllers and checks and routes, then `start(signal)` once. The constructor
 * does no I/O. Invariant: `#managed` and the check lists only grow before `start`; `#stopping` is
 * set once, by `start`.
 */
export class Manager {
  /** The keeper of clusters (built by the factory, or the one passed), lent to the registry. */
  readonly clusters: ManagedClusters;
  /** The registry the controllers use (built by the factory, or the one passed). */
  readonly registry: Registry;
  /** The prom-client registry every metric is in: register the embedder's own metrics here. */
  readonly metrics: ManagerMetrics;
  /** With the `sharding` option: which shard keys this replica acts for (run by `start`). */
  readonly sharder: Sharder | undefined;
  readonly #logger: Logger;
  readonly #clock: Clock;
  readonly #leaderElection: LeaderElectionOptions | undefined;
  readonly #metricsServer: MetricsServerOptions | undefined;
  readonly #probeAddress: BindAddress | undefined;
  readonly #gracePeriodMs: number;
  readonly #managed: Managed[] = [];
  readonly #healthChecks: Check[] = [{ name: 'ping', check: () => undefined }];
  readonly #readyChecks: Check[];
  readonly #routes = new Map<string, Route>();
  readonly #handlers = new Map<string, RouteHandler>();
  /** Paths of `#handlers` answered without the metrics authentication. */
  readonly #publicPaths = new Set<string>();
  /** Handler paths that take every method and authorise each request themselves. */
  readonly #actionPaths = new Set<string>();
  /** The controller consuming the registry's queue: its `workqueue_*` series carry this name. */
  #queueController: string | undefined;
  readonly #elector: LeaderElector | undefined;
  /** The elector's Lease API, connected at start. */
  readonly #leases: DeferredLeaseClient | undefined;
  readonly #sharding: ShardingOptions | undefined;
  /** The sharder's Lease store, connected at start. */
  readonly #shardLeases: DeferredShardLeaseStore | undefined;
  /** The Sharder's own peer Lease, on a connection of its own (see `SharderOptions.heartbeat`). */
  readonly #shardHeartbeat: DeferredShardLeaseStore | undefined;
  #started = false;
  #stopping = false;
  #servers: HttpServer[] = [];
  #probeUrl: string | undefined;
  #metricsUrl: string | undefined;

  constructor(options: ManagerOptions) {
    const clustersOption: unknown = options.clusters;
    if (typeof clustersOption !== 'function' && !isManagedClusters(clustersOption)) throw new TypeError('Manager option clusters must be a keeper of clusters (a ClusterSet) or a function that builds one');
    const registryOption: unknown = options.registry;
    if (!(registryOption instanceof Registry) && typeof registryOption !== 'function') throw new TypeError('Manager option registry must be a Registry or a function that builds one');
    const grace = nonNegativeNumber('Manager', 'gracefulShutdownTimeoutMs', options.gracefulShutdownTimeoutMs ?? 30_000);
    bindAddress('healthProbeBindAddress', options.healthProbeBindAddress, false);
    if (options.metricsServer !== undefined) bindAddress('metricsServer.bindAddress', options.metricsServer.bindAddress, true);
    const election = options.leaderElection;
    if (election !== undefined) {
      nonEmptyString('Manager', 'leaderElection.name', election.name);
      if (election.enabled ?? true) nonEmptyString('Manager', 'leaderElection.namespace', election.namespace);
    }
    const sharding = options.sharding;
    if (sharding !== undefined) {
      if (election !== undefined && election.enabled !== false) throw new TypeError('Manager options leaderElection and sharding exclude each other: one active replica, or every replica acting for its share');
      nonEmptyString('Manager', 'sharding.namespace', sharding.namespace);
    }
    this.#logger = options.logger ?? noopLogger;
    this.#clock = options.clock ?? realClock;
    this.#leaderElection = election;
    this.#sharding = sharding;
    this.#metricsServer = options.metricsServer;
    this.#probeAddress = options.healthProbeBindAddress;
    this.#gracePeriodMs = grace;
    if (election !== undefined && election.enabled !== false) {
      this.#leases = new DeferredLeaseClient(`${election.namespace ?? ''}/${election.name}`);
      // Built here, before the registry, so that invalid timings throw now, not at start.
      this.#elector = new LeaderElector({
        leases: this.#leases,
        identity: election.identity ?? `${hostname()}_${randomUUID()}`,
        leaseDurationMs: election.leaseDurationMs,
        renewDeadlineMs: election.renewDeadlineMs,
        retryPeriodMs: election.retryPeriodMs,
        releaseOnCancel: election.releaseOnCancel ?? true,
        logger: this.#logger,
        clock: this.#clock,
        random: election.random,
      });
    }
    if (sharding === undefined) {
      this.sharder = undefined;
      this.#shardHeartbeat = undefined;
    } else {
      this.#shardLeases = new DeferredShardLeaseStore(`${sharding.namespace}/${sharding.group}`);
      this.#shardHeartbeat = new DeferredShardLeaseStore(`${sharding.namespace}/${sharding.group}`);
      // Built here so that invalid options throw now, not at start.
      this.sharder = new Sharder({
        leases: this.#shardLeases,
        heartbeat: this.#shardHeartbeat,
        group: sharding.group,
        identity: sharding.identity ?? `${hostname()}_${randomUUID()}`,
        weight: sharding.weight,
        leaseDurationMs: sharding.leaseDurationMs,
        renewDeadlineMs: sharding.renewDeadlineMs,
        retryPeriodMs: sharding.retryPeriodMs,
        keys: sharding.keys,
        maxFenceTakesPerSecond: sharding.maxFenceTakesPerSecond,
        fenceTakeBurst: sharding.fenceTakeBurst,
        maxRecoveryTakesPerSecond: sharding.maxRecoveryTakesPerSecond,
        recoveryTakeBurst: sharding.recoveryTakeBurst,
        logger: this.#logger,
        clock: this.#clock,
        random: sharding.random,
      });
    }
    this.metrics = new ManagerMetrics(options.metrics);
    if (typeof options.clusters === 'function') {
      this.clusters = options.clusters({ onRequest: this.metrics.observeRequest });
      if (!isManagedClusters(this.clusters)) throw new TypeError('Manager option clusters: the factory must return a keeper of clusters (a ClusterSet)');
    } else {
      this.clusters = options.clusters;
    }
    if (options.registry instanceof Registry) {
      this.registry = options.registry;
    } else {
      const queue = new RateLimitingWorkQueue<OwnerKey>({ name: 'owners', rateLimiter: defaultControllerRateLimiter(), metrics: this.metrics.queueMetrics(() => this.#queueController) });
      this.registry = options.registry({ queue, clusters: this.clusters });
      if (!(this.registry instanceof Registry)) throw new TypeError('Manager option registry: the factory must return a Registry');
    }
    this.#readyChecks = [
      { name: 'shutdown', check: () => (this.#stopping ? 'shutting down' : undefined) },
      { name: 'leader-election', check: () => (this.#elector?.state === 'unknown' ? 'the Lease has not been read yet' : undefined) },
    ];
    if (this.sharder !== undefined) {
      const sharder = this.sharder;
      this.#readyChecks.push({ name: 'sharding', check: () => (sharder.joined ? undefined : 'the peer Lease has not been written yet') });
      sharder.subscribe((change) => { this.metrics.observeShardChange(change); });
    }
    const registry = this.registry;
    const sharder = this.sharder;
    this.metrics.bind({ caches: () => registry.caches(), memoryBudget: () => registry.memoryBudget(), leader: () => this.isLeader, leaseName: election?.name ?? '', ...(sharder === undefined ? {} : { shard: () => sharder.status() }) });
  }

  /** True while this replica leads (always, without leader election). */
  get isLeader(): boolean {
    if (this.#leaderElection === undefined || this.#leaderElection.enabled === false) return true;
    return this.#elector?.isLeader ?? false;
  }

  /** This replica's identity in the leader Lease or the shard group. */
  get identity(): string | undefined {
    return this.#elector?.identity ?? this.sharder?.identity;
  }

  /** `http(s)://host:port` of the probe server, once started. */
  get probeUrl(): string | undefined {
    return this.#probeUrl;
  }

  /** `http(s)://host:port` of the metrics server, once started. */
  get metricsUrl(): string | undefined {
    return this.#metricsUrl;
  }

  #beforeStart(what: string): void {
    if (this.#started) throw new Error(`Manager.${what} after start`);
  }

  /** Adds a controller (run through `runWorkers`, its metrics wired) or a runnable. Before `start`. */
  add<K = OwnerKey>(item: Controller<K> | Runnable): void {
    this.#beforeStart('add');
    if (typeof item.name !== 'string' || item.name === '') throw new TypeError(`Manager.add: name must be a non-empty string, got ${JSON.stringify(item.name)}`);
    if (this.#managed.some((m) => m.name === item.name)) throw new TypeError(`Manager.add: a controller or runnable named ${JSON.stringify(item.name)} was already added`);
    const needLeaderElection = item.needLeaderElection ?? true;
    if ('start' in item) {
      if (typeof item.start !== 'function') throw new TypeError('Manager.add: start must be a function');
      if (item.controller !== undefined) {
        this.#queueController ??= item.name;
        this.metrics.addController(item.name, { workers: item.controller.workers, queue: this.registry.queue.name });
      }
      this.#managed.push({ name: item.name, needLeaderElection, run: (signal) => item.start(signal) });
      return;
    }
    if (typeof item.reconcile !== 'function') throw new TypeError('Manager.add: a controller needs reconcile(key, context), a runnable start(signal)');
    const shardKeyOf = item.shardKeyOf;
    if (shardKeyOf !== undefined && (typeof shardKeyOf !== 'function' || this.sharder === undefined)) throw new TypeError('Manager.add: shardKeyOf needs the sharding option, and must be a function');
    const reconcile = shardKeyOf === undefined || this.sharder === undefined ? item.reconcile.bind(item) : shardedReconcile(this.sharder, shardKeyOf, item.reconcile.bind(item));
    // Without a queue of its own, K is OwnerKey (the documented default).
    const queue = item.queue ?? (this.registry.queue as unknown as RateLimitingQueue<K>);
    if (item.queue === undefined) this.#queueController ??= item.name;
    const workers = item.workers ?? 1;
    this.metrics.addController(item.name, { workers, queue: queue.name });
    const logger = this.#logger;
    const clock = this.#clock;
    const onReconcile = this.metrics.observeReconcile;
    this.#managed.push({
      name: item.name,
      needLeaderElection,
      run: (signal) => runWorkers(queue, {
        signal,
        workers,
        name: item.name,
        maxRetries: item.maxRetries,
        logger,
        clock,
        onReconcile,
        handler: (key, workSignal, context) => reconcile(key, { ...context, signal: workSignal }),
      }),
    });
  }

  /** Adds a liveness check (`/healthz`): failing it gets the process restarted. Before `start`. */
  addHealthzCheck(name: string, check: CheckFunction): void {
    this.#addCheck(this.#healthChecks, 'addHealthzCheck', name, check);
  }

  /** Adds a readiness check (`/readyz`), such as {@link syncedCheck}. Before `start`. */
  addReadyzCheck(name: string, check: CheckFunction): void {
    this.#addCheck(this.#readyChecks, 'addReadyzCheck', name, check);
  }

  #addCheck(list: Check[], what: string, name: string, check: CheckFunction): void {
    this.#beforeStart(what);
    if (typeof name !== 'string' || name === '' || list.some((c) => c.name === name)) throw new TypeError(`Manager.${what}: name must be a new non-empty string, got ${JSON.stringify(name)}`);
    if (typeof check !== 'function') throw new TypeError(`Manager.${what}: check must be a function`);
    list.push({ name, check });
  }

  /**
   * Serves `route` at `path` on the metrics server, behind the same authentication as `/metrics`
   * (the SubjectAccessReview names the path). Before `start`; needs `metricsServer`.
   */
  addRoute(path: string, route: Route): void {
    this.#addPath('addRoute', path, route, this.#routes);
  }

  /**
   * Like {@link addRoute} for a handler that writes its own answer (server-sent events, files);
   * a `path` ending in `/` serves its whole subtree. With `public`, it is answered without the
   * authentication: only for what anyone may read (a static page that carries no data). With
   * `action`, it takes every method and is never asked the server's authentication: the handler
   * authenticates and authorises each request itself, on the caller's own rights.
   */
  addHandler(path: string, handler: RouteHandler, options: { readonly public?: boolean | undefined; readonly action?: boolean | undefined } = {}): void {
    this.#addPath('addHandler', path, handler, this.#handlers);
    if (options.public === true) this.#publicPaths.add(path);
    if (options.action === true) this.#actionPaths.add(path);
  }

  #addPath<V>(what: string, path: string, value: V, into: Map<string, V>): void {
    this.#beforeStart(what);
    if (this.#metricsServer === undefined) throw new TypeError(`Manager.${what} needs the metricsServer option: routes are served there`);
    if (typeof path !== 'string' || !path.startsWith('/') || path === '/metrics' || this.#routes.has(path) || this.#handlers.has(path)) {
      throw new TypeError(`Manager.${what}: path must be a new absolute path other than /metrics, got ${JSON.stringify(path)}`);
    }
    if (typeof value !== 'function') throw new TypeError(`Manager.${what}: the handler must be a function`);
    into.set(path, value);
  }

  /**
   * Starts the servers, the runnables that run on every replica, sharding, and leader election
   * (or, without it, everything), then runs until `signal` aborts. Resolves once everything has
   * stopped, in this order: readiness fails; controllers stop taking keys and their in-flight
   * reconciles finish (up to the grace period); the Lease is released, or the shard fences and
   * then the peer Lease; the registry closes (caches, connections); the servers close.
   *
   * @throws {LeadershipLostError} the Lease could not be renewed (in-flight reconciles are not
   *   awaited then: another replica may lead already).
   * @throws {ShardGroupLostError} the peer Lease could not be renewed (likewise: others take the keys).
   * @throws {RunnableFailedError} a controller or runnable rejected.
   * @throws {ShutdownTimeoutError} reconciles were still running after the grace period.
   * A server that cannot bind rejects at once, after releasing what was started.
   */
  async start(signal: AbortSignal): Promise<void> {
    if (!(signal instanceof AbortSignal)) throw new TypeError('Manager.start: signal must be an AbortSignal');
    this.#beforeStart('start');
    this.#started = true;
    const holds: ClusterLease[] = [];
    let stopCertificates = (): void => undefined;
    const closeServers = async (): Promise<void> => {
      stopCertificates();
      await Promise.all(this.#servers.map((s) => s.close()));
      for (const hold of holds) hold.release();
    };
    try {
      await this.#startServers(holds, (stop) => { stopCertificates = stop; });
    } catch (err) {
      await closeServers();
      await this.#closeRegistry();
      throw err;
    }

    let reportStop: (reason: StopReason) => void = () => undefined;
    const stopped = new Promise<StopReason>((resolve) => { reportStop = resolve; });
    const onSignal = (): void => { reportStop({ kind: 'signal' }); };
    if (signal.aborted) onSignal();
    signal.addEventListener('abort', onSignal, { once: true });

    const work = new AbortController();
    const running = new Map<string, Promise<void>>();
    const launch = (m: Managed): void => {
      this.#logger.info('starting', { runnable: m.name });
      running.set(m.name, m.run(work.signal).then(
        () => { if (!work.signal.aborted) this.#logger.info('stopped on its own', { runnable: m.name }); },
        (err: unknown) => {
          const error = toError(err);
          this.#logger.error(`${m.name} failed: ${error.message}`, { runnable: m.name, error });
          reportStop({ kind: 'failed', error: new RunnableFailedError(m.name, error) });
        },
      ).finally(() => { running.delete(m.name); }));
    };
    // Sharding runs on every replica, not gated on leadership; controllers drop keys until it owns some.
    const sharding = new AbortController();
    let sharded: Promise<void> | undefined;
    if (this.sharder !== undefined && this.#shardLeases !== undefined && this.#shardHeartbeat !== undefined && this.#sharding !== undefined) {
      sharded = this.#shard(this.sharder, { leases: this.#shardLeases, heartbeat: this.#shardHeartbeat }, this.#sharding, sharding.signal, reportStop);
    }
    for (const m of this.#managed) if (!m.needLeaderElection) launch(m);
    const startLeading = (): void => { for (const m of this.#managed) if (m.needLeaderElection) launch(m); };

    const election = new AbortController();
    let electing: Promise<void> | undefined;
    const electionOptions = this.#leaderElection;
    if (this.#elector === undefined || this.#leases === undefined || electionOptions === undefined) {
      startLeading();
    } else {
      electing = this.#elect(this.#elector, this.#leases, electionOptions, election.signal, startLeading, reportStop);
    }

    const reason = await stopped;
    signal.removeEventListener('abort', onSignal);
    this.#stopping = true;
    const lost = reason.kind === 'failed' && (reason.error instanceof LeadershipLostError || reason.error instanceof ShardGroupLostError);
    this.#logger.info(reason.kind === 'signal' ? 'stopping: waiting for reconciles in flight' : `stopping: ${reason.error.message}`);
    work.abort(new Error('the manager is stopping'));
    let timedOut: ShutdownTimeoutError | undefined;
    if (!lost) timedOut = await this.#drain(running);
    election.abort();
    sharding.abort(); // after the drain: fences are released once the work under them settled
    await electing; // the Lease released, its connection let go
    // Fences released, then the peer Lease deleted. Not awaited after a timed-out drain: the sharder
    // releases a fence only once the work under it settles, and that work ignored its signal.
    if (timedOut === undefined) await sharded;
    else void sharded?.then(() => { this.#logger.info('sharding stopped after the work that outlived the grace period'); });
    await this.#closeRegistry();
    await closeServers();
    this.#logger.info('stopped', { graceful: reason.kind === 'signal' && timedOut === undefined });
    if (reason.kind === 'failed') throw reason.error;
    if (timedOut !== undefined) throw timedOut;
  }

  /** Closes the registry (its caches), then the keeper it was lent (every connection). */
  async #closeRegistry(): Promise<void> {
    await this.registry.close();
    await this.clusters.close();
  }

  /** Waits for `running` up to the grace period; the error names what is left when it passes. */
  async #drain(running: ReadonlyMap<string, Promise<void>>): Promise<ShutdownTimeoutError | undefined> {
    let timer: { cancel(): void } | undefined;
    const expired = new Promise<'expired'>((resolve) => { timer = this.#clock.setTimer(this.#gracePeriodMs, () => { resolve('expired'); }); });
    const all = Promise.all(running.values()).then(() => 'done' as const);
    const outcome = await Promise.race([all, expired]);
    timer?.cancel();
    if (outcome === 'done') return undefined;
    const error = new ShutdownTimeoutError([...running.keys()], this.#gracePeriodMs);
    this.#logger.error(error.message);
    return error;
  }

  /**
   * Campaigns until `signal` aborts; resolves once the Lease is released and its connection let
   * go. Never rejects: a lost lease or a failure to reach the cluster is reported to `reportStop`.
   */
  async #elect(elector: LeaderElector, leases: DeferredLeaseClient, options: LeaderElectionOptions, signal: AbortSignal, startLeading: () => void, reportStop: (reason: StopReason) => void): Promise<void> {
    const namespace = options.namespace ?? '';
    let hold: ClusterLease;
    try {
      // A connection of its own, as controller-runtime gives leader election its own client:
      // renewals never queue behind caches and reconciles in the shared rate bucket.
      hold = await this.clusters.acquire({ kind: 'local' }, { ownerNamespace: namespace, purpose: 'leader-election', signal });
    } catch (err) {
      if (!signal.aborted) reportStop({ kind: 'failed', error: toError(err) });
      return;
    }
    try {
      leases.connect(new KubeLeaseClient({ connection: hold.connection, namespace, name: options.name }));
      const outcome: ElectionOutcome = await elector.run(signal, { onStartedLeading: startLeading });
      if (outcome === 'lost') reportStop({ kind: 'failed', error: new LeadershipLostError(leases.description) });
    } catch (err) {
      reportStop({ kind: 'failed', error: toError(err) });
    } finally {
      hold.release();
    }
  }

  /**
   * Runs the sharder until `signal` aborts; resolves once it released its fences and peer Lease and
   * let its connection go. Never rejects: a lost group or an unreachable cluster goes to `reportStop`.
   */
  async #shard(sharder: Sharder, stores: { readonly leases: DeferredShardLeaseStore; readonly heartbeat: DeferredShardLeaseStore }, options: ShardingOptions, signal: AbortSignal, reportStop: (reason: StopReason) => void): Promise<void> {
    const holds: ClusterLease[] = [];
    try {
      // Connections of their own, like leader election's: the group's reads and fence writes never
      // queue behind the caches, and the peer Lease's renewals never queue behind a burst of fence
      // writes (hundreds of releases when a replica joins would outlast the renew deadline).
      // The group's connection goes at the take rates (a dead replica's fences at the recovery rate
      // would otherwise queue behind the keeper's 20 requests/s), plus 10/s for the group's read,
      // releases and garbage; the heartbeat's is the keeper's.
      const limits = {
        qps: (options.maxFenceTakesPerSecond ?? 20) + (options.maxRecoveryTakesPerSecond ?? 100) + 10,
        burst: Math.max(30, options.recoveryTakeBurst ?? 250),
      };
      holds.push(await this.clusters.acquire({ kind: 'local' }, { ownerNamespace: options.namespace, purpose: 'sharding', limits, signal }));
      holds.push(await this.clusters.acquire({ kind: 'local' }, { ownerNamespace: options.namespace, purpose: 'sharding-heartbeat', signal }));
    } catch (err) {
      for (const hold of holds) hold.release();
      if (!signal.aborted) reportStop({ kind: 'failed', error: toError(err) });
      return;
    }
    try {
      const [group, heartbeat] = holds;
      if (group === undefined || heartbeat === undefined) throw new Error('the shard connections were not made');
      stores.leases.connect(new KubeShardLeaseStore({ connection: group.connection, namespace: options.namespace, group: options.group }));
      stores.heartbeat.connect(new KubeShardLeaseStore({ connection: heartbeat.connection, namespace: options.namespace, group: options.group }));
      if ((await sharder.run(signal)) === 'lost') reportStop({ kind: 'failed', error: new ShardGroupLostError(stores.leases.description) });
    } catch (err) {
      reportStop({ kind: 'failed', error: toError(err) });
    } finally {
      for (const hold of holds) hold.release();
    }
  }

  async #startServers(holds: ClusterLease[], setStopCertificates: (stop: () => void) => void): Promise<void> {
    if (this.#probeAddress !== undefined) {
      const server = await HttpServer.start({
        name: 'probes',
        address: this.#probeAddress,
        routes: { '/healthz': checksRoute(() => this.#healthChecks, 'healthz'), '/readyz': checksRoute(() => this.#readyChecks, 'readyz') },
        logger: this.#logger,
      });
      this.#servers.push(server);
      this.#probeUrl = server.url;
    }
    const options = this.#metricsServer;
    if (options === undefined) return;
    const routes = { ...Object.fromEntries(this.#routes), '/metrics': metricsRoute(() => this.metrics.metrics()) };
    const handlers = Object.fromEntries(this.#handlers);
    if (!(options.secure ?? true)) {
      this.#logger.warn('metrics are served over plain HTTP to anyone who can reach them (metricsServer.secure: false)');
      const server = await HttpServer.start({ name: 'metrics', address: options.bindAddress, routes, handlers, actionPaths: this.#actionPaths, logger: this.#logger });
      this.#servers.push(server);
      this.#metricsUrl = server.url;
      return;
    }
    const given = options.certificate;
    let tls: ServingCertificate;
    if (given === undefined) {
      const bound = options.bindAddress.host;
      tls = selfSignedCertificate({ commonName: 'fleetcache-metrics', hosts: ['localhost', hostname(), '127.0.0.1', '::1', ...(bound === '' ? [] : [bound])] });
      this.#logger.info('metrics: serving a self-signed certificate');
    } else if (isCertificateFiles(given)) {
      tls = await readCertificate(given);
      this.#logger.info('metrics: serving the certificate from files', { path: given.dir, cert: given.certName });
    } else {
      tls = given;
    }
    // The management cluster's own-identity connection, held while the server runs. A connection
    // of its own: scrapes are never held behind the controllers' rate bucket.
    const hold = await this.clusters.acquire({ kind: 'local' }, { ownerNamespace: 'default', purpose: 'metrics-auth' });
    holds.push(hold);
    const filter = new KubeAuthFilter({ reviews: (apiPath, body) => hold.connection.request({ method: 'POST', path: apiPath, body }), logger: this.#logger, clock: this.#clock });
    const server = await HttpServer.start({ name: 'metrics', address: options.bindAddress, routes, handlers, publicPaths: this.#publicPaths, actionPaths: this.#actionPaths, logger: this.#logger, tls, authorize: (req, urlPath) => filter.check(req, urlPath) });
    this.#servers.push(server);
    this.#metricsUrl = server.url;
    if (given !== undefined && isCertificateFiles(given)) {
      setStopCertificates(watchCertificate({ files: given, current: tls, onChange: (next) => { server.setCertificate(next); }, logger: this.#logger }));
    }
  }
}

/**
 * `reconcile` run only while this replica owns the key's shard key; its signal aborts on stop or
 * when ownership ends. A key owned elsewhere resolves as a success: its owner reconciles it.
 */
function shardedReconcile<K>(sharder: Sharder, shardKeyOf: (key: K) => string, reconcile: Controller<K>['reconcile']): Controller<K>['reconcile'] {
  return async (key, context) => {
    const outcome = await sharder.whileOwned(shardKeyOf(key), async (owned) => {
      // One child of the worker's signal, aborted by either: no per-item listener on a shared signal.
      const { controller, dispose } = childController(context.signal);
      const detach = onAbort(owned, () => { controller.abort(owned.reason); });
      try {
        return await reconcile(key, { ...context, signal: controller.signal });
      } finally {
        detach();
        dispose();
      }
    });
    return outcome.owned ? outcome.value : undefined;
  };
}

function isManagedClusters(value: unknown): value is ManagedClusters {
  if (typeof value !== 'object' || value === null) return false;
  const keeper = value as Record<string, unknown>;
  return typeof keeper.acquire === 'function' && typeof keeper.subscribe === 'function' && typeof keeper.close === 'function';
}

/**
 * A readiness check that passes once `source` has synced: a reader (a `watchOwners` reader, say),
 * or a registry (every cache it holds now). Fails with what has not synced.
 */
export function syncedCheck(source: Registry | { readonly synced: boolean; readonly cluster?: string; readonly gvk?: { readonly kind: string } }): CheckFunction {
  if (source instanceof Registry) {
    return () => {
      const pending = source.caches().filter((c) => !c.synced);
      return pending.length === 0 ? undefined : `${pending.length} cache(s) have not synced: ${pending.slice(0, 3).map((c) => `${c.cluster} ${c.gvk.kind}`).join(', ')}`;
    };
  }
  return () => (source.synced ? undefined : `${source.gvk?.kind ?? 'the cache'}${source.cluster === undefined ? '' : ` in ${source.cluster}`} has not synced`);
}
