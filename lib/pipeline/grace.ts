import { MAX_FLEET_TARGETS_SHOWN, type EnvironmentStatus, type TargetStatus } from './types.ts';
import { nonNegativeNumber } from '../util/index.ts';

/** Default of {@link ProgressingGraceOptions.windowMs}. */
export const DEFAULT_PROGRESSING_GRACE_MS = 30_000;

export interface ProgressingGraceOptions {
  /**
   * How long a target that was ready at a revision keeps counting as ready at it while its Ready
   * condition is Unknown with reason `Progressing` (and its generation observed). Default
   * {@link DEFAULT_PROGRESSING_GRACE_MS}; 0 turns the grace off.
   */
  readonly windowMs?: number;
}

/** One environment's targets as just observed, before the grace. */
export interface ObservedEnvironment {
  readonly name: string;
  readonly targets: readonly TargetStatus[];
}

const targetKey = (t: TargetStatus): string => `${t.cluster}\u0000${t.namespace}`;

/**
 * Every Flux reconcile, the periodic no-op one included, starts with Ready=Unknown/Progressing for
 * a fraction of a second. Taken literally, an environment would flicker to not ready at every
 * interval and a promotion waiting for a pull request's merge would be superseded. So a target
 * that the Pipeline's previous status shows ready at revision R, and that is now `Progressing` at
 * R with its generation observed, still counts as ready at R for `windowMs` from when this
 * controller first saw it Progressing (its own clock: the target's cluster may disagree on time).
 * Past the window it is not ready (reason `Progressing`). After a restart the window starts again.
 *
 * Invariant: for each Pipeline, an entry exists for a target exactly when its latest observation
 * was `Progressing`; each {@link hold} replaces the Pipeline's entries, {@link forget} drops them.
 * Touched only by the reconcile of that Pipeline (never two at once).
 */
export class ProgressingGrace {
  readonly #windowMs: number;
  /** Pipeline key → target key → when it was first seen Progressing (clock milliseconds). */
  readonly #since = new Map<string, Map<string, number>>();

  constructor(options: ProgressingGraceOptions = {}) {
    const windowMs = options.windowMs ?? DEFAULT_PROGRESSING_GRACE_MS;
    this.#windowMs = nonNegativeNumber('ProgressingGrace', 'windowMs', windowMs);
  }

  /**
   * The targets of `observed` as decisions and status take them, and when the earliest grace in
   * force ends (undefined when none is), so the Pipeline is looked at again then.
   */
  hold(owner: string, observed: readonly ObservedEnvironment[], previous: readonly EnvironmentStatus[] | undefined, now: number): { readonly environments: ObservedEnvironment[]; readonly recheckInMs: number | undefined } {
    const before = this.#since.get(owner);
    const since = new Map<string, number>();
    let recheckInMs: number | undefined;
    const environments = observed.map((env) => {
      const shown = previous?.find((e) => e.name === env.name);
      const earlier = shown?.targets;
      // A fleet's status lists only its first not-ready targets: when that list was complete, a
      // target absent from it was counted ready at the environment's revision.
      const fleetReady = shown?.fleet !== undefined && shown.revision !== undefined && shown.targets.length < MAX_FLEET_TARGETS_SHOWN
        ? { ready: true, revision: shown.revision }
        : undefined;
      return {
        name: env.name,
        targets: env.targets.map((t) => {
          if (t.reason !== 'Progressing') return t;
          const key = targetKey(t);
          const start = before?.get(key) ?? now;
          since.set(key, start);
          const was = earlier?.find((p) => targetKey(p) === key) ?? fleetReady;
          const left = start + this.#windowMs - now;
          if (left <= 0 || t.readable !== true || t.revision === undefined || was?.ready !== true || was.revision !== t.revision) return t;
          recheckInMs = Math.min(recheckInMs ?? Infinity, left);
          const { reason: _progressing, ...held } = t;
          return { ...held, ready: true };
        }),
      };
    });
    if (since.size === 0) this.#since.delete(owner);
    else this.#since.set(owner, since);
    return { environments, recheckInMs };
  }

  /** Drops what is remembered of a Pipeline (deleted, or its spec invalid). */
  forget(owner: string): void {
    this.#since.delete(owner);
  }

  /** How many Pipelines have a target Progressing now: what is remembered, bounded by the Pipelines. */
  get size(): number {
    return this.#since.size;
  }
}
