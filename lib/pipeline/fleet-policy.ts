import type { FleetNotReadyReason, FleetStatus, TargetStatus } from './types.ts';

// The readiness policy of a fleet environment or wave, as pure functions of its targets' status:
// how many must be ready, at which revision the set stands, and the bounded counts status shows.

/** A policy checked and normalised (validate.ts makes them). */
export type ResolvedReadiness =
  | { readonly policy: 'All' }
  | { readonly policy: 'Quorum'; readonly count: number }
  | { readonly policy: 'Percent'; readonly percent: number };

export const ALL: ResolvedReadiness = Object.freeze({ policy: 'All' });

/** The policy as status names it: `All`, `Quorum 5`, `Percent 80`. */
export function policyText(policy: ResolvedReadiness): string {
  switch (policy.policy) {
    case 'All': return 'All';
    case 'Quorum': return `Quorum ${policy.count}`;
    case 'Percent': return `Percent ${policy.percent}`;
  }
}

/**
 * How many of `total` targets must be ready: all; `count` (at most `total`); `percent` of `total`
 * rounded up (at least 1). 0 only when `total` is 0: an empty set is never ready.
 */
export function requiredReady(policy: ResolvedReadiness, total: number): number {
  if (total <= 0) return 0;
  switch (policy.policy) {
    case 'All': return total;
    case 'Quorum': return Math.min(total, Math.max(1, policy.count));
    // Integer math first: 70% of 10 is 7, not 7.000000000000001 rounded up to 8.
    case 'Percent': return Math.min(total, Math.max(1, Math.ceil((policy.percent * total) / 100)));
  }
}

/** Why one target does not count as ready at `revision`, or undefined when it does. */
export function notReadyReasonOf(target: TargetStatus, revision: string | undefined): FleetNotReadyReason | undefined {
  if (target.readable === false) return 'Unreadable';
  if (target.readable === undefined) return 'Loading';
  if (target.exists === false) return 'Missing';
  if (!target.ready) return target.reason ?? 'NotReady';
  return target.revision !== undefined && target.revision === revision ? undefined : 'OtherRevision';
}

/** A set of targets judged by a policy. */
export interface SetReadiness {
  /** The policy is met at `revision`. */
  readonly ready: boolean;
  /**
   * The revision most targets are ready at (ties: the one named first in target order); with no
   * target ready, the revision every target reports when they agree.
   */
  readonly revision: string | undefined;
  readonly counts: Omit<FleetStatus, 'policy' | 'error' | 'membership'>;
}

/** {@link SetReadiness} of `targets` under `policy`. */
export function setReadiness(targets: readonly TargetStatus[], policy: ResolvedReadiness): SetReadiness {
  const readyAt = new Map<string, number>();
  let readable = 0;
  for (const t of targets) {
    if (t.readable === true) readable++;
    if (t.ready && t.readable === true && t.revision !== undefined) readyAt.set(t.revision, (readyAt.get(t.revision) ?? 0) + 1);
  }
  let revision: string | undefined;
  let best = 0;
  for (const [r, n] of readyAt) {
    if (n > best) [revision, best] = [r, n];
  }
  if (revision === undefined) {
    const first = targets[0]?.revision;
    revision = first !== undefined && targets.every((t) => t.revision === first) ? first : undefined;
  }
  const required = requiredReady(policy, targets.length);
  const notReady: Partial<Record<FleetNotReadyReason, number>> = {};
  for (const t of targets) {
    const reason = notReadyReasonOf(t, revision);
    if (reason !== undefined) notReady[reason] = (notReady[reason] ?? 0) + 1;
  }
  return { ready: required > 0 && best >= required, revision, counts: { total: targets.length, readyTargets: best, required, readable, notReady } };
}
