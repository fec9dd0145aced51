// The controller's side of sharding across replicas: which shard key a Pipeline falls under, and the
// glue between the controller and an ownership (the manager kit's Sharder, seen structurally:
// lib/pipeline may not import lib/manager).
import { abortReason, childController, FleetcacheError, onAbort, oneOf, toError, type Logger } from '../util/index.ts';
import { setCondition, type ConditionInput } from './conditions.ts';
import type { Condition, Pipeline } from './types.ts';

/** What a change of ownership reports: shard keys whose fence was taken, and keys no longer acted for. */
export interface PipelineShardChange {
  readonly gained: readonly string[];
  readonly lost: readonly string[];
}

/** A shard key no replica has acted for past the no-orphan bound (the manager kit's `OrphanedKey`). */
export interface PipelineShardOrphan {
  readonly key: string;
  /** Since when no replica acted for it (ms since the epoch, the reporting replica's clock). */
  readonly since: number;
  /** The bound it crossed, ms. */
  readonly boundMs: number;
}

/** What an orphan report carries for the controller (the manager kit's `ShardOrphans`). */
export interface PipelineShardOrphans {
  /** The orphaned keys this replica, and no other live one, reports to users. */
  readonly reported: readonly PipelineShardOrphan[];
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
  /**
   * Told after each read of the shard group of the keys past the no-orphan bound that this replica
   * reports; returns the unsubscribe function. Optional: without it no `ShardOwned` condition is
   * written (the ownership's own metric and logs still say so).
   */
  subscribeOrphans?(listener: (orphans: PipelineShardOrphans) => void): () => void;
}

/** The condition that says a Pipeline's shard has no acting replica: `False`/`Orphaned`, then `True`/`Owned` once one acts again. */
export const SHARD_OWNED = 'ShardOwned';
/** No replica has acted for the Pipeline's shard for longer than the no-orphan bound. */
export const REASON_ORPHANED = 'Orphaned';
/** A replica acts for the Pipeline's shard again (written by that replica). */
export const REASON_OWNED = 'Owned';

/** `ShardOwned=False`: whose shard, since when, past which bound. */
export function orphanedCondition(orphan: PipelineShardOrphan, generation: number): ConditionInput {
  const since = new Date(orphan.since).toISOString().replace(/\.\d{3}Z$/, 'Z');
  return {
    type: SHARD_OWNED,
    status: 'False',
    reason: REASON_ORPHANED,
    message: `no replica has acted for this Pipeline's shard ${JSON.stringify(orphan.key)} since ${since}, longer than the bound of ${(orphan.boundMs / 1000).toFixed(1)} s: nothing is reconciled or promoted for it (see fleetcache_shard_orphaned_keys and the replicas' logs)`,
    observedGeneration: generation,
  };
}

/**
 * The owner's conditions: a `ShardOwned` condition already there is set `True`/`Owned` (a replica
 * acts for the Pipeline: this one, writing behind the fence); none is added to a Pipeline that
 * never had one.
 */
export function withShardOwned(conditions: Condition[], generation: number, now: string): Condition[] {
  if (!conditions.some((c) => c.type === SHARD_OWNED)) return conditions;
  return setCondition(conditions, { type: SHARD_OWNED, status: 'True', reason: REASON_OWNED, message: 'a replica acts for this Pipeline\'s shard again', observedGeneration: generation }, now);
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
  /** The Pipeline as cached; undefined when it is gone. */
  readonly read: (pipeline: PipelineName) => Pipeline | undefined;
  /**
   * Writes `condition` on a Pipeline of an orphaned shard WITHOUT the fence (no replica holds it),
   * conditional on the Pipeline's resourceVersion, and records a Warning Event; false when someone
   * wrote the Pipeline first (the next report tries again on the newer copy).
   */
  readonly markOrphaned: (pipeline: Pipeline, condition: ConditionInput) => Promise<boolean>;
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
    const orphans = (ownership as { subscribeOrphans?: unknown }).subscribeOrphans;
    if (orphans !== undefined && typeof orphans !== 'function') throw new TypeError('PipelineController option shard.ownership.subscribeOrphans must be a function when given');
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
    const stopAlarm = this.#alarm(follower, logger);
    const unsubscribe = this.#ownership.subscribe((change) => {
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
    return () => {
      unsubscribe();
      stopAlarm();
    };
  }

  /**
   * The user-visible side of the no-orphan check: every Pipeline of a shard key this replica
   * reports orphaned gets `ShardOwned=False`/`Orphaned` and a Warning Event `ShardOrphaned`, once
   * (a Pipeline that already says so is left alone). One pass at a time; reports arriving during a
   * pass are folded into the next (level-triggered: a failed write is tried again on the next).
   *
   * Why this write may skip the fence while the shard has no owner: the fence exists so that two
   * replicas never ACT for a Pipeline (promote, record a promotion's outcome, decide status from
   * what they observed). This write acts on nothing: it copies the Pipeline's status as read and
   * changes one condition about the shard itself, in a PUT conditional on the resourceVersion read.
   * If an owner appears and writes first, the PUT fails (409) and nothing of the owner's is lost;
   * if the PUT lands first, the owner's next status write fails on the old resourceVersion, it
   * re-reads and (`withShardOwned`) sets the condition True. Only one live replica reports a key
   * (the Sharder's runner-up), and one that lost the group reports nothing.
   */
  #alarm(follower: ShardFollower, logger: Logger): () => void {
    const ownership = this.#ownership;
    if (ownership.subscribeOrphans === undefined) return () => undefined;
    const state: { latest: PipelineShardOrphans | undefined; running: boolean; stopped: boolean } = { latest: undefined, running: false, stopped: false };
    // Read through a function: `stopped` changes across awaits, which flow analysis does not see.
    const stopped = (): boolean => state.stopped;
    const pass = async (): Promise<void> => {
      while (state.latest !== undefined && !stopped()) {
        const report = state.latest;
        state.latest = undefined;
        for (const orphan of report.reported) {
          for (const name of follower.pipelinesOf(orphan.key)) {
            // Owned by now (by us): the reconcile the gain queued writes the condition, fenced.
            if (stopped() || ownership.owns(orphan.key)) break;
            const pipeline = follower.read(name);
            if (pipeline === undefined || pipeline.metadata?.deletionTimestamp !== undefined) continue;
            const current = pipeline.status?.conditions?.find((c) => c.type === SHARD_OWNED);
            if (current?.status === 'False' && current.reason === REASON_ORPHANED) continue;
            try {
              if (await follower.markOrphaned(pipeline, orphanedCondition(orphan, pipeline.metadata?.generation ?? 0))) {
                logger.error('a Pipeline\'s shard has had no owner past the bound: ShardOwned=False written', { pipeline: `${name.namespace}/${name.name}`, shardKey: orphan.key });
              }
            } catch (err) {
              logger.warn('could not write ShardOwned=False on a Pipeline whose shard has no owner; trying again at the next report', { pipeline: `${name.namespace}/${name.name}`, shardKey: orphan.key, error: toError(err).message });
            }
          }
        }
      }
    };
    const unsubscribe = ownership.subscribeOrphans((orphans) => {
      if (orphans.reported.length === 0) return;
      state.latest = orphans;
      if (state.running) return;
      state.running = true;
      void pass().finally(() => { state.running = false; });
    });
    return () => {
      state.stopped = true;
      unsubscribe();
    };
  }

  /** The distinct shard keys of `pipelines`. */
  keysOf(pipelines: Iterable<PipelineName>): Set<string> {
    const keys = new Set<string>();
    for (const p of pipelines) keys.add(this.keyOf(p));
    return keys;
  }
}
