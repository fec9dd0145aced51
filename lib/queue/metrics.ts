/**
 * A point-in-time view of one queue, cheap enough to read on every metrics scrape (O(items being
 * processed), which is at most the number of workers).
 */
export interface QueueStats {
  /** The queue's name (`workqueue_*{name=...}`). */
  readonly name: string;
  /** Items waiting to be handed out (`workqueue_depth`); excludes items still delayed by `addAfter`. */
  readonly depth: number;
  /** Items accepted since construction; duplicates of an item already waiting are not counted (`workqueue_adds_total`). */
  readonly adds: number;
  /** `addAfter` and `addRateLimited` calls accepted since construction (`workqueue_retries_total`); 0 for a plain queue. */
  readonly retries: number;
  /** Items handed out by `get()` and not yet `done()`. */
  readonly processing: number;
  /** Items delayed by `addAfter`, not yet added; 0 for a plain queue. */
  readonly delayed: number;
  /** Sum of how long every item being processed has been so far (`workqueue_unfinished_work_seconds`). */
  readonly unfinishedWorkSeconds: number;
  /** How long the oldest item being processed has been so far, 0 when none (`workqueue_longest_running_processor_seconds`). */
  readonly longestRunningProcessorSeconds: number;
}

/**
 * Receives what controller-runtime's `workqueue_*` metrics need, keyed by queue name. Counters and
 * histograms are pushed as they happen; gauges (depth, unfinished work, longest running processor)
 * are pulled at scrape time through the `stats` function handed to `register`, so no queue runs a
 * timer just to refresh them. Calls are synchronous and on the queue's hot path: keep them cheap and
 * never throw.
 */
export interface QueueMetricsProvider {
  /** A queue named `name` was constructed; `stats` reads its gauges whenever asked. Called once per queue. */
  register(name: string, stats: () => QueueStats): void;
  /** An item was accepted (`workqueue_adds_total`). */
  added(name: string): void;
  /** An item waited `seconds` between being added and being handed out (`workqueue_queue_duration_seconds`). */
  queued(name: string, seconds: number): void;
  /** An item was processed for `seconds`, from `get()` to `done()` (`workqueue_work_duration_seconds`). */
  worked(name: string, seconds: number): void;
  /** An item was scheduled again with a delay (`workqueue_retries_total`). */
  retried(name: string): void;
}
