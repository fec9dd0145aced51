import type { KubeObject } from '../transport/index.ts';
import { getAtPointer } from './json-pointer.ts';
import { isSuspended } from './flux.ts';
import { policyText, setReadiness } from './fleet-policy.ts';
import type { EnvironmentStatus, FleetStatus, NotReadyReason, TargetStatus, WaveStatus } from './types.ts';
import type { ResolvedEnvironment, ResolvedTarget } from './validate.ts';

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

/** Whether a target is ready, and why not in a fixed vocabulary. */
export type Readiness = { readonly ready: true } | { readonly ready: false; readonly reason: NotReadyReason };

const READY: Readiness = Object.freeze({ ready: true });
const notReady = (reason: NotReadyReason): Readiness => ({ ready: false, reason });

/**
 * Ready as Flux and kstatus mean it: not suspended, `status.observedGeneration` equal to
 * `metadata.generation` (the controller has seen the latest spec, so `Ready` is not about an older
 * one), and a `Ready` condition with status `True`. Suspended comes first: kustomize-controller
 * keeps Ready=True and observedGeneration current on a suspended Kustomization while it applies
 * nothing, so neither says what runs. Ready=Unknown with reason `Progressing` is `Progressing`:
 * every Flux reconcile, the periodic no-op one included, starts that way (see {@link ProgressingGrace}).
 */
export function readinessOf(obj: KubeObject): Readiness {
  if (isSuspended(obj)) return notReady('Suspended');
  const status = obj.status;
  if (!isRecord(status)) return notReady('NotReady');
  const generation = obj.metadata?.generation;
  if (typeof generation !== 'number' || status.observedGeneration !== generation) return notReady('NotObserved');
  const conditions = Array.isArray(status.conditions) ? (status.conditions as unknown[]) : [];
  const ready = conditions.find((c): c is Record<string, unknown> => isRecord(c) && c.type === 'Ready');
  if (ready?.status === 'True') return READY;
  return notReady(ready?.status === 'Unknown' && ready.reason === 'Progressing' ? 'Progressing' : 'NotReady');
}

/** {@link readinessOf} as a boolean. */
export function isObjectReady(obj: KubeObject): boolean {
  return readinessOf(obj).ready;
}

/**
 * Longest value taken for a revision. Generous for what revisions are (a semver with build
 * metadata, Flux's `main@sha1:<40 hex>`, an OCI `sha256:<64 hex>` digest), short of what data is.
 */
export const MAX_REVISION_LENGTH = 128;

/**
 * What a target's status says instead of a value that does not look like a revision. Fixed: the
 * value itself is never echoed (into status, Events or logs), since a revision path can point at
 * anything in an object the tenant may not be able to read.
 */
export const NOT_A_REVISION = 'not a revision';

// No control, format (bidi overrides, zero-width), surrogate, private-use or unassigned code point
// (\p{C}), and no space or separator (\p{Z}, \s): one printable token.
const revisionShape = /^[^\p{C}\p{Z}\s]+$/u;

/**
 * True when `value` looks like a revision: 1 to {@link MAX_REVISION_LENGTH} UTF-16 units, printable,
 * without whitespace, control or bidi characters.
 */
export function isRevision(value: string): boolean {
  return value.length > 0 && value.length <= MAX_REVISION_LENGTH && revisionShape.test(value);
}

/** What the revision path of an object holds. */
export type RevisionRead =
  | { readonly kind: 'absent' }
  | { readonly kind: 'revision'; readonly revision: string }
  /** Something is there, but it is not a revision: reported as {@link NOT_A_REVISION}, never echoed. */
  | { readonly kind: 'invalid' };

const ABSENT: RevisionRead = Object.freeze({ kind: 'absent' });
const INVALID: RevisionRead = Object.freeze({ kind: 'invalid' });

/** undefined and '' are absent; a finite number is its decimal text; anything else must pass {@link isRevision}. */
function revisionValue(value: unknown): RevisionRead {
  if (value === undefined || value === null || value === '') return ABSENT;
  const text = typeof value === 'string' ? value : typeof value === 'number' && Number.isFinite(value) ? String(value) : undefined;
  return text !== undefined && isRevision(text) ? { kind: 'revision', revision: text } : INVALID;
}

/**
 * What an object says its revision is: the value at `revisionPath` when the Pipeline names one (a
 * string or a number); otherwise `status.lastAppliedRevision` (Kustomization), else the
 * `chartVersion` of `status.history[0]` (HelmRelease: Flux keeps its history newest first).
 */
