import { invalidOption, realClock } from '../util/index.ts';
import { DelayingWorkQueue, type DelayingQueue, type DelayingQueueOptions } from './delaying.ts';
import { defaultControllerRateLimiter, type RateLimiter } from './rate-limiters.ts';

/** A {@link DelayingQueue} that retries items with backoff (client-go's `RateLimitingInterface`). */
export interface RateLimitingQueue<T> extends DelayingQueue<T> {
  /** Adds `item` after the delay its rate limiter gives (which counts one more failure). Ignored once shutting down. */
  addRateLimited(item: T): void;
  /** Clears the rate limiter's history of `item` (call it on success). Does not remove the item from the queue. */
  forget(item: T): void;
  /** How many times `item` was rate-limited since it was last forgotten. */
  numRequeues(item: T): number;
}

/** Options of {@link RateLimitingWorkQueue}. */
export interface RateLimitingQueueOptions<T> extends DelayingQueueOptions {
  /**
   * The retry policy. Default `defaultControllerRateLimiter({ clock })`: 5 ms doubling to 1000 s
   * per item, and 10 retries per second (burst 100) overall.
   */
  readonly rateLimiter?: RateLimiter<T> | undefined;
}

/** The delaying queue plus a {@link RateLimiter} deciding each retry's delay. */
export class RateLimitingWorkQueue<T> extends DelayingWorkQueue<T> implements RateLimitingQueue<T> {
  readonly #rateLimiter: RateLimiter<T>;

  constructor(options: RateLimitingQueueOptions<T> = {}) {
    // Checked before super() so that an invalid queue never registers with the metrics provider.
    const rateLimiter: unknown = options.rateLimiter ?? defaultControllerRateLimiter<T>({ clock: options.clock ?? realClock });
    const candidate = rateLimiter as Partial<RateLimiter<T>> | null;
    if (typeof candidate !== 'object' || candidate === null || typeof candidate.when !== 'function' || typeof candidate.forget !== 'function' || typeof candidate.numRequeues !== 'function') {
      invalidOption(new.target.name, 'rateLimiter', rateLimiter, 'a RateLimiter (when, forget, numRequeues)');
    }
    super(options);
    this.#rateLimiter = rateLimiter as RateLimiter<T>;
  }

  addRateLimited(item: T): void {
    // Checked first so that a stopped queue does not count failures.
    if (this.shuttingDown) return;
    this.addAfter(item, this.#rateLimiter.when(item));
  }

  forget(item: T): void {
    this.#rateLimiter.forget(item);
  }

  numRequeues(item: T): number {
    return this.#rateLimiter.numRequeues(item);
  }
}
