import { abortReason, clockOption, invalidOption, realClock, stringOption, type Clock } from '../util/index.ts';
import { Fifo } from './fifo.ts';
import type { QueueMetricsProvider, QueueStats } from './metrics.ts';

/**
 * A work queue of keys (client-go's `workqueue.Interface`): fair, stingy, safe to re-add an item
 * while it is processed, and shut down by notification. See the folder's index.ts for the
 * guarantees.
 *
 * Items are compared as `Map` keys (SameValueZero): two objects with equal contents are two
 * different items. Use strings (`namespace/name`, `cluster/namespace/name`) as keys.
 */
export interface Queue<T> {
  /** The name the queue reports in logs and metrics ('' when unnamed). */
  readonly name: string;
  /**
   * Marks `item` as needing processing. A no-op when it is already waiting, or when the queue is
   * shutting down. If `item` is being processed, it is handed out again after `done(item)`.
   */
  add(item: T): void;
  /**
   * Resolves with the next item, waiting until there is one. The caller now owns it and must call
   * `done(item)` when finished. Resolves `undefined` when the queue has shut down (after
   * `shutDownWithDrain`, once nothing is left to hand out). Rejects with the signal's reason when
   * `signal` aborts first; an item is never lost to an aborted `get`.
   */
  get(signal?: AbortSignal): Promise<{ readonly item: T } | undefined>;
  /** Marks `item` as processed; if it was added again meanwhile, it is queued again. Ignored for an item not handed out. */
  done(item: T): void;
  /** How many items wait to be handed out (informational: never gate `add`/`get` on it). */
  readonly len: number;
  /**
   * Stops the queue at once: `add` is ignored from now on, waiting items are dropped, and every
   * pending and future `get` resolves `undefined`. Items being processed may still be `done()`.
   * Safe to call more than once, and during `shutDownWithDrain` to end the drain early.
   */
  shutDown(): void;
  /**
   * Stops accepting items but keeps handing out the ones already queued (and those re-added while
   * processing) until none is left, then resolves once every item handed out is `done()`.
   * Consumers must keep calling `get`/`done` meanwhile, or this waits forever: pass `signal` to
   * bound the wait. When `signal` aborts first, the queue shuts down at once (as `shutDown()`) and
   * the promise rejects with the signal's reason.
   */
  shutDownWithDrain(signal?: AbortSignal): Promise<void>;
  /** True once `shutDown` or `shutDownWithDrain` was called. */
  readonly shuttingDown: boolean;
  /** A cheap snapshot of the queue's counters and gauges. */
  stats(): QueueStats;
}

/** Options of {@link WorkQueue}. */
export interface QueueOptions {
  /**
   * Names the queue in logs and metrics. Default '' (unnamed); must be non-empty when `metrics` is
   * set, since metrics are keyed by it.
   */
  readonly name?: string | undefined;
  /** Time source for delays, rate limits and durations. Default `realClock`. */
  readonly clock?: Clock | undefined;
  /** Receives the queue's `workqueue_*` metrics. Default undefined: no metrics are reported. */
  readonly metrics?: QueueMetricsProvider | undefined;
}

/** Options after defaults were applied. */
interface ResolvedQueueOptions {
  readonly name: string;
  readonly clock: Clock;
  readonly metrics: QueueMetricsProvider | undefined;
}

/** Applies the defaults of {@link QueueOptions} into a new object and validates it. */
function resolveQueueOptions(owner: string, options: QueueOptions): ResolvedQueueOptions {
  const resolved: ResolvedQueueOptions = {
    name: stringOption(owner, 'name', options.name ?? ''),
    clock: clockOption(owner, options.clock ?? realClock),
    metrics: options.metrics,
  };
  if (resolved.metrics !== undefined && resolved.name === '') invalidOption(owner, 'name', resolved.name, 'non-empty when metrics is set');
  return resolved;
}

/** A pending `get()`. */
interface Waiter<T> {
  readonly resolve: (next: { readonly item: T } | undefined) => void;
  /** Detaches the abort listener; undefined when the get had no signal. */
  readonly detach: (() => void) | undefined;
}

/**
 * The basic work queue. Single-threaded like everything in JavaScript, so every method runs to
 * completion: the invariants below hold between any two calls.
 *
 * Invariants:
 * - Every item in `#queue` is in `#dirty` and not in `#processing`; `#queue` has no duplicates.
 * - Every item in `#dirty` is either in `#queue`, or in `#processing` (then `done()` re-queues it).
 * - `#waiters` is non-empty only while `#queue` is empty and the queue can still hand out items.
 * - Once stopped (`shutDown`), `#queue` and `#dirty` are empty and stay so.
 */
export class WorkQueue<T> implements Queue<T> {
  readonly name: string;
  readonly #clock: Clock;
  readonly #metrics: QueueMetricsProvider | undefined;
  /** The order items are handed out in (fairness). */
  readonly #queue = new Fifo<T>();
  /** Items that need processing, with when they were added (0 without metrics: nothing reads it). */
  readonly #dirty = new Map<T, number>();
  /**
   * Items handed out and not yet done, with when they were handed out. A Map iterates in insertion
   * order and an item is here at most once, so the first entry is the longest running.
   */
  readonly #processing = new Map<T, number>();
  /** Pending `get()` calls, oldest first (a Set: an aborted get leaves from the middle in O(1)). */
  readonly #waiters = new Set<Waiter<T>>();
  /** Pending `shutDownWithDrain()` calls, settled once nothing is queued or processing. */
  readonly #drainers = new Set<() => void>();
  /** running → draining (shutDownWithDrain) → stopped (shutDown); never backwards. */
  #state: 'running' | 'draining' | 'stopped' = 'running';
  #adds = 0;

