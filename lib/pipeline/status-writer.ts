import type { ClusterConnection } from '../transport/index.ts';
import type { ClusterRef } from '../cluster/index.ts';
import type { Registry } from '../registry/index.ts';
import { apiVersionOf, KubeApiError, sanitizeForDisplay, toError, type Clock, type Logger } from '../util/index.ts';
import { displayEnvironments, driftedCondition, plain, promotingCondition, sameStatus, setCondition, type ConditionInput } from './conditions.ts';
import { withRecord } from './decide.ts';
import { activeHalt, haltCondition, withCommitted } from './guard.ts';
import { withShardOwned, type PipelineName } from './shard.ts';
import { PIPELINE_GVK, type CommittedPromotion, type EnvironmentStatus, type Pipeline, type PipelineStatus, type PromotionHalt, type PromotionRecord } from './types.ts';

/** Attempts at recording a promotion's outcome against concurrent writers of the Pipeline. */
const OUTCOME_WRITE_ATTEMPTS = 5;

const LOCAL: ClusterRef = { kind: 'local' };

/** The Pipeline's status could not be written: someone wrote it first. */
export class StatusConflict extends Error {}

/** RFC 3339 with second precision, as Kubernetes writes times. */
export function kubeTime(clock: Clock): string {
  return new Date(Math.floor(clock.now() / 1_000) * 1_000).toISOString().replace('.000Z', 'Z');
}

function pipelinePath(namespace: string, name: string, subresource = ''): string {
  return `/apis/${PIPELINE_GVK.group}/${PIPELINE_GVK.version}/namespaces/${encodeURIComponent(namespace)}/pipelines/${encodeURIComponent(name)}${subresource}`;
}

/** What a {@link StatusWriter} is built with. */
export interface StatusWriterOptions {
  /** Lends the management-cluster connection (the keeper's shared one, the service's identity). */
  readonly registry: Pick<Registry, 'connectionFor'>;
  /** Stamps conditions' transition times and Events. */
  readonly clock: Clock;
  /**
   * Called just before every status PUT and Event is sent; throws (NotShardOwnerError) when this
   * replica no longer owns the Pipeline's shard, so nothing is sent.
   */
  readonly fence: (pipeline: PipelineName, what: string) => void;
  /** False while the controller is not running: no connection is lent then (the write throws). */
  readonly running: () => boolean;
}

/**
 * The controller's writes to the management cluster: a Pipeline's status subresource and its
 * Events, as the service itself (what the controller owns, never a tenant's identity).
 *
 * Invariants: every status PUT and every Event passes `fence` immediately before its request, with
 * no `await` between, so a replica that lost the shard sends nothing (the one exception,
 * `markOrphaned`, writes for a shard nobody owns and only a condition about that); a status PUT carries the
 * resourceVersion read, so a concurrent writer makes it fail with {@link StatusConflict}; status is
 * written only when it differs from the Pipeline's. Holds no state of its own: the queue never
 * hands one Pipeline to two reconciles, so each reconcile's writes to its Pipeline are sequential.
 */
export class StatusWriter {
  readonly #registry: Pick<Registry, 'connectionFor'>;
  readonly #clock: Clock;
  readonly #fence: (pipeline: PipelineName, what: string) => void;
  readonly #running: () => boolean;

  constructor(options: StatusWriterOptions) {
    this.#registry = options.registry;
    this.#clock = options.clock;
    this.#fence = options.fence;
    this.#running = options.running;
  }

