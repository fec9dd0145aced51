import type { RequestOptions } from '../transport/index.ts';
import { apiVersionOf, FleetcacheError, KubeApiError, positiveInteger, sanitizeForDisplay, type Clock } from '../util/index.ts';
import { isRevision, MAX_REVISION_LENGTH } from './observe.ts';
import { MAX_APPROVALS_PER_ENVIRONMENT, MAX_RETRIES_PER_ENVIRONMENT, PIPELINE_GVK, type Approval, type Approver, type Pipeline, type PipelineStatus, type PromotionRecord, type WaveRetry } from './types.ts';

// Approvals are a right apart from editing a Pipeline (Kargo's `promote` verb is the anchor): the
// verb `approve` on `pipelines`, which the API server decides in a SubjectAccessReview, and a
// record in the status subresource, which a Pipeline's editors cannot write. The service checks
// the right and writes the record; the controller promotes into an environment that requires
// approval only when such a record names that environment and revision.

/** The RBAC verb that allows approving promotions of a Pipeline (group fleetcache.dev, resource pipelines). */
export const APPROVE_VERB = 'approve';

/**
 * The annotation that approved before approvals were a right of their own. It no longer approves
 * anything: whoever may patch the Pipeline could set it. It is only named in the message that says
 * how to approve.
 */
export const LEGACY_APPROVAL_PREFIX = 'fleetcache.dev/approve-';

/** An approval found for a promotion: who and when. */
export interface FoundApproval {
  readonly approver: Approver;
  readonly approvedAt: string;
}

/**
 * The approval of `revision` for `environment`: the oldest such record of `status.approvals`, or,
 * for a promotion already under way (Pending) whose approval has since been dropped from that
 * bounded list, the approval its record carries.
 */
export function findApproval(status: PipelineStatus | undefined, environment: string, revision: string): FoundApproval | undefined {
  const approval = (status?.approvals ?? []).find((a) => a.environment === environment && a.revision === revision);
  if (approval !== undefined) return { approver: approval.approver, approvedAt: approval.approvedAt };
  const pending = (status?.promotions ?? []).findLast((r) => r.environment === environment && r.revision === revision);
  if (pending?.state === 'Pending' && pending.approvedBy !== undefined && pending.approvedAt !== undefined) return { approver: pending.approvedBy, approvedAt: pending.approvedAt };
  return undefined;
}

/**
 * `approvals` with `approval` appended (unless one for its environment and revision is there: the
 * first approver stays on record), then only the newest {@link MAX_APPROVALS_PER_ENVIRONMENT} per
 * environment kept.
 */
export function withApproval(approvals: readonly Approval[], approval: Approval): Approval[] {
  if (approvals.some((a) => a.environment === approval.environment && a.revision === approval.revision)) return [...approvals];
  const next = [...approvals, approval];
  const kept = new Map<string, number>();
  const result: Approval[] = [];
  for (let i = next.length - 1; i >= 0; i--) {
    const a = next[i];
    if (a === undefined) continue;
    const count = kept.get(a.environment) ?? 0;
    if (count >= MAX_APPROVALS_PER_ENVIRONMENT) continue;
    kept.set(a.environment, count + 1);
    result.push(a);
  }
  return result.reverse();
}

/** The fields of a promotion record that say it was approved (none without an approval). */
export function approvedFields(approval: FoundApproval | undefined): { readonly approved?: true; readonly approvedBy?: Approver; readonly approvedAt?: string } {
  return approval === undefined ? {} : { approved: true, approvedBy: approval.approver, approvedAt: approval.approvedAt };
}

/** How to approve `revision` for `environment`: the text of the AwaitingApproval condition and Event. */
export function howToApprove(environment: string, revision: string): string {
  return `someone allowed the verb ${APPROVE_VERB} on this Pipeline (ClusterRole fleetcache-pipeline-approver) approves ${revision} for ${environment} with the dashboard's Approve button or POST /dashboard/api/approve`;
}

/**
 * A note for a Pipeline that still carries the old approval annotation for `environment`: it is
 * ignored (anyone who may patch the Pipeline could set it). Undefined when there is none.
 */
export function legacyAnnotationNote(pipeline: Pipeline, environment: string): string | undefined {
  const annotations = pipeline.metadata?.annotations;
  if (typeof annotations !== 'object' || annotations === null) return undefined;
  const key = `${LEGACY_APPROVAL_PREFIX}${environment}`;
  if (!Object.hasOwn(annotations, key)) return undefined;
  return `the annotation ${key} no longer approves (since approvals became the verb ${APPROVE_VERB}) and is ignored`;
}