  constructor(options: QueueOptions = {}) {
    const resolved = resolveQueueOptions(new.target.name, options);
    this.name = resolved.name;
    this.#clock = resolved.clock;
    this.#metrics = resolved.metrics;
    // The callback is only invoked later, at scrape time, when subclasses are fully constructed.
    this.#metrics?.register(this.name, () => this.stats());
  }

  add(item: T): void {
    if (this.#state !== 'running' || this.#dirty.has(item)) return;
    this.#dirty.set(item, this.#metrics === undefined ? 0 : this.#clock.now());
    this.#adds++;
    this.#metrics?.added(this.name);
    if (this.#processing.has(item)) return;
    this.#enqueue(item);
  }

  get(signal?: AbortSignal): Promise<{ readonly item: T } | undefined> {
    if (signal?.aborted === true) return Promise.reject(abortReason(signal));
    if (this.#queue.length > 0) return Promise.resolve({ item: this.#handOut(this.#queue.shift()) });
    if (this.#exhausted()) return Promise.resolve(undefined);
    return new Promise((resolve, reject) => {
      if (signal === undefined) {
        this.#waiters.add({ resolve, detach: undefined });
        return;
      }
      const onAbort = (): void => {
        this.#waiters.delete(waiter);
        reject(abortReason(signal));
      };
      const waiter: Waiter<T> = { resolve, detach: () => { signal.removeEventListener('abort', onAbort); } };
      signal.addEventListener('abort', onAbort, { once: true });
      this.#waiters.add(waiter);
    });
  }

  done(item: T): void {
    if (this.#metrics === undefined) {
      if (!this.#processing.delete(item)) return;
    } else {
      const startedAt = this.#processing.get(item);
      if (startedAt === undefined) return;
      this.#processing.delete(item);
      this.#metrics.worked(this.name, (this.#clock.now() - startedAt) / 1000);
    }
    if (this.#dirty.has(item)) this.#enqueue(item);
    if (this.#state !== 'running') this.#settle();
  }

  get len(): number {
    return this.#queue.length;
  }

  get shuttingDown(): boolean {
    return this.#state !== 'running';
  }

  shutDown(): void {
    this.#state = 'stopped';
    this.#queue.clear();
    this.#dirty.clear();
    this.#settle();
  }

  shutDownWithDrain(signal?: AbortSignal): Promise<void> {
    if (this.#state === 'running') this.#state = 'draining';
    this.#settle();
    if (this.#drained()) return Promise.resolve();
    if (signal?.aborted === true) {
      this.shutDown();
      return Promise.reject(abortReason(signal));
    }
    return new Promise((resolve, reject) => {
      const onAbort = (): void => {
        this.#drainers.delete(drainer);
        this.shutDown();
        if (signal !== undefined) reject(abortReason(signal));
      };
      const drainer = (): void => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#drainers.add(drainer);
    });
  }

  stats(): QueueStats {
    const now = this.#clock.now();
    let unfinished = 0;
    let longest = 0;
    for (const startedAt of this.#processing.values()) {
      const ran = Math.max(0, now - startedAt);
      unfinished += ran;
      longest = Math.max(longest, ran);
    }
    return {
      name: this.name,
      depth: this.#queue.length,
      adds: this.#adds,
      retries: 0,
      processing: this.#processing.size,
      delayed: 0,
      unfinishedWorkSeconds: unfinished / 1000,
      longestRunningProcessorSeconds: longest / 1000,
    };
  }

  /** Puts a dirty item that is not processing in line: straight to the oldest waiter if any. */
  #enqueue(item: T): void {
    const waiter = this.#waiters.size === 0 ? undefined : this.#oldestWaiter();
    if (waiter === undefined) {
      this.#queue.push(item);
      return;
    }
    this.#waiters.delete(waiter);
    waiter.detach?.();
    waiter.resolve({ item: this.#handOut(item) });
  }

  /** Moves an item from dirty to processing, at the moment a consumer receives it. */
  #handOut(item: T): T {
    const now = this.#clock.now();
    if (this.#metrics !== undefined) this.#metrics.queued(this.name, Math.max(0, now - (this.#dirty.get(item) ?? now)) / 1000);
    this.#dirty.delete(item);
    this.#processing.set(item, now);
    return item;
  }

  #oldestWaiter(): Waiter<T> | undefined {
    for (const waiter of this.#waiters) return waiter;
    return undefined;
  }

  /** True when `get` can never hand out anything again. */
  #exhausted(): boolean {
    if (this.#state === 'running') return false;
    if (this.#state === 'stopped') return true;
    if (this.#queue.length > 0) return false;
    // Draining: an item re-added while processing comes back on done().
    for (const item of this.#processing.keys()) if (this.#dirty.has(item)) return false;
    return true;
  }

  #drained(): boolean {
    return this.#queue.length === 0 && this.#processing.size === 0;
  }

  /** After shutdown: releases the waiters that will never get an item, and finished drains. */
  #settle(): void {
    if (this.#waiters.size > 0 && this.#exhausted()) {
      const waiters = [...this.#waiters];
      this.#waiters.clear();
      for (const waiter of waiters) {
        waiter.detach?.();
        waiter.resolve(undefined);
      }
    }
    if (this.#drainers.size > 0 && this.#drained()) {
      const drainers = [...this.#drainers];
      this.#drainers.clear();
      for (const drainer of drainers) drainer();
    }
  }
}
