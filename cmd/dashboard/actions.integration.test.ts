// The approval endpoint's wave retry ("action": "retry") against a real kube-apiserver: the
// caller's bearer token is reviewed by a real TokenReview, the verb approve decided by a real
// SubjectAccessReview over the shipped approver ClusterRole, and the retry is written, as the
// service, into the Pipeline's status through the real CRD's schema. No controller runs: the
// failed wave is recorded in status as the controller records it.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadAll } from 'js-yaml';
import { useClusters, type TestCluster } from '../../e2e/harness/index.ts';
import { ensureNamespace, must } from '../../fixtures/support/index.ts';
import { CompositeProvider, LocalProvider } from '../../lib/cluster/index.ts';
import { HttpServer } from '../../lib/manager/index.ts';
import { pipelineCrd, type Pipeline } from '../../lib/pipeline/index.ts';
import type { Registry } from '../../lib/registry/index.ts';
import { registryWithKeeper } from '../../lib/registry/testing.ts';
import { ApprovalEndpoint, APPROVE_PATH } from './actions.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));
const NS = 'team-retry';
const PIPELINE = `/apis/fleetcache.dev/v1alpha1/namespaces/${NS}/pipelines/shop`;
const APPROVER = 'system:serviceaccount:people:release-manager';

/** A service account's token in namespace `people`. */
async function tokenOf(cluster: TestCluster, serviceAccount: string): Promise<string> {
  const kubeconfig = await cluster.restrictedKubeconfig({ namespace: 'people', serviceAccount });
  const token = /"?token"?: *"?([^"\s]+)"?/.exec(kubeconfig)?.[1] ?? '';
  assert.ok(token.length > 20);
  return token;
}

