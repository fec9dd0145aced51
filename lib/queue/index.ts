/**
 * The keyed work queue with rate limiters, with client-go's workqueue semantics: fleetcache funnels
 * every cache event of every cluster into one queue of owner keys, consumed by async workers.
 *
 * Guarantees:
 * - Fair: items are handed out in the order they were added (FIFO).
 * - Stingy: an item is never handed to two consumers at once, and an item added several times
 *   before it is handed out is handed out once.
 * - Re-add while processing: an item added while it is being processed is handed out again after
 *   `done()`, never concurrently with itself.
 * - Shutdown: `shutDown()` stops at once; `shutDownWithDrain()` hands out what is queued and waits
 *   for everything handed out to be done. Either way `get()` then resolves `undefined`, delayed
 *   items are dropped and no timer is left behind.
 *
 * Items are compared as `Map` keys (SameValueZero): use strings such as `namespace/name`.
 */
export type { Queue, QueueOptions } from './queue.ts';
export { WorkQueue } from './queue.ts';
export type { DelayingQueue, DelayingQueueOptions } from './delaying.ts';
export { DelayingWorkQueue } from './delaying.ts';
export type { RateLimitingQueue, RateLimitingQueueOptions } from './rate-limiting.ts';
export { RateLimitingWorkQueue } from './rate-limiting.ts';
export type {
  RateLimiter,
  ItemExponentialRateLimiterOptions,
  TokenBucketRateLimiterOptions,
  MaxOfRateLimiterOptions,
  DefaultControllerRateLimiterOptions,
} from './rate-limiters.ts';
export {
  ItemExponentialRateLimiter,
  TokenBucketRateLimiter,
  MaxOfRateLimiter,
  defaultControllerRateLimiter,
} from './rate-limiters.ts';
export type { QueueMetricsProvider, QueueStats } from './metrics.ts';
export type { ReconcileObservation, ReconcileResult, RequeueAfter, RunWorkersOptions, WorkContext, WorkHandler } from './workers.ts';
export { runWorkers } from './workers.ts';
export { RECONCILE_ERROR_REASONS } from './reasons.ts';
export type { ReconcileErrorReason } from './reasons.ts';
