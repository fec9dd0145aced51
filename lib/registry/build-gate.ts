import { abortReason, onAbort } from '../util/index.ts';

/** One caller waiting for a slot. */
interface Waiter {
  readonly grant: (release: () => void) => void;
  readonly detach: () => void;
}

/**
 * A FIFO bound on cache builds in flight (`maxConcurrentBuilds`): asking for a thousand clusters at
 * once must not run a thousand synchronous setups (kubeconfig, TLS context, connection, informer)
 * back to back on one turn of the event loop. Callers beyond the bound wait in order of arrival;
 * a waiter whose signal aborts leaves the queue at once and never holds a slot. A freed slot is
 * handed on after a turn of the event loop (`setImmediate`), so I/O runs between admissions.
 *
 * Invariants: `#inFlight` ≤ `max`; `#waiting` (insertion-ordered, so FIFO) holds exactly the
 * callers not yet granted and not aborted; a waiter is granted only while `#inFlight` < `max`;
 * `#handing` is true iff one `setImmediate` hand-off is scheduled.
 */
export class BuildGate {
  readonly max: number;
  #inFlight = 0;
  readonly #waiting = new Set<Waiter>();
  #handing = false;

  constructor(max: number) {
    this.max = max;
  }

  /** Slots held now. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** Callers waiting for a slot. */
  get queued(): number {
    return this.#waiting.size;
  }

  /** A slot now if one is free and nobody waits (the release function), else undefined. */
  tryAcquire(): (() => void) | undefined {
    if (this.#inFlight >= this.max || this.#waiting.size > 0) return undefined;
    this.#inFlight += 1;
    return this.#releaser();
  }

  /**
   * Resolves with the function that gives the slot back (call it once; more is a no-op) once one is
   * free and every earlier caller got theirs; rejects with the reason of `signal` or `also`
   * (`signal` checked first), whichever aborts first. Two signals rather than a child of both: a
   * fleet asked for at once queues a waiter per cache, and a child controller each (its signal,
   * listener map and fan-out) was garbage that outlived the young generation (issue 12).
   */
  acquire(signal: AbortSignal, also?: AbortSignal): Promise<() => void> {
    if (signal.aborted) return Promise.reject(abortReason(signal));
    if (also?.aborted === true) return Promise.reject(abortReason(also));
    const now = this.tryAcquire();
    if (now !== undefined) return Promise.resolve(now);
    return new Promise((resolve, reject) => {
      const leave = (from: AbortSignal): void => {
        this.#waiting.delete(waiter);
        waiter.detach();
        reject(abortReason(from));
      };
      // One callback on each signal through the shared fan-out, both removed when granted or left.
      const detachSignal = onAbort(signal, () => { leave(signal); });
      const detachAlso = also === undefined ? undefined : onAbort(also, () => { leave(also); });
      const waiter: Waiter = {
        grant: (release) => { waiter.detach(); resolve(release); },
        detach: () => {
          detachSignal();
          detachAlso?.();
        },
      };
      this.#waiting.add(waiter);
    });
  }

  #releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#inFlight -= 1;
      this.#handOn();
    };
  }

  /** Grants the next waiter a free slot after a turn of the event loop, one per turn. */
  #handOn(): void {
    if (this.#handing || this.#waiting.size === 0 || this.#inFlight >= this.max) return;
    this.#handing = true;
    setImmediate(() => {
      this.#handing = false;
      const [next] = this.#waiting;
      if (next !== undefined && this.#inFlight < this.max) {
        this.#waiting.delete(next);
        this.#inFlight += 1;
        next.grant(this.#releaser());
      }
      this.#handOn();
    });
  }
}
