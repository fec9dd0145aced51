/** Structured fields attached to a log line. Never put credentials here. */
export type LogFields = Readonly<Record<string, unknown>>;

/**
 * The logger the library writes to. A winston logger satisfies it as is; the library never logs
 * through a global and never to the console on its own.
 */
export interface Logger {
  error(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  info(message: string, fields?: LogFields): void;
  debug(message: string, fields?: LogFields): void;
  /** A logger that adds `fields` to every line (per cluster, per informer, per owner). */
  child(fields: LogFields): Logger;
}

/** Discards everything: the default when the embedder passes no logger. */
export const noopLogger: Logger = {
  error: () => undefined,
  warn: () => undefined,
  info: () => undefined,
  debug: () => undefined,
  child: () => noopLogger,
};
