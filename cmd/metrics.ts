import { cpuUsage, memoryUsage } from 'node:process';
import type { QueueMetricsProvider, QueueStats } from '../lib/queue/index.ts';
import type { CacheInfo } from '../lib/registry/index.ts';
import { formatGvk } from '../lib/util/index.ts';

/** The Content-Type of the Prometheus text exposition format this module writes. */
export const metricsContentType = 'text/plain; version=0.0.4; charset=utf-8';

/** What the controller reports for `/metrics` (the PipelineController's `stats()`). */
export interface ControllerStats {
  readonly reconciles: number;
  readonly reconcileErrors: number;
  readonly promotions: { readonly succeeded: number; readonly failed: number };
}

/** Where `/metrics` reads from at scrape time. */
export interface MetricsSources {
  readonly workqueue: WorkqueueMetrics;
  /** The registry's `caches()`. */
  readonly caches: () => readonly CacheInfo[];
  readonly controller: () => ControllerStats;
  /** 1 while this process holds the lease (always 1 without leader election). */
  readonly leader: () => boolean;
}

/** controller-runtime's workqueue buckets: 10 ns to 1000 s, ×10 each (`ExponentialBuckets(10e-9, 10, 12)`). */
const durationBuckets: readonly number[] = [1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1, 10, 100, 1000];

/** A cumulative histogram of fixed buckets. */
class Histogram {
  /** counts[i] observations fell into (buckets[i-1], buckets[i]]; the last slot is +Inf. */
  readonly buckets: readonly number[];
  readonly counts: number[];
  sum = 0;
  count = 0;

  constructor(buckets: readonly number[]) {
    this.buckets = buckets;
    this.counts = new Array<number>(buckets.length + 1).fill(0);
  }

  observe(value: number): void {
    if (!Number.isFinite(value)) return;
    let i = this.buckets.findIndex((upper) => value <= upper);
    if (i < 0) i = this.buckets.length;
    this.counts[i] = (this.counts[i] ?? 0) + 1;
    this.sum += value;
    this.count += 1;
  }
}

/** Everything recorded for one queue. */
interface QueueSeries {
  readonly stats: () => QueueStats;
  adds: number;
  retries: number;
  readonly queueDuration: Histogram;
  readonly workDuration: Histogram;
}

/**
 * Collects lib/queue's `workqueue_*` metrics in memory, for {@link renderMetrics}. Pushes are
 * O(buckets) and never throw (they run on the queue's hot path).
 *
 * Invariant: `#queues` has one entry per registered queue name; pushes for a name never
 * registered are dropped rather than invented.
 */
export class WorkqueueMetrics implements QueueMetricsProvider {
  readonly #queues = new Map<string, QueueSeries>();

  register(name: string, stats: () => QueueStats): void {
    this.#queues.set(name, { stats, adds: 0, retries: 0, queueDuration: new Histogram(durationBuckets), workDuration: new Histogram(durationBuckets) });
  }

  added(name: string): void {
    const q = this.#queues.get(name);
    if (q !== undefined) q.adds += 1;
  }

  queued(name: string, seconds: number): void {
    this.#queues.get(name)?.queueDuration.observe(seconds);
  }

  worked(name: string, seconds: number): void {
    this.#queues.get(name)?.workDuration.observe(seconds);
  }

  retried(name: string): void {
    const q = this.#queues.get(name);
    if (q !== undefined) q.retries += 1;
  }

  /** Every registered queue's series, for {@link renderMetrics}. */
  entries(): IterableIterator<[string, QueueSeries]> {
    return this.#queues.entries();
  }
}

type Labels = Readonly<Record<string, string>>;

function escapeLabel(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

function formatValue(value: number): string {
  if (Number.isNaN(value)) return 'NaN';
  if (value === Infinity) return '+Inf';
  if (value === -Infinity) return '-Inf';
  return String(value);
}

function formatLabels(labels: Labels): string {
  const pairs = Object.entries(labels).map(([k, v]) => `${k}="${escapeLabel(v)}"`);
  return pairs.length === 0 ? '' : `{${pairs.join(',')}}`;
}

/** Writes metric families in the text format: HELP and TYPE once per family, then its samples. */
class TextWriter {
  readonly #lines: string[] = [];

  family(name: string, type: 'counter' | 'gauge' | 'histogram', help: string, samples: readonly (readonly [Labels, number])[]): void {
    this.#lines.push(`# HELP ${name} ${help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')}`, `# TYPE ${name} ${type}`);
    for (const [labels, value] of samples) this.#lines.push(`${name}${formatLabels(labels)} ${formatValue(value)}`);
  }

  histogram(name: string, help: string, series: readonly (readonly [Labels, Histogram])[]): void {
    this.#lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} histogram`);
    for (const [labels, h] of series) {
      let cumulative = 0;
      h.buckets.forEach((upper, i) => {
        cumulative += h.counts[i] ?? 0;
        this.#lines.push(`${name}_bucket${formatLabels({ ...labels, le: formatValue(upper) })} ${cumulative}`);
      });
      this.#lines.push(
        `${name}_bucket${formatLabels({ ...labels, le: '+Inf' })} ${h.count}`,
        `${name}_sum${formatLabels(labels)} ${formatValue(h.sum)}`,
        `${name}_count${formatLabels(labels)} ${h.count}`,
      );
    }
  }

  text(): string {
    return `${this.#lines.join('\n')}\n`;
  }
}

