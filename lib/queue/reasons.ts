import { FleetcacheError, isAbortError, KubeApiError, TransportError } from '../util/index.ts';

/**
 * Why a reconcile failed, in a few fixed words: the `reason` label of
 * `fleetcache_reconcile_errors_total`, so its values stay bounded whatever the handlers throw.
 *
 * - `conflict`: HTTP 409, or a status write that kept conflicting (`ERR_STATUS_CONFLICT`)
 * - `not_found` (404), `forbidden` (401, 403), `invalid` (400, 422), `throttled` (429),
 *   `server_error` (5xx), `api_error` (any other status): a `KubeApiError` by its HTTP status
 * - `transport`: the cluster could not be reached (`TransportError`)
 * - `timeout`: an abort or timeout the workers did not ask for (`AbortError`, `TimeoutError`)
 * - `fleetcache`: any other typed error of the library (`FleetcacheError`)
 * - `panic`: a bug in the handler rather than a failed operation (see {@link isPanic})
 * - `invalid_result`: the handler resolved with neither nothing nor `{ requeueAfterMs }`
 * - `other`: anything else the handler threw
 */
export type ReconcileErrorReason =
  | 'conflict' | 'not_found' | 'forbidden' | 'invalid' | 'throttled' | 'server_error' | 'api_error'
  | 'transport' | 'timeout' | 'fleetcache' | 'panic' | 'invalid_result' | 'other';

/** Every {@link ReconcileErrorReason}, for metrics that set their label values up front. */
export const RECONCILE_ERROR_REASONS: readonly ReconcileErrorReason[] = [
  'conflict', 'not_found', 'forbidden', 'invalid', 'throttled', 'server_error', 'api_error',
  'transport', 'timeout', 'fleetcache', 'panic', 'invalid_result', 'other',
];

/** The errors V8 throws for a mistake in the code itself. */
const ENGINE_ERRORS: readonly (abstract new (...args: never[]) => Error)[] = [TypeError, ReferenceError, RangeError, SyntaxError, EvalError, URIError];

/**
 * Whether a handler's failure is what Go would have raised as a panic (controller-runtime's
 * `controller_runtime_reconcile_panics_total`): a thrown value that is not an `Error`, or an error
 * the JavaScript engine raises for a bug (`TypeError` reading a property of undefined,
 * `ReferenceError`, `RangeError`…) with no `cause`. A `TypeError` with a `cause` is a failed
 * operation reported that way (undici's `fetch failed`), not a bug.
 */
export function isPanic(thrown: unknown): boolean {
  if (!(thrown instanceof Error)) return true;
  return thrown.cause === undefined && ENGINE_ERRORS.some((kind) => Object.getPrototypeOf(thrown) === kind.prototype);
}

/** The reason of a handler's failure (what it threw). */
export function reconcileErrorReason(thrown: unknown): ReconcileErrorReason {
  if (isPanic(thrown)) return 'panic';
  if (thrown instanceof KubeApiError) return apiReason(thrown.statusCode);
  if (thrown instanceof TransportError) return 'transport';
  if (thrown instanceof FleetcacheError) return thrown.code === 'ERR_STATUS_CONFLICT' ? 'conflict' : 'fleetcache';
  if (isAbortError(thrown)) return 'timeout';
  return 'other';
}

function apiReason(status: number): ReconcileErrorReason {
  if (status === 409) return 'conflict';
  if (status === 404) return 'not_found';
  if (status === 401 || status === 403) return 'forbidden';
  if (status === 400 || status === 422) return 'invalid';
  if (status === 429) return 'throttled';
  if (status >= 500 && status <= 599) return 'server_error';
  return 'api_error';
}
