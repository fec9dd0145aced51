// Request limiter benchmark (issue 12): `node bench/limiter.bench.ts [--main DIR] [--seconds N] [--rounds N]`.
// Timer wake-ups of 1,000 idle clusters' limiters (a request bucket and a LIST share each, both
// used once), the pacing of a saturated bucket, and the overhead per request and per LIST slot,
// for lib/transport's TokenBucket and ConcurrencyLimiter (jobs asked for 1,000 at a time, for 2 s). With `--main DIR` (a checkout of the
// code before them, e.g. `git worktree add /tmp/limiter-base main`, whose node_modules holds
// bottleneck: `npm ci` there, or a symlink to a node_modules that has it), the bottleneck-based
// limiters of that checkout run beside them in this same process. Wake-ups are counted by wrapping
// the global setTimeout/setInterval before any limiter exists. Prints tables; asserts nothing.
import { performance } from 'node:perf_hooks';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ConcurrencyLimiter, TokenBucket } from '../lib/transport/limiter.ts';

const args = process.argv.slice(2);
function option(name: string): string | undefined {
  const i = args.indexOf(name);
  return i === -1 ? undefined : args[i + 1];
}
const mainDir = option('--main');
const idleSeconds = Number(option('--seconds') ?? '5');
const rounds = Number(option('--rounds') ?? '3');
const CLUSTERS = 1_000;

// --- wake-up counting --------------------------------------------------------------------------
let wakeups = 0;
/** Timers set and neither fired (a timeout) nor cleared: unref'd ones included, which Node's resource list leaves out. */
const live = new Set<unknown>();
type TimerFn = (fn: (...a: unknown[]) => void, ms?: number, ...rest: unknown[]) => unknown;
type ClearFn = (handle: unknown) => void;
const g = globalThis as unknown as { setTimeout: TimerFn; setInterval: TimerFn; clearTimeout: ClearFn; clearInterval: ClearFn };
for (const name of ['setTimeout', 'setInterval'] as const) {
  const original = g[name];
  g[name] = (fn, ms, ...rest) => {
    const handle = original(function counted(this: unknown, ...a: unknown[]) {
      wakeups++;
      if (name === 'setTimeout') live.delete(handle);
      fn.apply(this, a);
    }, ms, ...rest);
    live.add(handle);
    return handle;
  };
}
for (const name of ['clearTimeout', 'clearInterval'] as const) {
  const original = g[name];
  g[name] = (handle) => {
    live.delete(handle);
    original(handle);
  };
}

/** The limiters of one cluster, as a connection holds them, behind one interface per implementation. */
interface Variant {
  readonly name: string;
  /** A request bucket and a LIST share for one cluster. */
  cluster(qps: number, burst: number): Cluster;
  /** A LIST limiter shared by clusters. */
  lists(max: number): Lists;
}
interface Cluster {
  /** One fresh request (takes a token). */
  request(signal: AbortSignal, fn: () => Promise<void>): Promise<void>;
  /** One LIST page: the cluster's share, then a slot of `lists`. */
  listPage(lists: Lists, signal: AbortSignal, fn: () => Promise<void>): Promise<void>;
  close(): Promise<void>;
}
interface Lists {
  readonly handle: unknown;
  stop(): Promise<void>;
}

const branch: Variant = {
  name: 'branch (TokenBucket)',
  cluster(qps, burst) {
    const bucket = new TokenBucket({ qps, burst });
    const share = new ConcurrencyLimiter({ maxConcurrent: 5 });
    return {
      async request(signal, fn) {
        await bucket.take(signal);
        await fn();
      },
      listPage: (lists, signal, fn) => share.run(signal, () => (lists.handle as ConcurrencyLimiter).run(signal, fn)),
      close: () => { bucket.close(); return share.stop(); },
    };
  },
  lists(max) {
    const limiter = new ConcurrencyLimiter({ maxConcurrent: max });
    return { handle: limiter, stop: () => limiter.stop() };
  },
};

/** The exports of main's lib/transport/limiter.ts that the benchmark drives. */
interface MainLimiterModule {
  createRequestLimiter(qps: number, burst: number): { disconnect(wait: boolean): Promise<void> };
  createListLimiter(max: number): { stop(options: { dropWaitingJobs: boolean }): Promise<void> };
  scheduleAbortable(limiter: unknown, signal: AbortSignal, fn: () => Promise<void>): Promise<void>;
  ClusterShare: new (max: number) => { run(signal: AbortSignal, fn: () => Promise<void>): Promise<void> };
}

async function mainVariant(dir: string): Promise<Variant> {
  const m = await import(pathToFileURL(join(resolve(dir), 'lib', 'transport', 'limiter.ts')).href) as MainLimiterModule;
  return {
    name: 'main (bottleneck)',
    cluster(qps, burst) {
      const limiter = m.createRequestLimiter(qps, burst);
      const share = new m.ClusterShare(5);
      return {
        request: (signal, fn) => m.scheduleAbortable(limiter, signal, fn),
        listPage: (lists, signal, fn) => share.run(signal, () => m.scheduleAbortable(lists.handle, signal, fn)),
        close: () => limiter.disconnect(false),
      };
    },
    lists(max) {
      const limiter = m.createListLimiter(max);
      return { handle: limiter, stop: () => limiter.stop({ dropWaitingJobs: true }).catch(() => undefined) };
    },
  };
}

