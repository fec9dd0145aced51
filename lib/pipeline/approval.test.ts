import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { RequestOptions } from '../transport/index.ts';
import { FakeClock, KubeApiError } from '../util/index.ts';
import { ApprovalError, approvedFields, findApproval, legacyAnnotationNote, recordApproval, recordRetry, withApproval, withRetry, type ApprovalClient } from './approval.ts';
import { MAX_APPROVALS_PER_ENVIRONMENT, MAX_RETRIES_PER_ENVIRONMENT, PIPELINE_GVK, type Approval, type Pipeline, type WaveRetry } from './types.ts';

const PATH = '/apis/fleetcache.dev/v1alpha1/namespaces/team-a/pipelines/shop';

function approval(environment: string, revision: string, username = 'alice'): Approval {
  return { environment, revision, approver: { username }, approvedAt: '2026-01-01T00:00:00Z' };
}

/**
 * One Pipeline behind a client that answers as the API server does: GET returns it, PUT on
 * /status with a stale resourceVersion is 409, else only status changes and the version moves on.
 * `interfere` runs before each PUT (a concurrent writer).
 */
class OnePipeline implements ApprovalClient {
  object: Record<string, unknown> | undefined;
  rv = 1;
  readonly requests: RequestOptions[] = [];
  interfere: () => void = () => undefined;

  constructor(spec: unknown, status: Record<string, unknown> = {}) {
    this.object = { apiVersion: 'fleetcache.dev/v1alpha1', kind: 'Pipeline', metadata: { namespace: 'team-a', name: 'shop', uid: 'u-1', resourceVersion: '1' }, spec, status };
  }

  bump(): void {
    this.rv += 1;
    (this.object?.metadata as Record<string, unknown>).resourceVersion = String(this.rv);
  }

  request(options: RequestOptions): Promise<unknown> {
    this.requests.push(options);
    const notFound = (): Promise<never> => Promise.reject(new KubeApiError({ cluster: 'local', gvk: PIPELINE_GVK, statusCode: 404, status: { reason: 'NotFound' } }));
    if (this.object === undefined) return notFound();
    if (options.method === 'GET' && options.path === PATH) return Promise.resolve(structuredClone(this.object));
    if (options.method === 'PUT' && options.path === `${PATH}/status`) {
      this.interfere();
      const body = options.body as Pipeline;
      if (body.metadata?.resourceVersion !== String(this.rv)) return Promise.reject(new KubeApiError({ cluster: 'local', gvk: PIPELINE_GVK, statusCode: 409, status: { reason: 'Conflict' } }));
      this.object = { ...this.object, status: body.status };
      this.bump();
      return Promise.resolve(structuredClone(this.object));
    }
    return Promise.reject(new Error(`unexpected ${options.method} ${options.path}`));
  }
}

const gatedSpec = { environments: [{ name: 'dev', targets: [] }, { name: 'prod', targets: [], requireApproval: true }] };
const request = { namespace: 'team-a', name: 'shop', environment: 'prod', revision: '1.2.0', approver: { username: 'alice', uid: 'uid-alice' } };

