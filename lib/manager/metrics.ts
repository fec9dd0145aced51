import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { RECONCILE_ERROR_REASONS, type QueueMetricsProvider, type QueueStats, type ReconcileObservation } from '../queue/index.ts';
import type { CacheInfo, MemoryBudgetStatus } from '../registry/index.ts';
import type { RequestObservation } from '../transport/index.ts';
import type { ShardChange, ShardStatus } from './shard/index.ts';

/** The Content-Type of the Prometheus text exposition format (0.0.4) that `/metrics` answers. */
export const metricsContentType: string = Registry.PROMETHEUS_CONTENT_TYPE;

/** Options of {@link ManagerMetrics}. */
export interface ManagerMetricsOptions {
  /**
   * The prom-client registry the metrics are registered in: pass your own to merge them with
   * your process's metrics. Default: a new `Registry`. Names must be free in it.
   */
  readonly registry?: Registry;
  /**
   * Register prom-client's Node runtime metrics (`process_*`, `nodejs_*`: CPU, memory, heap,
   * event-loop lag, GC) in the registry. Default true; pass false when the registry already has them.
   */
  readonly defaultMetrics?: boolean;
}

/** What {@link ManagerMetrics.bind} reads at scrape time. */
export interface MetricsSources {
  /** The registry's `caches()`. */
  readonly caches: () => readonly CacheInfo[];
  /** True while this process holds the lease (always true without leader election). */
  readonly leader: () => boolean;
  /** The Lease's name: `leader_election_master_status{name}`; '' leaves that series out (no leader election). */
  readonly leaseName: string;
  /** The sharder's status, with sharding (`fleetcache_shard_*`). Default: no shard series. */
  readonly shard?: (() => ShardStatus) | undefined;
  /** The registry's `memoryBudget()` (`fleetcache_memory_budget_*`). Default: both series at 0. */
  readonly memoryBudget?: (() => MemoryBudgetStatus | undefined) | undefined;
}

/** controller-runtime's workqueue buckets: 10 ns to 1000 s, ×10 each (`ExponentialBuckets(10e-9, 10, 12)`). */
const workqueueBuckets = [1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1, 10, 100, 1000];
/** controller-runtime's `controller_runtime_reconcile_time_seconds` buckets. */
const reconcileBuckets = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
  1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
];
/** client-go's `rest_client_request_duration_seconds` buckets. */
const requestBuckets = [0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0];
/** controller-runtime initialises every result of every controller at 0, so rates start at once. */
const reconcileResults = ['success', 'error', 'requeue', 'requeue_after'] as const;

/** One registered queue: the controller it serves and how to read its gauges. */
interface QueueEntry {
  /** Read on every push and scrape: a queue built before its controller was added learns it then. */
  readonly controller: () => string;
  readonly name: string;
  readonly stats: () => QueueStats;
  /** The provider's label function that registered it: pushes from another provider are dropped. */
  readonly owner: () => string | undefined;
}

/**
 * The manager's metrics in a prom-client registry, named and labelled as controller-runtime and
 * client-go name them: `controller_runtime_*{controller}`, `workqueue_*{controller,name}`,
 * `rest_client_*{cluster}`, `leader_election_master_status{name}`, the Node runtime metrics, and the
 * registry's caches as `fleetcache_*{cluster,group,version,kind}`.
 *
 * The library reports through neutral hooks, which this class turns into samples: a queue's
 * {@link QueueMetricsProvider} ({@link queueMetrics}), runWorkers' `onReconcile`
 * ({@link observeReconcile}), a connection's `onRequest` ({@link observeRequest}). Gauges and the
 * caches' counters are read at scrape time from {@link bind}'s sources.
 *
 * Invariant: `#queues` has one entry per queue name; pushes for a name never registered are dropped
 * rather than invented (a label set with no queue behind it would never move).
 */
export class ManagerMetrics {
  /** Where every metric of the manager is registered; `metrics()` renders it. */
  readonly registry: Registry;
  readonly #queues = new Map<string, QueueEntry>();
  readonly #controllers = new Map<string, { readonly workers: number; readonly queue: string }>();
  #sources: MetricsSources | undefined;

