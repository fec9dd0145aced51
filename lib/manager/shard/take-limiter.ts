// A token bucket that never waits: fence takes beyond the rate are left for a later tick.
import { positiveInteger, positiveNumber, type Clock } from '../../util/index.ts';

/**
 * Bounds how many fences a replica takes: a rolling restart hands hundreds of keys to a new
 * replica at once, and taking them all in one tick would start as many builds at once
 * (multicluster-runtime's "cold-start stampede"). Invariant: 0 ≤ `#tokens` ≤ burst.
 */
export class TakeLimiter {
  readonly #perSecond: number;
  readonly #burst: number;
  readonly #clock: Clock;
  #tokens: number;
  #at: number;

  /** `rateOption`, `burstOption`: the Sharder options the values came from, for the TypeError. */
  constructor(limits: { readonly perSecond: number; readonly burst: number; readonly rateOption: string; readonly burstOption: string }, clock: Clock) {
    this.#perSecond = positiveNumber('Sharder', limits.rateOption, limits.perSecond);
    this.#burst = positiveInteger('Sharder', limits.burstOption, limits.burst);
    this.#clock = clock;
    this.#tokens = this.#burst;
    this.#at = clock.now();
  }

  /** Takes a token if one is left now. */
  tryTake(): boolean {
    const now = this.#clock.now();
    this.#tokens = Math.min(this.#burst, this.#tokens + ((now - this.#at) / 1000) * this.#perSecond);
    this.#at = now;
    if (this.#tokens < 1) return false;
    this.#tokens -= 1;
    return true;
  }

  /** How long `takes` fences can be delayed by the limit, at worst (a full bucket spends `burst` at once). */
  delayMs(takes: number): number {
    return (Math.max(0, takes - this.#burst) / this.#perSecond) * 1000;
  }
}