describe('approvals', () => {
  it('records an approval in status only, naming the approver and the time, conditional on the resourceVersion read', async () => {
    const promotions = [{ environment: 'prod', revision: '1.2.0', strategy: 'patch', state: 'AwaitingApproval', attempts: 0, startedAt: '2026-01-01T00:00:00Z' }];
    const api = new OnePipeline(gatedSpec, { observedGeneration: 3, promotions });
    const out = await recordApproval(request, { client: api, clock: new FakeClock(Date.parse('2026-02-03T04:05:06.789Z')) });
    assert.equal(out.created, true);
    assert.deepEqual(out.approval, { environment: 'prod', revision: '1.2.0', approver: { username: 'alice', uid: 'uid-alice' }, approvedAt: '2026-02-03T04:05:06Z' });
    const status = api.object?.status as Record<string, unknown>;
    assert.deepEqual(status.approvals, [out.approval]);
    assert.deepEqual(status.promotions, promotions, 'the rest of status is kept');
    assert.equal(status.observedGeneration, 3);
    const put = api.requests.find((r) => r.method === 'PUT');
    assert.equal((put?.body as Pipeline).metadata?.resourceVersion, '1', 'the write carries the version it read');
  });

  it('reads again and retries when someone wrote first, and gives up with Conflict after its attempts', async () => {
    const api = new OnePipeline(gatedSpec);
    let races = 2;
    api.interfere = () => { if (races-- > 0) api.bump(); };
    const out = await recordApproval(request, { client: api, clock: new FakeClock(0) });
    assert.equal(out.created, true);
    assert.equal(api.requests.filter((r) => r.method === 'GET').length, 3);

    const busy = new OnePipeline(gatedSpec);
    busy.interfere = () => { busy.bump(); };
    await assert.rejects(recordApproval(request, { client: busy, clock: new FakeClock(0), attempts: 2 }), (err: unknown) => err instanceof ApprovalError && err.reason === 'Conflict' && err.code === 'ERR_APPROVAL_CONFLICT');
    assert.equal(busy.requests.filter((r) => r.method === 'PUT').length, 2);
  });

  it('keeps the first approval of a revision and writes nothing again', async () => {
    const first = approval('prod', '1.2.0', 'bob');
    const api = new OnePipeline(gatedSpec, { approvals: [first] });
    const out = await recordApproval(request, { client: api, clock: new FakeClock(0) });
    assert.equal(out.created, false);
    assert.deepEqual(out.approval, first);
    assert.equal(api.requests.filter((r) => r.method === 'PUT').length, 0);
  });

  it('refuses a missing Pipeline, an unknown environment, one that needs no approval, and what is not a revision', async () => {
    const gone = new OnePipeline(gatedSpec);
    gone.object = undefined;
    await assert.rejects(recordApproval(request, { client: gone, clock: new FakeClock(0) }), (err: unknown) => err instanceof ApprovalError && err.reason === 'PipelineNotFound');
    const api = new OnePipeline(gatedSpec);
    await assert.rejects(recordApproval({ ...request, environment: 'qa' }, { client: api, clock: new FakeClock(0) }), (err: unknown) => err instanceof ApprovalError && err.reason === 'InvalidApproval' && err.message.includes('no environment qa'));
    await assert.rejects(recordApproval({ ...request, environment: 'dev' }, { client: api, clock: new FakeClock(0) }), (err: unknown) => err instanceof ApprovalError && err.reason === 'InvalidApproval' && err.message.includes('does not require approval'));
    await assert.rejects(recordApproval({ ...request, revision: '1.2.0 now' }, { client: api, clock: new FakeClock(0) }), (err: unknown) => err instanceof ApprovalError && err.reason === 'InvalidApproval');
    assert.equal(api.requests.filter((r) => r.method === 'PUT').length, 0);
    await assert.rejects(recordApproval(request, { client: api, clock: new FakeClock(0), attempts: 0 }), TypeError);
  });

  it('passes other API errors through', async () => {
    const api = new OnePipeline(gatedSpec);
    api.request = () => Promise.reject(new KubeApiError({ cluster: 'local', gvk: PIPELINE_GVK, statusCode: 403, status: { reason: 'Forbidden' } }));
    await assert.rejects(recordApproval(request, { client: api, clock: new FakeClock(0) }), (err: unknown) => err instanceof KubeApiError && err.statusCode === 403);
  });

  it('finds an approval by environment and revision, or in the record of a promotion already under way', () => {
    const status = { approvals: [approval('prod', '1.1.0'), approval('staging', '1.2.0')] };
    assert.equal(findApproval(status, 'prod', '1.2.0'), undefined, 'another revision does not count');
    assert.equal(findApproval(status, 'staging', '1.1.0'), undefined, 'another environment does not count');
    assert.deepEqual(findApproval(status, 'prod', '1.1.0'), { approver: { username: 'alice' }, approvedAt: '2026-01-01T00:00:00Z' });
    const pending = { promotions: [{ environment: 'prod', revision: '1.3.0', strategy: 'patch' as const, state: 'Pending' as const, attempts: 1, startedAt: 'x', approved: true, approvedBy: { username: 'carol' }, approvedAt: 't' }] };
    assert.deepEqual(findApproval(pending, 'prod', '1.3.0'), { approver: { username: 'carol' }, approvedAt: 't' });
    assert.equal(findApproval(pending, 'prod', '1.4.0'), undefined, 'the approval a promotion under way carries opens no gate for a newer revision');
    const failed = { promotions: [{ ...pending.promotions[0]!, state: 'Failed' as const }] };
    assert.equal(findApproval(failed, 'prod', '1.3.0'), undefined, 'only a promotion under way carries its approval on');
    assert.equal(findApproval(undefined, 'prod', '1.1.0'), undefined);
    assert.deepEqual(approvedFields(findApproval(status, 'prod', '1.1.0')), { approved: true, approvedBy: { username: 'alice' }, approvedAt: '2026-01-01T00:00:00Z' });
    assert.deepEqual(approvedFields(undefined), {});
  });

  it('keeps the newest approvals per environment, within the bound', () => {
    let approvals: Approval[] = [approval('dev', 'd1')];
    for (let i = 0; i < MAX_APPROVALS_PER_ENVIRONMENT + 5; i++) approvals = withApproval(approvals, approval('prod', `p${i}`));
    assert.equal(approvals.filter((a) => a.environment === 'prod').length, MAX_APPROVALS_PER_ENVIRONMENT);
    assert.equal(approvals.find((a) => a.environment === 'prod')?.revision, 'p5', 'the oldest went first');
    assert.equal(approvals.at(-1)?.revision, `p${MAX_APPROVALS_PER_ENVIRONMENT + 4}`);
    assert.ok(approvals.some((a) => a.environment === 'dev'), 'other environments are kept');
    assert.deepEqual(withApproval(approvals, approval('prod', 'p14', 'mallory')), approvals, 'an approval on record is not replaced');
  });

  it('names the old annotation as ignored', () => {
    const with_ = { metadata: { annotations: { 'fleetcache.dev/approve-prod': '1.2.0' } } };
    assert.match(legacyAnnotationNote(with_, 'prod') ?? '', /fleetcache\.dev\/approve-prod no longer approves/);
    assert.equal(legacyAnnotationNote(with_, 'staging'), undefined);
    assert.equal(legacyAnnotationNote({}, 'prod'), undefined);
  });
  it('approves a wave that requires its own approval as <environment>/<wave>, and no other wave', async () => {
    const spec = { environments: [{ name: 'dev', targets: [] }, { name: 'prod', fleet: { namespace: 'app', clusters: [], waves: [{ name: 'canary', count: 1 }, { name: 'rest', count: 1, requireApproval: true }] } }] };
    const api = new OnePipeline(spec);
    const out = await recordApproval({ ...request, environment: 'prod/rest' }, { client: api, clock: new FakeClock(0) });
    assert.equal(out.approval.environment, 'prod/rest');
    assert.ok(findApproval(api.object?.status as Pipeline['status'], 'prod/rest', '1.2.0') !== undefined);
    await assert.rejects(recordApproval({ ...request, environment: 'prod/canary' }, { client: api, clock: new FakeClock(0) }), (err: unknown) => err instanceof ApprovalError && err.reason === 'InvalidApproval' && err.message.includes('does not require approval'));
    await assert.rejects(recordApproval({ ...request, environment: 'prod/late' }, { client: api, clock: new FakeClock(0) }), (err: unknown) => err instanceof ApprovalError && err.message.includes('no environment prod/late'));
  });
});

