import type { OwnerRef, Registry } from '../registry/index.ts';
import { toError, type Clock } from '../util/index.ts';
import { isRevertedByFlux } from './flux.ts';
import type { ObservedEnvironment, ProgressingGrace } from './grace.ts';
import type { Membership } from './fleet-members.ts';
import { environmentStatusOf, fleetEnvironmentStatusOf, targetStatusOf, type TargetObservation } from './observe.ts';
import type { EnvironmentStatus, Pipeline } from './types.ts';
import type { ResolvedTarget, ValidPipelineSpec } from './validate.ts';

/**
 * Patch strategy: per Pipeline key, per {@link patchedTargetKey}, the revision patched and the
 * generation the patch left, so that a cache which has not seen the patch yet is not taken for
 * Flux reverting it. Replaced by each patch promotion of that environment (act.ts); read by
 * {@link TargetObserver}; a Pipeline's entries go when it is forgotten. Touched only by that
 * Pipeline's reconcile (the queue never runs two at once).
 */
export type PatchedMemory = Map<string, Map<string, { readonly revision: string; readonly generation: number | undefined }>>;

/** The key of one target of one environment in a Pipeline's {@link PatchedMemory}. */
export function patchedTargetKey(environment: string, target: ResolvedTarget): string {
  return `${environment}\u0000${target.clusterKey}\u0000${target.namespace}`;
}

/** What a {@link TargetObserver} is built with. */
export interface TargetObserverOptions {
  /** Whose caches hold the targets (the reader is registered for the Pipeline as owner). */
  readonly registry: Pick<Registry, 'watchTargetAndGetReader'>;
  readonly clock: Clock;
  /** The Progressing grace, remembered per Pipeline key. */
  readonly grace: ProgressingGrace;
  /** What patch promotions left (shared with the acting side). */
  readonly patched: PatchedMemory;
}

/**
 * Reads a Pipeline's targets through the registry's caches (observe.ts turns what is read into
 * status). Cluster failures are observations, never errors; only an abort rejects. Holds no state
 * of its own beyond what it is given.
 */
export class TargetObserver {
  readonly #registry: Pick<Registry, 'watchTargetAndGetReader'>;
  readonly #clock: Clock;
  readonly #grace: ProgressingGrace;
  readonly #patched: PatchedMemory;

  constructor(options: TargetObserverOptions) {
    this.#registry = options.registry;
    this.#clock = options.clock;
    this.#grace = options.grace;
    this.#patched = options.patched;
  }

  /**
   * Every environment's status from the caches: each target's readiness and revision, marked
   * `drifted` where Flux put a patched value back, then the Progressing grace applied. A fleet
   * environment's targets are its members as resolved (`membership` says what is known of them).
   */
  async observeAll(key: string, pipeline: Pipeline, spec: ValidPipelineSpec, owner: OwnerRef, signal: AbortSignal, membership: ReadonlyMap<string, Membership> = new Map()): Promise<{ readonly environments: EnvironmentStatus[]; readonly graceEndsInMs: number | undefined }> {
    const promotion = spec.promotion;
    const records = pipeline.status?.promotions ?? [];
    const patched = this.#patched.get(key);
    const observed: ObservedEnvironment[] = await Promise.all(spec.environments.map(async (env) => {
      const seen = await Promise.all(env.targets.map((t) => this.observe(t, spec, owner, signal)));
      const newest = records.findLast((r) => r.environment === env.name);
      const expected = promotion.strategy === 'patch' && newest?.strategy === 'patch' && newest.state === 'Succeeded' ? newest.revision : undefined;
      return {
        name: env.name,
        targets: env.targets.map((t, i) => {
          const view = seen[i] ?? { state: 'loading' as const };
          const status = targetStatusOf(t, view, spec.revisionPath);
          if (expected === undefined || promotion.strategy !== 'patch' || view.state !== 'read' || view.object === undefined) return status;
          const memory = patched?.get(patchedTargetKey(env.name, t));
          const generation = memory?.revision === expected ? memory.generation : undefined;
          return isRevertedByFlux(view.object, promotion.path, expected, generation) ? { ...status, drifted: true } : status;
        }),
      };
    }));
    const held = this.#grace.hold(key, observed, pipeline.status?.environments, this.#clock.now());
    const environments = held.environments.map((e, i) => {
      const env = spec.environments[i];
      if (env?.fleet === undefined) return environmentStatusOf(e.name, e.targets);
      const known = membership.get(env.name) ?? { state: 'loading' as const };
      return fleetEnvironmentStatusOf(env, e.targets, known.state === 'unreadable' ? { error: known.error } : { loading: known.state === 'loading' });
    });
    return { environments, graceEndsInMs: held.recheckInMs };
  }

  /** What the cache of one target shows. Cluster failures are observations, never reconcile errors. */
  async observe(target: ResolvedTarget, spec: ValidPipelineSpec, owner: OwnerRef, signal: AbortSignal): Promise<TargetObservation> {
    try {
      const reader = await this.#registry.watchTargetAndGetReader(target.cluster, { gvk: spec.app.gvk, namespace: target.namespace, name: spec.app.name }, owner, signal);
      const error = reader.lastError;
      if (error !== undefined) return { state: 'unreadable', error };
      if (!reader.synced) return { state: 'loading' }; // the registry requeues the owner on sync
      return { state: 'read', object: reader.get(target.namespace, spec.app.name) };
    } catch (err) {
      if (signal.aborted) throw err;
      return { state: 'unreadable', error: toError(err) };
    }
  }
}