/** What an approval request asks for. */
export interface ApprovalRequest {
  readonly namespace: string;
  readonly name: string;
  readonly environment: string;
  readonly revision: string;
  /** Who approves: the user a TokenReview authenticated and a SubjectAccessReview allowed. */
  readonly approver: Approver;
}

/** Why an approval was not recorded. */
export type ApprovalRefusal =
  /** No such Pipeline (said only to callers allowed to approve it). */
  | 'PipelineNotFound'
  /** The Pipeline has no such environment, or it does not require approval, or the revision is not one. */
  | 'InvalidApproval'
  /** The status kept changing under every attempt to write it. */
  | 'Conflict';

const REFUSAL_CODES: Readonly<Record<ApprovalRefusal, string>> = {
  PipelineNotFound: 'ERR_APPROVAL_PIPELINE_NOT_FOUND',
  InvalidApproval: 'ERR_APPROVAL_INVALID',
  Conflict: 'ERR_APPROVAL_CONFLICT',
};

/** An approval that could not be recorded: `reason` says why, the message is for the caller. */
export class ApprovalError extends FleetcacheError {
  readonly reason: ApprovalRefusal;
  constructor(reason: ApprovalRefusal, message: string, options?: ErrorOptions) {
    super(REFUSAL_CODES[reason], message, options);
    this.reason = reason;
  }
}

/** The subset of a connection that approvals use: requests to the management cluster as the service. */
export interface ApprovalClient {
  request(options: RequestOptions): Promise<unknown>;
}

/** Options of {@link recordApproval}. */
export interface RecordApprovalOptions {
  /** The management cluster, as the service (which may update `pipelines/status`). Required. */
  readonly client: ApprovalClient;
  /** Required: the approval's time. */
  readonly clock: Clock;
  /** Writes tried against concurrent writers of the status. Default 5. */
  readonly attempts?: number;
  readonly signal?: AbortSignal;
}

/** The outcome of {@link recordApproval}. */
export interface RecordedApproval {
  readonly approval: Approval;
  /** False when an approval of that environment and revision was on record already (it is kept). */
  readonly created: boolean;
  /** The Pipeline as last read or written. */
  readonly pipeline: Pipeline;
}

function pipelinePath(namespace: string, name: string, subresource = ''): string {
  return `/apis/${PIPELINE_GVK.group}/${PIPELINE_GVK.version}/namespaces/${encodeURIComponent(namespace)}/pipelines/${encodeURIComponent(name)}${subresource}`;
}

/** Names of the environments of a (not yet validated) spec that require approval, and all names. */
function environmentsOf(spec: unknown): { readonly all: ReadonlySet<string>; readonly gated: ReadonlySet<string> } {
  const all = new Set<string>();
  const gated = new Set<string>();
  const list = typeof spec === 'object' && spec !== null ? (spec as { environments?: unknown }).environments : undefined;
  for (const env of Array.isArray(list) ? list as unknown[] : []) {
    if (typeof env !== 'object' || env === null) continue;
    const { name, requireApproval, fleet } = env as { name?: unknown; requireApproval?: unknown; fleet?: unknown };
    if (typeof name !== 'string') continue;
    all.add(name);
    if (requireApproval === true) gated.add(name);
    // A wave that requires its own approval is approved as `<environment>/<wave>`.
    const waves: unknown = typeof fleet === 'object' && fleet !== null ? (fleet as { waves?: unknown }).waves : undefined;
    for (const wave of Array.isArray(waves) ? waves as unknown[] : []) {
      if (typeof wave !== 'object' || wave === null) continue;
      const { name: waveName, requireApproval: waveGated } = wave as { name?: unknown; requireApproval?: unknown };
      if (typeof waveName !== 'string') continue;
      all.add(`${name}/${waveName}`);
      if (waveGated === true) gated.add(`${name}/${waveName}`);
    }
  }
  return { all, gated };
}

/** RFC 3339 with second precision, as Kubernetes writes times. */
function rfc3339(ms: number): string {
  return new Date(Math.floor(ms / 1_000) * 1_000).toISOString().replace('.000Z', 'Z');
}

/**
 * Records that `request.approver` approved `request.revision` for `request.environment` in the
 * Pipeline's `status.approvals`: read, then PUT on the status subresource conditional on the
 * resourceVersion read, again on a conflict. The caller has checked the approver's right.
 *
 * @throws {ApprovalError} `PipelineNotFound`, `InvalidApproval` (no such environment, one that does
 *   not require approval, not a revision), `Conflict` (every attempt lost a race); a
 *   {@link KubeApiError} for anything else the API server refused.
 */
