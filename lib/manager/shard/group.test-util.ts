// Test support: replicas of one shard group on a MemoryLeases and a FakeClock, and the invariant
// checker the tests run at every step.
import assert from 'node:assert/strict';
import { FakeClock } from '../../util/index.ts';
import { MemoryLeases, type MemoryLeaseClient } from './memory-store.ts';
import { Sharder, type ShardChange, type ShardOutcome, type SharderOptions } from './sharder.ts';

/** Test timings: lease 6 s, renew deadline 4 s, retry 1 s. */
export const timing = { leaseDurationMs: 6_000, renewDeadlineMs: 4_000, retryPeriodMs: 1_000 } as const;

export interface Replica {
  readonly name: string;
  readonly sharder: Sharder;
  readonly client: MemoryLeaseClient;
  readonly changes: ShardChange[];
  readonly stop: () => void;
  readonly outcome: Promise<ShardOutcome>;
  /** How run ended, once it has. */
  readonly settled: () => ShardOutcome | undefined;
}

async function flush(): Promise<void> {
  for (let i = 0; i < 8; i++) await new Promise((resolve) => setImmediate(resolve));
}

/**
 * Replicas sharing one in-memory group. `advance` moves the clock in small steps and, after each,
 * checks the invariants: no key has two acting owners; none is unowned for longer than `boundMs`
 * (measured here, from the first step at which no running replica owned it).
 */
export class Group {
  readonly clock = new FakeClock(1_700_000_000_000);
  readonly leases = new MemoryLeases();
  readonly keys = new Set<string>();
  readonly replicas = new Map<string, Replica>();
  /** Key → first step time at which no replica acted for it. */
  readonly #unownedSince = new Map<string, number>();
  boundMs: number = timing.leaseDurationMs + 2 * timing.retryPeriodMs;
  /** Key → the replicas that acted for it, in order (consecutive duplicates folded). */
  readonly history = new Map<string, string[]>();

  constructor(keys: Iterable<string>) {
    for (const key of keys) this.keys.add(key);
  }

  start(name: string, options: Partial<SharderOptions> = {}): Replica {
    const client = this.leases.client(name);
    const sharder = new Sharder({ leases: client, group: 'test', identity: name, keys: () => this.keys, clock: this.clock, random: () => 0, ...timing, ...options });
    const changes: ShardChange[] = [];
    sharder.subscribe((change) => { changes.push(change); });
    const controller = new AbortController();
    let result: ShardOutcome | undefined;
    const outcome = sharder.run(controller.signal).then((r) => { result = r; return r; });
    const replica: Replica = { name, sharder, client, changes, stop: () => { controller.abort(); }, outcome, settled: () => result };
    this.replicas.set(name, replica);
    return replica;
  }

  /** The replicas acting for `key` now. */
  actors(key: string): string[] {
    return [...this.replicas.values()].filter((r) => r.sharder.owns(key)).map((r) => r.name);
  }

  check(): void {
    const now = this.clock.now();
    for (const key of this.keys) {
      const actors = this.actors(key);
      assert.ok(actors.length <= 1, `at ${now}: ${key} has ${actors.length} acting owners: ${actors.join(', ')}`);
      const actor = actors[0];
      if (actor !== undefined) {
        this.#unownedSince.delete(key);
        const seen = this.history.get(key) ?? [];
        if (seen.at(-1) !== actor) seen.push(actor);
        this.history.set(key, seen);
        continue;
      }
      const since = this.#unownedSince.get(key) ?? now;
      this.#unownedSince.set(key, since);
      assert.ok(now - since <= this.boundMs, `at ${now}: ${key} unowned for ${now - since} ms, past the bound ${this.boundMs} ms`);
    }
  }

  /** Moves the clock `ms` forward in `step`s, letting the loops run and checking the invariants after each. */
  async advance(ms: number, step = 100): Promise<void> {
    for (let t = 0; t < ms; t += step) {
      this.clock.advance(Math.min(step, ms - t));
      await flush();
      this.check();
    }
  }

  /** Advances until `condition` holds, up to `maxMs` (fails then); resolves with the time it took. */
  async until(what: string, condition: () => boolean, maxMs = 60_000, step = 100): Promise<number> {
    const start = this.clock.now();
    while (!condition()) {
      if (this.clock.now() - start > maxMs) assert.fail(`no ${what} within ${maxMs} ms`);
      await this.advance(step, step);
    }
    return this.clock.now() - start;
  }

  /** Every key acted for by exactly one replica. */
  converged(): boolean {
    return [...this.keys].every((k) => this.actors(k).length === 1);
  }

  /** The keys `name` acts for now. */
  ownedBy(name: string): string[] {
    return [...this.keys].filter((k) => this.replicas.get(name)?.sharder.owns(k) === true).sort();
  }
}
