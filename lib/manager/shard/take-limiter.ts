// A token bucket that never waits: fence takes beyond the rate are left for a later tick.
import type { Clock } from '../../util/index.ts';

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

  constructor(perSecond: number, burst: number, clock: Clock) {
    if (!Number.isFinite(perSecond) || perSecond <= 0) throw new TypeError(`Sharder option maxFenceTakesPerSecond must be a positive number, got ${perSecond}`);
    if (!Number.isSafeInteger(burst) || burst < 1) throw new TypeError(`Sharder option fenceTakeBurst must be a positive integer, got ${burst}`);
    this.#perSecond = perSecond;
    this.#burst = burst;
    this.#clock = clock;
    this.#tokens = burst;
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