export async function recordApproval(request: ApprovalRequest, options: RecordApprovalOptions): Promise<RecordedApproval> {
  if (!isRevision(request.revision)) throw new ApprovalError('InvalidApproval', `revision is not a revision (one printable token without spaces, at most ${MAX_REVISION_LENGTH} characters)`);
  const written = await updateStatus(request, options, (pipeline) => {
    const { all, gated } = environmentsOf(pipeline.spec);
    if (!all.has(request.environment)) throw new ApprovalError('InvalidApproval', `the Pipeline has no environment ${sanitizeForDisplay(request.environment, 100)}`);
    if (!gated.has(request.environment)) throw new ApprovalError('InvalidApproval', `environment ${request.environment} does not require approval`);
    const existing = (pipeline.status?.approvals ?? []).find((a) => a.environment === request.environment && a.revision === request.revision);
    if (existing !== undefined) return { result: existing };
    const approval: Approval = { environment: request.environment, revision: request.revision, approver: approverOf(request.approver), approvedAt: rfc3339(options.clock.now()) };
    return { result: approval, status: { ...pipeline.status, approvals: withApproval(pipeline.status?.approvals ?? [], approval) } };
  });
  return { approval: written.result, created: written.created, pipeline: written.pipeline };
}

/** The approver as recorded: an empty uid is left out. */
function approverOf(approver: Approver): Approver {
  return { username: approver.username, ...(approver.uid === undefined || approver.uid === '' ? {} : { uid: approver.uid }) };
}

/**
 * Reads the Pipeline, lets `change` decide (a `status` to write, or none when the result is on
 * record already), then PUTs the status subresource conditional on the resourceVersion read, again
 * on a conflict (at most `options.attempts` times).
 */
async function updateStatus<T>(
  where: { readonly namespace: string; readonly name: string },
  options: RecordApprovalOptions,
  change: (pipeline: Pipeline) => { readonly result: T; readonly status?: PipelineStatus },
): Promise<{ readonly result: T; readonly created: boolean; readonly pipeline: Pipeline }> {
  const attempts = positiveInteger('recordApproval', 'attempts', options.attempts ?? 5);
  const path = pipelinePath(where.namespace, where.name);
  const signal = options.signal === undefined ? {} : { signal: options.signal };
  for (let attempt = 1; ; attempt++) {
    let pipeline: Pipeline;
    try {
      pipeline = await options.client.request({ method: 'GET', path, gvk: PIPELINE_GVK, ...signal }) as Pipeline;
    } catch (err) {
      if (err instanceof KubeApiError && err.statusCode === 404) throw new ApprovalError('PipelineNotFound', `Pipeline ${where.namespace}/${where.name} not found`, { cause: err });
      throw err;
    }
    const { result, status } = change(pipeline);
    if (status === undefined) return { result, created: false, pipeline };
    try {
      const written = await options.client.request({
        method: 'PUT',
        path: pipelinePath(where.namespace, where.name, '/status'),
        body: JSON.parse(JSON.stringify({ ...pipeline, status })) as unknown,
        gvk: PIPELINE_GVK,
        ...signal,
      }) as Pipeline;
      return { result, created: true, pipeline: written };
    } catch (err) {
      if (!(err instanceof KubeApiError && err.statusCode === 409)) throw err;
      if (attempt >= attempts) throw new ApprovalError('Conflict', `the Pipeline's status kept changing: ${attempts} attempts lost a race`, { cause: err });
    }
  }
}

// --- Retries of a stopped wave: the same right (the verb approve), the same kind of record. ---

/**
 * The newest record of `wave` of `environment` at `revision` when the rollout stopped there: it was
 * carried out (`committedAt`) and then `Failed` (not ready within the apply timeout). A wave whose
 * action failed before it was carried out is retried with backoff by itself.
 */
export function stoppedWave(records: readonly PromotionRecord[], environment: string, wave: string, revision: string): PromotionRecord | undefined {
  const record = records.findLast((r) => r.environment === environment && r.wave === wave && r.revision === revision);
  return record?.state === 'Failed' && record.committedAt !== undefined ? record : undefined;
}

/** The retry of `record` (a stopped wave's) on record in `status.retries`, if any: it names the failed attempt. */
export function findRetry(status: PipelineStatus | undefined, record: PromotionRecord): WaveRetry | undefined {
  return (status?.retries ?? []).find((r) => r.environment === record.environment && r.wave === record.wave && r.revision === record.revision && r.attempt === record.attempts);
}

/** `retries` with `retry` appended, then only the newest {@link MAX_RETRIES_PER_ENVIRONMENT} per environment kept. */
export function withRetry(retries: readonly WaveRetry[], retry: WaveRetry): WaveRetry[] {
  const next = [...retries, retry];
  const kept = new Map<string, number>();
  const result: WaveRetry[] = [];
  for (let i = next.length - 1; i >= 0; i--) {
    const r = next[i];
    if (r === undefined) continue;
    const count = kept.get(r.environment) ?? 0;
    if (count >= MAX_RETRIES_PER_ENVIRONMENT) continue;
    kept.set(r.environment, count + 1);
    result.push(r);
  }
  return result.reverse();
}

