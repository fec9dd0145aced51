// Registry benchmark: `node --expose-gc bench/registry.bench.ts [--quick] [--rates=1000,5000,10000]
// [--seconds=3] [--rounds=1] [--objects=1000]` (make bench). The simulated API server runs in a
// process of its own (bench/latency/sim-host.ts), so this process holds only the registry.
//
// 1. Event → owner requeued, measured where it is made: each event is stamped when the chunk
//    holding it reaches the connection (`onWatchChunk`, before decoding) and when its owner is
//    added to the registry's requeue queue (a queue given as the `queue` option), both on this
//    process's monotonic clock; no clock crosses processes. At each rate, p50/p99/p99.9/max of that
//    latency, the garbage collector's pauses in the same window (perf_hooks 'gc' entries: count,
//    longest, total), and beside them how late the simulator sent against its schedule (its own
//    clock): lag there is the simulator's, not the registry's. The events are also split by that
//    lag: on schedule (sent < 1 ms late) and burst (sent later, so in a batch with the events the
//    simulator caught up on, each waiting behind the ones before it in the registry), and the
//    registry's cost per event back to back: the gap between two requeues of one chunk's events.
//    Heap flags given to this process (`--max-semi-space-size`, `--single-threaded-gc`) are
//    printed in the header, to compare settings run after run. A consumer takes keys off the
//    queue as a worker would (get, done; no work). One owner per object, 1,000 objects by default.
//    The arrival stamp is taken when the bytes are handed to JavaScript: time they wait in the
//    socket while this process is in a GC pause or a long task is not counted (hence the pauses
//    beside). Stamping costs a Buffer.indexOf per chunk, on the measured path; without a
//    benchmark the observer is unset and nothing is attached to the stream.
// 2. Hot path: watchTargetAndGetReader for a key whose cache exists, in calls per second, beside a
//    plain async-mutex-guarded Map doing the same key computation and lookup. Ratios, not absolute
//    times, are what to compare: the machines are shared (the load average is printed).
import { Mutex } from 'async-mutex';
import { spawn } from 'node:child_process';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { constants, performance, PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { clusterKey, StaticProvider, type ClusterRef } from '../lib/cluster/index.ts';
import { ownerKey, type OwnerKey, type Registry } from '../lib/registry/index.ts';
import { registryWithKeeper } from '../lib/registry/testing.ts';
import type { GroupVersionKind } from '../lib/util/index.ts';
import { StampedQueue, Window } from './latency/stamps.ts';

const args = process.argv.slice(2);
const option = (name: string, fallback: string): string => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback;
const quick = args.includes('--quick');
const rates = option('rates', '1000,5000,10000').split(',').map(Number);
const seconds = Number(option('seconds', quick ? '1' : '3'));
const rounds = Number(option('rounds', '1'));
const objects = Number(option('objects', '1000'));
if (rates.some((r) => !(r > 0)) || !(seconds > 0) || !Number.isInteger(rounds) || rounds < 1 || !Number.isInteger(objects) || objects < 1) {
  throw new TypeError('--rates must be positive numbers, --seconds positive, --rounds and --objects positive integers');
}

/** An event the simulator sent less than this late against its schedule counts as on schedule. */
const ON_SCHEDULE_MS = 1;
const configMaps: GroupVersionKind = { group: '', version: 'v1', kind: 'ConfigMap' };
const ref: ClusterRef = { kind: 'static', name: 'sim' };
const owner = (k: number): { namespace: string; name: string } => ({ namespace: 'bench', name: `lat-owner-${k}` });

/** The p-th percentile (nearest rank) of sorted values. */
function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;
}

function median(values: readonly number[]): number {
  return percentile([...values].sort((a, b) => a - b), 50);
}

/** Lines from the simulator's stdout, one at a time. */
class SimHost {
  readonly #child = spawn(process.execPath, [join(import.meta.dirname, 'latency', 'sim-host.ts'), String(objects)], { stdio: ['pipe', 'pipe', 'inherit'] });
  readonly #lines = createInterface({ input: this.#child.stdout })[Symbol.asyncIterator]();

  async next<T>(): Promise<T> {
    const line = await this.#lines.next();
    if (line.done === true) throw new Error('the simulator exited');
    return JSON.parse(line.value) as T;
  }

  send(message: unknown): void {
    this.#child.stdin.write(`${JSON.stringify(message)}\n`);
  }

