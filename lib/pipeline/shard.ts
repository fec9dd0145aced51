// The controller's side of sharding across replicas: which shard key a Pipeline falls under, and the
// glue between the controller and an ownership (the manager kit's Sharder, seen structurally:
// lib/pipeline may not import lib/manager).
import { abortReason, childController, FleetcacheError, onAbort, oneOf, type Logger } from '../util/index.ts';

/** What a change of ownership reports: shard keys whose fence was taken, and keys no longer acted for. */
export interface PipelineShardChange {
  readonly gained: readonly string[];
  readonly lost: readonly string[];
}

/**
 * What the controller needs of sharding: the shape of the manager kit's `ShardOwnership`, declared
 * here so that any implementation (the Sharder, a test's fake) fits.
 */
export interface PipelineShardOwnership {
  /** True while this replica may act for `key`. No I/O. */
  owns(key: string): boolean;
  /**
   * Runs `fn` while this replica owns `key`, or resolves `{ owned: false }` without calling it.
   * `signal` aborts when ownership ends; the key's fence is released only after `fn` settled.
   */
  whileOwned<T>(key: string, fn: (signal: AbortSignal) => Promise<T>): Promise<{ readonly owned: true; readonly value: T } | { readonly owned: false }>;
  /** Told of keys gained and lost; returns the unsubscribe function. */
  subscribe(listener: (change: PipelineShardChange) => void): () => void;
}

/** The values of {@link PipelineShardBy}. */
const SHARD_BY = ['namespace', 'pipeline'] as const;

/**
 * The unit of work: a Pipeline's namespace (every Pipeline of a tenant on one replica, so the
 * tenant's caches, keyed by its identity, are built once; one fence per namespace) or the
 * Pipeline itself (`namespace/name`: finer balance, one fence per Pipeline, caches shared by a
 * tenant's Pipelines built on several replicas).
 */
export type PipelineShardBy = (typeof SHARD_BY)[number];

/** {@link PipelineControllerOptions.shard}. */
export interface PipelineShardOptions {
  /** Who may act for which shard key. Required. */
  readonly ownership: PipelineShardOwnership;
  /** What a shard key is. Required. */
  readonly by: PipelineShardBy;
}

/** A Pipeline as the sharding glue names it. */
export interface PipelineName {
  readonly namespace: string;
  readonly name: string;
}

/** The shard key of a Pipeline: its namespace, or `namespace/name`. */
export function pipelineShardKey(by: PipelineShardBy, pipeline: PipelineName): string {
  return by === 'namespace' ? pipeline.namespace : `${pipeline.namespace}/${pipeline.name}`;
}

/**
 * A write for a Pipeline (status, Event, a promotion about to act) was refused: this replica no
 * longer owns the Pipeline's shard key. The reconcile ends; the new owner carries on from status.
 */
export class NotShardOwnerError extends FleetcacheError {
  readonly shardKey: string;

  constructor(shardKey: string, what: string) {
    super('ERR_NOT_SHARD_OWNER', `not writing ${what}: this replica no longer owns shard ${JSON.stringify(shardKey)}`);
    this.shardKey = shardKey;
  }
}

/** What {@link PipelineShard.follow} acts on, in the controller. */
export interface ShardFollower {
  /** The Pipelines of a shard key in the controller's cache; none before the cache exists. */
  readonly pipelinesOf: (key: string) => Iterable<PipelineName>;
  /** Queue the Pipeline for a reconcile now. */
  readonly enqueue: (pipeline: PipelineName) => void;
  /** Drop what the controller holds for the Pipeline (registry owner, per-Pipeline memory). */
  readonly forget: (pipeline: PipelineName) => void;
}

/**
 * The controller's sharding glue: runs a reconcile only while its Pipeline's shard key is owned,
 * fences writes, and follows gains (reconcile now) and losses (forget). Holds no state of its own
 * besides the options: ownership is the ownership's.
 */
export class PipelineShard {
  readonly #ownership: PipelineShardOwnership;
  readonly by: PipelineShardBy;

