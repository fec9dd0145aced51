// Approvals as a right of their own, on a real apiserver with real RBAC: the service runs as the
// ServiceAccount of config/rbac with exactly its roles; the tenant's editor may do anything to
// team-a's Pipelines (create, update, patch, annotate) but not approve; an approver holds only the
// shipped ClusterRole fleetcache-pipeline-approver, bound in team-a. The editor's annotation and
// approval requests do nothing; the approver's approval is recorded under their name, and the
// promotion then proceeds and names them.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { loadAll } from 'js-yaml';
import { after, afterEach, before, describe, it } from 'node:test';
import { helmReleaseCrd } from '../../fixtures/crds/index.ts';
import { FluxStandIn, HELM_RELEASE } from '../flux/standin.ts';
import { eventually, freePort, useClusters, type AdminApi, type TestCluster } from '../harness/index.ts';
import { apiAs, dumpServiceLogOnFailure, helmRelease, HR, installServiceRbac, must, namespacedAccount, PIPELINES, release, runService, setVersion, TENANT, type PolicyRule, type ServiceRun } from './tenants.ts';
import { pipelineCrd } from '../../lib/pipeline/index.ts';

const root = new URL('../../', import.meta.url).pathname;
const APPROVER = `system:serviceaccount:${TENANT}:approver`;

interface Record_ { readonly environment: string; readonly revision: string; readonly state: string; readonly message?: string; readonly approved?: boolean; readonly approvedBy?: { readonly username: string; readonly uid?: string }; readonly approvedAt?: string }
interface PipelineView {
  readonly metadata: { readonly resourceVersion: string; readonly annotations?: Record<string, string> };
  readonly status?: {
    readonly conditions?: readonly { readonly type: string; readonly reason: string; readonly message: string }[];
    readonly environments?: readonly { readonly name: string; readonly ready: boolean; readonly revision?: string }[];
    readonly promotions?: readonly Record_[];
    readonly approvals?: readonly { readonly environment: string; readonly revision: string; readonly approver: { readonly username: string; readonly uid?: string }; readonly approvedAt: string }[];
  };
}

function tokenOf(kubeconfig: string): string {
  const token = (JSON.parse(kubeconfig) as { users: { user: { token: string } }[] }).users[0]?.user.token;
  assert.ok(token !== undefined && token !== '');
  return token;
}

/** POST an approval to the service's endpoint (HTTPS, self-signed) with `token`. */
function postApproval(url: string, token: string | undefined, body: object): Promise<{ status: number; body: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const text = JSON.stringify(body);
    const req = httpsRequest(`${url}/dashboard/api/approve`, {
      method: 'POST',
      rejectUnauthorized: false,
      headers: { 'content-type': 'application/json', ...(token === undefined ? {} : { authorization: `Bearer ${token}` }) },
    }, (res) => {
      let answer = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => { answer += chunk; });
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, body: answer === '' ? {} : JSON.parse(answer) as Record<string, unknown> }); });
    });
    req.once('error', reject);
    req.end(text);
  });
}

