import { isAbortError, noopLogger, toError, type Logger } from '../util/index.ts';
import type { RateLimitingQueue } from './rate-limiting.ts';
import { integerAtLeast, invalid } from './validate.ts';

/** What a handler may return instead of nothing: process the item again after this delay. */
export interface RequeueAfter {
  /** Milliseconds (finite, >= 0) before the item is handled again. */
  readonly requeueAfterMs: number;
}

/**
 * Processes one item. Resolving (with nothing) means success; `{ requeueAfterMs }` means success
 * but look again later; throwing or rejecting means failure, retried with backoff. `signal` is the
 * workers' signal: abort it to stop early. The same item is never handled twice at once.
 */
// eslint-disable-next-line @typescript-eslint/no-invalid-void-type -- an async handler that returns nothing resolves to void
export type WorkHandler<T> = (item: T, signal: AbortSignal) => Promise<void | RequeueAfter | undefined>;

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
   * with a warning; 0 drops at the first failure. Default 15, linkerd's budget.
   */
  readonly maxRetries?: number | undefined;
  /** Where failures are reported: retries at debug, drops at warn. Default `noopLogger`. */
  readonly logger?: Logger | undefined;
}

interface ResolvedWorkerOptions<T> {
  readonly signal: AbortSignal;
  readonly handler: WorkHandler<T>;
  readonly workers: number;
  readonly maxRetries: number;
  readonly logger: Logger;
}

function resolveWorkerOptions<T>(options: RunWorkersOptions<T>): ResolvedWorkerOptions<T> {
  const owner = 'runWorkers';
  const signal: unknown = options.signal;
  if (!(signal instanceof AbortSignal)) invalid(owner, 'signal', signal, 'an AbortSignal');
  const handler: unknown = options.handler;
  if (typeof handler !== 'function') invalid(owner, 'handler', handler, 'a function');
  return {
    signal: options.signal,
    handler: options.handler,
    workers: integerAtLeast(owner, 'workers', options.workers ?? 1, 1),
    maxRetries: integerAtLeast(owner, 'maxRetries', options.maxRetries ?? 15, 0),
    logger: options.logger ?? noopLogger,
  };
}

/**
 * Runs `workers` loops that take items from `queue` and hand them to `handler`, with
 * controller-runtime's bookkeeping:
 * - success: `forget` (the item's backoff starts over);
 * - `{ requeueAfterMs }`: `forget`, then `addAfter(item, requeueAfterMs)`;
 * - failure: `addRateLimited` while `numRequeues < maxRetries`, else `forget` and drop with a warn
 *   log line naming the item, the error and the retry count. A failure that is the workers' own
 *   abort re-adds the item without counting it, so the next run picks it up;
 * - `done(item)` in every case.
 *
 * Resolves once every worker has returned: after `signal` aborts (each worker finishes the item it
 * holds, then stops) or after the queue shuts down. The queue itself is not shut down: delayed
 * items keep their timer until the owner calls `shutDown()`. Throws a TypeError on invalid options.
 */
export function runWorkers<T>(queue: RateLimitingQueue<T>, options: RunWorkersOptions<T>): Promise<void> {
  const resolved = resolveWorkerOptions(options);
  const logger = resolved.logger.child({ queue: queue.name });
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

async function processItem<T>(queue: RateLimitingQueue<T>, options: ResolvedWorkerOptions<T>, logger: Logger, item: T): Promise<void> {
  try {
    let outcome: unknown;
    try {
      outcome = await options.handler(item, options.signal);
    } catch (thrown) {
      failed(queue, options, logger, item, toError(thrown));
      return;
    }
    if (outcome === undefined) {
      queue.forget(item);
      return;
    }
    const ms = requeueDelay(outcome);
    if (ms === undefined) {
      failed(queue, options, logger, item, new TypeError(`handler resolved with neither nothing nor a valid { requeueAfterMs }`));
      return;
    }
    queue.forget(item);
    queue.addAfter(item, ms);
  } catch (err) {
    // Only bookkeeping can land here (a throwing rate limiter or logger): report it, keep working.
    logger.error(`queue bookkeeping failed for ${String(item)}: ${toError(err).message}`, { item, error: toError(err).message });
  } finally {
    queue.done(item);
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
  if (retries < options.maxRetries) {
    logger.debug(`retrying ${String(item)} after failure ${retries + 1}: ${error.message}`, { item, retries, error: error.message });
    queue.addRateLimited(item);
    return;
  }
  queue.forget(item);
  logger.warn(`dropping ${String(item)} out of the queue after ${retries} retries: ${error.message}`, { item, retries, error: error.message });
}
