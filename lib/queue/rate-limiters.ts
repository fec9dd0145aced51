import { clockOption, integerAtLeast, invalidOption, numberAbove, realClock, type Clock } from '../util/index.ts';

/**
 * Decides how long an item waits before it is retried (client-go's `workqueue.RateLimiter`). A
 * limiter is stateful: `when` counts a failure, `forget` clears an item's history.
 */
export interface RateLimiter<T> {
  /** Records one more failure of `item` and returns how many milliseconds to wait before retrying it. */
  when(item: T): number;
  /** Clears what the limiter tracks about `item` (call it on success): its next failure starts over. */
  forget(item: T): void;
  /** How many failures of `item` were recorded since it was last forgotten. */
  numRequeues(item: T): number;
}

/** Options of {@link ItemExponentialRateLimiter}. Durations are in milliseconds. */
export interface ItemExponentialRateLimiterOptions {
  /** Delay after the first failure; each further failure doubles it. Default 5. */
  readonly baseDelayMs?: number | undefined;
  /** Ceiling of the delay. Default 1 000 000 (1000 s), client-go's controller default. */
  readonly maxDelayMs?: number | undefined;
}

/**
 * Per-item exponential backoff: the n-th consecutive failure of an item waits
 * `baseDelayMs * 2^(n-1)`, capped at `maxDelayMs`.
 *
 * Invariant: `#failures` holds exactly the items that failed since they were last forgotten, each
 * with a count >= 1. It grows with the number of distinct failing items: callers forget on success.
 */
export class ItemExponentialRateLimiter<T> implements RateLimiter<T> {
  readonly #baseDelayMs: number;
  readonly #maxDelayMs: number;
  readonly #failures = new Map<T, number>();

  constructor(options: ItemExponentialRateLimiterOptions = {}) {
    const owner = 'ItemExponentialRateLimiter';
    this.#baseDelayMs = numberAbove(owner, 'baseDelayMs', options.baseDelayMs ?? 5, 0);
    this.#maxDelayMs = numberAbove(owner, 'maxDelayMs', options.maxDelayMs ?? 1_000_000, 0);
    if (this.#maxDelayMs < this.#baseDelayMs) invalidOption(owner, 'maxDelayMs', this.#maxDelayMs, `>= baseDelayMs (${this.#baseDelayMs})`);
  }

  when(item: T): number {
    const failures = this.#failures.get(item) ?? 0;
    this.#failures.set(item, failures + 1);
    // 2 ** failures overflows to Infinity long after the cap applies; min() handles both.
    return Math.min(this.#baseDelayMs * 2 ** failures, this.#maxDelayMs);
  }

  forget(item: T): void {
    this.#failures.delete(item);
  }

  numRequeues(item: T): number {
    return this.#failures.get(item) ?? 0;
  }
}

/** Options of {@link TokenBucketRateLimiter}. */
export interface TokenBucketRateLimiterOptions {
  /** Tokens added per second: the sustained rate of retries. Default 10. */
  readonly qps?: number | undefined;
  /** Bucket size: how many retries may go at once after a quiet period. The bucket starts full. Default 100. */
  readonly burst?: number | undefined;
  /** Time source for refilling. Default `realClock`. */
  readonly clock?: Clock | undefined;
}

/**
 * An overall token bucket shared by all items (golang.org/x/time/rate's `Reserve().Delay()`, which
 * client-go's `BucketRateLimiter` wraps): each `when` takes a token; when the bucket is empty the
 * caller is told how long until its token will have accumulated, and later callers queue behind it.
 * It tracks no item, so `forget` does nothing and `numRequeues` is always 0.
 */
export class TokenBucketRateLimiter<T> implements RateLimiter<T> {
  readonly #qps: number;
  readonly #burst: number;
  readonly #clock: Clock;
  /** Tokens left after the last `when` (negative: reservations queued beyond the bucket). */
  #tokens: number;
  /** When `#tokens` was last brought up to date; undefined until the first `when`. */
  #last: number | undefined;

  constructor(options: TokenBucketRateLimiterOptions = {}) {
    const owner = 'TokenBucketRateLimiter';
    this.#qps = numberAbove(owner, 'qps', options.qps ?? 10, 0);
    this.#burst = integerAtLeast(owner, 'burst', options.burst ?? 100, 1);
    this.#clock = clockOption(owner, options.clock ?? realClock);
    this.#tokens = this.#burst;
  }

  when(_item: T): number {
    const now = this.#clock.now();
    const elapsed = this.#last === undefined ? 0 : Math.max(0, now - this.#last);
    this.#last = Math.max(now, this.#last ?? now);
    this.#tokens = Math.min(this.#burst, this.#tokens + (elapsed * this.#qps) / 1000) - 1;
    return this.#tokens >= 0 ? 0 : (-this.#tokens * 1000) / this.#qps;
  }

  forget(_item: T): void {
    // Nothing is tracked per item.
  }

  numRequeues(_item: T): number {
    return 0;
  }
}

/** Options of {@link MaxOfRateLimiter}. */
export interface MaxOfRateLimiterOptions<T> {
  /** The limiters to combine; at least one. Required. */
  readonly limiters: readonly RateLimiter<T>[];
}

/**
 * Combines limiters: every one records each failure, and the longest wait wins. `numRequeues` is
 * the highest of theirs; `forget` forgets in all.
 */
export class MaxOfRateLimiter<T> implements RateLimiter<T> {
  readonly #limiters: readonly RateLimiter<T>[];

  constructor(options: MaxOfRateLimiterOptions<T>) {
    const limiters: unknown = options.limiters;
    if (!Array.isArray(limiters) || limiters.length === 0) invalidOption('MaxOfRateLimiter', 'limiters', limiters, 'a non-empty array of rate limiters');
    this.#limiters = [...options.limiters];
  }

  when(item: T): number {
    let wait = 0;
    for (const limiter of this.#limiters) wait = Math.max(wait, limiter.when(item));
    return wait;
  }

  forget(item: T): void {
    for (const limiter of this.#limiters) limiter.forget(item);
  }

  numRequeues(item: T): number {
    let requeues = 0;
    for (const limiter of this.#limiters) requeues = Math.max(requeues, limiter.numRequeues(item));
    return requeues;
  }
}

/** Options of {@link defaultControllerRateLimiter}. */
export interface DefaultControllerRateLimiterOptions {
  /** Time source of the token bucket. Default `realClock`. */
  readonly clock?: Clock | undefined;
}

/**
 * controller-runtime's default: per-item exponential backoff from 5 ms doubling to 1000 s, and an
 * overall token bucket of 10 retries per second with a burst of 100, whichever waits longer.
 */
export function defaultControllerRateLimiter<T>(options: DefaultControllerRateLimiterOptions = {}): RateLimiter<T> {
  return new MaxOfRateLimiter<T>({
    limiters: [
      new ItemExponentialRateLimiter<T>({ baseDelayMs: 5, maxDelayMs: 1_000_000 }),
      new TokenBucketRateLimiter<T>({ qps: 10, burst: 100, clock: options.clock }),
    ],
  });
}
