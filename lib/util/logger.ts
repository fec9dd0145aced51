/** Structured fields attached to a log line. Never put credentials here. */
export type LogFields = Readonly<Record<string, unknown>>;

/**
 * The logger the library writes to: `(message, fields)` at four levels, and `child(fields)`. Every
 * field of a line and of its parents' `child()` must reach the output.
 *
 * A winston logger satisfies it as is, but use {@link fromWinston} anyway: winston folds a field
 * named `message` into the message and lets `level` be overwritten. A pino logger must be wrapped
 * with {@link fromPino}: pino's signature is `info(fields, message)`, and a raw pino logger called
 * as `info(message, fields)` silently drops the fields, so it is refused at compile time.
 * The library never logs through a global and never to the console on its own.
 */
export interface Logger {
  error(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  info(message: string, fields?: LogFields): void;
  debug(message: string, fields?: LogFields): void;
  /** A logger that adds `fields` to every line (per cluster, per informer, per owner, per reconcile). */
  child(fields: LogFields): Logger;
  /**
   * Never set. A raw pino logger has a numeric `levelVal`, so this makes passing one where a
   * Logger is expected a type error instead of a logger that drops every field: wrap it with
   * {@link fromPino}.
   */
  readonly levelVal?: never;
}

/** Discards everything: the default when the embedder passes no logger. */
export const noopLogger: Logger = {
  error: () => undefined,
  warn: () => undefined,
  info: () => undefined,
  debug: () => undefined,
  child: () => noopLogger,
};

/** The part of a pino logger that {@link fromPino} uses (pino's `LogFn`: fields first). */
export interface PinoLike {
  error(fields: object, message: string): void;
  warn(fields: object, message: string): void;
  info(fields: object, message: string): void;
  debug(fields: object, message: string): void;
  child(bindings: Record<string, unknown>): PinoLike;
}

/** The part of a winston logger that {@link fromWinston} uses (message first, then metadata). */
export interface WinstonLike {
  error(message: string, meta: object): unknown;
  warn(message: string, meta: object): unknown;
  info(message: string, meta: object): unknown;
  debug(message: string, meta: object): unknown;
  child(meta: Record<string, unknown>): WinstonLike;
}

/**
 * Copies `fields`, renaming each key the backend owns (`reserved`) to `field_<key>`, so that no
 * field overwrites the level, message or time of the line, and none is lost.
 */
function guardReserved(fields: LogFields | undefined, reserved: ReadonlySet<string>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (fields === undefined) return out;
  for (const [key, value] of Object.entries(fields)) out[reserved.has(key) ? `field_${key}` : key] = value;
  return out;
}

/** pino's own keys in every line (default `messageKey`, `timestamp`, `base`). */
const pinoReserved: ReadonlySet<string> = new Set(['level', 'time', 'msg', 'pid', 'hostname']);
/** winston's own keys: `level`, and `message` (a `message` field is appended to the message). */
const winstonReserved: ReadonlySet<string> = new Set(['level', 'message']);

/**
 * A {@link Logger} over a pino logger: `info(message, fields)` becomes `pino.info(fields, message)`,
 * `child(fields)` a pino child. Fields named like pino's own keys (`level`, `time`, `msg`, `pid`,
 * `hostname`) arrive as `field_<key>`.
 */
export function fromPino(pino: PinoLike): Logger {
  return {
    error: (message, fields) => { pino.error(guardReserved(fields, pinoReserved), message); },
    warn: (message, fields) => { pino.warn(guardReserved(fields, pinoReserved), message); },
    info: (message, fields) => { pino.info(guardReserved(fields, pinoReserved), message); },
    debug: (message, fields) => { pino.debug(guardReserved(fields, pinoReserved), message); },
    child: (fields) => fromPino(pino.child(guardReserved(fields, pinoReserved))),
  };
}

/**
 * A {@link Logger} over a winston logger. Fields named `level` or `message` arrive as
 * `field_level` / `field_message` (winston would overwrite the one and append the other to the
 * message).
 */
export function fromWinston(winston: WinstonLike): Logger {
  return {
    error: (message, fields) => { winston.error(message, guardReserved(fields, winstonReserved)); },
    warn: (message, fields) => { winston.warn(message, guardReserved(fields, winstonReserved)); },
    info: (message, fields) => { winston.info(message, guardReserved(fields, winstonReserved)); },
    debug: (message, fields) => { winston.debug(message, guardReserved(fields, winstonReserved)); },
    child: (fields) => fromWinston(winston.child(guardReserved(fields, winstonReserved))),
  };
}