  constructor(options: PipelineShardOptions) {
    const ownership: unknown = options.ownership;
    if (typeof ownership !== 'object' || ownership === null || !['owns', 'whileOwned', 'subscribe'].every((m) => typeof (ownership as Record<string, unknown>)[m] === 'function')) {
      throw new TypeError('PipelineController option shard.ownership must have owns, whileOwned and subscribe');
    }
    this.#ownership = options.ownership;
    this.by = oneOf('PipelineController', 'shard.by', options.by, SHARD_BY);
  }

  keyOf(pipeline: PipelineName): string {
    return pipelineShardKey(this.by, pipeline);
  }

  /** Whether this replica owns the Pipeline's key now. */
  owns(pipeline: PipelineName): boolean {
    return this.#ownership.owns(this.keyOf(pipeline));
  }

  /** Throws {@link NotShardOwnerError} unless this replica owns the Pipeline's key now: call it right before a write. */
  fence(pipeline: PipelineName, what: string): void {
    const key = this.keyOf(pipeline);
    if (!this.#ownership.owns(key)) throw new NotShardOwnerError(key, what);
  }

  /**
   * Runs `reconcile` inside `whileOwned` of the Pipeline's key, with a signal that aborts when
   * `signal` or the ownership does. Not owned: resolves undefined without calling it (a gain
   * enqueues the Pipeline). Ownership lost meanwhile (a fence refused, or the work aborted by the
   * ownership's signal): logged at info, resolves undefined. `reconcile` is called synchronously
   * once the ownership calls back, so a reconcile that registers its owner before its first
   * `await` does so while owned.
   */
  async run<T>(pipeline: PipelineName, signal: AbortSignal, logger: Logger, reconcile: (signal: AbortSignal) => Promise<T>): Promise<T | undefined> {
    const key = this.keyOf(pipeline);
    // Set from callbacks: an object, so the compiler does not narrow it to its initial value.
    const ownership = { ended: false };
    try {
      const ran = await this.#ownership.whileOwned(key, async (owned) => {
        if (owned.aborted || !this.#ownership.owns(key)) {
          ownership.ended = true;
          return undefined;
        }
        const { controller, dispose } = childController(signal);
        const detach = onAbort(owned, () => {
          ownership.ended = true;
          controller.abort(abortReason(owned));
        });
        try {
          return await reconcile(controller.signal);
        } finally {
          detach();
          dispose();
        }
      });
      if (ran.owned && !ownership.ended) return ran.value;
      if (ownership.ended) logger.info('not reconciled: this replica no longer owns the shard', { shardKey: key });
      return undefined;
    } catch (err) {
      if (err instanceof NotShardOwnerError || (ownership.ended && !signal.aborted)) {
        logger.info('reconcile stopped: this replica no longer owns the shard', { shardKey: key, error: err instanceof Error ? err.message : String(err) });
        return undefined;
      }
      throw err;
    }
  }

  /**
   * Follows ownership changes: every Pipeline of a gained key is enqueued at once, every Pipeline
   * of a lost key forgotten. Returns the unsubscribe function.
   */
  follow(follower: ShardFollower, logger: Logger): () => void {
    return this.#ownership.subscribe((change) => {
      let gained = 0;
      for (const key of change.gained) {
        for (const pipeline of follower.pipelinesOf(key)) {
          follower.enqueue(pipeline);
          gained += 1;
        }
      }
      let lost = 0;
      for (const key of change.lost) {
        for (const pipeline of follower.pipelinesOf(key)) {
          follower.forget(pipeline);
          lost += 1;
        }
      }
      if (change.gained.length + change.lost.length > 0) {
        logger.info('shard ownership changed', { gainedKeys: change.gained.length, lostKeys: change.lost.length, pipelinesEnqueued: gained, pipelinesForgotten: lost });
      }
    });
  }

  /** The distinct shard keys of `pipelines`. */
  keysOf(pipelines: Iterable<PipelineName>): Set<string> {
    const keys = new Set<string>();
    for (const p of pipelines) keys.add(this.keyOf(p));
    return keys;
  }
}