  readonly #reconcileTotal: Counter<'controller' | 'result'>;
  readonly #reconcileErrors: Counter<'controller'>;
  readonly #reconcilePanics: Counter<'controller'>;
  readonly #reconcileErrorReasons: Counter<'controller' | 'reason'>;
  readonly #reconcileTime: Histogram<'controller'>;
  readonly #adds: Counter<'controller' | 'name'>;
  readonly #retries: Counter<'controller' | 'name'>;
  readonly #queueDuration: Histogram<'controller' | 'name'>;
  readonly #workDuration: Histogram<'controller' | 'name'>;
  readonly #requests: Counter<'cluster' | 'code' | 'method'>;
  readonly #requestDuration: Histogram<'cluster' | 'verb'>;
  readonly #handoffs: Counter<'direction'>;

  constructor(options: ManagerMetricsOptions = {}) {
    if (options.registry !== undefined && !(options.registry instanceof Registry)) throw new TypeError('ManagerMetrics option registry must be a prom-client Registry');
    const registry = options.registry ?? new Registry();
    this.registry = registry;
    const registers = [registry];
    // prom-client calls `collect` with the metric as `this`: reach this object through closures.
    const queues = this.#queues;
    const controllers = this.#controllers;
    const sources = (): MetricsSources | undefined => this.#sources;

    this.#reconcileTotal = new Counter({ name: 'controller_runtime_reconcile_total', help: 'Total number of reconciliations per controller', labelNames: ['controller', 'result'], registers });
    this.#reconcileErrors = new Counter({ name: 'controller_runtime_reconcile_errors_total', help: 'Total number of reconciliation errors per controller', labelNames: ['controller'], registers });
    this.#reconcilePanics = new Counter({ name: 'controller_runtime_reconcile_panics_total', help: 'Total number of reconciliation panics per controller', labelNames: ['controller'], registers });
    // controller_runtime_reconcile_errors_total keeps controller-runtime's one label; the reason is a
    // second counter, its values the fixed RECONCILE_ERROR_REASONS (bounded whatever handlers throw).
    this.#reconcileErrorReasons = new Counter({ name: 'fleetcache_reconcile_errors_total', help: 'Total number of reconciliation errors per controller and reason (conflict, not_found, forbidden, invalid, throttled, server_error, api_error, transport, timeout, fleetcache, panic, invalid_result, other)', labelNames: ['controller', 'reason'], registers });
    this.#reconcileTime = new Histogram({ name: 'controller_runtime_reconcile_time_seconds', help: 'Length of time per reconciliation per controller', labelNames: ['controller'], buckets: reconcileBuckets, registers });
    new Gauge({
      name: 'controller_runtime_max_concurrent_reconciles', help: 'Maximum number of concurrent reconciles per controller', labelNames: ['controller'], registers,
      collect() { for (const [controller, c] of controllers) this.set({ controller }, c.workers); },
    });
    new Gauge({
      name: 'controller_runtime_active_workers', help: 'Number of currently used workers per controller', labelNames: ['controller'], registers,
      collect() {
        // A worker is busy exactly while its item is handed out and not done: the queue's `processing`.
        for (const [controller, c] of controllers) this.set({ controller }, queues.get(c.queue)?.stats().processing ?? 0);
      },
    });

    const queueGauge = (name: string, help: string, read: (s: QueueStats) => number): void => {
      new Gauge({
        name, help, labelNames: ['controller', 'name'], registers,
        collect() { for (const q of queues.values()) this.set({ controller: q.controller(), name: q.name }, read(q.stats())); },
      });
    };
    queueGauge('workqueue_depth', 'Current depth of workqueue', (s) => s.depth);
    this.#adds = new Counter({ name: 'workqueue_adds_total', help: 'Total number of adds handled by workqueue', labelNames: ['controller', 'name'], registers });
    this.#queueDuration = new Histogram({ name: 'workqueue_queue_duration_seconds', help: 'How long in seconds an item stays in workqueue before being requested', labelNames: ['controller', 'name'], buckets: workqueueBuckets, registers });
    this.#workDuration = new Histogram({ name: 'workqueue_work_duration_seconds', help: 'How long in seconds processing an item from workqueue takes.', labelNames: ['controller', 'name'], buckets: workqueueBuckets, registers });
    queueGauge('workqueue_unfinished_work_seconds', 'How many seconds of work has been done that is in progress and hasn\'t been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.', (s) => s.unfinishedWorkSeconds);
    queueGauge('workqueue_longest_running_processor_seconds', 'How many seconds has the longest running processor for workqueue been running.', (s) => s.longestRunningProcessorSeconds);
    this.#retries = new Counter({ name: 'workqueue_retries_total', help: 'Total number of retries handled by workqueue', labelNames: ['controller', 'name'], registers });

    this.#requests = new Counter({ name: 'rest_client_requests_total', help: 'Number of HTTP requests, partitioned by cluster, status code and method.', labelNames: ['cluster', 'code', 'method'], registers });
    this.#requestDuration = new Histogram({ name: 'rest_client_request_duration_seconds', help: 'Request latency in seconds. Broken down by cluster and verb.', labelNames: ['cluster', 'verb'], buckets: requestBuckets, registers });

    new Gauge({
      name: 'leader_election_master_status', help: 'Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. \'name\' is the string used to identify the lease.', labelNames: ['name'], registers,
      collect() { const s = sources(); if (s !== undefined && s.leaseName !== '') this.set({ name: s.leaseName }, s.leader() ? 1 : 0); },
    });
    new Gauge({
      name: 'fleetcache_leader', help: '1 while this process is the leader (always 1 without leader election).', registers,
      collect() { const s = sources(); if (s !== undefined) this.set(s.leader() ? 1 : 0); },
    });

    this.#cacheMetrics(registers, sources);
    this.#handoffs = new Counter({ name: 'fleetcache_shard_handoffs_total', help: 'Shard keys this replica gained (fence taken) or lost (stopped acting for), with sharding.', labelNames: ['direction'], registers });
    this.#shardMetrics(registers, sources);

    if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry });
  }

  /** `fleetcache_*` per cache, read from `caches()` at scrape time (series vanish with their cache). */
  #cacheMetrics(registers: Registry[], sources: () => MetricsSources | undefined): void {
    const labelNames = ['cluster', 'group', 'version', 'kind'] as const;
    const labelsOf = (c: CacheInfo): Record<(typeof labelNames)[number], string> => ({ cluster: c.cluster, group: c.gvk.group, version: c.gvk.version, kind: c.gvk.kind });
    const caches = (): readonly CacheInfo[] => sources()?.caches() ?? [];
    new Gauge({
      name: 'fleetcache_caches', help: 'Informer caches the registry holds, one per cluster and group/version/kind.', registers,
      collect() { this.set(caches().length); },
    });
    const perCache = (name: string, help: string, type: 'gauge' | 'counter', read: (c: CacheInfo) => number): void => {
      if (type === 'gauge') {
        new Gauge({ name, help, labelNames, registers, collect() { this.reset(); for (const c of caches()) this.set(labelsOf(c), read(c)); } });
      } else {
        new Counter({ name, help, labelNames, registers, collect() { this.reset(); for (const c of caches()) this.inc(labelsOf(c), read(c)); } });
      }
    };
    perCache('fleetcache_cache_synced', '1 once the cache has applied its first complete LIST.', 'gauge', (c) => (c.synced ? 1 : 0));
    perCache('fleetcache_cached_objects', 'Objects held in the cache.', 'gauge', (c) => c.objects);
    perCache('fleetcache_cache_retained_bytes', 'Estimated bytes the cache\'s objects hold (their stored text plus a per-object estimate).', 'gauge', (c) => c.retainedBytes ?? 0);
    perCache('fleetcache_cache_compressed_objects', 'Objects the cache holds packed (informer objects: compressed).', 'gauge', (c) => c.compressed ?? 0);
    perCache('fleetcache_cache_owners', 'Owners (Pipelines) that use at least one target in the cache.', 'gauge', (c) => c.owners);
    perCache('fleetcache_relists_total', 'Full LISTs the cache made after its first one (watch gaps, 410 Gone).', 'counter', (c) => c.relists);
    perCache('fleetcache_watch_errors_total', 'Errors the cache\'s list/watch loop met.', 'counter', (c) => c.watchErrors);
    const budget = (): MemoryBudgetStatus | undefined => sources()?.memoryBudget?.();
    new Gauge({
      name: 'fleetcache_memory_budget_bytes', help: 'Resident memory at or above which the registry refuses new caches (--memory-budget); 0 without a budget.', registers,
      collect() { this.set(budget()?.maxRssBytes ?? 0); },
    });
    new Counter({
      name: 'fleetcache_memory_budget_refusals_total', help: 'New caches the registry refused because the process\'s resident memory was over its budget.', registers,
      collect() { this.reset(); this.inc(budget()?.refusals ?? 0); },
    });
  }

  /** `fleetcache_shard_*`, read from the sharder's status at scrape time; absent without sharding. */
  #shardMetrics(registers: Registry[], sources: () => MetricsSources | undefined): void {
    const shardGauge = (name: string, help: string, read: (s: ShardStatus) => number): void => {
      new Gauge({ name, help, registers, collect() { const status = sources()?.shard?.(); if (status !== undefined) this.set(read(status)); } });
    };
    shardGauge('fleetcache_shard_peers', 'Live replicas of the shard group this replica sees, itself included.', (s) => s.peers.filter((p) => p.live).length);
    shardGauge('fleetcache_shard_owned_keys', 'Shard keys this replica acts for.', (s) => s.owned.length);
    shardGauge('fleetcache_shard_unowned_keys', 'Live shard keys no live replica acts for, group-wide (handoffs in progress).', (s) => s.unowned.length);
    shardGauge('fleetcache_shard_orphaned_keys', 'Live shard keys no live replica has acted for longer than the no-orphan bound: an error.', (s) => s.orphaned.length);
  }

  /** Sets what scrape-time metrics read (caches, leadership, sharding). Until then they are empty. */
  bind(sources: MetricsSources): void {
    this.#sources = sources;
    if (sources.shard !== undefined) for (const direction of ['gained', 'lost']) this.#handoffs.inc({ direction }, 0);
  }

  /** A sharder's change: counts `fleetcache_shard_handoffs_total{direction}`. */
  readonly observeShardChange = (change: ShardChange): void => {
    if (change.gained.length > 0) this.#handoffs.inc({ direction: 'gained' }, change.gained.length);
    if (change.lost.length > 0) this.#handoffs.inc({ direction: 'lost' }, change.lost.length);
  };

  /**
   * Declares a controller: `workers` is its `controller_runtime_max_concurrent_reconciles`, and its
   * active workers are read from the queue named `queue` (register it through {@link queueMetrics}).
   * Its reconcile results start at 0.
   */
  addController(controller: string, settings: { readonly workers: number; readonly queue: string }): void {
    this.#controllers.set(controller, settings);
    for (const result of reconcileResults) this.#reconcileTotal.inc({ controller, result }, 0);
    this.#reconcileErrors.inc({ controller }, 0);
    this.#reconcilePanics.inc({ controller }, 0);
  }

  /**
   * A queue metrics provider whose series carry `controller` (and the queue's own `name`).
   * `controller` may be a function, read on every push and scrape: for a queue built before the
   * controller that consumes it (a registry's queue); until then it names the queue itself.
   */
  queueMetrics(controller: string | (() => string | undefined)): QueueMetricsProvider {
    const label = typeof controller === 'string' ? (): string | undefined => controller : controller;
    const known = (name: string): string | undefined => {
      const q = this.#queues.get(name);
      return q?.owner === label ? q.controller() : undefined;
    };
    // Pushes run on the queue's hot path: O(buckets), never throwing.
    return {
      register: (name, stats) => { this.#queues.set(name, { controller: () => label() ?? name, name, stats, owner: label }); },
      added: (name) => { const c = known(name); if (c !== undefined) this.#adds.inc({ controller: c, name }); },
      queued: (name, seconds) => { const c = known(name); if (c !== undefined && Number.isFinite(seconds)) this.#queueDuration.observe({ controller: c, name }, seconds); },
      worked: (name, seconds) => { const c = known(name); if (c !== undefined && Number.isFinite(seconds)) this.#workDuration.observe({ controller: c, name }, seconds); },
      retried: (name) => { const c = known(name); if (c !== undefined) this.#retries.inc({ controller: c, name }); },
    };
  }

  /** runWorkers' `onReconcile`. */
  readonly observeReconcile = (o: ReconcileObservation): void => {
    this.#reconcileTotal.inc({ controller: o.controller, result: o.result });
    if (o.result === 'error') {
      this.#reconcileErrors.inc({ controller: o.controller });
      const reason = o.reason !== undefined && RECONCILE_ERROR_REASONS.includes(o.reason) ? o.reason : 'other';
      this.#reconcileErrorReasons.inc({ controller: o.controller, reason });
      if (reason === 'panic') this.#reconcilePanics.inc({ controller: o.controller });
    }
    this.#reconcileTime.observe({ controller: o.controller }, Math.max(0, o.durationMs) / 1000);
  };

  /** A ClusterConnection's `onRequest`. */
  readonly observeRequest = (o: RequestObservation): void => {
    this.#requests.inc({ cluster: o.cluster, code: o.code, method: o.method });
    this.#requestDuration.observe({ cluster: o.cluster, verb: o.method }, Math.max(0, o.durationMs) / 1000);
  };

  /** The whole `/metrics` answer, in the text format, read now. */
  metrics(): Promise<string> {
    return this.registry.metrics();
  }
}