/** How to carry a stopped wave out again: the end of its Promoting=False message. */
export function howToRetry(environment: string, wave: string, revision: string): string {
  return `someone allowed the verb ${APPROVE_VERB} on this Pipeline retries ${environment}/${wave} at ${revision} with the dashboard's Retry button or POST /dashboard/api/approve with "action": "retry"`;
}

/** The outcome of {@link recordRetry}. */
export interface RecordedRetry {
  readonly retry: WaveRetry;
  /** False when a retry of that failed attempt was on record already (it is kept). */
  readonly created: boolean;
  readonly pipeline: Pipeline;
}

/**
 * Records that `request.approver` asks to carry out again the wave `request.environment`
 * (`<environment>/<wave>`) at `request.revision`, whose rollout stopped there: a {@link WaveRetry}
 * naming the failed attempt, in `status.retries`. The controller then carries the wave out once
 * more (one new attempt) and the rollout continues when it is ready. The caller has checked the
 * right (the verb `approve`).
 *
 * @throws {ApprovalError} `PipelineNotFound`; `InvalidApproval` (not `<environment>/<wave>` of the
 *   spec, not a revision, or the wave's rollout of that revision is not stopped there); `Conflict`.
 */
export async function recordRetry(request: ApprovalRequest, options: RecordApprovalOptions): Promise<RecordedRetry> {
  if (!isRevision(request.revision)) throw new ApprovalError('InvalidApproval', `revision is not a revision (one printable token without spaces, at most ${MAX_REVISION_LENGTH} characters)`);
  const [environment, wave, extra] = request.environment.split('/');
  if (environment === undefined || wave === undefined || extra !== undefined) throw new ApprovalError('InvalidApproval', 'a retry names a wave: <environment>/<wave>');
  const written = await updateStatus(request, options, (pipeline) => {
    if (!environmentsOf(pipeline.spec).all.has(request.environment)) throw new ApprovalError('InvalidApproval', `the Pipeline has no wave ${sanitizeForDisplay(request.environment, 100)}`);
    const stopped = stoppedWave(pipeline.status?.promotions ?? [], environment, wave, request.revision);
    if (stopped === undefined) throw new ApprovalError('InvalidApproval', `the rollout of ${request.revision} is not stopped at wave ${wave} of ${environment} (only a wave carried out and then failed is retried this way)`);
    const existing = findRetry(pipeline.status, stopped);
    if (existing !== undefined) return { result: existing };
    const retry: WaveRetry = { environment, wave, revision: request.revision, attempt: stopped.attempts, requestedBy: approverOf(request.approver), requestedAt: rfc3339(options.clock.now()) };
    return { result: retry, status: { ...pipeline.status, retries: withRetry(pipeline.status?.retries ?? [], retry) } };
  });
  return { retry: written.result, created: written.created, pipeline: written.pipeline };
}

/** A core/v1 Event on `pipeline` naming who approved what (the caller records it, best effort). */
export function approvalEvent(pipeline: Pipeline, approval: Approval, now: string): object {
  return personEvent(pipeline, 'PromotionApproved', `${approval.approver.username} approved ${approval.revision} for ${approval.environment}`, now);
}

/** A core/v1 Event `WaveRetryRequested` on `pipeline` naming who asked to retry which wave (the caller records it, best effort). */
export function retryEvent(pipeline: Pipeline, retry: WaveRetry, now: string): object {
  return personEvent(pipeline, 'WaveRetryRequested', `${retry.requestedBy.username} asked to carry out wave ${retry.wave} of ${retry.environment} at ${retry.revision} again (attempt ${retry.attempt} had failed)`, now);
}

function personEvent(pipeline: Pipeline, reason: string, message: string, now: string): object {
  const meta = pipeline.metadata ?? {};
  const namespace = meta.namespace ?? '';
  return {
    apiVersion: 'v1',
    kind: 'Event',
    metadata: { generateName: `${meta.name ?? 'pipeline'}.`, namespace },
    involvedObject: { apiVersion: apiVersionOf(PIPELINE_GVK), kind: PIPELINE_GVK.kind, namespace, name: meta.name, uid: meta.uid, resourceVersion: meta.resourceVersion },
    type: 'Normal',
    reason,
    message: sanitizeForDisplay(message, 1_000),
    source: { component: 'fleetcache' },
    firstTimestamp: now,
    lastTimestamp: now,
    count: 1,
  };
}