const startTimeSeconds = Date.now() / 1000 - process.uptime();

/** The whole `/metrics` answer, read from `sources` now. */
export function renderMetrics(sources: MetricsSources): string {
  const w = new TextWriter();
  const queues = [...sources.workqueue.entries()].map(([name, q]) => ({ labels: { name }, q, stats: q.stats() }));
  w.family('workqueue_depth', 'gauge', 'Current depth of workqueue', queues.map(({ labels, stats }) => [labels, stats.depth]));
  w.family('workqueue_adds_total', 'counter', 'Total number of adds handled by workqueue', queues.map(({ labels, q }) => [labels, q.adds]));
  w.histogram('workqueue_queue_duration_seconds', 'How long in seconds an item stays in workqueue before being requested', queues.map(({ labels, q }) => [labels, q.queueDuration]));
  w.histogram('workqueue_work_duration_seconds', 'How long in seconds processing an item from workqueue takes.', queues.map(({ labels, q }) => [labels, q.workDuration]));
  w.family('workqueue_unfinished_work_seconds', 'gauge', 'How many seconds of work has been done that is in progress and hasn\'t been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.', queues.map(({ labels, stats }) => [labels, stats.unfinishedWorkSeconds]));
  w.family('workqueue_longest_running_processor_seconds', 'gauge', 'How many seconds has the longest running processor for workqueue been running.', queues.map(({ labels, stats }) => [labels, stats.longestRunningProcessorSeconds]));
  w.family('workqueue_retries_total', 'counter', 'Total number of retries handled by workqueue', queues.map(({ labels, q }) => [labels, q.retries]));

  const caches = sources.caches().map((c) => ({ labels: { cluster: c.cluster, gvk: formatGvk(c.gvk) }, c }));
  w.family('fleetcache_caches', 'gauge', 'Informer caches the registry holds, one per cluster and group/version/kind.', [[{}, caches.length]]);
  w.family('fleetcache_cache_synced', 'gauge', '1 once the cache has applied its first complete LIST.', caches.map(({ labels, c }) => [labels, c.synced ? 1 : 0]));
  w.family('fleetcache_cached_objects', 'gauge', 'Objects held in the cache.', caches.map(({ labels, c }) => [labels, c.objects]));
  w.family('fleetcache_cache_owners', 'gauge', 'Owners (Pipelines) that use at least one target in the cache.', caches.map(({ labels, c }) => [labels, c.owners]));
  w.family('fleetcache_relists_total', 'counter', 'Full LISTs the cache made after its first one (watch gaps, 410 Gone).', caches.map(({ labels, c }) => [labels, c.relists]));
  w.family('fleetcache_watch_errors_total', 'counter', 'Errors the cache\'s list/watch loop met.', caches.map(({ labels, c }) => [labels, c.watchErrors]));

  const stats = sources.controller();
  w.family('fleetcache_reconciles_total', 'counter', 'Pipeline reconciles run.', [[{}, stats.reconciles]]);
  w.family('fleetcache_reconcile_errors_total', 'counter', 'Pipeline reconciles that failed (and were retried through the queue).', [[{}, stats.reconcileErrors]]);
  w.family('fleetcache_promotions_total', 'counter', 'Promotions of a revision to the next environment, by outcome.', [
    [{ outcome: 'succeeded' }, stats.promotions.succeeded],
    [{ outcome: 'failed' }, stats.promotions.failed],
  ]);
  w.family('fleetcache_leader', 'gauge', '1 while this process is the leader (always 1 without --leader-elect).', [[{}, sources.leader() ? 1 : 0]]);

  const cpu = cpuUsage();
  w.family('process_cpu_seconds_total', 'counter', 'Total user and system CPU time spent in seconds.', [[{}, (cpu.user + cpu.system) / 1e6]]);
  w.family('process_resident_memory_bytes', 'gauge', 'Resident memory size in bytes.', [[{}, memoryUsage.rss()]]);
  w.family('process_start_time_seconds', 'gauge', 'Start time of the process since unix epoch in seconds.', [[{}, Math.round(startTimeSeconds)]]);
  return w.text();
}
