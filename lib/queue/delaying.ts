import type { Clock, Timer } from '../util/index.ts';
import { realClock } from '../util/index.ts';
import type { QueueMetricsProvider, QueueStats } from './metrics.ts';
import { WorkQueue, type Queue, type QueueOptions } from './queue.ts';

/** A {@link Queue} that can also add an item later (client-go's `DelayingInterface`). */
export interface DelayingQueue<T> extends Queue<T> {
  /**
   * Adds `item` once `ms` milliseconds have passed on the queue's clock; at once when `ms <= 0`.
   * Throws a TypeError when `ms` is not a finite number.
   * While an item waits, an earlier `addAfter` moves it earlier and a later one is ignored. A plain
   * `add` does not cancel a pending `addAfter`. Ignored once the queue is shutting down; delayed
   * items are dropped by either shutdown.
   */
  addAfter(item: T, ms: number): void;
}

/** Options of {@link DelayingWorkQueue}: those of the basic queue. */
export type DelayingQueueOptions = QueueOptions;

/** A delayed item in the heap. */
interface Delayed<T> {
  readonly item: T;
  /** Clock time at which it is added. */
  readyAt: number;
  /** Tie-breaker: among equal `readyAt`, the one scheduled first is added first. */
  seq: number;
  /** Position in `#heap`, kept current by every swap. */
  index: number;
}

/** setTimeout's ceiling: longer delays fire at once, so the timer is re-armed in steps instead. */
const maxTimerMs = 2 ** 31 - 1;

/**
 * The basic queue plus a min-heap of delayed items ordered by ready time, served by a single
 * timer on the clock that is armed for the heap's top (not one timer per item).
 *
 * Invariants:
 * - `#heap` is a binary min-heap on (readyAt, seq); `#heap[i].index === i` for every i.
 * - `#delayed` maps exactly the items in `#heap` to their entries: an item waits at most once.
 * - `#timer` is set iff `#heap` is non-empty, and is due no later than the top's readyAt
 *   (`#timerAt`); when it fires, every due item is added and the timer is re-armed.
 * - After shutdown, `#heap` and `#delayed` are empty and no timer is pending.
 */
export class DelayingWorkQueue<T> extends WorkQueue<T> implements DelayingQueue<T> {
  readonly #clock: Clock;
  readonly #metrics: QueueMetricsProvider | undefined;
  readonly #heap: Delayed<T>[] = [];
  readonly #delayed = new Map<T, Delayed<T>>();
  #seq = 0;
  #timer: Timer | undefined;
  #timerAt = Infinity;
  #retries = 0;

  constructor(options: DelayingQueueOptions = {}) {
    super(options);
    this.#clock = options.clock ?? realClock;
    this.#metrics = options.metrics;
  }

  addAfter(item: T, ms: number): void {
    if (this.shuttingDown) return;
    if (!Number.isFinite(ms)) throw new TypeError(`addAfter: ms must be a finite number, got ${ms}`);
    this.#retries++;
    if (this.#metrics !== undefined) this.#metrics.retried(this.name);
    if (ms <= 0) {
      this.add(item);
      return;
    }
    const readyAt = this.#clock.now() + ms;
    const existing = this.#delayed.get(item);
    if (existing !== undefined) {
      if (readyAt >= existing.readyAt) return;
      existing.readyAt = readyAt;
      existing.seq = this.#seq++;
      this.#siftUp(existing.index);
    } else {
      const entry: Delayed<T> = { item, readyAt, seq: this.#seq++, index: this.#heap.length };
      this.#heap.push(entry);
      this.#delayed.set(item, entry);
      this.#siftUp(entry.index);
    }
    this.#arm();
  }

  override shutDown(): void {
    this.#dropDelayed();
    super.shutDown();
  }

  override shutDownWithDrain(signal?: AbortSignal): Promise<void> {
    this.#dropDelayed();
    return super.shutDownWithDrain(signal);
  }

  override stats(): QueueStats {
    return { ...super.stats(), retries: this.#retries, delayed: this.#heap.length };
  }

  /** Makes sure the timer is due no later than the heap's top. */
  #arm(): void {
    const top = this.#heap[0];
    if (top === undefined || (this.#timer !== undefined && this.#timerAt <= top.readyAt)) return;
    this.#timer?.cancel();
    this.#timerAt = top.readyAt;
    const ms = Math.min(Math.max(0, top.readyAt - this.#clock.now()), maxTimerMs);
    this.#timer = this.#clock.setTimer(ms, () => {
      this.#timer = undefined;
      this.#timerAt = Infinity;
      this.#fire();
    });
  }

  /** Adds every due item, oldest readyAt first, then re-arms for the next one. */
  #fire(): void {
    const now = this.#clock.now();
    for (let top = this.#heap[0]; top !== undefined && top.readyAt <= now; top = this.#heap[0]) {
      this.#popTop();
      this.#delayed.delete(top.item);
      this.add(top.item);
    }
    this.#arm();
  }

  #dropDelayed(): void {
    this.#timer?.cancel();
    this.#timer = undefined;
    this.#timerAt = Infinity;
    this.#heap.length = 0;
    this.#delayed.clear();
  }

  #less(a: Delayed<T>, b: Delayed<T>): boolean {
    return a.readyAt < b.readyAt || (a.readyAt === b.readyAt && a.seq < b.seq);
  }

  #place(entry: Delayed<T>, index: number): void {
    this.#heap[index] = entry;
    entry.index = index;
  }

  #siftUp(index: number): void {
    const entry = this.#heap[index];
    if (entry === undefined) return;
    let i = index;
    while (i > 0) {
      const parentIndex = (i - 1) >> 1;
      const parent = this.#heap[parentIndex];
      if (parent === undefined || !this.#less(entry, parent)) break;
      this.#place(parent, i);
      i = parentIndex;
    }
    this.#place(entry, i);
  }

  #popTop(): void {
    const last = this.#heap.pop();
    if (last === undefined || this.#heap.length === 0) return;
    // Sift the last entry down from the root.
    let i = 0;
    const n = this.#heap.length;
    for (;;) {
      const leftIndex = 2 * i + 1;
      const rightIndex = leftIndex + 1;
      const left = this.#heap[leftIndex];
      const right = this.#heap[rightIndex];
      let child = left;
      let childIndex = leftIndex;
      if (right !== undefined && rightIndex < n && left !== undefined && this.#less(right, left)) {
        child = right;
        childIndex = rightIndex;
      }
      if (child === undefined || leftIndex >= n || !this.#less(child, last)) break;
      this.#place(child, i);
      i = childIndex;
    }
    this.#place(last, i);
  }
}
