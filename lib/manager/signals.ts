import type { EventEmitter } from 'node:events';

/** Options of {@link signalHandler}. */
export interface SignalHandlerOptions {
  /** Where SIGTERM and SIGINT arrive. Default `process`. */
  readonly source?: Pick<EventEmitter, 'on' | 'off'> | undefined;
  /**
   * Called with 1 on the second signal. Default: none — the handler lets go of both signals after
   * the first, so a second one gets Node's default action (the process ends by that signal) and the
   * library itself never calls `process.exit`.
   */
  readonly exit?: ((code: number) => void) | undefined;
}

/**
 * controller-runtime's SetupSignalHandler: a signal that aborts on the first SIGTERM or SIGINT
 * (stop gracefully: pass it to `Manager.start`), while a second one ends the process at once —
 * through `exit` when given, else by the signal's default action (the handler unsubscribes after
 * the first). Call it once per process, from the program's entry point.
 */
export function signalHandler(options: SignalHandlerOptions = {}): AbortSignal {
  const source = options.source ?? process;
  const { exit } = options;
  const stop = new AbortController();
  let received = 0;
  const listeners = new Map<'SIGTERM' | 'SIGINT', () => void>();
  for (const name of ['SIGTERM', 'SIGINT'] as const) {
    listeners.set(name, () => {
      received += 1;
      if (received > 1) {
        exit?.(1);
        return;
      }
      stop.abort(new Error(`received ${name}`));
      if (exit === undefined) for (const [n, listener] of listeners) source.off(n, listener);
    });
  }
  for (const [name, listener] of listeners) source.on(name, listener);
  return stop.signal;
}
