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

/** True when `committed` holds ⟨environment, revision⟩ (of `wave`, for a wave; a record without a wave otherwise). */
export function wasCommitted(committed: readonly CommittedPromotion[] | undefined, environment: string, revision: string, wave?: string): boolean {
  return committed?.some((c) => c.environment === environment && c.revision === revision && c.wave === wave) === true;
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
  const earlier = committed?.find((c) => c.environment === environment && c.revision === revision && c.wave === request.wave);
  if (earlier !== undefined) {
    throw new PromotionRefusedError('PromotionLoop', environment, `refused a second promotion of ${revision} to ${environment}${request.wave === undefined ? '' : ` wave ${request.wave}`}: carried out already at ${earlier.at}${earlier.commit === undefined ? '' : ` (commit ${earlier.commit.slice(0, 12)})`}`);
  }
  // Promotions before the last halt do not count again once a spec change lifted it.
  const lifted = request.haltedAt === undefined ? Number.NEGATIVE_INFINITY : Date.parse(request.haltedAt);
  const since = Math.max(now - policy.windowMs, Number.isNaN(lifted) ? Number.NEGATIVE_INFINITY : lifted);
  // Revisions, not entries: the waves of one rollout are one promotion of the environment.
  const recent = new Set((committed ?? []).filter((c) => c.environment === environment && Date.parse(c.at) > since).map((c) => c.revision)).size;
  if (recent >= policy.maxPerEnvironment) {
    throw new PromotionRefusedError('PromotionLoop', environment, `stopped promoting: ${environment} was promoted ${recent} times within ${Math.round(policy.windowMs / 1_000)} s (at most ${policy.maxPerEnvironment}), which looks like a loop — does the revision read change with every commit? Fix the spec; any change of it resumes promotions`);
  }
}

/** `committed` with `entry` appended, keeping the newest {@link MAX_COMMITTED_PER_ENVIRONMENT} per environment. */
export function withCommitted(committed: readonly CommittedPromotion[] | undefined, entry: CommittedPromotion): CommittedPromotion[] {
  const next = [...(committed ?? []).filter((c) => c.environment !== entry.environment || c.revision !== entry.revision || c.wave !== entry.wave), entry];
  const kept = new Map<string, number>();
  const result: CommittedPromotion[] = [];
  for (let i = next.length - 1; i >= 0; i--) {
    const c = next[i];
    if (c === undefined) continue;
    const count = kept.get(c.environment) ?? 0;
    if (count >= MAX_COMMITTED_PER_ENVIRONMENT) continue;
    kept.set(c.environment, count + 1);
    result.push(c);
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
