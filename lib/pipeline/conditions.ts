import { isDeepStrictEqual } from 'node:util';
import { sanitizeForDisplay } from '../util/index.ts';
import { howToRetry } from './approval.ts';
import { notReadyReasonOf } from './fleet-policy.ts';
import { MAX_FLEET_TARGETS_SHOWN, type Condition, type EnvironmentStatus, type PipelineStatus, type PromotionRecord } from './types.ts';

// Pipeline conditions in the usual Kubernetes form, and the "did the status change" test.

/** Condition types a Pipeline reports. */
export const READY = 'Ready';
export const PROMOTING = 'Promoting';
/** Patch strategy: True while a patched value has been put back by the Flux Kustomization managing the object. */
export const DRIFTED = 'Drifted';

/** Reasons of the Ready condition. */
export const REASON_INVALID_SPEC = 'InvalidSpec';
export const REASON_TARGET_NOT_READABLE = 'TargetNotReadable';
export const REASON_WAITING_FOR_CACHES = 'WaitingForCaches';
/** A fleet environment's member list (the kubeconfig Secret or Cluster cache) has not loaded yet (Ready and Promoting). */
export const REASON_FLEET_MEMBERSHIP_LOADING = 'FleetMembershipLoading';
export const REASON_RECONCILED = 'Reconciled';
/** Reasons of the Promoting condition. */
export const REASON_PROMOTING = 'Promoting';
export const REASON_PROMOTION_FAILED = 'PromotionFailed';
export const REASON_IDLE = 'Idle';
/** A git promotion is committed; its environment does not run the revision yet. */
export const REASON_WAITING_FOR_APPLY = 'WaitingForApply';
/** Reasons of the Drifted condition. */
export const REASON_REVERTED_BY_FLUX = 'RevertedByFlux';
export const REASON_IN_SYNC = 'InSync';

/** A condition's content, before its transition time is settled. */
export type ConditionInput = Omit<Condition, 'lastTransitionTime'>;

/** Messages are capped well under the API's 32 768 limit: status is read by people. */
const MAX_MESSAGE = 2_000;
/** A target's error and a promotion's message, each: they sit in lists. */
export const MAX_STATUS_TEXT = 1_000;

/**
 * `conditions` with `next` set: `lastTransitionTime` is kept when the status did not change (a new
 * reason or message is not a transition), and `now` otherwise.
 */
export function setCondition(conditions: readonly Condition[], next: ConditionInput, now: string): Condition[] {
  const previous = conditions.find((c) => c.type === next.type);
  const condition: Condition = {
    type: next.type,
    status: next.status,
    reason: next.reason,
    message: sanitizeForDisplay(next.message, MAX_MESSAGE),
    lastTransitionTime: previous?.status === next.status ? previous.lastTransitionTime : now,
    observedGeneration: next.observedGeneration,
  };
  return previous === undefined ? [...conditions, condition] : conditions.map((c) => (c === previous ? condition : c));
}

/** The Ready condition of a Pipeline whose spec is invalid. */
export function invalidSpecCondition(problems: readonly string[], generation: number): ConditionInput {
  return { type: READY, status: 'False', reason: REASON_INVALID_SPEC, message: problems.join('; '), observedGeneration: generation };
}

/** The fleet environments whose member list is still loading, as a phrase, or undefined when none is. */
export function membershipLoading(environments: readonly EnvironmentStatus[]): string | undefined {
  const names = environments.filter((e) => e.fleet?.membership === 'Loading').map((e) => e.name);
  return names.length === 0 ? undefined : `waiting for the fleet membership of ${names.join(', ')} (the cluster list) to load`;
}

/**
 * The Ready condition from the environments: False/TargetNotReadable naming each unreadable target
 * and its cluster's error, Unknown while a fleet's member list loads (FleetMembershipLoading: no
 * "0 of 0" is ever reported as observed) or caches load, True otherwise (ready means "observed",
 * not "every environment is ready": that is in `status.environments`).
 */
