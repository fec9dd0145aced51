/** A pending timer; `cancel()` is idempotent and safe after the timer fired. */
export interface Timer {
  cancel(): void;
}

/**
 * Time, injected so that backoff, garbage collection and lease timing can be driven by tests
 * without real sleeps (client-go's Reflector takes a clock for the same reason).
 */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Calls `fn` once after `ms` milliseconds. */
  setTimer(ms: number, fn: () => void): Timer;
}

/**
 * A timer of the event loop. A class, not an object with a `cancel` closure: a cache keeps one
 * armed per watch, and the closure with its context cost about 90 bytes more (issue 12).
 */
class EventLoopTimer implements Timer {
  readonly #handle: NodeJS.Timeout;

  constructor(handle: NodeJS.Timeout) {
    this.#handle = handle;
  }

  cancel(): void {
    clearTimeout(this.#handle);
  }
}

/** The wall clock, backed by the event loop's timers. */
export const realClock: Clock = {
  now: () => Date.now(),
  setTimer(ms, fn) {
    return new EventLoopTimer(setTimeout(fn, Math.max(0, ms)));
  },
};

interface FakeTimer {
  readonly at: number;
  readonly seq: number;
  readonly fn: () => void;
  cancelled: boolean;
}

/**
 * A clock that moves only when told to. Timers fire synchronously inside `advance`, in due order
 * (ties in creation order); a timer set by a firing callback fires in the same `advance` if due.
 *
 * Invariant: `#timers` holds exactly the timers neither fired nor cancelled.
 */
export class FakeClock implements Clock {
  #now: number;
  #seq = 0;
  #timers: FakeTimer[] = [];

  constructor(start = 0) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimer(ms: number, fn: () => void): Timer {
    const timer: FakeTimer = { at: this.#now + Math.max(0, ms), seq: this.#seq++, fn, cancelled: false };
    this.#timers.push(timer);
    return {
      cancel: () => {
        timer.cancelled = true;
        this.#timers = this.#timers.filter((t) => t !== timer);
      },
    };
  }

  /** Moves time forward by `ms`, firing every timer that falls due on the way. */
  advance(ms: number): void {
    const target = this.#now + ms;
    for (;;) {
      const next = this.#timers.reduce<FakeTimer | undefined>(
        (best, t) => (best === undefined || t.at < best.at || (t.at === best.at && t.seq < best.seq) ? t : best),
        undefined,
      );
      if (next === undefined || next.at > target) break;
      this.#timers = this.#timers.filter((t) => t !== next);
      this.#now = Math.max(this.#now, next.at);
      next.fn();
    }
    this.#now = target;
  }

  /** Timers neither fired nor cancelled: a test asserts 0 after `stop()` to prove nothing leaked. */
  get pendingTimers(): number {
    return this.#timers.length;
  }

  /** Milliseconds until the next timer is due, or undefined when none is pending. */
  get nextTimerIn(): number | undefined {
    if (this.#timers.length === 0) return undefined;
    return Math.min(...this.#timers.map((t) => t.at)) - this.#now;
  }
}