  async close(): Promise<void> {
    const exited = new Promise((resolve) => { this.#child.once('exit', resolve); setTimeout(resolve, 10_000).unref(); });
    this.#child.stdin.end();
    await exited;
  }
}

interface Figures {
  readonly rate: number;
  readonly latencies: Float64Array;
  /** Latencies of the events the simulator sent less than ON_SCHEDULE_MS late, and of the others. */
  readonly onSchedule: Float64Array;
  readonly burst: Float64Array;
  /** Requeue minus the previous event's requeue, for events of one chunk: the registry's cost per event back to back. */
  readonly gaps: Float64Array;
  readonly unmatched: number;
  readonly lag: readonly number[];
  readonly gc: { readonly count: number; readonly maxMs: number; readonly totalMs: number; readonly scavenges: number; readonly maxScavengeMs: number };
  readonly load: number;
}

/** One window at `rate`: the simulator sends, the consumer drains, then both stamps are read. */
async function window(sim: SimHost, queue: StampedQueue, rate: number, from: number): Promise<Figures> {
  const total = Math.max(objects, Math.round((rate * seconds) / objects) * objects);
  const stamps = new Window(from, total, objects);
  const pauses: PerformanceEntry[] = [];
  const gc = new PerformanceObserver((list) => { pauses.push(...list.getEntries()); });
  gc.observe({ entryTypes: ['gc'] });
  const load = loadavg()[0] ?? Number.NaN;
  const begin = performance.now();
  queue.window = stamps;
  sim.send({ rate, total, from });
  const { lagMs } = await sim.next<{ sent: number; lagMs: number[] }>();
  // Whatever is still on its way when the simulator is done.
  for (let waited = 0; waited < 5_000 && stamps.requeued.some(Number.isNaN); waited += 50) await new Promise((resolve) => setTimeout(resolve, 50));
  queue.window = undefined;
  const end = performance.now();
  await new Promise((resolve) => setImmediate(resolve));
  gc.disconnect();
  const inWindow = pauses.filter((p) => p.startTime >= begin && p.startTime <= end);
  const scavenges = inWindow.filter((p) => ((p as { detail?: { kind?: number } }).detail)?.kind === constants.NODE_PERFORMANCE_GC_MINOR);
  const latencies: number[] = [];
  const onSchedule: number[] = [];
  const burst: number[] = [];
  const gaps: number[] = [];
  let unmatched = 0;
  for (let i = 0; i < total; i++) {
    const d = (stamps.requeued[i] ?? Number.NaN) - (stamps.arrived[i] ?? Number.NaN);
    if (Number.isNaN(d) || d < 0) {
      unmatched += 1;
      continue;
    }
    latencies.push(d);
    ((lagMs[i] ?? Number.POSITIVE_INFINITY) < ON_SCHEDULE_MS ? onSchedule : burst).push(d);
    const gap = (stamps.requeued[i] ?? Number.NaN) - (stamps.requeued[i - 1] ?? Number.NaN);
    if (i > 0 && stamps.arrived[i] === stamps.arrived[i - 1] && gap > 0) gaps.push(gap);
  }
  return {
    rate,
    latencies: Float64Array.from(latencies).sort(),
    onSchedule: Float64Array.from(onSchedule).sort(),
    burst: Float64Array.from(burst).sort(),
    gaps: Float64Array.from(gaps).sort(),
    unmatched,
    lag: [...lagMs].sort((a, b) => a - b),
    gc: {
      count: inWindow.length,
      maxMs: Math.max(0, ...inWindow.map((p) => p.duration)),
      totalMs: inWindow.reduce((sum, p) => sum + p.duration, 0),
      scavenges: scavenges.length,
      maxScavengeMs: Math.max(0, ...scavenges.map((p) => p.duration)),
    },
    load,
  };
}

async function hotPath(registry: Registry, calls: number): Promise<number> {
  const started = performance.now();
  for (let i = 0; i < calls; i++) {
    await registry.watchTargetAndGetReader(ref, { gvk: configMaps, namespace: 'bench', name: `lat-${i % 100}` }, owner(i % 100));
  }
  return calls / ((performance.now() - started) / 1000);
}

async function mutexMap(calls: number): Promise<number> {
  const mutex = new Mutex();
  const map = new Map<string, object>();
  const reader = {};
  map.set(`${clusterKey(ref, 'bench')}\u001f${configMaps.group}\u001f${configMaps.version}\u001f${configMaps.kind}`, reader);
  const started = performance.now();
  for (let i = 0; i < calls; i++) {
    const key = `${clusterKey(ref, 'bench')}\u001f${configMaps.group}\u001f${configMaps.version}\u001f${configMaps.kind}`;
    await mutex.runExclusive(() => map.get(key));
  }
  return calls / ((performance.now() - started) / 1000);
}

const ms = (value: number): string => (value >= 100 ? value.toFixed(0) : value >= 10 ? value.toFixed(1) : value.toFixed(2));

const sim = new SimHost();
const { kubeconfig } = await sim.next<{ kubeconfig: string }>();
const objectOf = new Map<OwnerKey, number>();
for (let k = 0; k < objects; k++) objectOf.set(ownerKey(owner(k)), k);
const queue = new StampedQueue(objectOf);
const registry = registryWithKeeper({
  provider: new StaticProvider({ clusters: { sim: kubeconfig } }),
  credentialCheckIntervalMs: 0,
  queue,
  connection: { onWatchChunk: (chunk) => { queue.window?.chunk(chunk); } },
});
const stop = new AbortController();
const consumer = (async () => {
  for (;;) {
    let next: { readonly item: OwnerKey } | undefined;
    try {
      next = await queue.get(stop.signal);
    } catch {
      return;
    }
    if (next === undefined) return;
    queue.done(next.item);
  }
})();
try {
  for (let k = 0; k < objects; k++) {
    await registry.watchTargetAndGetReader(ref, { gvk: configMaps, namespace: 'bench', name: `lat-${k}` }, owner(k));
  }
  const reader = await registry.watchTargetAndGetReader(ref, { gvk: configMaps, namespace: 'bench', name: 'lat-0' }, owner(0));
  await reader.waitForSync();
  await new Promise((resolve) => setTimeout(resolve, 500)); // the initial adds drain

  const results: Figures[] = [];
  let from = 0;
  for (let round = 0; round < rounds; round++) {
    for (const rate of rates) {
      process.stderr.write(`# round ${round + 1}/${rounds}, ${rate} events/s for ${seconds} s…\n`);
      const figures = await window(sim, queue, rate, from);
      results.push(figures);
      from += figures.latencies.length + figures.unmatched;
      await new Promise((resolve) => setTimeout(resolve, 300));
    }
  }

  const flags = process.execArgv.filter((a) => a.startsWith('--max-semi-space') || a.startsWith('--max-old-space') || a.startsWith('--single-threaded')).join(' ') || 'default heap flags';
  console.log(`\n| event → owner requeued (bytes at the connection → queue add), ${objects} objects, ${seconds} s per rate, ${flags} | samples | p50 | p99 | p99.9 | max | on schedule (sent < ${ON_SCHEDULE_MS} ms late): n, p50, p99, p99.9 | burst (sent later): n, p50, p99 | per event back to back (one chunk): p50, p90 | GC pauses: count, longest, total (of which scavenges: count, longest) | simulator late vs schedule: p50, p99, max | load avg (1 min) |`);
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const r of results) {
    const l = r.latencies;
    const s = r.onSchedule;
    const b = r.burst;
    console.log(`| ${r.rate.toLocaleString('en')} events/s | ${l.length}${r.unmatched > 0 ? ` (${r.unmatched} unmatched)` : ''} | ${ms(percentile(l, 50))} ms | ${ms(percentile(l, 99))} ms | ${ms(percentile(l, 99.9))} ms | ${ms(percentile(l, 100))} ms | ${s.length}, ${ms(percentile(s, 50))}, ${ms(percentile(s, 99))}, ${ms(percentile(s, 99.9))} ms | ${b.length}, ${ms(percentile(b, 50))}, ${ms(percentile(b, 99))} ms | ${(percentile(r.gaps, 50) * 1000).toFixed(1)}, ${(percentile(r.gaps, 90) * 1000).toFixed(1)} µs | ${r.gc.count}, ${ms(r.gc.maxMs)} ms, ${ms(r.gc.totalMs)} ms (${r.gc.scavenges}, ${ms(r.gc.maxScavengeMs)} ms) | ${ms(percentile(r.lag, 50))} ms, ${ms(percentile(r.lag, 99))} ms, ${ms(percentile(r.lag, 100))} ms | ${r.load.toFixed(1)} |`);
  }

  if (!quick) {
    const calls = 200_000;
    const ours: number[] = [];
    const theirs: number[] = [];
    for (let round = 0; round < 5; round++) {
      ours.push(await hotPath(registry, calls));
      theirs.push(await mutexMap(calls));
    }
    const hot = median(ours);
    const base = median(theirs);
    console.log(`\n| hot path (existing key), 5 rounds of 200k calls, load avg ${(loadavg()[0] ?? 0).toFixed(1)} | calls/s (median) | vs mutex-guarded Map |`);
    console.log('| --- | --- | --- |');
    console.log(`| registry.watchTargetAndGetReader | ${hot.toFixed(0)} | ${(hot / base).toFixed(2)}× |`);
    console.log(`| async-mutex runExclusive + Map.get | ${base.toFixed(0)} | 1.00× |`);
  }
} finally {
  stop.abort();
  await consumer;
  await registry.close();
  await sim.close();
}
