import type { Clock } from './clock.ts';
import { numberAtLeast } from './options.ts';

/** Options of {@link Backoff}. Durations are in milliseconds. */
export interface BackoffOptions {
  /** First delay. Default 800 (client-go's reflector backoff). */
  readonly initialMs?: number;
  /** Ceiling of the delay. Default 30 000. */
  readonly maxMs?: number;
  /** Growth factor per failure. Default 2. */
  readonly factor?: number;
  /** Jitter as a fraction of the delay: the delay is multiplied by [1, 1 + jitter). Default 1.0. */
  readonly jitter?: number;
  /** A success followed by this long without failure resets the delay to `initialMs`. Default 120 000. */
  readonly resetAfterMs?: number;
  /** Source of randomness in [0, 1), injectable for deterministic tests. Default Math.random. */
  readonly random?: () => number;
}

/**
 * Exponential backoff with jitter that resets after a stable period, as client-go's
 * `wait.Backoff` with `ResetDuration` does. Not shared between loops: one per retrying loop.
 */
export class Backoff {
  readonly #initial: number;
  readonly #max: number;
  readonly #factor: number;
  readonly #jitter: number;
  readonly #resetAfter: number;
  readonly #random: () => number;
  readonly #clock: Clock;
  /** Delay the next failure will get, before jitter. */
  #current: number;
  /** When the last failure happened; a quiet period longer than resetAfter starts over. */
  #lastFailureAt: number | undefined;

  constructor(clock: Clock, options: BackoffOptions = {}) {
    this.#initial = numberAtLeast('backoff', 'initialMs', options.initialMs ?? 800, 0);
    this.#max = numberAtLeast('backoff', 'maxMs', options.maxMs ?? 30_000, 0);
    this.#factor = numberAtLeast('backoff', 'factor', options.factor ?? 2, 1);
    this.#jitter = numberAtLeast('backoff', 'jitter', options.jitter ?? 1, 0);
    this.#resetAfter = numberAtLeast('backoff', 'resetAfterMs', options.resetAfterMs ?? 120_000, 0);
    this.#random = options.random ?? Math.random;
    this.#clock = clock;
    this.#current = this.#initial;
  }

  /** Records a failure and returns how long to wait before the next attempt. */
  next(): number {
    const now = this.#clock.now();
    if (this.#lastFailureAt !== undefined && now - this.#lastFailureAt > this.#resetAfter) this.#current = this.#initial;
    this.#lastFailureAt = now;
    const base = Math.min(this.#current, this.#max);
    this.#current = Math.min(this.#current * this.#factor, this.#max);
    return Math.min(base * (1 + this.#jitter * this.#random()), this.#max * (1 + this.#jitter));
  }

  /** Starts over at once (an explicit success that proves the peer healthy). */
  reset(): void {
    this.#current = this.#initial;
    this.#lastFailureAt = undefined;
  }
}