describe('approvals are a right of their own', () => {
  const env = useClusters(1, { namePrefix: 'approval' });
  let mgmt: TestCluster;
  let editor: AdminApi;
  let editorToken = '';
  let approverToken = '';
  let service: ServiceRun | undefined;
  let metrics = '';
  let flux: FluxStandIn | undefined;

  const readPipeline = async (): Promise<PipelineView> => (await must(mgmt, 'GET', `${PIPELINES}/shop`)).body as PipelineView;
  const newest = (p: PipelineView, environment: string): Record_ | undefined => p.status?.promotions?.findLast((r) => r.environment === environment);
  const request = { namespace: TENANT, pipeline: 'shop', environment: 'prod', revision: '1.1.0' };

  before(async () => {
    [mgmt] = env.clusters as [TestCluster];
    await mgmt.installCRDs([pipelineCrd, helmReleaseCrd]);
    const serviceKubeconfig = await installServiceRbac(mgmt, 'fleetcache-system');
    // The editor: every verb a tenant's developers usually get on Pipelines, but not approve.
    const editorKubeconfig = await namespacedAccount(mgmt, TENANT, 'editor', [
      { apiGroups: ['fleetcache.dev'], resources: ['pipelines'], verbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'] },
    ]);
    editor = apiAs(mgmt, editorKubeconfig);
    editorToken = tokenOf(editorKubeconfig);
    // The approver: only the shipped ClusterRole, bound in team-a as the README says.
    const approverKubeconfig = await mgmt.restrictedKubeconfig({ namespace: TENANT, serviceAccount: 'approver' });
    approverToken = tokenOf(approverKubeconfig);
    await must(mgmt, 'POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${TENANT}/rolebindings`, {
      metadata: { name: 'approver-approve', namespace: TENANT },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'fleetcache-pipeline-approver' },
      subjects: [{ kind: 'ServiceAccount', name: 'approver', namespace: TENANT }],
    });
    for (const ns of [`${TENANT}-dev`, `${TENANT}-prod`]) {
      await must(mgmt, 'POST', '/api/v1/namespaces', { metadata: { name: ns } }, [409]);
      await must(mgmt, 'POST', `${HR}/namespaces/${ns}/helmreleases`, helmRelease(ns, '1.0.0'));
    }
    flux = new FluxStandIn({ name: mgmt.name, kubeconfig: mgmt.adminKubeconfig, kinds: [HELM_RELEASE] });
    await flux.start();
    const port = await freePort();
    metrics = `https://127.0.0.1:${port}`;
    // The metrics server (and the dashboard with its endpoint) as shipped: HTTPS, authenticated.
    service = await runService('approval', serviceKubeconfig, [`--metrics-bind-address=127.0.0.1:${port}`, '--allow-cross-namespace-targets']);
    await must(editor, 'POST', PIPELINES, {
      apiVersion: 'fleetcache.dev/v1alpha1',
      kind: 'Pipeline',
      metadata: { name: 'shop', namespace: TENANT },
      spec: {
        appRef: { apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease', name: 'podinfo' },
        environments: [{ name: 'dev', targets: [{ namespace: `${TENANT}-dev` }] }, { name: 'prod', targets: [{ namespace: `${TENANT}-prod` }], requireApproval: true }],
        promotion: { strategy: 'patch', patch: { path: '/spec/chart/spec/version' } },
      },
    });
  }, { timeout: 300_000 });

  afterEach((t) => { dumpServiceLogOnFailure(t, service); });

  after(async () => {
    await service?.stop();
    await flux?.stop();
  });

  it('ships an approver role with only the verb, and grants the status subresource to the service alone', () => {
    const docs = readdirSync(join(root, 'config')).flatMap((dir) => readdirSync(join(root, 'config', dir)).filter((f) => f.endsWith('.yaml')).flatMap((f) => loadAll(readFileSync(join(root, 'config', dir, f), 'utf8')) as { kind?: string; metadata?: { name?: string; labels?: Record<string, string> }; rules?: PolicyRule[] }[]));
    const roles = docs.filter((d) => d.kind === 'ClusterRole' || d.kind === 'Role');
    assert.deepEqual(roles.find((r) => r.metadata?.name === 'fleetcache-pipeline-approver')?.rules, [{ apiGroups: ['fleetcache.dev'], resources: ['pipelines'], verbs: ['approve'] }]);
    const grantsStatus = roles.filter((r) => (r.rules ?? []).some((rule) => (rule.apiGroups as readonly string[] | undefined ?? []).some((g) => g === 'fleetcache.dev' || g === '*') && (rule.resources as readonly string[] | undefined ?? []).some((res) => res === 'pipelines/status' || res === 'pipelines/*' || res === '*')));
    assert.deepEqual(grantsStatus.map((r) => r.metadata?.name), ['fleetcache'], 'only the service\'s own ClusterRole');
    assert.ok(!roles.some((r) => Object.keys(r.metadata?.labels ?? {}).some((l) => l.startsWith('rbac.authorization.k8s.io/aggregate-to-'))), 'nothing aggregated into the built-in roles');
  });

  it('waits for an approval, and neither the editor\'s annotation nor the editor\'s own approval request opens the gate', async () => {
    await eventually('both environments ready at 1.0.0', async () => (await readPipeline()).status?.environments?.every((e) => e.ready && e.revision === '1.0.0') === true, 60_000);
    await setVersion(mgmt, `${TENANT}-dev`, '1.1.0');
    const waiting = await eventually('prod awaits approval of 1.1.0', async () => {
      const p = await readPipeline();
      return newest(p, 'prod')?.state === 'AwaitingApproval' && newest(p, 'prod')?.revision === '1.1.0' && p;
    }, 60_000);
    const promoting = waiting.status?.conditions?.find((c) => c.type === 'Promoting');
    assert.equal(promoting?.reason, 'AwaitingApproval');
    assert.match(promoting.message, /verb approve on this Pipeline/);

    // The old way: the editor annotates. The controller sees it, says it is ignored, and waits on.
    const current = (await must(editor, 'GET', `${PIPELINES}/shop`)).body as PipelineView & Record<string, unknown>;
    await must(editor, 'PUT', `${PIPELINES}/shop`, { ...current, metadata: { ...current.metadata, annotations: { ...current.metadata.annotations, 'fleetcache.dev/approve-prod': '1.1.0' } } });
    const ignored = await eventually('the annotation is named as ignored', async () => {
      const p = await readPipeline();
      return newest(p, 'prod')?.message?.includes('fleetcache.dev/approve-prod no longer approves') === true && p;
    }, 60_000);
    assert.equal(newest(ignored, 'prod')?.state, 'AwaitingApproval');
    assert.match(ignored.status?.conditions?.find((c) => c.type === 'Promoting')?.message ?? '', /no longer approves/);
    assert.equal((await release(mgmt, `${TENANT}-prod`)).spec.chart.spec.version, '1.0.0', 'prod untouched');

    // Writing the approval into status itself: the editor may not touch the status subresource.
    const forged = await editor.request('PUT', `${PIPELINES}/shop/status`, { ...ignored, status: { ...ignored.status, approvals: [{ ...request, approver: { username: 'mallory' }, approvedAt: '2026-01-01T00:00:00Z' }] } });
    assert.equal(forged.statusCode, 403, JSON.stringify(forged.body));
    // Through the main resource, the status in the body is dropped (the status subresource is on).
    const latest = (await must(editor, 'GET', `${PIPELINES}/shop`)).body as PipelineView & Record<string, unknown>;
    await must(editor, 'PUT', `${PIPELINES}/shop`, { ...latest, status: { ...latest.status, approvals: [{ ...request, approver: { username: 'mallory' }, approvedAt: '2026-01-01T00:00:00Z' }] } });

    // The endpoint: no token, a made-up one, and the editor's (who lacks the verb).
    assert.equal((await postApproval(metrics, undefined, request)).status, 401);
    assert.equal((await postApproval(metrics, 'made-up-token', request)).status, 401);
    const refused = await postApproval(metrics, editorToken, request);
    assert.equal(refused.status, 403, JSON.stringify(refused.body));
    assert.equal(refused.body.error, `user system:serviceaccount:${TENANT}:editor may not approve pipelines.fleetcache.dev shop in namespace ${TENANT}`);
    // The editor cannot tell a Pipeline they may not approve from one that does not exist.
    assert.equal((await postApproval(metrics, editorToken, { ...request, pipeline: 'nothing-here' })).status, 403);

    const after_ = await readPipeline();
    assert.equal(after_.status?.approvals, undefined, 'no approval recorded');
    assert.equal(newest(after_, 'prod')?.state, 'AwaitingApproval');
    assert.equal((await release(mgmt, `${TENANT}-prod`)).spec.chart.spec.version, '1.0.0', 'prod still untouched');
  });

  it('records the approver by name; the promotion then proceeds and its record names them', async () => {
    const answer = await postApproval(metrics, approverToken, request);
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    const approval = answer.body.approval as { approver: { username: string; uid?: string }; approvedAt: string };
    assert.equal(approval.approver.username, APPROVER);
    assert.ok(approval.approver.uid !== undefined && approval.approver.uid !== '', 'the ServiceAccount token carries a uid');
    const recorded = (await readPipeline()).status?.approvals ?? [];
    assert.deepEqual(recorded.map((a) => [a.environment, a.revision, a.approver.username]), [['prod', '1.1.0', APPROVER]]);

    await eventually('prod is patched to 1.1.0', async () => (await release(mgmt, `${TENANT}-prod`)).spec.chart.spec.version === '1.1.0', 60_000);
    const done = await eventually('the promotion is recorded as succeeded', async () => {
      const r = newest(await readPipeline(), 'prod');
      return r?.state === 'Succeeded' && r;
    }, 60_000);
    assert.equal(done.approved, true);
    assert.deepEqual(done.approvedBy, approval.approver);
    assert.equal(done.approvedAt, approval.approvedAt);

    const events = (await must(mgmt, 'GET', `/api/v1/namespaces/${TENANT}/events?fieldSelector=involvedObject.name%3Dshop`)).body as { items: { reason: string; message: string }[] };
    assert.ok(events.items.some((e) => e.reason === 'PromotionApproved' && e.message === `${APPROVER} approved 1.1.0 for prod`), JSON.stringify(events.items.map((e) => e.reason)));
    const logs = service?.output() ?? '';
    assert.match(logs, /approval recorded/);
    assert.match(logs, /approval refused: the verb is not allowed/);
    assert.ok(!logs.includes(approverToken) && !logs.includes(editorToken), 'no token in the logs');

    // Approving again keeps the first record.
    const again = await postApproval(metrics, approverToken, request);
    assert.equal(again.status, 200);
    assert.equal(again.body.created, false);
  });
});
