// A concurrency bound shared fairly between keys (network peers): waiters are served round-robin
// across keys, FIFO within one, so a thousand waiters from one peer delay another peer's request
// by at most one turn per busy peer, not by the thousand. The metrics server runs its
// TokenReviews and SubjectAccessReviews through one.
import { FleetcacheError, positiveInteger } from '../util/index.ts';

/** A key already has its most waiters, or all keys together have theirs: refused at once, not queued. */
export class SlotQueueFullError extends FleetcacheError {
  /** Which bound was reached. */
  readonly limit: 'maxWaitingPerKey' | 'maxWaiting';
  readonly max: number;

  constructor(limit: 'maxWaitingPerKey' | 'maxWaiting', max: number) {
    super('ERR_SLOT_QUEUE_FULL', `too many requests waiting for a review slot (${limit} ${max})`);
    this.limit = limit;
    this.max = max;
  }
}

/** Options of {@link FairSlots}. */
export interface FairSlotsOptions {
  /** Holders at once. Default 4. */
  readonly maxConcurrent?: number | undefined;
  /** Waiters one key may have; the next is refused with {@link SlotQueueFullError}. Default 16. */
  readonly maxWaitingPerKey?: number | undefined;
  /** Waiters of all keys together; the next is refused with {@link SlotQueueFullError}. Default 512. */
  readonly maxWaiting?: number | undefined;
}

/** Gives the slot back; calling it again does nothing. */
export type ReleaseSlot = () => void;

/**
 * Invariants: `#held` ≤ `#max`; a key is in `#waiting` if and only if its queue is non-empty, and
 * the Map's order is the round-robin order (a key served goes to the back when it still waits);
 * `#count` is the total of all queues; waiters exist only while every slot is held.
 */
export class FairSlots {
  readonly #max: number;
  readonly #maxPerKey: number;
  readonly #maxWaiting: number;
  readonly #waiting = new Map<string, (() => void)[]>();
  #held = 0;
  #count = 0;

  constructor(options: FairSlotsOptions = {}) {
    this.#max = positiveInteger('FairSlots', 'maxConcurrent', options.maxConcurrent ?? 4);
    this.#maxPerKey = positiveInteger('FairSlots', 'maxWaitingPerKey', options.maxWaitingPerKey ?? 16);
    this.#maxWaiting = positiveInteger('FairSlots', 'maxWaiting', options.maxWaiting ?? 512);
  }

  /**
   * Resolves with the slot's release once `key` holds a slot (at once when one is free). Rejects
   * with {@link SlotQueueFullError} at once when `key`, or everyone, already waits too much.
   */
  acquire(key: string): Promise<ReleaseSlot> {
    if (this.#held < this.#max) {
      this.#held += 1;
      return Promise.resolve(this.#release());
    }
    const queue = this.#waiting.get(key) ?? [];
    if (queue.length >= this.#maxPerKey) return Promise.reject(new SlotQueueFullError('maxWaitingPerKey', this.#maxPerKey));
    if (this.#count >= this.#maxWaiting) return Promise.reject(new SlotQueueFullError('maxWaiting', this.#maxWaiting));
    return new Promise<ReleaseSlot>((resolve) => {
      queue.push(() => { resolve(this.#release()); });
      this.#count += 1;
      if (!this.#waiting.has(key)) this.#waiting.set(key, queue);
    });
  }

  /** Slots held now. */
  get held(): number {
    return this.#held;
  }

  /** Waiters now, all keys together. */
  get waiting(): number {
    return this.#count;
  }

  #release(): ReleaseSlot {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#handOver();
    };
  }

  /** A freed slot goes to the head of the next key in turn, else back to the pool. */
  #handOver(): void {
    const next = this.#waiting.entries().next();
    if (next.done === true) {
      this.#held -= 1;
      return;
    }
    const [key, queue] = next.value;
    const wake = queue.shift();
    this.#count -= 1;
    this.#waiting.delete(key);
    if (queue.length > 0) this.#waiting.set(key, queue); // to the back of the round
    wake?.(); // the slot passes straight on: #held is unchanged
  }
}
