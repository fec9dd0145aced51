import { abortReason, ClosedError, integerAtLeast, numberAbove, onAbort, realClock, type Clock, type Timer } from '../util/index.ts';

// Both limiters keep no timer while idle: at a thousand clusters, a refill heartbeat per limiter
// (bottleneck's 250 ms one) is 4,000 wake-ups a second doing nothing. Tokens are counted lazily
// from the clock, and a timer is armed only for the first waiter of a bucket.

/** One caller waiting in a queue. */
interface Waiter<T> {
  readonly resolve: (value: T) => void;
  readonly reject: (err: Error) => void;
  /** Detaches the abort callback (the signal's one fan-out listener stays shared; see onAbort). */
  detach: () => void;
}

/** Queues a waiter in `queue` until resolved, or removes it and rejects when `signal` aborts. */
function wait<T>(queue: Set<Waiter<T>>, signal: AbortSignal | undefined, onLeave: () => void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const waiter: Waiter<T> = { resolve, reject, detach: () => undefined };
    queue.add(waiter);
    if (signal === undefined) return;
    waiter.detach = onAbort(signal, () => {
      // Already granted (and removed) when this runs after a hand-off in the same tick: nothing to undo.
      if (!queue.delete(waiter)) return;
      reject(abortReason(signal));
      onLeave();
    });
  });
}

/** Options of {@link TokenBucket}. */
export interface TokenBucketOptions {
  /** Tokens added per second: the sustained request rate. Required, a finite number > 0. */
  readonly qps: number;
  /** Size of the bucket, full at start: how many requests may go at once after a quiet spell. Required, an integer >= 1. */
  readonly burst: number;
  /** Default: the wall clock. */
  readonly clock?: Clock;
}

/**
 * A request rate limiter with client-go's flowcontrol semantics (`NewTokenBucketRateLimiter`):
 * `burst` tokens at start, refilled continuously at `qps` up to `burst`; each request takes one
 * token, waiting for it when the bucket is empty, in arrival order.
 *
 * Invariants: `#waiters` is in arrival order and is non-empty only while fewer than one token is
 * left (a drain hands tokens to the head until it empties or the tokens run out); `#timer` is set
 * if and only if `#waiters` is non-empty, so an idle bucket holds no timer, and N waiters hold one
 * (due when the head's token is). `#tokens` is exact as of `#at` (it is refilled lazily from the clock).
 */
export class TokenBucket {
  readonly #qps: number;
  readonly #burst: number;
  readonly #clock: Clock;
  #tokens: number;
  #at: number;
  readonly #waiters = new Set<Waiter<undefined>>();
  #timer: Timer | undefined;
  #closed = false;

  constructor(options: TokenBucketOptions) {
    this.#qps = numberAbove('TokenBucket', 'qps', options.qps, 0);
    this.#burst = integerAtLeast('TokenBucket', 'burst', options.burst, 1);
    this.#clock = options.clock ?? realClock;
    this.#tokens = this.#burst;
    this.#at = this.#clock.now();
  }

