import type { Writable } from 'node:stream';
import winston from 'winston';
import { redactUrlsInText, sanitizeForDisplay, type Logger } from '../lib/util/index.ts';
import type { LogLevel } from './flags.ts';

/** Options of {@link createLogger}. */
export interface CreateLoggerOptions {
  /** Least severe level written. Default 'info'. */
  readonly level?: LogLevel;
  /** Where JSON lines go. Default process.stderr (stdout stays free for --help and --version). */
  readonly stream?: Writable;
  /** Fields on every line. Default { logger: 'fleetcache' }. */
  readonly fields?: Readonly<Record<string, unknown>>;
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

/**
 * A winston logger writing one JSON object per line, with `timestamp`, `level`, `message` and the
 * structured fields of the line and of every parent `child()`. It satisfies the library's Logger.
 */
export function createLogger(options: CreateLoggerOptions = {}): Logger {
  const logger = winston.createLogger({
    level: options.level ?? 'info',
    levels: { error: 0, warn: 1, info: 2, debug: 3 },
    defaultMeta: options.fields ?? { logger: 'fleetcache' },
    format: winston.format.combine(redact(), winston.format.timestamp(), winston.format.json()),
    transports: [new winston.transports.Stream({ stream: options.stream ?? process.stderr })],
    exitOnError: false,
  });
  return logger;
}
