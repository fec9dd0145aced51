import type { Writable } from 'node:stream';
import winston from 'winston';
import { fromWinston, realClock, redactUrlsInText, sanitizeForDisplay, type Clock, type Logger } from '../lib/util/index.ts';
import type { LogFormat, LogLevel } from './flags.ts';

/** Options of {@link createLogger}. */
export interface CreateLoggerOptions {
  /** Least severe level written. Default 'info'. */
  readonly level?: LogLevel;
  /** Where JSON lines go. Default process.stderr (stdout stays free for --help and --version). */
  readonly stream?: Writable;
  /** Fields on every line. Default { logger: 'fleetcache' }. */
  readonly fields?: Readonly<Record<string, unknown>>;
  /**
   * `json`: one JSON object per line with zap's production keys (`level`, `ts` in epoch seconds,
   * `logger`, `msg`, then the fields), as controller-runtime writes. `console`: zap's development
   * layout for people, `ISO-time<TAB>LEVEL<TAB>logger<TAB>msg<TAB>{fields}`. Default `json`.
   */
  readonly format?: LogFormat;
  /** Stamps `ts`. Default: the wall clock. */
  readonly clock?: Clock;
}

const redacted = '[REDACTED]';

/** Longest string a log line carries in one field (message included), in UTF-16 code units. */
export const MAX_LOG_TEXT = 4_096;

/**
 * Field names whose values are credentials wherever they appear (kubeconfig user entries, HTTP
 * headers, Secret data). Compared lower-cased with '-' and '_' removed.
 */
const credentialKeys = new Set([
  'token', 'bearertoken', 'accesstoken', 'idtoken', 'refreshtoken', 'password', 'authorization',
  'proxyauthorization', 'clientkeydata', 'keydata', 'cookie', 'setcookie', 'data', 'stringdata',
]);

/**
 * Credential shapes inside free text (an error message that quotes a header or a kubeconfig):
 * `Bearer <token>`, `Basic <b64>`, JWTs (every Kubernetes service-account token is one), `token: x`
 * / `"token":"x"` pairs, and PEM private keys.
 */
const credentialPatterns: readonly [RegExp, string][] = [
  [/\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]+/g, `$1 ${redacted}`],
  [/\beyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*/g, redacted],
  [/("?(?:token|password|client-key-data)"?\s*[:=]\s*)"?[^\s",}]+"?/gi, `$1${redacted}`],
  [/-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----|$)/g, redacted],
];

/**
 * Replaces credential shapes in free text (see credentialPatterns) and passes every URL in it
 * through `redactUrl` (user information and query replaced).
 */
export function scrubText(text: string): string {
  let out = redactUrlsInText(text);
  for (const [pattern, replacement] of credentialPatterns) out = out.replace(pattern, replacement);
  return out;
}

/** What a log line may carry of outside text: scrubbed, then bounded with controls and bidi escaped. */
function displayText(text: string): string {
  return sanitizeForDisplay(scrubText(text), MAX_LOG_TEXT);
}

function scrub(value: unknown, depth: number): unknown {
  if (typeof value === 'string') return displayText(value);
  if (value instanceof Error) {
    const code = (value as { code?: unknown }).code;
    return { name: value.name, message: displayText(value.message), ...(typeof code === 'string' ? { code: displayText(code) } : {}) };
  }
  if (typeof value !== 'object' || value === null) return value;
  if (depth > 6) return '[…]';
  if (Array.isArray(value)) return value.map((v: unknown) => scrub(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    out[k] = credentialKeys.has(k.toLowerCase().replace(/[-_]/g, '')) && v !== undefined && v !== null && v !== '' ? redacted : scrub(v, depth + 1);
  }
  return out;
}

/**
 * Defence in depth: the library never logs credentials on purpose, but an error message may quote
 * a server's answer, a kubeconfig or a URL. Every string field and the message are scrubbed,
 * URLs redacted, control and bidi characters escaped and the length capped at
 * {@link MAX_LOG_TEXT} before the line is serialized; Error values become { name, message, code }.
 */
const redact = winston.format((info) => {
  for (const key of Object.keys(info)) {
    if (key === 'level') continue;
    const value: unknown = info[key];
    info[key] = credentialKeys.has(key.toLowerCase().replace(/[-_]/g, '')) ? redacted : scrub(value, 0);
  }
  return info;
});

/** Keys the line itself owns, in zap's order; a field by one of these names is renamed `field_<key>`. */
const lineKeys = ['level', 'ts', 'logger', 'msg'] as const;

/** The line's fields: every string key of winston's info object but its own level and message. */
function fieldsOf(info: winston.Logform.TransformableInfo): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(info)) {
    if (key === 'level' || key === 'message' || key === 'logger') continue;
    fields[(lineKeys as readonly string[]).includes(key) ? `field_${key}` : key] = value;
  }
  return fields;
}

/** zap's production JSON: `{"level","ts","logger","msg",...fields}`. */
function zapJson(clock: Clock): winston.Logform.Format {
  return winston.format.printf((info) => JSON.stringify({
    level: info.level,
    ts: clock.now() / 1000,
    logger: info.logger,
    msg: info.message,
    ...fieldsOf(info),
  }));
}

/** zap's development console layout: tab-separated time, LEVEL, logger, message, then the fields as JSON. */
function zapConsole(clock: Clock): winston.Logform.Format {
  return winston.format.printf((info) => {
    const fields = fieldsOf(info);
    const parts = [new Date(clock.now()).toISOString(), info.level.toUpperCase(), typeof info.logger === 'string' ? info.logger : '', String(info.message)];
    if (Object.keys(fields).length > 0) parts.push(JSON.stringify(fields));
    return parts.join('\t');
  });
}

/**
 * A winston logger writing one line per call, in zap's production JSON (default) or console
 * layout, with the structured fields of the line and of every parent `child()`, each scrubbed
 * (see `redact`). Returned through {@link fromWinston}, so no field is ever dropped or folded.
 */
export function createLogger(options: CreateLoggerOptions = {}): Logger {
  const clock = options.clock ?? realClock;
  const logger = winston.createLogger({
    level: options.level ?? 'info',
    levels: { error: 0, warn: 1, info: 2, debug: 3 },
    defaultMeta: options.fields ?? { logger: 'fleetcache' },
    format: winston.format.combine(redact(), options.format === 'console' ? zapConsole(clock) : zapJson(clock)),
    transports: [new winston.transports.Stream({ stream: options.stream ?? process.stderr })],
    exitOnError: false,
  });
  return fromWinston(logger);
}