  /** The full status for this reconcile, conditions' transition times carried over. */
  status(pipeline: Pipeline, ready: ConditionInput, environments: readonly EnvironmentStatus[], records: readonly PromotionRecord[], halt?: PromotionHalt): PipelineStatus {
    const generation = pipeline.metadata?.generation ?? 0;
    const now = kubeTime(this.#clock);
    // The last halt stays in status (the guard counts from it); it is in force at its generation only.
    const halted = halt ?? pipeline.status?.halted;
    const active = halt ?? activeHalt(pipeline.status, generation);
    let conditions = setCondition(pipeline.status?.conditions ?? [], ready, now);
    conditions = setCondition(conditions, active === undefined ? promotingCondition(records, generation, environments) : haltCondition(active, generation), now);
    const drift = driftedCondition(environments, pipeline.status?.conditions ?? [], generation);
    if (drift !== undefined) conditions = setCondition(conditions, drift, now);
    conditions = withShardOwned(conditions, generation, now);
    const committed = pipeline.status?.committed;
    return plain({
      observedGeneration: generation,
      conditions,
      environments: displayEnvironments(environments),
      promotions: records,
      ...(committed === undefined ? {} : { committed }),
      ...(halted === undefined ? {} : { halted }),
      ...(pipeline.status?.approvals === undefined ? {} : { approvals: pipeline.status.approvals }),
      ...(pipeline.status?.retries === undefined ? {} : { retries: pipeline.status.retries }),
    });
  }

  /** Writes the status when it differs from the Pipeline's; false when someone wrote first. */
  async writeIfChanged(pipeline: Pipeline, status: PipelineStatus): Promise<boolean> {
    if (sameStatus(pipeline.status, status)) return true;
    try {
      await this.putStatus(pipeline, status);
      return true;
    } catch (err) {
      // A newer Pipeline exists; the cache delivers it and requeues us.
      if (err instanceof StatusConflict) return false;
      throw err;
    }
  }

  /** PUT on the status subresource, conditional on the Pipeline's resourceVersion; StatusConflict on 409. */
  async putStatus(pipeline: Pipeline, status: PipelineStatus): Promise<Pipeline> {
    const meta = pipeline.metadata ?? {};
    this.fence(pipeline, 'the status');
    const body = { ...plain(pipeline), status };
    try {
      return (await (await this.#management(pipeline)).request({ method: 'PUT', path: pipelinePath(meta.namespace ?? '', meta.name ?? '', '/status'), body, gvk: PIPELINE_GVK })) as Pipeline;
    } catch (err) {
      if (err instanceof KubeApiError && err.statusCode === 409) throw new StatusConflict(err.message, { cause: err });
      throw err;
    }
  }

  /**
   * Writes a promotion's outcome. A conflict (the spec was edited meanwhile, say) re-reads the
   * Pipeline and sets just this record again, so the outcome is not lost to a stale cache.
   */
  async recordOutcome(written: Pipeline, record: PromotionRecord, carriedOut?: CommittedPromotion): Promise<void> {
    let current = written;
    for (let attempt = 1; ; attempt++) {
      const records = withRecord(current.status?.promotions ?? [], record);
      const generation = current.metadata?.generation ?? 0;
      const conditions = setCondition(current.status?.conditions ?? [], promotingCondition(records, generation), kubeTime(this.#clock));
      const committed = carriedOut === undefined ? current.status?.committed : withCommitted(current.status?.committed, carriedOut);
      try {
        await this.putStatus(current, plain({ ...current.status, conditions, promotions: records, ...(committed === undefined ? {} : { committed }) }));
        return;
      } catch (err) {
        if (!(err instanceof StatusConflict) || attempt >= OUTCOME_WRITE_ATTEMPTS) throw err;
        const meta = current.metadata ?? {};
        current = (await (await this.#management(current)).request({ method: 'GET', path: pipelinePath(meta.namespace ?? '', meta.name ?? '') })) as Pipeline;
      }
    }
  }

  /**
   * Sets `ShardOwned=False` (see shard.ts) on a Pipeline whose shard NO replica owns, and records a
   * Warning Event `ShardOrphaned`: the one status PUT and Event that do not pass `fence`, as no
   * replica holds it (why that is safe: `PipelineShard`'s orphan alarm). The rest of the status is
   * the Pipeline's as read, and the PUT is conditional on its resourceVersion, so it never
   * overwrites a write it did not see. False on a conflict.
   */
  async markOrphaned(pipeline: Pipeline, condition: ConditionInput, log: Logger): Promise<boolean> {
    const meta = pipeline.metadata ?? {};
    const status = plain({ ...pipeline.status, conditions: setCondition(pipeline.status?.conditions ?? [], condition, kubeTime(this.#clock)) });
    try {
      await (await this.#management(pipeline)).request({ method: 'PUT', path: pipelinePath(meta.namespace ?? '', meta.name ?? '', '/status'), body: { ...plain(pipeline), status }, gvk: PIPELINE_GVK });
    } catch (err) {
      if (err instanceof KubeApiError && err.statusCode === 409) return false;
      throw err;
    }
    await this.#postEvent(pipeline, 'Warning', 'ShardOrphaned', condition.message, log);
    return true;
  }

  /**
   * Records a core/v1 Event on the Pipeline. Best effort: a failure is logged, never fatal; a
   * shard no longer owned throws NotShardOwnerError (the reconcile ends).
   */
  async event(pipeline: Pipeline, type: 'Normal' | 'Warning', reason: string, message: string, log: Logger): Promise<void> {
    this.fence(pipeline, `the event ${reason}`);
    await this.#postEvent(pipeline, type, reason, message, log);
  }

  /** POSTs the Event; failures are logged. Callers fence it (or say why not). */
  async #postEvent(pipeline: Pipeline, type: 'Normal' | 'Warning', reason: string, message: string, log: Logger): Promise<void> {
    const meta = pipeline.metadata ?? {};
    const namespace = meta.namespace ?? '';
    const now = kubeTime(this.#clock);
    try {
      await (await this.#management(pipeline)).request({
        method: 'POST',
        path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/events`,
        body: {
          apiVersion: 'v1',
          kind: 'Event',
          metadata: { generateName: `${meta.name ?? 'pipeline'}.`, namespace },
          involvedObject: { apiVersion: apiVersionOf(PIPELINE_GVK), kind: PIPELINE_GVK.kind, namespace, name: meta.name, uid: meta.uid, resourceVersion: meta.resourceVersion },
          type,
          reason,
          message: sanitizeForDisplay(message, 1_000),
          source: { component: 'fleetcache' },
          firstTimestamp: now,
          lastTimestamp: now,
          count: 1,
        },
      });
    } catch (err) {
      log.warn('could not record an event', { reason, error: toError(err).message });
    }
  }

  /** With sharding: throws NotShardOwnerError unless this replica owns the Pipeline's shard now. */
  fence(pipeline: Pipeline, what: string): void {
    this.#fence({ namespace: pipeline.metadata?.namespace ?? '', name: pipeline.metadata?.name ?? '' }, what);
  }

  /**
   * The management cluster as the service itself, for what the controller owns: the Pipeline's
   * status subresource and its Events. The keeper's shared connection, as the Pipeline cache's.
   */
  async #management(pipeline: Pipeline): Promise<ClusterConnection> {
    if (!this.#running()) throw new Error('PipelineController is not running');
    const meta = pipeline.metadata ?? {};
    return this.#registry.connectionFor(LOCAL, { namespace: meta.namespace ?? '', name: meta.name ?? '' });
  }
}
