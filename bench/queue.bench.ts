// Throughput of lib/queue's add/get/done against a naive array + Set queue, in the same process.
// The naive queue de-duplicates waiting items but has none of the workqueue guarantees (an item
// can be handed to two consumers at once; no processing set, no re-queue on done). Both hand items
// out through a promise, as an async worker must await them. Run: node bench/queue.bench.ts
import { performance } from 'node:perf_hooks';
import { RateLimitingWorkQueue, WorkQueue } from '../lib/queue/index.ts';

/** The part of a queue the scenarios drive. */
interface BenchQueue {
  add(item: string): void;
  get(): Promise<{ readonly item: string } | undefined>;
  done(item: string): void;
  readonly len: number;
}

class NaiveQueue implements BenchQueue {
  readonly #items: string[] = [];
  readonly #waiting = new Set<string>();

  add(item: string): void {
    if (this.#waiting.has(item)) return;
    this.#waiting.add(item);
    this.#items.push(item);
  }

  get(): Promise<{ readonly item: string } | undefined> {
    const item = this.#items.shift();
    if (item === undefined) return Promise.resolve(undefined);
    this.#waiting.delete(item);
    return Promise.resolve({ item });
  }

  done(_item: string): void {
    // Nothing tracked.
  }

  get len(): number {
    return this.#items.length;
  }
}

/** Takes everything queued, one item at a time, as `consumers` concurrent workers. Returns gets + dones. */
async function consume(queue: BenchQueue, consumers: number): Promise<number> {
  let ops = 0;
  const worker = async (): Promise<void> => {
    while (queue.len > 0) {
      const next = await queue.get();
      if (next === undefined) return;
      queue.done(next.item);
      ops += 2;
    }
  };
  await Promise.all(Array.from({ length: consumers }, worker));
  return ops;
}

interface Scenario {
  readonly name: string;
  /** Runs once against `queue`, returns how many add/get/done calls it made. */
  run(queue: BenchQueue): Promise<number>;
}

const keys = Array.from({ length: 100_000 }, (_, i) => `namespace-${i % 97}/owner-${i}`);

const scenarios: Scenario[] = [
  {
    name: '100k distinct keys, add all then drain (1 worker)',
    async run(queue) {
      for (const key of keys) queue.add(key);
      return keys.length + (await consume(queue, 1));
    },
  },
  {
    name: '200k adds over 1k hot keys, bursts of 2k (8 workers)',
    async run(queue) {
      let ops = 0;
      let seed = 7;
      for (let burst = 0; burst < 100; burst++) {
        for (let i = 0; i < 2_000; i++) {
          seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
          queue.add(keys[seed % 1_000] ?? '');
          ops++;
        }
        ops += await consume(queue, 8);
      }
      return ops;
    },
  },
  {
    name: '10k-deep steady queue, add one per item taken (4 workers)',
    async run(queue) {
      for (let i = 0; i < 10_000; i++) queue.add(keys[i] ?? '');
      let ops = 10_000;
      let nextKey = 10_000;
      const worker = async (): Promise<void> => {
        while (nextKey < keys.length) {
          const next = await queue.get();
          if (next === undefined) return;
          queue.done(next.item);
          queue.add(keys[nextKey++] ?? '');
          ops += 3;
        }
      };
      await Promise.all(Array.from({ length: 4 }, worker));
      return ops + (await consume(queue, 4));
    },
  },
];

const implementations: { readonly name: string; create(): BenchQueue }[] = [
  { name: 'WorkQueue', create: () => new WorkQueue<string>() },
  { name: 'RateLimitingWorkQueue', create: () => new RateLimitingWorkQueue<string>() },
  { name: 'naive array+Set', create: () => new NaiveQueue() },
];

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
}

/**
 * Median ops/s of each implementation over `rounds` runs, each on a fresh queue. Rounds interleave
 * the implementations so that noise from other processes hits them alike; one warm-up round first.
 */
async function measure(scenario: Scenario, rounds: number): Promise<number[]> {
  for (const impl of implementations) await scenario.run(impl.create());
  const rates = implementations.map((): number[] => []);
  for (let round = 0; round < rounds; round++) {
    for (const [index, impl] of implementations.entries()) {
      const queue = impl.create();
      const start = performance.now();
      const ops = await scenario.run(queue);
      rates[index]?.push(ops / ((performance.now() - start) / 1000));
    }
  }
  return rates.map(median);
}

function formatRate(rate: number): string {
  return `${(rate / 1e6).toFixed(2)} M/s`;
}

const rounds = 5;
const rows: string[][] = [['scenario', ...implementations.map((impl) => impl.name), 'WorkQueue / naive', 'RateLimiting / naive']];
const started = performance.now();
for (const scenario of scenarios) {
  const rates = await measure(scenario, rounds);
  const [work = 0, rateLimiting = 0, naive = 1] = rates;
  rows.push([scenario.name, ...rates.map(formatRate), `${(work / naive).toFixed(2)}x`, `${(rateLimiting / naive).toFixed(2)}x`]);
}

const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? '').length))) ?? [];
console.log(`add/get/done calls per second (median of ${rounds} runs, Node ${process.version})\n`);
for (const [index, row] of rows.entries()) {
  console.log(row.map((cell, column) => (column === 0 ? cell.padEnd(widths[column] ?? 0) : cell.padStart(widths[column] ?? 0))).join('  '));
  if (index === 0) console.log(widths.map((width) => '-'.repeat(width)).join('  '));
}
console.log(`\ntotal ${((performance.now() - started) / 1000).toFixed(1)} s`);