export function readyCondition(environments: readonly EnvironmentStatus[], generation: number): ConditionInput {
  const unreadable: string[] = [];
  let loading = 0;
  for (const env of environments) {
    if (env.fleet?.error !== undefined) unreadable.push(`${env.name}: the cluster list: ${env.fleet.error}`);
    for (const t of env.targets) {
      if (t.readable === false) unreadable.push(`${env.name}: ${t.cluster} namespace ${t.namespace}: ${t.error ?? 'unreadable'}`);
      else if (t.readable === undefined) loading++;
    }
  }
  if (unreadable.length > 0) {
    return { type: READY, status: 'False', reason: REASON_TARGET_NOT_READABLE, message: unreadable.join('; '), observedGeneration: generation };
  }
  const members = membershipLoading(environments);
  if (members !== undefined) return { type: READY, status: 'Unknown', reason: REASON_FLEET_MEMBERSHIP_LOADING, message: members, observedGeneration: generation };
  if (loading > 0) {
    return { type: READY, status: 'Unknown', reason: REASON_WAITING_FOR_CACHES, message: `waiting for the caches of ${loading} target(s) to load`, observedGeneration: generation };
  }
  const summary = environments.map((e) => `${e.name}: ${e.revision ?? 'no single revision'}${e.ready ? ' (ready)' : e.reason === undefined ? ' (not ready)' : ` (not ready: ${e.reason})`}`).join(', ');
  return { type: READY, status: 'True', reason: REASON_RECONCILED, message: summary, observedGeneration: generation };
}

/**
 * The Promoting condition from the newest promotion record; while a fleet's member list loads
 * (`environments` given), Unknown/FleetMembershipLoading unless a promotion is acting (Pending),
 * with what the newest record says after it.
 */
export function promotingCondition(records: readonly PromotionRecord[], generation: number, environments?: readonly EnvironmentStatus[]): ConditionInput {
  const condition = promotingFromRecords(records, generation);
  const members = environments === undefined ? undefined : membershipLoading(environments);
  if (members === undefined || condition.reason === REASON_PROMOTING) return condition;
  return { type: PROMOTING, status: 'Unknown', reason: REASON_FLEET_MEMBERSHIP_LOADING, message: `${members}; ${condition.message}`, observedGeneration: generation };
}

