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
    const onAbort = (): void => {
      timer.cancel();
      if (signal !== undefined) reject(abortReason(signal));
    };
    const timer = clock.setTimer(ms, () => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    });
    signal?.addEventListener('abort', onAbort, { once: true });
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
  const onAbort = (): void => { controller.abort(parent.reason); };
  parent.addEventListener('abort', onAbort, { once: true });
  return { controller, dispose: () => { parent.removeEventListener('abort', onAbort); } };
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
    const onAbort = (): void => { reject(abortReason(signal)); };
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => { signal.removeEventListener('abort', onAbort); resolve(value); },
      (err: unknown) => { signal.removeEventListener('abort', onAbort); reject(err instanceof Error ? err : new Error(String(err))); },
    );
  });
}
