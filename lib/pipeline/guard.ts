import { FleetcacheError } from '../util/index.ts';
import { PROMOTING, type ConditionInput } from './conditions.ts';
import { isCommitReference } from './flux.ts';
import { MAX_COMMITTED_PER_ENVIRONMENT, type CommittedPromotion, type PipelineStatus, type PromotionHalt } from './types.ts';

// The commit-rate guard: whatever the spec says, a Pipeline carries out each ⟨environment,
// revision⟩ at most once, never writes a commit reference into a manifest, and stops when one
// environment is promoted again and again (a loop: its own commits changing the revision it reads).

/** When promotions of one environment are a loop. */
export interface LoopPolicy {
  /** Promotions of one environment carried out within `windowMs` beyond which the next is refused. Default 6; at most {@link MAX_COMMITTED_PER_ENVIRONMENT}. */
  readonly maxPerEnvironment: number;
  /** Default 600 000 (10 minutes). */
  readonly windowMs: number;
}

export const DEFAULT_LOOP_POLICY: LoopPolicy = Object.freeze({ maxPerEnvironment: 6, windowMs: 600_000 });

/** Checks a {@link LoopPolicy} given as an option; throws TypeError naming the option. */
export function loopPolicy(option: string, value: Partial<LoopPolicy> | undefined): LoopPolicy {
  const policy = { ...DEFAULT_LOOP_POLICY, ...value };
  if (!Number.isInteger(policy.maxPerEnvironment) || policy.maxPerEnvironment < 1 || policy.maxPerEnvironment > MAX_COMMITTED_PER_ENVIRONMENT) {
    throw new TypeError(`${option}.maxPerEnvironment must be an integer from 1 to ${MAX_COMMITTED_PER_ENVIRONMENT}, got ${policy.maxPerEnvironment}`);
  }
  if (!Number.isFinite(policy.windowMs) || policy.windowMs <= 0) throw new TypeError(`${option}.windowMs must be a positive number, got ${policy.windowMs}`);
  return policy;
}

/** A promotion the guard refuses; the Pipeline stops promoting until its spec changes. */
export class PromotionRefusedError extends FleetcacheError {
  readonly reason: PromotionHalt['reason'];
  readonly environment: string;

  constructor(reason: PromotionHalt['reason'], environment: string, message: string) {
    super(reason === 'PromotionLoop' ? 'ERR_PROMOTION_LOOP' : 'ERR_COMMIT_REFERENCE', message);
    this.reason = reason;
    this.environment = environment;
  }
}

/**
 * The entry of `committed` for ⟨environment, revision⟩ of `wave` (for a wave), or one without a
 * wave: a plain environment's entry, or an older rollout's waves folded into one by
 * {@link withCommitted} (it covers every wave).
 */
function findCommitted(committed: readonly CommittedPromotion[] | undefined, environment: string, revision: string, wave: string | undefined): CommittedPromotion | undefined {
  return committed?.find((c) => c.environment === environment && c.revision === revision && (c.wave === wave || c.wave === undefined));
}

/** True when `committed` holds ⟨environment, revision⟩ (of `wave`, for a wave; see {@link findCommitted}). */
export function wasCommitted(committed: readonly CommittedPromotion[] | undefined, environment: string, revision: string, wave?: string): boolean {
  return findCommitted(committed, environment, revision, wave) !== undefined;
}

/**
 * Throws {@link PromotionRefusedError} when promoting `revision` into `environment` must not
 * happen: the revision is a commit or artifact reference (any attempt), or — for a new promotion
 * — the pair was carried out already, or the environment was promoted `maxPerEnvironment` times
 * within `windowMs` already (counting only since the last halt, so fixing the spec resumes).
 */
