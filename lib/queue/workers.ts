import { randomUUID } from 'node:crypto';
import { clockOption, integerAtLeast, invalidOption, isAbortError, noopLogger, realClock, stringOption, toError, type Clock, type Logger } from '../util/index.ts';
import type { RateLimitingQueue } from './rate-limiting.ts';
import { reconcileErrorReason, type ReconcileErrorReason } from './reasons.ts';

/** What a handler may return instead of nothing: process the item again after this delay. */
export interface RequeueAfter {
  /** Milliseconds (finite, >= 0) before the item is handled again. */
  readonly requeueAfterMs: number;
}

/** What {@link runWorkers} hands a handler besides the item, fresh for every call. */
export interface WorkContext {
  /**
   * The workers' logger with `controller` and `reconcileID` added (controller-runtime's keys):
   * log through it so that every line of one reconcile carries the same ID.
   */
  readonly logger: Logger;
  /** A UUID naming this one call of the handler. */
  readonly reconcileID: string;
}

/**
 * Processes one item. Resolving (with nothing) means success; `{ requeueAfterMs }` means success
 * but look again later; throwing or rejecting means failure, retried with backoff. `signal` is the
 * workers' signal: abort it to stop early. The same item is never handled twice at once.
 */
// eslint-disable-next-line @typescript-eslint/no-invalid-void-type -- an async handler that returns nothing resolves to void
export type WorkHandler<T> = (item: T, signal: AbortSignal, context: WorkContext) => Promise<void | RequeueAfter | undefined>;

/**
 * How one call of the handler ended, as controller-runtime's `controller_runtime_reconcile_total`
 * labels it: `success` (resolved with nothing), `requeue_after` (resolved with `{ requeueAfterMs }`),
 * `error` (threw, or resolved with something malformed). `requeue` (re-added with the rate limiter
 * without an error) is controller-runtime's fourth value; no handler result here produces it.
 */
export type ReconcileResult = 'success' | 'error' | 'requeue' | 'requeue_after';

/** One finished call of the handler, for metrics. Calls ended by the workers' own abort are not reported. */
export interface ReconcileObservation {
  /** {@link RunWorkersOptions.name}. */
  readonly controller: string;
  readonly result: ReconcileResult;
  /** From the call to its settling, on the workers' clock. */
  readonly durationMs: number;
  /** Why it failed, in a bounded set of words (`panic` for a bug in the handler); only when `result` is `error`. */
  readonly reason?: ReconcileErrorReason;
}

/** Options of {@link runWorkers}. */
export interface RunWorkersOptions<T> {
  /** Stops the workers: none takes a new item; handlers already running finish. Required. */
  readonly signal: AbortSignal;
  /** Processes one item. Required. */
  readonly handler: WorkHandler<T>;
  /** How many items are handled at once (distinct items, by the queue's guarantee). Default 1. */
  readonly workers?: number | undefined;
  /**
   * How many times a failing item is retried (with the queue's rate limiter) before it is dropped
   * with a warning; 0 drops at the first failure. Default: unset, retried with backoff for as long
   * as it fails, never dropped (controller-runtime's semantics; the rate limiter caps the delay).
   * Set it only to give an item a budget.
   */
  readonly maxRetries?: number | undefined;
  /**
   * Names the controller: the `controller` field of log lines and of {@link ReconcileObservation}.
   * Default: the queue's name.
   */
  readonly name?: string | undefined;
  /**
   * Called after every call of the handler with how it ended (synchronously; keep it cheap; a
   * throw is logged and ignored). Default: none.
   */
  readonly onReconcile?: ((observation: ReconcileObservation) => void) | undefined;
  /**
   * Where failures are reported. Every failed call logs one error-level line, `Reconciler error`
   * (controller-runtime's message), with the item, the error message and `retries` (failures of the
   * item before this one); its rate is the queue's rate limiter's (per-item backoff, and by default
   * 10 retries per second overall), so no separate log limit. A drop (`maxRetries` reached) adds a
   * warn line. Default `noopLogger`: pass one, or failures are seen only through `onReconcile`.
   */
  readonly logger?: Logger | undefined;
  /** Times handler calls. Default: the wall clock. */
  readonly clock?: Clock | undefined;
}

interface ResolvedWorkerOptions<T> {
  readonly signal: AbortSignal;
  readonly handler: WorkHandler<T>;
  readonly workers: number;
  readonly maxRetries: number;
  readonly name: string;
  readonly onReconcile: ((observation: ReconcileObservation) => void) | undefined;
  readonly logger: Logger;
  readonly clock: Clock;
}

function resolveWorkerOptions<T>(options: RunWorkersOptions<T>, queueName: string): ResolvedWorkerOptions<T> {
  const owner = 'runWorkers';
  const signal: unknown = options.signal;
  if (!(signal instanceof AbortSignal)) invalidOption(owner, 'signal', signal, 'an AbortSignal');
  const handler: unknown = options.handler;
  if (typeof handler !== 'function') invalidOption(owner, 'handler', handler, 'a function');
  return {
    signal: options.signal,
    handler: options.handler,
    workers: integerAtLeast(owner, 'workers', options.workers ?? 1, 1),
    maxRetries: options.maxRetries === undefined ? Infinity : integerAtLeast(owner, 'maxRetries', options.maxRetries, 0),
    name: options.name === undefined ? queueName : stringOption(owner, 'name', options.name),
    onReconcile: checkOptionalFunction(owner, 'onReconcile', options.onReconcile),
    logger: options.logger ?? noopLogger,
    clock: options.clock === undefined ? realClock : clockOption(owner, options.clock),
  };
}

