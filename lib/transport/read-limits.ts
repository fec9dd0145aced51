// The bounds on what one answer of an API server may make this process hold: defaults and validation.
import { invalidOption } from '../util/index.ts';

const MiB = 1024 * 1024;

/**
 * Bounds on what one answer of an API server may make this process hold. A read stops at its limit
 * and destroys the stream (the excess is never buffered) with a `LimitExceededError` naming the
 * limit; the cache concerned backs off as after any other failure.
 */
export interface ReadLimits {
  /**
   * Largest watch event (one line: one object plus a small envelope). Default 16 MiB: the API
   * server refuses objects above about 1.5 MiB (etcd's request limit), so ten times that is
   * headroom, and a pod's memory limit survives several watches each holding one line.
   */
  readonly maxWatchEventBytes?: number;
  /**
   * Largest LIST response (one page). Default 64 MiB: a page of 500 objects (the informer's default
   * page size) averaging 128 KiB, about twenty times a real page of Pods, while one page being
   * parsed (roughly three times its size in objects) still fits the service's 512 MiB pod limit.
   * Raise it for an unpaginated LIST of a large collection (the fallback after two expired
   * continue tokens).
   */
  readonly maxListBytes?: number;
  /**
   * Largest other successful response: discovery documents and single-object answers of
   * `request()` (GET, PATCH, ...). Default 16 MiB, as for a watch event.
   */
  readonly maxResponseBytes?: number;
  /**
   * Largest error response body read to build a `KubeApiError` (a Status is a few hundred bytes).
   * Default 64 KiB; beyond it the HTTP status alone is reported, with a `LimitExceededError` as `cause`.
   */
  readonly maxErrorBytes?: number;
}

/** The defaults of {@link ReadLimits}, in bytes. */
export const DEFAULT_READ_LIMITS: Readonly<Required<ReadLimits>> = Object.freeze({
  maxWatchEventBytes: 16 * MiB,
  maxListBytes: 64 * MiB,
  maxResponseBytes: 16 * MiB,
  maxErrorBytes: 64 * 1024,
});

/** Validates the read limits and merges them over the defaults (into a new object). */
export function readLimitsOf(options: ReadLimits, owner: string): Required<ReadLimits> {
  const out = { ...DEFAULT_READ_LIMITS };
  for (const name of Object.keys(DEFAULT_READ_LIMITS) as (keyof ReadLimits)[]) {
    const value = options[name];
    if (value === undefined) continue;
    if (!Number.isSafeInteger(value) || value < 1) invalidOption(owner, name, value, 'a positive integer (bytes)');
    out[name] = value;
  }
  return out;
}