export function checkPromotion(
  committed: readonly CommittedPromotion[] | undefined,
  request: {
    readonly environment: string;
    readonly revision: string;
    readonly isNew: boolean;
    /** The wave of a fleet environment: carried out once per wave. */
    readonly wave?: string | undefined;
    /** `status.halted.at` of the last halt, in force or lifted: only promotions after it count. */
    readonly haltedAt?: string | undefined;
  },
  now: number,
  policy: LoopPolicy = DEFAULT_LOOP_POLICY,
): void {
  const { environment, revision } = request;
  if (isCommitReference(revision)) {
    throw new PromotionRefusedError('CommitReference', environment, `refused to promote ${revision} to ${environment}: it is a Git commit or artifact reference, which changes with every commit (fleetcache's own too) and is never written into a manifest; set spec.revisionPath to the value the promotion sets (e.g. /spec/postBuild/substitute/version for a Flux Kustomization)`);
  }
  if (!request.isNew) return;
  const earlier = findCommitted(committed, environment, revision, request.wave);
  if (earlier !== undefined) {
    throw new PromotionRefusedError('PromotionLoop', environment, `refused a second promotion of ${revision} to ${environment}${request.wave === undefined ? '' : ` wave ${request.wave}`}: carried out already at ${earlier.at}${earlier.commit === undefined ? '' : ` (commit ${earlier.commit.slice(0, 12)})`}`);
  }
  // Promotions before the last halt do not count again once a spec change lifted it.
  const lifted = request.haltedAt === undefined ? Number.NEGATIVE_INFINITY : Date.parse(request.haltedAt);
  const since = Math.max(now - policy.windowMs, Number.isNaN(lifted) ? Number.NEGATIVE_INFINITY : lifted);
  // Revisions, not entries: the waves of one rollout are one promotion of the environment. The
  // revision asked for is left out: its own earlier waves must not stop the rest of its rollout.
  const recent = new Set((committed ?? []).filter((c) => c.environment === environment && c.revision !== revision && Date.parse(c.at) > since).map((c) => c.revision)).size;
  if (recent >= policy.maxPerEnvironment) {
    throw new PromotionRefusedError('PromotionLoop', environment, `stopped promoting: ${environment} was promoted ${recent} times within ${Math.round(policy.windowMs / 1_000)} s (at most ${policy.maxPerEnvironment}), which looks like a loop — does the revision read change with every commit? Fix the spec; any change of it resumes promotions`);
  }
}

/**
 * `committed` with `entry` appended, keeping per environment the newest
 * {@link MAX_COMMITTED_PER_ENVIRONMENT} revisions: the newest one with an entry per wave (its
 * rollout may still be going on), each older one folded into a single entry without a wave, which
 * covers every wave ({@link findCommitted}). So a fleet of many waves keeps as many revisions for
 * the loop guard as a plain environment does, in at most `MAX_WAVES + MAX_COMMITTED_PER_ENVIRONMENT - 1`
 * entries per environment.
 */
export function withCommitted(committed: readonly CommittedPromotion[] | undefined, entry: CommittedPromotion): CommittedPromotion[] {
  const next = [...(committed ?? []).filter((c) => c.environment !== entry.environment || c.revision !== entry.revision || c.wave !== entry.wave), entry];
  /** Per environment: its newest revision, and the revisions kept so far. */
  const seen = new Map<string, { readonly newest: string; readonly revisions: Set<string> }>();
  const result: CommittedPromotion[] = [];
  for (let i = next.length - 1; i >= 0; i--) {
    const c = next[i];
    if (c === undefined) continue;
    let env = seen.get(c.environment);
    if (env === undefined) {
      env = { newest: c.revision, revisions: new Set() };
      seen.set(c.environment, env);
    }
    if (c.revision === env.newest) {
      env.revisions.add(c.revision);
      result.push(c);
      continue;
    }
    if (env.revisions.has(c.revision) || env.revisions.size >= MAX_COMMITTED_PER_ENVIRONMENT) continue;
    env.revisions.add(c.revision);
    // The newest entry of an older revision stands for its whole rollout.
    const { wave: _wave, ...folded } = c;
    result.push(folded);
  }
  return result.reverse();
}

/** The halt in force: recorded at the Pipeline's current generation (a spec change lifts it). */
export function activeHalt(status: PipelineStatus | undefined, generation: number): PromotionHalt | undefined {
  const halted = status?.halted;
  return halted?.generation === generation ? halted : undefined;
}

/** The Promoting condition while promotions are stopped. */
export function haltCondition(halt: PromotionHalt, generation: number): ConditionInput {
  return { type: PROMOTING, status: 'False', reason: halt.reason, message: halt.message, observedGeneration: generation };
}
