import { DelayingWorkQueue, ItemExponentialRateLimiter } from '../queue/index.ts';
import { toError, type Clock, type Logger } from '../util/index.ts';

/** What the collector records on each cache it watches. */
export interface Collectable {
  /** When the cache was first seen without users since it last had some; undefined while used. */
  unusedSince: number | undefined;
  /** When the collector looks at it next; undefined while a check runs. */
  nextGcCheckAt: number | undefined;
}

/** The registry, as the collector sees it. */
export interface CollectorHost<K extends string, E extends Collectable> {
  /** The published cache under `key`, if any. */
  entry(key: K): E | undefined;
  /** Whether anything (an owner, a held reader) uses the cache under `key` now. */
  used(key: K): boolean;
  /**
   * Removes `entry` if it is still the one published under `key` and still unused (checked again
   * under the registry's lock), then stops it. Resolves true when it removed it.
   */
  collect(key: K, entry: E): Promise<boolean>;
}

/** Options of {@link GarbageCollector}: the registry's, already validated. */
export interface GarbageCollectorOptions<K extends string, E extends Collectable> {
  readonly host: CollectorHost<K, E>;
  readonly initialDelayMs: number;
  readonly maxDelayMs: number;
  readonly graceMs: number;
  readonly clock: Clock;
  readonly logger: Logger;
}

/**
 * Collects caches nobody uses. Every published cache is checked through a delaying queue, first
 * after `initialDelayMs`, the delay doubling up to `maxDelayMs` while the cache stays used; one
 * that lost its last user is checked a grace period later and removed if still unused by then.
 * One worker: checks are cheap and removal is serialised by the registry's lock anyway.
 *
 * Invariant: a key is in the queue (or being checked) while its cache is published; a failed
 * check is retried with backoff, so no cache is ever forgotten.
 */
export class GarbageCollector<K extends string, E extends Collectable> {
  readonly #host: CollectorHost<K, E>;
  readonly #queue: DelayingWorkQueue<K>;
  readonly #limiter: ItemExponentialRateLimiter<K>;
  readonly #graceMs: number;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #loop: Promise<void>;

  constructor(options: GarbageCollectorOptions<K, E>) {
    this.#host = options.host;
    this.#graceMs = options.graceMs;
    this.#clock = options.clock;
    this.#logger = options.logger;
    this.#limiter = new ItemExponentialRateLimiter({ baseDelayMs: options.initialDelayMs, maxDelayMs: options.maxDelayMs });
    this.#queue = new DelayingWorkQueue<K>({ name: 'cache-gc', clock: options.clock });
    // Started here but does no I/O: it only waits for keys the registry schedules.
    this.#loop = this.#run();
  }

  /** A cache was published under `key`: its first check is one backoff step away. */
  published(key: K, entry: E): void {
    this.#schedule(key, entry, this.#limiter.when(key));
  }

  /** These caches lost an owner: those left unused become eligible after the grace period, not at the next backoff step. */
  released(keys: readonly K[]): void {
    const now = this.#clock.now();
    for (const key of keys) {
      const entry = this.#host.entry(key);
      if (entry === undefined || this.#host.used(key)) continue;
      entry.unusedSince ??= now;
      this.#schedule(key, entry, this.#graceMs);
    }
  }

  /** Stops the worker; resolves once the check in progress (if any) finished. */
  async shutDown(): Promise<void> {
    this.#queue.shutDown();
    await this.#loop;
  }

  #schedule(key: K, entry: E, delayMs: number): void {
    const now = this.#clock.now();
    const at = now + delayMs;
    // An earlier check wins (the delaying queue keeps the earliest time for an item).
    if (entry.nextGcCheckAt === undefined || at < entry.nextGcCheckAt || entry.nextGcCheckAt <= now) entry.nextGcCheckAt = at;
    this.#queue.addAfter(key, delayMs);
  }

  async #run(): Promise<void> {
    for (;;) {
      const next = await this.#queue.get();
      if (next === undefined) return;
      const key = next.item;
      try {
        await this.#check(key);
      } catch (err) {
        this.#logger.warn('cache garbage-collection check failed; retrying', { key, error: toError(err).message });
        const entry = this.#host.entry(key);
        if (entry !== undefined) this.#schedule(key, entry, this.#limiter.when(key));
      } finally {
        this.#queue.done(key);
      }
    }
  }

  async #check(key: K): Promise<void> {
    const entry = this.#host.entry(key);
    if (entry === undefined) {
      this.#limiter.forget(key);
      return;
    }
    entry.nextGcCheckAt = undefined;
    const now = this.#clock.now();
    if (this.#host.used(key)) {
      entry.unusedSince = undefined;
      this.#schedule(key, entry, this.#limiter.when(key));
      return;
    }
    entry.unusedSince ??= now;
    const idle = now - entry.unusedSince;
    if (idle < this.#graceMs) {
      this.#schedule(key, entry, this.#graceMs - idle);
      return;
    }
    if (await this.#host.collect(key, entry)) {
      this.#limiter.forget(key);
      return;
    }
    // Used again, or swapped meanwhile: keep checking whatever is published now.
    const current = this.#host.entry(key);
    if (current !== undefined) this.#schedule(key, current, this.#limiter.when(key));
  }
}
