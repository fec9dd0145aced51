/**
 * The pipeline-promotion controller built on the registry: the `Pipeline` API (fleetcache.dev/
 * v1alpha1) and its validation, status computed level-triggered from the registry's caches, and
 * promotion of a revision from each environment to the next (patch, webhook, or a commit or pull
 * request in Git), restart-safe, with optional approval gates, optionally sharded across replicas. Published as `fleetcache/pipeline`,
 * apart from the root, for those who embed the service's controller or read its API; an operator
 * writing its own controller needs only `fleetcache`. Git (`lib/gitops`) stays internal: only the
 * options the controller takes for it are named here.
 */
export { PipelineController } from './controller.ts';
export type { GitPromoterOptions, UrlPolicy } from '../gitops/index.ts';
export type { PipelineControllerOptions, PipelineControllerStats, PromotionRequest } from './controller.ts';
export { PromotionError, WebhookRefusedError } from './errors.ts';
export { NotShardOwnerError, pipelineShardKey, REASON_ORPHANED, REASON_OWNED, SHARD_OWNED } from './shard.ts';
export type { PipelineShardBy, PipelineShardChange, PipelineShardOptions, PipelineShardOrphan, PipelineShardOrphans, PipelineShardOwnership } from './shard.ts';
export { APPROVE_VERB, ApprovalError, approvalEvent, LEGACY_APPROVAL_PREFIX, recordApproval, recordRetry, retryEvent } from './approval.ts';
export type { ApprovalClient, ApprovalRefusal, ApprovalRequest, RecordApprovalOptions, RecordedApproval, RecordedRetry } from './approval.ts';
export type { WebhookRefusal } from './errors.ts';
export { PIPELINE_GVK, MAX_APPROVALS_PER_ENVIRONMENT, MAX_PROMOTIONS_PER_ENVIRONMENT, MAX_COMMITTED_PER_ENVIRONMENT, MAX_RETRIES_PER_ENVIRONMENT } from './types.ts';
export { PromotionRefusedError, DEFAULT_LOOP_POLICY } from './guard.ts';
export type { LoopPolicy } from './guard.ts';
export { isCommitReference } from './flux.ts';
export { DEFAULT_PROGRESSING_GRACE_MS } from './grace.ts';
export { DEFAULT_APPLY_TIMEOUT_MS } from './decide.ts';
export type {
  Approval,
  Approver,
  CommittedPromotion,
  Condition,
  EnvironmentStatus,
  GitPromotion,
  PatchPromotion,
  Pipeline,
  PipelineClusterRef,
  PipelineEnvironment,
  PipelinePromotion,
  PipelineSpec,
  PipelineStatus,
  PipelineTarget,
  NotReadyReason,
  PromotionHalt,
  PromotionRecord,
  PromotionState,
  RetryMark,
  TargetStatus,
  WaveRetry,
  WebhookPromotion,
} from './types.ts';
export { validatePipelineSpec } from './validate.ts';
export { pipelineCrd } from './crd.ts';
export { AppKinds, DEFAULT_APP_KINDS } from './app-kinds.ts';
export type { ResolvedEnvironment, ResolvedGitPromotion, ResolvedPromotion, ResolvedTarget, SpecValidation, ValidationPolicy, ValidPipelineSpec } from './validate.ts';
export { isObjectReady, readinessOf, isRevision, MAX_REVISION_LENGTH, NOT_A_REVISION, objectRevision, readRevision } from './observe.ts';
export type { Readiness, RevisionRead } from './observe.ts';
