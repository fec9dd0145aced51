import type { Clock } from './clock.ts';
import { realClock } from './clock.ts';

/** The reason a signal carries, or a standard AbortError when it carries none. */
export function abortReason(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  return reason instanceof Error ? reason : new DOMException('This operation was aborted', 'AbortError');
}

/** True for the error a sleep or request rejects with when its signal aborts. */
export function isAbortError(err: unknown): boolean {
  return err instanceof Error && (err.name === 'AbortError' || err.name === 'TimeoutError');
}

/** Our one listener on a signal and the callbacks it runs. */
interface FanOut {
  readonly callbacks: Set<() => void>;
  readonly listener: () => void;
}

/**
 * One 'abort' listener per signal, fanning out to a set of callbacks.
 *
 * `addEventListener` scans the signal's listener list for a duplicate on every call, so n
 * listeners on one long-lived signal (the registry's root, a caller's signal shared by many
 * builds) cost O(n²) to add. Here a signal carries at most one listener of ours, whatever the
 * number of children, and adding or removing a callback is O(1).
 *
 * Invariant: a signal is a key of `fanOuts` if and only if our listener is attached to it and its
 * set of callbacks is non-empty; the last callback detached removes the listener too, so a
 * long-lived signal keeps nothing for children that ended on their own.
 */
const fanOuts = new WeakMap<AbortSignal, FanOut>();

/**
 * Runs `callback` once when `signal` aborts (at once, synchronously, if it already has) and returns
 * a function that detaches it. Detaching after it ran, or twice, does nothing.
 */
export function onAbort(signal: AbortSignal, callback: () => void): () => void {
  if (signal.aborted) {
    callback();
    return () => undefined;
  }
  let fanOut = fanOuts.get(signal);
  if (fanOut === undefined) {
    const callbacks = new Set<() => void>();
    const listener = (): void => {
      fanOuts.delete(signal);
      // A Set iterates live: a callback detached by an earlier one while they run is skipped.
      for (const run of callbacks) {
        callbacks.delete(run);
        run();
      }
    };
    fanOut = { callbacks, listener };
    fanOuts.set(signal, fanOut);
    signal.addEventListener('abort', listener, { once: true });
  }
  const { callbacks, listener } = fanOut;
  // The function itself, or a wrapper when it is attached already: the same function can be
  // attached twice and detached once each (a wrapper for every call cost a closure per child).
  const entry = callbacks.has(callback) ? (): void => { callback(); } : callback;
  callbacks.add(entry);
  // A second detach must not remove a later attachment of the same function.
  let attached = true;
  return () => {
    if (!attached) return;
    attached = false;
    if (!callbacks.delete(entry) || callbacks.size > 0) return;
    fanOuts.delete(signal);
    signal.removeEventListener('abort', listener);
  };
}

/**
 * Resolves after `ms`, or rejects with the signal's reason as soon as it aborts. The timer and
 * the abort listener are both released whichever comes first.
 */
export function sleep(ms: number, signal?: AbortSignal, clock: Clock = realClock): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted === true) {
      reject(abortReason(signal));
      return;
    }
    const timer = clock.setTimer(ms, () => {
      detach();
      resolve();
    });
    const detach = signal === undefined ? () => undefined : onAbort(signal, () => {
      timer.cancel();
      reject(abortReason(signal));
    });
  });
}

/**
 * A controller that aborts when `parent` aborts, for the lifecycle tree (registry → cluster →
 * informer). `dispose()` detaches it from the parent without aborting it, so a long-lived parent
 * does not accumulate listeners from children that ended on their own.
 */
export function childController(parent?: AbortSignal): { readonly controller: AbortController; readonly dispose: () => void } {
  const controller = new AbortController();
  if (parent === undefined) return { controller, dispose: () => undefined };
  if (parent.aborted) {
    controller.abort(parent.reason);
    return { controller, dispose: () => undefined };
  }
  const dispose = onAbort(parent, () => { controller.abort(parent.reason); });
  return { controller, dispose };
}

/**
 * Waits for `promise`, or rejects with the signal's reason when it aborts first. The promise is not
 * cancelled (it cannot be); its eventual rejection is swallowed so it never goes unhandled.
 */
export function raceAbort<T>(promise: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (signal === undefined) return promise;
  if (signal.aborted) {
    promise.catch(() => undefined);
    return Promise.reject(abortReason(signal));
  }
  return new Promise<T>((resolve, reject) => {
    const detach = onAbort(signal, () => { reject(abortReason(signal)); });
    promise.then(
      (value) => { detach(); resolve(value); },
      (err: unknown) => { detach(); reject(err instanceof Error ? err : new Error(String(err))); },
    );
  });
}