function promotingFromRecords(records: readonly PromotionRecord[], generation: number): ConditionInput {
  const last = records.at(-1);
  // Say which wave: `prod wave canary`.
  const newest = last?.wave === undefined ? last : { ...last, environment: `${last.environment} wave ${last.wave}` };
  if (newest?.state === 'Pending') {
    return { type: PROMOTING, status: 'True', reason: REASON_PROMOTING, message: `promoting ${newest.revision} to ${newest.environment} (attempt ${newest.attempts})${newest.pullRequest === undefined ? '' : `: pull request #${newest.pullRequest.number} ${newest.pullRequest.url} waits for its merge`}`, observedGeneration: generation };
  }
  if (newest?.state === 'Committed') {
    const gate = newest.commitStatuses === undefined ? '' : `; ${newest.commitStatuses.message}`;
    if (newest.wave !== undefined) return { type: PROMOTING, status: 'True', reason: REASON_WAITING_FOR_APPLY, message: `promoting ${newest.revision} to ${newest.environment}: carried out, waiting for the wave to be ready${gate}`, observedGeneration: generation };
    return { type: PROMOTING, status: 'True', reason: REASON_WAITING_FOR_APPLY, message: `committed ${newest.commit === undefined ? '' : `${newest.commit.slice(0, 12)} `}promoting ${newest.revision} to ${newest.environment}: waiting for ${newest.environment} to run it${gate}`, observedGeneration: generation };
  }
  if (newest?.state === 'AwaitingApproval') {
    return { type: PROMOTING, status: 'False', reason: 'AwaitingApproval', message: `promoting ${newest.revision} to ${newest.environment} waits for approval${newest.message === undefined ? '' : `: ${newest.message}`}`, observedGeneration: generation };
  }
  if (newest?.state === 'Failed') {
    // A wave carried out and not ready in time stops the rollout: say how a person carries it on.
    // (Said before the record's message, which may be long enough to be cut.)
    const retry = last?.wave !== undefined && last.committedAt !== undefined ? ` (to carry it out again, ${howToRetry(last.environment, last.wave, last.revision)})` : '';
    return { type: PROMOTING, status: 'False', reason: REASON_PROMOTION_FAILED, message: `promoting ${newest.revision} to ${newest.environment} failed${retry}: ${newest.message ?? 'unknown error'}`, observedGeneration: generation };
  }
  return { type: PROMOTING, status: 'False', reason: REASON_IDLE, message: 'no promotion in progress', observedGeneration: generation };
}

/**
 * The Drifted condition (patch strategy): True naming each target whose patched value the Flux
 * Kustomization managing it put back, else False — or none at all when there is no drift and never
 * was (`previous` has no Drifted condition), so Pipelines without drift carry no such condition.
 */
export function driftedCondition(environments: readonly EnvironmentStatus[], previous: readonly Condition[], generation: number): ConditionInput | undefined {
  const drifted = environments.flatMap((e) => e.targets.filter((t) => t.drifted === true).map((t) => `${e.name}: ${t.cluster} namespace ${t.namespace}`));
  if (drifted.length > 0) {
    return { type: DRIFTED, status: 'True', reason: REASON_REVERTED_BY_FLUX, message: `the patched value was put back by the Flux Kustomization that manages the object (${drifted.join('; ')}): under Flux, promote with the git strategy`, observedGeneration: generation };
  }
  if (!previous.some((c) => c.type === DRIFTED)) return undefined;
  return { type: DRIFTED, status: 'False', reason: REASON_IN_SYNC, message: 'every patched value holds', observedGeneration: generation };
}

/**
 * `environments` as status may show them: each target's error (a peer's words) and each revision
 * (read from objects in clusters the tenant controls) bounded and with control and bidi characters
 * escaped. Only the status shows these: decisions are taken on what the caches hold, and promotion
 * records keep the revision they act on. Condition and promotion messages are treated where they
 * are made.
 */
export function displayEnvironments(environments: readonly EnvironmentStatus[]): EnvironmentStatus[] {
  const text = (value: string): string => sanitizeForDisplay(value, MAX_STATUS_TEXT);
  return environments.map((env) => ({
    ...env,
    ...(env.revision === undefined ? {} : { revision: text(env.revision) }),
    ...(env.fleet?.error === undefined ? {} : { fleet: { ...env.fleet, error: text(env.fleet.error) } }),
    ...(env.waves === undefined ? {} : { waves: env.waves.map((w) => (w.revision === undefined ? w : { ...w, revision: text(w.revision) })) }),
    // A fleet's status is bounded: its counts, and only the first few targets not ready.
    targets: (env.fleet === undefined ? env.targets : env.targets.filter((t) => notReadyReasonOf(t, env.revision) !== undefined).slice(0, MAX_FLEET_TARGETS_SHOWN)).map((t) => ({
      ...t,
      ...(t.error === undefined ? {} : { error: text(t.error) }),
      ...(t.revision === undefined ? {} : { revision: text(t.revision) }),
    })),
  }));
}

/** JSON as the server would store it: no undefined members, no class instances. */
export function plain<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

function withoutTransitionTimes(status: PipelineStatus | undefined): unknown {
  if (status === undefined) return {};
  const copy = plain(status) as unknown as { conditions?: Record<string, unknown>[] };
  for (const c of copy.conditions ?? []) delete c.lastTransitionTime;
  return copy;
}

/**
 * True when two statuses say the same thing: members compared in any order (the server may
 * reorder keys), conditions' `lastTransitionTime` ignored (it follows from the status).
 */
export function sameStatus(a: PipelineStatus | undefined, b: PipelineStatus | undefined): boolean {
  return isDeepStrictEqual(withoutTransitionTimes(a), withoutTransitionTimes(b));
}