describe('wave retries', () => {
  const spec = { environments: [{ name: 'dev', targets: [] }, { name: 'prod', fleet: { namespace: 'app', clusters: [], waves: [{ name: 'canary', count: 1 }, { name: 'rest', count: 1 }] } }] };
  const record = (wave: string, state: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({ environment: 'prod', wave, revision: '1.2.0', strategy: 'patch', state, attempts: 1, startedAt: '2026-01-01T00:00:00Z', ...extra });
  const retryOf = { ...request, environment: 'prod/canary' };

  it('records a retry of a wave stopped at the revision, naming who, when and the failed attempt; once per failed attempt', async () => {
    const api = new OnePipeline(spec, { promotions: [record('canary', 'Failed', { committedAt: '2026-01-01T00:00:00Z', attempts: 2 })] });
    const out = await recordRetry(retryOf, { client: api, clock: new FakeClock(Date.parse('2026-02-03T04:05:06.789Z')) });
    assert.equal(out.created, true);
    assert.deepEqual(out.retry, { environment: 'prod', wave: 'canary', revision: '1.2.0', attempt: 2, requestedBy: { username: 'alice', uid: 'uid-alice' }, requestedAt: '2026-02-03T04:05:06Z' });
    assert.deepEqual((api.object?.status as Pipeline['status'])?.retries, [out.retry]);
    const again = await recordRetry({ ...retryOf, approver: { username: 'bob' } }, { client: api, clock: new FakeClock(0) });
    assert.equal(again.created, false, 'the first retry of that attempt stays on record');
    assert.equal(again.retry.requestedBy.username, 'alice');
    assert.equal(api.requests.filter((r) => r.method === 'PUT').length, 1);
  });

  it('refuses what is not a stopped wave: a bare environment, an unknown wave, a wave in flight, ready, or failed before it was carried out', async () => {
    const api = new OnePipeline(spec, { promotions: [record('canary', 'Committed', { committedAt: '2026-01-01T00:00:00Z' }), record('rest', 'Failed', { finishedAt: '2026-01-01T00:00:00Z' })] });
    const refused = (r: typeof request, text: string): Promise<void> => assert.rejects(recordRetry(r, { client: api, clock: new FakeClock(0) }), (err: unknown) => err instanceof ApprovalError && err.reason === 'InvalidApproval' && err.message.includes(text));
    await refused({ ...request, environment: 'prod' }, '<environment>/<wave>');
    await refused({ ...request, environment: 'prod/late' }, 'no wave prod/late');
    await refused(retryOf, 'not stopped at wave canary of prod');
    await refused({ ...request, environment: 'prod/rest' }, 'not stopped at wave rest');
    await refused({ ...retryOf, revision: '1.3.0' }, 'not stopped');
    assert.equal(api.requests.filter((r) => r.method === 'PUT').length, 0);
  });

  it('keeps the newest retries per environment, within the bound', () => {
    let retries: WaveRetry[] = [];
    for (let i = 0; i < MAX_RETRIES_PER_ENVIRONMENT + 3; i++) retries = withRetry(retries, { environment: 'prod', wave: 'canary', revision: `r${i}`, attempt: 1, requestedBy: { username: 'a' }, requestedAt: '2026-01-01T00:00:00Z' });
    assert.equal(retries.length, MAX_RETRIES_PER_ENVIRONMENT);
    assert.equal(retries[0]?.revision, 'r3');
  });
});
