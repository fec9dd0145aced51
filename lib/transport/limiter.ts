import { Semaphore } from 'async-mutex';
import Bottleneck from 'bottleneck';
import { abortReason, raceAbort } from '../util/index.ts';

/**
 * A limiter on concurrent LISTs, meant to be shared by every cluster connection of a process so
 * that a fleet-wide relist (after a network blip) cannot exhaust memory. Argo CD found about 50
 * concurrent LISTs the right order. Each LIST page holds one slot while it is requested and read.
 */
export function createListLimiter(maxConcurrent = 50): Bottleneck {
  if (!Number.isInteger(maxConcurrent) || maxConcurrent < 1) throw new TypeError(`createListLimiter: maxConcurrent must be an integer >= 1, got ${maxConcurrent}`);
  return new Bottleneck({ maxConcurrent });
}

let processListLimiter: Bottleneck | undefined;

/** The process-wide LIST limiter connections use when given none (50 concurrent LISTs). */
export function defaultListLimiter(): Bottleneck {
  processListLimiter ??= createListLimiter();
  return processListLimiter;
}

/**
 * A token bucket of `burst` requests refilled at `qps` per second (client-go's and
 * controller-runtime's defaults are 20/30). Bottleneck refills on a 250 ms heartbeat, so the
 * bucket gains qps/4 tokens per beat. Its interval is unref'd and cleared by `disconnect()`.
 */
export function createRequestLimiter(qps: number, burst: number): Bottleneck {
  return new Bottleneck({
    reservoir: burst,
    reservoirIncreaseAmount: qps / 4,
    reservoirIncreaseInterval: 250,
    reservoirIncreaseMaximum: burst,
    heartbeatInterval: 250,
  });
}

/**
 * Runs `fn` when the limiter lets it, or rejects with the signal's reason as soon as it aborts
 * (a job still queued then finds the signal aborted and returns at once, releasing its slot).
 */
export function scheduleAbortable<T>(limiter: Bottleneck, signal: AbortSignal, fn: () => Promise<T>): Promise<T> {
  if (signal.aborted) return Promise.reject(abortReason(signal));
  return raceAbort(limiter.schedule(() => (signal.aborted ? Promise.reject(abortReason(signal)) : fn())), signal);
}

/**
 * A cluster's share of the shared LIST limiter: at most `max` of its LIST pages hold or wait for a
 * shared slot at once, so a few clusters whose API servers accept and never answer hold a few slots
 * each, never all of them. An async-mutex semaphore: no timer, nothing to stop.
 */
export class ClusterShare {
  readonly #semaphore: Semaphore;
  readonly #max: number;

  constructor(max: number) {
    this.#semaphore = new Semaphore(max);
    this.#max = max;
  }

  /** Runs `fn` inside one unit of the share; rejects with the signal's reason once it aborts. */
  async run<T>(signal: AbortSignal, fn: () => Promise<T>): Promise<T> {
    if (signal.aborted) throw abortReason(signal);
    const acquiring = this.#semaphore.acquire();
    let release: (() => void) | undefined;
    try {
      [, release] = await raceAbort(acquiring, signal);
    } catch (err) {
      // Acquired after the caller left: given back at once.
      void acquiring.then(([, late]) => { late(); });
      throw err;
    }
    try {
      return await fn();
    } finally {
      release();
    }
  }

  /** Units held now (for tests and stats). */
  get held(): number {
    return this.#max - this.#semaphore.getValue();
  }
}
