// writeStatus on a real kube-apiserver: a merge patch on the status subresource that carries the
// resourceVersion its decision was made on, so a concurrent writer makes it fail with 409; it then
// re-reads, decides again and retries, and after maxAttempts throws a typed StatusConflictError.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { useClusters, type TestCluster } from '../../e2e/harness/index.ts';
import { helmReleaseCrd } from '../../fixtures/crds/index.ts';
import { LocalProvider } from '../cluster/index.ts';
import { KubeApiError, type GroupVersionKind } from '../util/index.ts';
import type { KubeObject } from '../transport/index.ts';
import { StatusConflictError, writeStatus, type Registry, type StatusConnection } from './index.ts';
import { registryWithKeeper } from './testing.ts';

const helmReleases: GroupVersionKind = { group: 'helm.toolkit.fluxcd.io', version: 'v2', kind: 'HelmRelease' };
const path = '/apis/helm.toolkit.fluxcd.io/v2/namespaces/apps/helmreleases';

interface HelmRelease extends KubeObject {
  readonly spec?: { readonly version?: string };
  readonly status?: { readonly observedVersion?: string; readonly history?: readonly string[] };
}

describe('writeStatus on a real cluster', () => {
  const env = useClusters(1, { namePrefix: 'status' });
  let cluster: TestCluster;

  before(async () => {
    [cluster] = env.clusters;
    await cluster.installCRDs([helmReleaseCrd]);
    const ns = await cluster.request('POST', '/api/v1/namespaces', { metadata: { name: 'apps' } });
    assert.ok(ns.statusCode === 201 || ns.statusCode === 409, JSON.stringify(ns.body));
  });

  /** Another writer's merge patch. */
  const mergePatch = async (at: string, body: object): Promise<HelmRelease> =>
    (await (await connection()).request({ method: 'PATCH', path: at, body, contentType: 'application/merge-patch+json', gvk: helmReleases })) as HelmRelease;

  /** Creates a HelmRelease at `version` with a status another writer set, and returns it as the API server has it. */
  async function release(name: string, version: string): Promise<HelmRelease> {
    const created = await cluster.request('POST', path, { apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease', metadata: { name, namespace: 'apps' }, spec: { version } });
    assert.equal(created.statusCode, 201, JSON.stringify(created.body));
    return mergePatch(`${path}/${name}/status`, { status: { history: ['0.9'] } });
  }

  /** Another writer changes the spec: the resourceVersion moves on. */
  async function bump(name: string, version: string): Promise<void> {
    await mergePatch(`${path}/${name}`, { spec: { version } });
  }

  let registry: Registry;
  before(() => { registry = registryWithKeeper({ provider: new LocalProvider({ kubeConfig: cluster.kubeConfig() }), credentialCheckIntervalMs: 0 }); });
  after(() => registry.close());
  /** Asked for at each use, as `connectionFor` says: the keeper may replace it. */
  const connection = (): Promise<StatusConnection> => registry.connectionFor({ kind: 'local' }, { namespace: 'apps', name: 'owner' });

  const observed = (current: HelmRelease): { observedVersion: string } => ({ observedVersion: current.spec?.version ?? '' });

  it('merges the decided status into the status subresource, keeps what others wrote, and sends nothing when it already holds', async () => {
    const conn = await connection();
    const web = await release('web', '1.0');
    const first = await writeStatus({ connection: conn, gvk: helmReleases, object: web, status: observed });
    assert.deepEqual([first.result, first.attempts, first.object.status], ['written', 1, { history: ['0.9'], observedVersion: '1.0' }]);
    const stored = (await cluster.request('GET', `${path}/web`)).body as HelmRelease;
    assert.deepEqual([stored.spec, stored.status], [{ version: '1.0' }, { history: ['0.9'], observedVersion: '1.0' }], 'the spec untouched, the other writer\'s field kept');
    const again = await writeStatus({ connection: conn, gvk: helmReleases, object: first.object, status: observed });
    assert.deepEqual([again.result, again.object.metadata?.resourceVersion], ['unchanged', first.object.metadata?.resourceVersion]);
  });

  it('on a conflict re-reads, decides on what is there and writes that', async () => {
    const conn = await connection();
    const stale = await release('api', '1.0');
    await bump('api', '2.0'); // after our read, before our write
    const decided: string[] = [];
    const done = await writeStatus({ connection: conn, gvk: helmReleases, object: stale, status: (current) => { decided.push(current.spec?.version ?? ''); return observed(current); } });
    assert.deepEqual([done.result, done.attempts, decided], ['written', 2, ['1.0', '2.0']], 'the first decision, on the stale object, was refused');
    const stored = (await cluster.request('GET', `${path}/api`)).body as HelmRelease;
    assert.equal(stored.status?.observedVersion, '2.0', 'never the stale decision');
  });

  it('gives up after maxAttempts with a typed StatusConflictError carrying the 409', async () => {
    const conn = await connection();
    const busy = await release('busy', '1.0');
    let n = 0;
    // A writer that always gets there first: it changes the object before each of our PATCHes.
    const raced: StatusConnection = {
      name: conn.name,
      resolve: (gvk, signal) => conn.resolve(gvk, signal),
      request: async (options) => {
        if (options.method === 'PATCH') await bump('busy', `1.${++n}`);
        return conn.request(options);
      },
    };
    const err = await writeStatus({ connection: raced, gvk: helmReleases, object: busy, status: observed, maxAttempts: 3 }).then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof StatusConflictError, String(err));
    assert.deepEqual([err.code, err.attempts, err.object, err.cluster], ['ERR_STATUS_CONFLICT', 3, { namespace: 'apps', name: 'busy' }, 'local']);
    assert.ok(err.cause instanceof KubeApiError && err.cause.statusCode === 409);
    assert.equal(n, 3, 'one PATCH per attempt');
    const stored = (await cluster.request('GET', `${path}/busy`)).body as HelmRelease;
    assert.deepEqual(stored.status, { history: ['0.9'] }, 'nothing of ours was written');
  });
});