describe('the approval endpoint retries a stopped wave on a real apiserver', () => {
  const fixture = useClusters(1, { namePrefix: 'retry' });
  let cluster: TestCluster;
  let registry: Registry;
  let server: HttpServer;
  let url = '';
  let approverToken = '';
  let viewerToken = '';

  before(async () => {
    [cluster] = fixture.clusters as [TestCluster];
    await cluster.installCRDs([pipelineCrd]);
    await ensureNamespace(cluster, NS);
    for (const doc of loadAll(readFileSync(path.join(root, 'config/rbac/pipeline_approver_role.yaml'), 'utf8')) as object[]) {
      await must(cluster, 'POST', '/apis/rbac.authorization.k8s.io/v1/clusterroles', doc);
    }
    approverToken = await tokenOf(cluster, 'release-manager');
    viewerToken = await tokenOf(cluster, 'viewer');
    await must(cluster, 'POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${NS}/rolebindings`, {
      metadata: { name: 'release-manager-approve', namespace: NS },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'fleetcache-pipeline-approver' },
      subjects: [{ kind: 'ServiceAccount', name: 'release-manager', namespace: 'people' }],
    });
    // prod is a fleet environment in two waves; canary was carried out at 1.2.0 and failed there.
    await must(cluster, 'POST', `/apis/fleetcache.dev/v1alpha1/namespaces/${NS}/pipelines`, {
      apiVersion: 'fleetcache.dev/v1alpha1',
      kind: 'Pipeline',
      metadata: { name: 'shop', namespace: NS },
      spec: {
        appRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'shop' },
        environments: [
          { name: 'dev', targets: [{ namespace: 'shop-dev' }] },
          { name: 'prod', fleet: { namespace: 'shop', clusters: [{ kind: 'Secret', name: 'eu-1' }, { kind: 'Secret', name: 'eu-2' }], waves: [{ name: 'canary', count: 1 }, { name: 'rest', count: 1 }] } },
        ],
        promotion: { strategy: 'patch', patch: { path: '/spec/template/spec/containers/0/image' } },
      },
    });
    const pipeline = (await must(cluster, 'GET', PIPELINE)) as Pipeline;
    await must(cluster, 'PUT', `${PIPELINE}/status`, { ...pipeline, status: { promotions: [{ environment: 'prod', wave: 'canary', revision: '1.2.0', strategy: 'patch', state: 'Failed', attempts: 1, startedAt: '2026-05-06T06:00:00Z', committedAt: '2026-05-06T06:00:00Z', message: 'wave canary not ready within the apply timeout' }] } });

    // The endpoint as the service runs it: the management cluster through the registry, as the service.
    registry = registryWithKeeper({ provider: new CompositeProvider({ byKind: { local: new LocalProvider({ kubeConfig: cluster.kubeConfig() }) } }) });
    const connection = await registry.connectionFor({ kind: 'local' }, { namespace: 'default', name: 'dashboard-actions' });
    const endpoint = new ApprovalEndpoint({ management: () => Promise.resolve(connection) });
    server = await HttpServer.start({
      name: 'test', address: { host: '127.0.0.1', port: 0 }, routes: {}, handlers: { [APPROVE_PATH]: endpoint.handle }, actionPaths: new Set([APPROVE_PATH]),
      authorize: () => Promise.resolve({ allowed: false, status: 403, message: 'the server filter was asked' }),
    });
    url = `${server.url}${APPROVE_PATH}`;
  }, { timeout: 120_000 });

  after(async () => {
    await server.close();
    await registry.close();
  });

  async function retry(token: string, wave: string): Promise<{ status: number; body: Record<string, unknown> }> {
    const res = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ namespace: NS, pipeline: 'shop', environment: wave, revision: '1.2.0', action: 'retry' }) });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  }

  async function recorded(): Promise<{ retries: unknown; events: string[] }> {
    const pipeline = (await must(cluster, 'GET', PIPELINE)) as Pipeline;
    const events = (await must(cluster, 'GET', `/api/v1/namespaces/${NS}/events?fieldSelector=involvedObject.name%3Dshop`)) as { items: { reason: string; message: string }[] };
    return { retries: pipeline.status?.retries, events: events.items.filter((e) => e.reason === 'WaveRetryRequested').map((e) => e.message) };
  }

  it('refuses a caller without the verb approve (403), records a retry for one allowed only of a wave that stopped (422 otherwise, saying why)', { timeout: 60_000 }, async () => {
    const viewer = await retry(viewerToken, 'prod/canary');
    assert.equal(viewer.status, 403, JSON.stringify(viewer.body));
    assert.equal(viewer.body.error, `user system:serviceaccount:people:viewer may not approve pipelines.fleetcache.dev shop in namespace ${NS}`);
    assert.deepEqual(await recorded(), { retries: undefined, events: [] }, 'nothing recorded for a caller without the verb');

    const rest = await retry(approverToken, 'prod/rest');
    assert.equal(rest.status, 422, JSON.stringify(rest.body));
    assert.equal(rest.body.error, 'the rollout of 1.2.0 is not stopped at wave rest of prod (only a wave carried out and then failed is retried this way)');
    assert.deepEqual(await recorded(), { retries: undefined, events: [] }, 'nothing recorded for a wave that did not stop');

    const before = Date.now() - 1_000;
    const canary = await retry(approverToken, 'prod/canary');
    assert.equal(canary.status, 200, JSON.stringify(canary.body));
    assert.equal(canary.body.created, true);
    const { retries, events } = await recorded();
    assert.deepEqual(canary.body.retry, (retries as unknown[] | undefined)?.[0], 'the answer is what status holds');
    const [only, ...others] = (retries ?? []) as { environment: string; wave: string; revision: string; attempt: number; requestedBy: { username: string; uid?: string }; requestedAt: string }[];
    assert.ok(only !== undefined);
    assert.deepEqual(others, []);
    assert.deepEqual([only.environment, only.wave, only.revision, only.attempt, only.requestedBy.username], ['prod', 'canary', '1.2.0', 1, APPROVER]);
    assert.ok(only.requestedBy.uid !== undefined && only.requestedBy.uid !== '', 'the TokenReview\'s uid is kept');
    assert.ok(Date.parse(only.requestedAt) >= before, only.requestedAt);
    assert.deepEqual(events, [`${APPROVER} asked to carry out wave canary of prod at 1.2.0 again (attempt 1 had failed)`]);

    const again = await retry(approverToken, 'prod/canary');
    assert.equal(again.status, 200);
    assert.equal(again.body.created, false, 'the retry on record is kept');
    assert.equal(((await recorded()).retries as unknown[]).length, 1);
  });
});