const noop = (): Promise<void> => Promise.resolve();

/** 1,000 clusters' limiters, each used once, then left idle for `idleSeconds`. */
async function idle(variant: Variant): Promise<{ wakeupsPerS: number; cpuMsPerS: number; timers: number }> {
  const signal = new AbortController().signal;
  const lists = variant.lists(50);
  const clusters = Array.from({ length: CLUSTERS }, () => variant.cluster(20, 30));
  await Promise.all(clusters.map((c) => c.request(signal, noop)));
  await Promise.all(clusters.map((c) => c.listPage(lists, signal, noop)));
  await new Promise((r) => { setTimeout(r, 300); });
  const timers = live.size;
  const before = wakeups;
  const cpu = process.cpuUsage();
  const started = performance.now();
  await new Promise((r) => { setTimeout(r, idleSeconds * 1000); });
  const seconds = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu);
  // The measuring sleep itself is one wake-up.
  const counted = wakeups - before - 1;
  await Promise.all(clusters.map((c) => c.close()));
  await lists.stop();
  return { wakeupsPerS: counted / seconds, cpuMsPerS: (used.user + used.system) / 1000 / seconds, timers };
}

/** A bucket of qps 1,000, burst 500, asked for 500 + 4,000 requests at once: the rate after the burst, and wake-ups. */
async function paced(variant: Variant): Promise<{ rate: number; seconds: number; wakeups: number }> {
  const signal = new AbortController().signal;
  const qps = 1_000;
  const burst = 500;
  const cluster = variant.cluster(qps, burst);
  let done = 0;
  let burstDoneAt = 0;
  const before = wakeups;
  const requests = Array.from({ length: burst + 4 * qps }, () => cluster.request(signal, () => {
    done++;
    if (done === burst) burstDoneAt = performance.now();
    return Promise.resolve();
  }));
  await Promise.all(requests);
  const seconds = (performance.now() - burstDoneAt) / 1000;
  const woke = wakeups - before;
  await cluster.close();
  return { rate: (4 * qps) / seconds, seconds, wakeups: woke };
}

/** Batches of 1,000 jobs asked for at once, batch after batch for at least `seconds`: jobs per second. */
async function saturated(job: (i: number) => Promise<void>, seconds = 2): Promise<number> {
  let n = 0;
  const started = performance.now();
  while (performance.now() - started < seconds * 1000) {
    await Promise.all(Array.from({ length: 1_000 }, (_, i) => job(n + i)));
    n += 1_000;
  }
  return n / ((performance.now() - started) / 1000);
}

/** Requests through a bucket that never runs out: the limiter's own cost. */
async function requestOverhead(variant: Variant): Promise<number> {
  const signal = new AbortController().signal;
  const cluster = variant.cluster(1e9, 1e9);
  const rate = await saturated(() => cluster.request(signal, noop));
  await cluster.close();
  return rate;
}

/** LIST pages from 100 clusters (share 5 each) through one LIST limiter of 50. */
async function listOverhead(variant: Variant): Promise<number> {
  const signal = new AbortController().signal;
  const lists = variant.lists(50);
  const clusters = Array.from({ length: 100 }, () => variant.cluster(20, 30));
  const rate = await saturated((i) => (clusters[i % clusters.length] ?? assertNever()).listPage(lists, signal, noop));
  await Promise.all(clusters.map((c) => c.close()));
  await lists.stop();
  return rate;
}

function assertNever(): never {
  throw new Error('unreachable');
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

const variants: Variant[] = [branch];
if (mainDir !== undefined) variants.push(await mainVariant(mainDir));

const fmt = (n: number, digits = 0): string => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
console.log(`${CLUSTERS.toLocaleString('en-US')} idle clusters (bucket qps 20 / burst 30 + LIST share 5, each used once), ${idleSeconds} s; throughput: median of ${rounds} rounds\n`);
console.log('| limiter | idle wake-ups/s | idle CPU ms/s | timers held idle | paced rate after burst (qps 1,000) | wake-ups while pacing 4,000 | requests/s, bucket never empty | LIST pages/s, 100 clusters × share 5 → 50 |');
console.log('| --- | --- | --- | --- | --- | --- | --- | --- |');
for (const variant of variants) {
  const i = await idle(variant);
  const p = await paced(variant);
  const req: number[] = [];
  const lst: number[] = [];
  for (let r = 0; r < rounds; r++) {
    req.push(await requestOverhead(variant));
    lst.push(await listOverhead(variant));
  }
  console.log(`| ${variant.name} | ${fmt(i.wakeupsPerS, 1)} | ${fmt(i.cpuMsPerS, 1)} | ${fmt(i.timers)} | ${fmt(p.rate)}/s over ${fmt(p.seconds, 2)} s | ${fmt(p.wakeups)} | ${fmt(median(req))} | ${fmt(median(lst))} |`);
}