export function readRevision(obj: KubeObject, revisionPath: string | undefined): RevisionRead {
  if (revisionPath !== undefined) return revisionValue(getAtPointer(obj, revisionPath));
  const status = obj.status;
  if (!isRecord(status)) return ABSENT;
  const applied = revisionValue(status.lastAppliedRevision);
  if (applied.kind !== 'absent') return applied;
  const history = status.history;
  if (Array.isArray(history) && history.length > 0) {
    const newest: unknown = history[0];
    if (isRecord(newest)) return revisionValue(newest.chartVersion);
  }
  return ABSENT;
}

/**
 * The revision a target runs ({@link readRevision}), or undefined when there is none or it is not a
 * revision. `revisionPath` is a Pipeline target's JSON pointer (`/spec/postBuild/substitute/version`);
 * unset, the kind's own field is read: `status.lastAppliedRevision`, else a HelmRelease's newest
 * `status.history[0].chartVersion`.
 */
export function objectRevision(obj: KubeObject, revisionPath?: string): string | undefined {
  const read = readRevision(obj, revisionPath);
  return read.kind === 'revision' ? read.revision : undefined;
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
      const read = readRevision(seen.object, revisionPath);
      // Not a revision: the target cannot count as ready at any revision, so nothing is promoted.
      if (read.kind === 'invalid') return { ...where, readable: true, exists: true, ready: false, error: NOT_A_REVISION };
      const readiness = readinessOf(seen.object);
      return { ...where, readable: true, exists: true, ready: readiness.ready, ...(readiness.ready ? {} : { reason: readiness.reason }), ...(read.kind === 'revision' ? { revision: read.revision } : {}) };
    }
  }
}

/**
 * True when every target of the environment could be read (none unreadable, none loading); for a
 * fleet, when its members are known and enough of them can be read for its policy to be met.
 */
export function isEnvironmentKnown(env: EnvironmentStatus): boolean {
  const fleet = env.fleet;
  if (fleet !== undefined) return fleet.error === undefined && fleet.membership === undefined && fleet.total > 0 && fleet.readable >= fleet.required;
  return env.targets.every((t) => t.readable === true);
}

/**
 * A fleet environment's status: ready when its readiness policy is met at the revision most of its
 * targets are ready at; counts by reason; each wave judged by its own policy. `targets` holds
 * every target (status shows a bounded part, conditions.ts). `membership` says what is known of the
 * member list: unreadable (`fleet.error`), still loading (`fleet.membership: Loading`, never ready).
 */
export function fleetEnvironmentStatusOf(env: ResolvedEnvironment, targets: readonly TargetStatus[], membership: { readonly error?: string; readonly loading?: boolean } = {}): EnvironmentStatus {
  const fleet = env.fleet;
  if (fleet === undefined) return environmentStatusOf(env.name, targets);
  const membershipError = membership.error;
  const overall = setReadiness(targets, fleet.readiness);
  const counts: FleetStatus = {
    policy: policyText(fleet.readiness),
    ...overall.counts,
    ...(membershipError === undefined ? {} : { error: membershipError }),
    ...(membership.loading === true ? { membership: 'Loading' as const } : {}),
  };
  const waves = fleet.waves.length === 0 ? undefined : fleet.waves.map((w): WaveStatus => {
    const r = setReadiness(targets.filter((t) => env.waveOf?.get(t.cluster) === w.name), w.readiness);
    return {
      name: w.name,
      ready: r.ready,
      ...(r.revision === undefined ? {} : { revision: r.revision }),
      total: r.counts.total,
      readyTargets: r.counts.readyTargets,
      required: r.counts.required,
      ...(w.soakSeconds > 0 ? { soakSeconds: w.soakSeconds } : {}),
      ...(w.requireApproval ? { requireApproval: true } : {}),
    };
  });
  const reason = overall.ready ? undefined : targets.find((t) => t.reason !== undefined)?.reason;
  return {
    name: env.name,
    ready: overall.ready && membershipError === undefined && membership.loading !== true,
    ...(overall.revision === undefined ? {} : { revision: overall.revision }),
    ...(reason === undefined ? {} : { reason }),
    targets,
    fleet: counts,
    ...(waves === undefined ? {} : { waves }),
  };
}

/**
 * An environment's status: its revision is the one every target reports, when they agree; it is
 * ready when every target is ready at that revision.
 */
export function environmentStatusOf(name: string, targets: readonly TargetStatus[]): EnvironmentStatus {
  const first = targets[0]?.revision;
  const revision = first !== undefined && targets.every((t) => t.revision === first) ? first : undefined;
  const ready = revision !== undefined && targets.every((t) => t.ready && t.readable === true);
  const reason = ready ? undefined : targets.find((t) => t.reason !== undefined)?.reason;
  return { name, ready, ...(revision === undefined ? {} : { revision }), ...(reason === undefined ? {} : { reason }), targets };
}
