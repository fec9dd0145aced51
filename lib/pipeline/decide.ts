import { wasCommitted } from './guard.ts';
import { isEnvironmentKnown } from './observe.ts';
import { MAX_PROMOTIONS_PER_ENVIRONMENT, type CommittedPromotion, type EnvironmentStatus, type PromotionRecord, type RetryMark, type WaveRetry, type WaveStatus } from './types.ts';

// The promotion decision, as a pure function of the environments' status and the promotion records
// already written: the controller acts only on what this returns, after recording it.

/** Delay before a failed promotion is attempted again: doubles per attempt. */
export interface RetryPolicy {
  readonly initialMs: number;
  readonly maxMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = Object.freeze({ initialMs: 2_000, maxMs: 300_000 });

/** How long a `Committed` promotion may wait for its environment to run the revision. Default 10 minutes. */
export const DEFAULT_APPLY_TIMEOUT_MS = 600_000;

/** What else the decision takes into account. */
export interface DecisionContext {
  /** `status.committed`: ⟨environment, revision⟩ pairs carried out already are never promoted again. */
  readonly committed?: readonly CommittedPromotion[] | undefined;
  /** Default {@link DEFAULT_APPLY_TIMEOUT_MS}: when a `Committed` record falls due. */
  readonly applyTimeoutMs?: number;
  /** `status.retries`: a stopped wave whose failed attempt a retry names is carried out again, once. */
  readonly retries?: readonly WaveRetry[] | undefined;
}

export type PromotionDecision =
  /** Nothing to do now; when `retryInMs` is set, a failed promotion falls due then. */
  | { readonly action: 'none'; readonly retryInMs?: number }
  /**
   * Promote `revision` from environment `from` into `to`. `attempt` is the attempt about to begin
   * (1 for a new promotion); `resumed` when a Pending record is taken up again (after a restart).
   */
  | { readonly action: 'promote'; readonly from: string; readonly to: string; readonly revision: string; readonly attempt: number; readonly resumed: boolean; readonly startedAt: string | undefined; readonly wave?: string; readonly retry?: RetryMark }
  /** A Pending promotion whose source no longer holds its revision: close it as Failed. */
  | { readonly action: 'supersede'; readonly record: PromotionRecord; readonly reason: string };

/** The newest record for (environment, revision) — of `wave` for a wave, without one otherwise — or undefined. */
export function findRecord(records: readonly PromotionRecord[], environment: string, revision: string, wave?: string): PromotionRecord | undefined {
  return records.findLast((r) => r.environment === environment && r.revision === revision && r.wave === wave);
}

/** When a failed record may be attempted again (clock milliseconds). */
export function retryDueAt(record: PromotionRecord, policy: RetryPolicy): number {
  const finished = Date.parse(record.finishedAt ?? record.startedAt);
  const delay = Math.min(policy.initialMs * 2 ** Math.max(0, record.attempts - 1), policy.maxMs);
  return (Number.isNaN(finished) ? 0 : finished) + delay;
}

/**
 * What to do next. In order:
 * 1. A `Pending` record is resumed when its source environment is still ready at its revision and
 *    its target environment can be read, or superseded when the source moved on (never promote a
 *    revision that is not ready everywhere in the source).
 * 2. Otherwise the first environment `i` ready at a revision `R` that environment `i+1` is not at
 *    (and whose targets can all be read) is promoted, unless a record for (`i+1`, `R`) says it
 *    succeeded already (at most once per revision and environment) or failed too recently (retry
 *    with backoff). Only adjacent environments are compared, so nothing skips an environment.
 *    Never into an environment with a `Committed` record (one commit in flight per environment:
 *    it lands or times out first, see {@link settleCommitted}), never out of one whose own
 *    promotion of the revision is still `Committed` (a commit-status gate holds it) or failed its
 *    commit-status gate, never a pair in `committed`.
 */
export function decidePromotion(
  environments: readonly EnvironmentStatus[],
  records: readonly PromotionRecord[],
  now: number,
  policy: RetryPolicy = DEFAULT_RETRY,
  context: DecisionContext = {},
): PromotionDecision {
  const indexOf = (name: string): number => environments.findIndex((e) => e.name === name);
  for (const record of records) {
    if (record.state !== 'Pending') continue;
    const to = indexOf(record.environment);
    const source = to > 0 ? environments[to - 1] : undefined;
    const target = environments[to];
    if (source === undefined || target === undefined) {
      return { action: 'supersede', record, reason: `environment ${record.environment} is no longer a promotion target of this pipeline` };
    }
    if (!isEnvironmentKnown(source) || !isEnvironmentKnown(target)) continue; // wait until both can be read
    if (!source.ready || source.revision !== record.revision) {
      return { action: 'supersede', record, reason: `environment ${source.name} is no longer ready at ${record.revision}` };
    }
    return { action: 'promote', from: source.name, to: target.name, revision: record.revision, attempt: record.attempts + 1, resumed: true, startedAt: record.startedAt, ...(record.wave === undefined ? {} : { wave: record.wave }), ...(record.retry === undefined ? {} : { retry: record.retry }) };
  }

  let retryInMs: number | undefined;
  const inFlight = new Set<string>();
  for (const record of records) {
    if (record.state !== 'Committed') continue;
    inFlight.add(record.environment);
    // Past due it is settled before this runs, unless a commit-status gate holds it (and requeues itself).
    const due = applyDueAt(record, context.applyTimeoutMs ?? DEFAULT_APPLY_TIMEOUT_MS) - now;
    if (due > 0) retryInMs = Math.min(retryInMs ?? Infinity, due);
  }
  for (let i = 0; i + 1 < environments.length; i++) {
    const source = environments[i];
    const target = environments[i + 1];
    if (source === undefined || target === undefined) break;
    const revision = source.revision;
    if (!source.ready || revision === undefined || !isEnvironmentKnown(target)) continue;
    if (target.waves !== undefined) {
      if (inFlight.has(target.name)) continue;
      const step = nextWave(target, target.waves, revision, records, now, policy, context.committed, context.retries);
      if (step.action === 'promote') return { action: 'promote', from: source.name, to: target.name, revision, wave: step.wave, attempt: step.attempt, resumed: false, startedAt: step.startedAt, ...(step.retry === undefined ? {} : { retry: step.retry }) };
      if (step.retryInMs !== undefined) retryInMs = Math.min(retryInMs ?? Infinity, step.retryInMs);
      continue;
    }
    if (target.revision === revision || inFlight.has(target.name) || wasCommitted(context.committed, target.name, revision)) continue;
    // A source whose own promotion of the revision (any of its waves) is still Committed (its commit-status gate waits), or failed its gate, passes nothing on.
    if (records.some((r) => r.environment === source.name && r.revision === revision && (r.state === 'Committed' || r.commitStatuses?.state === 'Failed'))) continue;
    const record = findRecord(records, target.name, revision);
    // AwaitingApproval: asked again each time; the controller checks the approval before acting.
    if (record === undefined || record.state === 'AwaitingApproval') return { action: 'promote', from: source.name, to: target.name, revision, attempt: 1, resumed: false, startedAt: undefined };
    if (record.state !== 'Failed') continue; // Succeeded, Committed: once per revision and environment; Pending: above
    const due = retryDueAt(record, policy);
    if (due <= now) return { action: 'promote', from: source.name, to: target.name, revision, attempt: record.attempts + 1, resumed: false, startedAt: record.startedAt };
    retryInMs = Math.min(retryInMs ?? Infinity, due - now);
  }
  return retryInMs === undefined ? { action: 'none' } : { action: 'none', retryInMs };
}

/** What {@link nextWave} found. */
type WaveStep =
  | { readonly action: 'promote'; readonly wave: string; readonly attempt: number; readonly startedAt: string | undefined; readonly retry?: RetryMark }
  | { readonly action: 'none'; readonly retryInMs?: number };

/**
 * The next wave of a rollout of `revision` into a fleet environment, in order: a wave is done when
 * its record `Succeeded` (it was ready at the revision); the next one starts once the previous is
 * ready at the revision now and has soaked `soakSeconds` from its record's `readyAt`. A wave
 * carried out that did not become ready in time (`Failed` after being carried out) stops the
 * rollout of this revision — until a person's retry names that failed attempt (`retries`): the
 * wave is then carried out once more (attempt + 1, whatever the previous wave does now: it passed
 * its gates for this revision already) and the rollout goes on from there when it is ready. A wave
 * whose action failed is retried with backoff. Empty waves are passed over; an environment whose
 * every target runs the revision has nothing to do.
 */
export function nextWave(target: EnvironmentStatus, waves: readonly WaveStatus[], revision: string, records: readonly PromotionRecord[], now: number, policy: RetryPolicy, committed: readonly CommittedPromotion[] | undefined, retries?: readonly WaveRetry[]): WaveStep {
  if (target.targets.length > 0 && target.targets.every((t) => t.readable === true && t.ready && t.revision === revision)) return { action: 'none' };
  let previous: { readonly wave: WaveStatus; readonly record: PromotionRecord | undefined } | undefined;
  for (const wave of waves) {
    if (wave.total === 0) continue;
    const record = findRecord(records, target.name, revision, wave.name);
    const carried = wasCommitted(committed, target.name, revision, wave.name);
    // Done (or carried out long ago, its record since dropped from the bounded list).
    if (record?.state === 'Succeeded' || (carried && record === undefined)) {
      previous = { wave, record };
      continue;
    }
    // Carried out and failed: this revision's rollout stops here, unless a person retries that attempt.
    if (record?.state === 'Failed' && record.committedAt !== undefined) {
      const retry = retries?.find((r) => r.environment === record.environment && r.wave === wave.name && r.revision === revision && r.attempt === record.attempts);
      if (retry === undefined) return { action: 'none' };
      return { action: 'promote', wave: wave.name, attempt: record.attempts + 1, startedAt: record.startedAt, retry: { by: retry.requestedBy, at: retry.requestedAt, of: retry.attempt } };
    }
    // A retry whose action failed (before it was carried out again) is tried again with backoff.
    const retrying = record?.state === 'Failed' ? record.retry : undefined;
    // In flight (Pending, Committed), or carried out (its record since dropped): the rollout waits or stops here.
    if (retrying === undefined && (carried || record?.state === 'Pending' || record?.state === 'Committed')) return { action: 'none' };
    if (previous !== undefined && retrying === undefined) {
      if (!previous.wave.ready || previous.wave.revision !== revision) return { action: 'none' }; // woken when it is
      const readyAt = Date.parse(previous.record?.readyAt ?? '');
      const soakedAt = (Number.isNaN(readyAt) ? 0 : readyAt) + (previous.wave.soakSeconds ?? 0) * 1_000;
      if (soakedAt > now) return { action: 'none', retryInMs: soakedAt - now };
    }
    if (record === undefined || record.state === 'AwaitingApproval') return { action: 'promote', wave: wave.name, attempt: 1, startedAt: undefined };
    const due = retryDueAt(record, policy); // Failed before it was carried out
    if (due <= now) return { action: 'promote', wave: wave.name, attempt: record.attempts + 1, startedAt: record.startedAt, ...(retrying === undefined ? {} : { retry: retrying }) };
    return { action: 'none', retryInMs: due - now };
  }
  return { action: 'none' };
}

/**
 * `records` with `record` in place of the newest one for the same (environment, revision), or
 * appended; then only the newest {@link MAX_PROMOTIONS_PER_ENVIRONMENT} per environment are kept.
 */
export function withRecord(records: readonly PromotionRecord[], record: PromotionRecord): PromotionRecord[] {
  const at = records.findLastIndex((r) => r.environment === record.environment && r.revision === record.revision && r.wave === record.wave);
  const next = at < 0 ? [...records, record] : records.map((r, i) => (i === at ? record : r));
  const kept = new Map<string, number>();
  const result: PromotionRecord[] = [];
  for (let i = next.length - 1; i >= 0; i--) {
    const r = next[i];
    if (r === undefined) continue;
    const count = kept.get(r.environment) ?? 0;
    // A Pending or Committed record is never dropped: it is the memory that prevents a second promotion.
    if (count >= MAX_PROMOTIONS_PER_ENVIRONMENT && r.state !== 'Pending' && r.state !== 'Committed') continue;
    kept.set(r.environment, count + 1);
    result.push(r);
  }
  return result.reverse();
}

/** When a `Committed` record times out (clock milliseconds). */
export function applyDueAt(record: PromotionRecord, applyTimeoutMs: number): number {
  const at = Date.parse(record.committedAt ?? record.finishedAt ?? record.startedAt);
  return (Number.isNaN(at) ? 0 : at) + applyTimeoutMs;
}

/** A `Committed` record closed by {@link settleCommitted}. */
export interface SettledPromotion {
  /** The record as it now stands: `Succeeded` or `Failed`. */
  readonly record: PromotionRecord;
  /** True when the environment runs the revision. */
  readonly applied: boolean;
}

/**
 * Closes `Committed` records (a git promotion is done when the environment runs the revision, not
 * when the push returned): `Succeeded` once every target of the environment is ready at the
 * revision, `Failed` when `applyTimeoutMs` passed since the commit first, or when the environment
 * left the spec. `nowText` is `now` as status writes times.
 */
export function settleCommitted(environments: readonly EnvironmentStatus[], records: readonly PromotionRecord[], now: number, nowText: string, applyTimeoutMs: number = DEFAULT_APPLY_TIMEOUT_MS): SettledPromotion[] {
  const settled: SettledPromotion[] = [];
  for (const record of records) {
    if (record.state !== 'Committed') continue;
    const env = environments.find((e) => e.name === record.environment);
    // Nothing is judged on a fleet whose member list has not loaded: its counts are not the fleet's.
    if (env?.fleet?.membership === 'Loading') continue;
    if (record.wave !== undefined) {
      const closed = settleWave(env, record, now, nowText, applyTimeoutMs);
      if (closed !== undefined) settled.push(closed);
      continue;
    }
    const commit = record.commit === undefined ? 'the commit' : `commit ${record.commit.slice(0, 12)}`;
    if (env !== undefined && isEnvironmentKnown(env) && env.ready && env.revision === record.revision) {
      settled.push({ applied: true, record: { ...record, state: 'Succeeded', finishedAt: nowText, message: `${record.message ?? commit}; ${env.name} runs ${record.revision}` } });
    } else if (env === undefined) {
      settled.push({ applied: false, record: { ...record, state: 'Failed', finishedAt: nowText, message: `${commit} was pushed, but environment ${record.environment} is no longer a promotion target of this pipeline` } });
    } else if (now >= applyDueAt(record, applyTimeoutMs)) {
      settled.push({ applied: false, record: { ...record, state: 'Failed', finishedAt: nowText, message: `${commit} was pushed, but ${env.name} did not run ${record.revision} within ${Math.round(applyTimeoutMs / 1_000)} s${env.reason === undefined ? '' : ` (${env.reason})`}` } });
    }
  }
  return settled;
}

/**
 * A wave's `Committed` record closed: `Succeeded` with `readyAt` once the wave meets its readiness
 * policy at the revision, `Failed` (the rollout stops at this wave) past `applyTimeoutMs` from
 * when it was carried out, or when the wave left the spec; undefined while it is still waiting.
 */
function settleWave(env: EnvironmentStatus | undefined, record: PromotionRecord, now: number, nowText: string, applyTimeoutMs: number): SettledPromotion | undefined {
  const name = `wave ${record.wave ?? '?'} of ${record.environment}`;
  const wave = env?.waves?.find((w) => w.name === record.wave);
  if (wave === undefined) return { applied: false, record: { ...record, state: 'Failed', finishedAt: nowText, message: `${name} is no longer in the spec; the rollout of ${record.revision} stops here` } };
  const counts = `${wave.readyTargets} of ${wave.total} clusters ready at ${wave.revision ?? 'no single revision'}, ${wave.required} needed`;
  if (wave.ready && wave.revision === record.revision) {
    return { applied: true, record: { ...record, state: 'Succeeded', finishedAt: nowText, readyAt: nowText, message: `${record.message ?? 'carried out'}; ${name} is ready (${counts})` } };
  }
  if (now < applyDueAt(record, applyTimeoutMs)) return undefined;
  const reasons = Object.entries(env?.fleet?.notReady ?? {}).map(([reason, n]) => `${reason} ${n}`).join(', ');
  return { applied: false, record: { ...record, state: 'Failed', finishedAt: nowText, message: `${name} was not ready at ${record.revision} within ${Math.round(applyTimeoutMs / 1_000)} s (${counts}${reasons === '' ? '' : `; environment not ready: ${reasons}`}): the rollout stops at this wave` } };
}
