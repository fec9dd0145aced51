import { SocketBudget, type ClusterConnectionOptions } from '../transport/index.ts';

/**
 * Settings every connection of a keeper (`ClusterSet`) is built with: a subset
 * of `ClusterConnectionOptions`, whose JSDoc states each default (HTTP/2 on, request timeout
 * 60 000 ms, 5 LIST pages per cluster, PING every 30 000 ms answered within 15 000 ms, the
 * process-wide socket budget, no watch chunk observer). Unset fields keep those defaults; an empty object changes nothing.
 */
export type ConnectionOptions = Pick<ClusterConnectionOptions, 'http2' | 'requestTimeoutMs' | 'maxListsPerCluster' | 'pingIntervalMs' | 'pingTimeoutMs' | 'socketBudget' | 'onWatchChunk'>;

type Check = (value: unknown) => boolean;

const positive: Check = (value) => typeof value === 'number' && Number.isFinite(value) && value > 0;
const positiveInteger: Check = (value) => typeof value === 'number' && Number.isSafeInteger(value) && value > 0;

/** What each field must be, and how the TypeError says so. */
const CHECKS: Readonly<Record<keyof ConnectionOptions, readonly [Check, string]>> = {
  http2: [(value) => typeof value === 'boolean', 'a boolean'],
  requestTimeoutMs: [positive, 'a positive number (ms)'],
  maxListsPerCluster: [positiveInteger, 'a positive integer'],
  pingIntervalMs: [positive, 'a positive number (ms)'],
  pingTimeoutMs: [positive, 'a positive number (ms)'],
  socketBudget: [(value) => value instanceof SocketBudget, 'a SocketBudget'],
  onWatchChunk: [(value) => typeof value === 'function', 'a function'],
};

/**
 * Validates connection settings and copies the ones set into a new frozen object (the caller's is
 * never kept). `owner` prefixes the option's name in the TypeError (`registry option connection`).
 * Unknown fields are refused rather than silently ignored.
 */
export function connectionOptionsOf(value: unknown, owner: string): Readonly<ConnectionOptions> {
  if (value === undefined) return Object.freeze({});
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new TypeError(`${owner} must be an object, got ${value === null ? 'null' : typeof value}`);
  const out: Record<string, unknown> = {};
  for (const [name, field] of Object.entries(value)) {
    if (field === undefined) continue;
    const check = Object.hasOwn(CHECKS, name) ? CHECKS[name as keyof ConnectionOptions] : undefined;
    if (check === undefined) throw new TypeError(`${owner}.${name} is not a connection option (known: ${Object.keys(CHECKS).join(', ')})`);
    if (!check[0](field)) throw new TypeError(`${owner}.${name} must be ${check[1]}, got ${typeof field === 'string' ? JSON.stringify(field) : typeof field === 'object' ? 'another object' : String(field)}`);
    out[name] = field;
  }
  return Object.freeze(out as ConnectionOptions);
}
