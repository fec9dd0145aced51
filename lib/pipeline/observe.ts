import type { KubeObject } from '../transport/index.ts';
import { getAtPointer } from './json-pointer.ts';
import type { EnvironmentStatus, TargetStatus } from './types.ts';
import type { ResolvedTarget } from './validate.ts';

// Pure functions from what the caches hold to the Pipeline's per-target and per-environment status.

/** What the controller could learn about one target from its cache. */
export type TargetObservation =
  /** No reader (credentials, discovery, an unreachable cluster) or the cache's last LIST/WATCH failed. */
  | { readonly state: 'unreadable'; readonly error: Error }
  /** The cache has not completed its first LIST: whether the object exists is not known yet. */
  | { readonly state: 'loading' }
  /** The cache is synced: `object` is the target, or undefined when it does not exist. */
  | { readonly state: 'read'; readonly object: KubeObject | undefined };

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Ready as Flux and kstatus mean it: a `Ready` condition with status `True`, and
 * `status.observedGeneration` equal to `metadata.generation` (the controller has seen the latest
 * spec, so `Ready` is not about an older one).
 */
export function isObjectReady(obj: KubeObject): boolean {
  const status = obj.status;
  if (!isRecord(status)) return false;
  const generation = obj.metadata?.generation;
  if (typeof generation !== 'number' || status.observedGeneration !== generation) return false;
  const conditions = Array.isArray(status.conditions) ? (status.conditions as unknown[]) : [];
  return conditions.some((c) => isRecord(c) && c.type === 'Ready' && c.status === 'True');
}

function revisionValue(value: unknown): string | undefined {
  if (typeof value === 'string' && value !== '') return value;
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  return undefined;
}

/**
 * The revision a target runs: the value at `revisionPath` when the Pipeline names one (a string or
 * a number); otherwise `status.lastAppliedRevision` (Kustomization), else the `chartVersion` of
 * `status.history[0]` (HelmRelease: Flux keeps its history newest first).
 */
export function objectRevision(obj: KubeObject, revisionPath: string | undefined): string | undefined {
  if (revisionPath !== undefined) return revisionValue(getAtPointer(obj, revisionPath));
  const status = obj.status;
  if (!isRecord(status)) return undefined;
  const applied = revisionValue(status.lastAppliedRevision);
  if (applied !== undefined) return applied;
  const history = status.history;
  if (Array.isArray(history) && history.length > 0) {
    const newest: unknown = history[0];
    if (isRecord(newest)) return revisionValue(newest.chartVersion);
  }
  return undefined;
}

/** One target's status from what its cache shows. */
export function targetStatusOf(target: ResolvedTarget, seen: TargetObservation, revisionPath: string | undefined): TargetStatus {
  const where = { cluster: target.clusterKey, namespace: target.namespace };
  switch (seen.state) {
    case 'unreadable':
      return { ...where, readable: false, ready: false, error: seen.error.message };
    case 'loading':
      return { ...where, ready: false };
    case 'read': {
      if (seen.object === undefined) return { ...where, readable: true, exists: false, ready: false };
      const revision = objectRevision(seen.object, revisionPath);
      return { ...where, readable: true, exists: true, ready: isObjectReady(seen.object), ...(revision === undefined ? {} : { revision }) };
    }
  }
}

/** True when every target of the environment could be read (none unreadable, none loading). */
export function isEnvironmentKnown(env: EnvironmentStatus): boolean {
  return env.targets.every((t) => t.readable === true);
}

/**
 * An environment's status: its revision is the one every target reports, when they agree; it is
 * ready when every target is ready at that revision.
 */
export function environmentStatusOf(name: string, targets: readonly TargetStatus[]): EnvironmentStatus {
  const first = targets[0]?.revision;
  const revision = first !== undefined && targets.every((t) => t.revision === first) ? first : undefined;
  const ready = revision !== undefined && targets.every((t) => t.ready && t.readable === true);
  return { name, ready, ...(revision === undefined ? {} : { revision }), targets };
}