  /**
   * Resolves once the caller has a token (at once when one is left and nobody waits). Rejects with
   * the signal's reason when it aborts first (its place in the queue is freed), or with a
   * `ClosedError` once the bucket is closed.
   */
  take(signal?: AbortSignal): Promise<void> {
    if (this.#closed) return Promise.reject(new ClosedError('request limiter'));
    if (signal?.aborted === true) return Promise.reject(abortReason(signal));
    if (this.#waiters.size === 0) {
      this.#refill();
      if (this.#tokens >= 1) {
        this.#tokens -= 1;
        return Promise.resolve();
      }
    }
    const waiting = wait(this.#waiters, signal, () => { this.#arm(); });
    // A real clock's timer may fire late: tokens that accrued meanwhile go to the queue's head first.
    this.#drain();
    return waiting;
  }

  /** Tokens available now (fractional while refilling). */
  get tokens(): number {
    this.#refill();
    return this.#tokens;
  }

  /** Callers waiting for a token. */
  get waiting(): number {
    return this.#waiters.size;
  }

  /** Rejects every waiter with a `ClosedError`, releases the timer and refuses later takes. Idempotent. */
  close(): void {
    this.#closed = true;
    this.#timer?.cancel();
    this.#timer = undefined;
    const waiters = [...this.#waiters];
    this.#waiters.clear();
    for (const w of waiters) {
      w.detach();
      w.reject(new ClosedError('request limiter'));
    }
  }

  #refill(): void {
    const now = this.#clock.now();
    // A clock that stepped back adds nothing (and restarts the count from now).
    if (now > this.#at) this.#tokens = Math.min(this.#burst, this.#tokens + ((now - this.#at) * this.#qps) / 1000);
    this.#at = now;
  }

  /** Hands tokens to waiters in order while there are any, then re-arms. */
  #drain(): void {
    this.#refill();
    for (const waiter of this.#waiters) {
      if (this.#tokens < 1) break;
      this.#tokens -= 1;
      this.#waiters.delete(waiter);
      waiter.detach();
      waiter.resolve(undefined);
    }
    this.#arm();
  }

  /** Keeps the invariant: one timer, due when the head's token is, while anybody waits; none otherwise. */
  #arm(): void {
    if (this.#waiters.size === 0) {
      this.#timer?.cancel();
      this.#timer = undefined;
      return;
    }
    if (this.#timer !== undefined) return;
    // At least 1 ms: a float remainder just below a whole token must not spin on 0 ms timers.
    const ms = Math.max(1, Math.ceil(((1 - this.#tokens) * 1000) / this.#qps));
    this.#timer = this.#clock.setTimer(ms, () => {
      this.#timer = undefined;
      this.#drain();
    });
  }
}

/** Options of {@link ConcurrencyLimiter}. */
export interface ConcurrencyLimiterOptions {
  /** Slots: how many callers may hold one at once. Required, an integer >= 1. */
  readonly maxConcurrent: number;
  /** What it limits, in its errors. Default `concurrency limiter`. */
  readonly what?: string;
}

/**
 * A counting semaphore: at most `max` holders at once, the others wait in arrival order. It has
 * no timers at all, so there is nothing to stop for it to be collected.
 *
 * Invariants: `#held <= max`; `#waiters` is in arrival order and non-empty only while
 * `#held === max` (a released slot goes straight to the head of the queue, so a newcomer never
 * overtakes a waiter).
 */
export class ConcurrencyLimiter {
  /** Slots in all. */
  readonly max: number;
  readonly #what: string;
  #held = 0;
  readonly #waiters = new Set<Waiter<() => void>>();
  #stopped = false;

  constructor(options: ConcurrencyLimiterOptions) {
    this.max = integerAtLeast('ConcurrencyLimiter', 'maxConcurrent', options.maxConcurrent, 1);
    this.#what = options.what ?? 'concurrency limiter';
  }

  /**
   * Resolves with a release function once the caller holds a slot (calling it twice releases
   * once). Rejects with the signal's reason when it aborts first (its place is freed), or with a
   * `ClosedError` once stopped.
   */
  acquire(signal?: AbortSignal): Promise<() => void> {
    if (this.#stopped) return Promise.reject(new ClosedError(this.#what));
    if (signal?.aborted === true) return Promise.reject(abortReason(signal));
    if (this.#held < this.max) {
      this.#held++;
      return Promise.resolve(this.#releaser());
    }
    return wait(this.#waiters, signal, () => undefined);
  }

  /** Runs `fn` holding one slot, released when it settles; rejects as {@link acquire} does. */
  async run<T>(signal: AbortSignal | undefined, fn: () => Promise<T>): Promise<T> {
    const release = await this.acquire(signal);
    try {
      // Granted in the same tick its signal aborted: the slot goes back unused.
      if (signal?.aborted === true) throw abortReason(signal);
      return await fn();
    } finally {
      release();
    }
  }

  /** Slots held now. */
  get held(): number {
    return this.#held;
  }

  /** Callers waiting for a slot. */
  get waiting(): number {
    return this.#waiters.size;
  }

  /**
   * Rejects every waiter with a `ClosedError` and refuses later acquisitions; holders keep their
   * slots until they release them. Idempotent; resolves at once (there is nothing to wait for).
   */
  stop(): Promise<void> {
    this.#stopped = true;
    const waiters = [...this.#waiters];
    this.#waiters.clear();
    for (const w of waiters) {
      w.detach();
      w.reject(new ClosedError(this.#what));
    }
    return Promise.resolve();
  }

  #releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const [next] = this.#waiters;
      if (next === undefined) {
        this.#held--;
        return;
      }
      // The slot passes to the head as it is: `#held` does not change.
      this.#waiters.delete(next);
      next.detach();
      next.resolve(this.#releaser());
    };
  }
}

/**
 * A limiter on concurrent LISTs, meant to be shared by every cluster connection of a process so
 * that a fleet-wide relist (after a network blip) cannot exhaust memory. Argo CD found about 50
 * concurrent LISTs the right order. Each LIST page holds one slot while it is requested and read.
 */
export function createListLimiter(maxConcurrent = 50): ConcurrencyLimiter {
  if (!Number.isInteger(maxConcurrent) || maxConcurrent < 1) throw new TypeError(`createListLimiter: maxConcurrent must be an integer >= 1, got ${maxConcurrent}`);
  return new ConcurrencyLimiter({ maxConcurrent, what: 'LIST limiter' });
}

let processListLimiter: ConcurrencyLimiter | undefined;

/** The process-wide LIST limiter connections use when given none (50 concurrent LISTs). */
export function defaultListLimiter(): ConcurrencyLimiter {
  processListLimiter ??= createListLimiter();
  return processListLimiter;
}