function checkOptionalFunction<F>(owner: string, option: string, value: F | undefined): F | undefined {
  const untyped: unknown = value;
  if (untyped !== undefined && typeof untyped !== 'function') invalidOption(owner, option, untyped, 'a function');
  return value;
}

/**
 * Runs `workers` loops that take items from `queue` and hand them to `handler`, with
 * controller-runtime's bookkeeping:
 * - success: `forget` (the item's backoff starts over);
 * - `{ requeueAfterMs }`: `forget`, then `addAfter(item, requeueAfterMs)`;
 * - failure: an error log line `Reconciler error` naming the item, the error and the retry count,
 *   then `addRateLimited`, so the item is retried with the queue's backoff for as long as it
 *   fails: it is never dropped unless `maxRetries` is set, and then, once `numRequeues` reaches
 *   it, `forget` and a warn log line naming the item, the error and the retry count. A failure
 *   that is the workers' own abort re-adds the item without counting it, so the next run picks it up;
 * - `done(item)` in every case.
 *
 * Every call gets a child logger with `controller` (`name`) and `reconcileID` (a fresh UUID), and
 * is reported to `onReconcile` with its result and duration.
 *
 * Resolves once every worker has returned: after `signal` aborts (each worker finishes the item it
 * holds, then stops) or after the queue shuts down. The queue itself is not shut down: delayed
 * items keep their timer until the owner calls `shutDown()`. Throws a TypeError on invalid options.
 */
export function runWorkers<T>(queue: RateLimitingQueue<T>, options: RunWorkersOptions<T>): Promise<void> {
  const resolved = resolveWorkerOptions(options, queue.name);
  const logger = resolved.logger.child({ controller: resolved.name, queue: queue.name });
  const loops = Array.from({ length: resolved.workers }, () => workerLoop(queue, resolved, logger));
  // allSettled: resolve only when every worker has returned, even if one failed.
  return Promise.allSettled(loops).then((results) => {
    for (const result of results) if (result.status === 'rejected') throw toError(result.reason);
  });
}

async function workerLoop<T>(queue: RateLimitingQueue<T>, options: ResolvedWorkerOptions<T>, logger: Logger): Promise<void> {
  const { signal } = options;
  while (!signal.aborted) {
    let next: { readonly item: T } | undefined;
    try {
      next = await queue.get(signal);
    } catch {
      return; // get rejects only when the signal aborts
    }
    if (next === undefined) return;
    await processItem(queue, options, logger, next.item);
  }
}

async function processItem<T>(queue: RateLimitingQueue<T>, options: ResolvedWorkerOptions<T>, workersLogger: Logger, item: T): Promise<void> {
  const reconcileID = randomUUID();
  const logger = workersLogger.child({ reconcileID });
  const started = options.clock.now();
  let result: ReconcileResult | undefined;
  let reason: ReconcileErrorReason | undefined;
  try {
    let outcome: unknown;
    try {
      outcome = await options.handler(item, options.signal, { logger, reconcileID });
    } catch (thrown) {
      const error = toError(thrown);
      if (!(options.signal.aborted && isAbortError(error))) {
        result = 'error';
        reason = reconcileErrorReason(thrown);
      }
      failed(queue, options, logger, item, error);
      return;
    }
    if (outcome === undefined) {
      result = 'success';
      queue.forget(item);
      return;
    }
    const ms = requeueDelay(outcome);
    if (ms === undefined) {
      result = 'error';
      reason = 'invalid_result';
      failed(queue, options, logger, item, new TypeError(`handler resolved with neither nothing nor a valid { requeueAfterMs }`));
      return;
    }
    result = 'requeue_after';
    queue.forget(item);
    queue.addAfter(item, ms);
  } catch (err) {
    // Only bookkeeping can land here (a throwing rate limiter or logger): report it, keep working.
    logger.error(`queue bookkeeping failed for ${String(item)}: ${toError(err).message}`, { item, error: toError(err).message });
  } finally {
    queue.done(item);
    if (result !== undefined) observe(options, logger, result, options.clock.now() - started, reason);
  }
}

function observe<T>(options: ResolvedWorkerOptions<T>, logger: Logger, result: ReconcileResult, durationMs: number, reason: ReconcileErrorReason | undefined): void {
  try {
    options.onReconcile?.({ controller: options.name, result, durationMs, ...(reason === undefined ? {} : { reason }) });
  } catch (err) {
    logger.error(`onReconcile failed: ${toError(err).message}`, { error: toError(err).message });
  }
}

/** The delay a handler asked for, or undefined when its result is malformed (untyped callers). */
function requeueDelay(outcome: unknown): number | undefined {
  if (typeof outcome !== 'object' || outcome === null || !('requeueAfterMs' in outcome)) return undefined;
  const ms = outcome.requeueAfterMs;
  return typeof ms === 'number' && Number.isFinite(ms) && ms >= 0 ? ms : undefined;
}

function failed<T>(queue: RateLimitingQueue<T>, options: ResolvedWorkerOptions<T>, logger: Logger, item: T, error: Error): void {
  if (options.signal.aborted && isAbortError(error)) {
    queue.add(item);
    return;
  }
  const retries = queue.numRequeues(item);
  logger.error(`Reconciler error for ${String(item)} (retries ${retries}): ${error.message}`, { item, retries, error: error.message });
  if (retries < options.maxRetries) {
    queue.addRateLimited(item);
    return;
  }
  queue.forget(item);
  logger.warn(`dropping ${String(item)} out of the queue after ${retries} retries: ${error.message}`, { item, retries, error: error.message });
}
