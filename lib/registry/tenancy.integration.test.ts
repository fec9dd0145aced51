// Identities and namespace scopes against a real apiserver, whose RBAC decides: an impersonated
// ServiceAccount without rights gets typed 403s, and a kubeconfig whose account has only a
// namespaced Role syncs through a namespace-scoped cache.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { eventually, useClusters, type TestCluster } from '../../e2e/harness/index.ts';
import { SecretProvider, serviceAccountIdentity, type ClusterRef } from '../cluster/index.ts';
import { FakeClock, KubeApiError, type GroupVersionKind } from '../util/index.ts';
import type { Registry } from './index.ts';
import { registryWithKeeper } from './testing.ts';

const configMaps: GroupVersionKind = { group: '', version: 'v1', kind: 'ConfigMap' };

async function must(cluster: TestCluster, method: string, path: string, body: unknown): Promise<void> {
  const res = await cluster.request(method, path, body);
  assert.ok(res.statusCode === 201 || res.statusCode === 409, `${method} ${path}: ${res.statusCode} ${JSON.stringify(res.body)}`);
}

describe('tenancy on a real cluster', () => {
  const env = useClusters(1, { namePrefix: 'tenancy' });
  let cluster: TestCluster;

  before(async () => {
    [cluster] = env.clusters as [TestCluster];
    for (const ns of ['team-a', 'apps']) await must(cluster, 'POST', '/api/v1/namespaces', { metadata: { name: ns } });
    await must(cluster, 'POST', '/api/v1/namespaces/apps/configmaps', { metadata: { name: 'app', namespace: 'apps' }, data: { revision: 'v1' } });
    // The remote account may read ConfigMaps in `apps`, and nothing else anywhere.
    await must(cluster, 'POST', '/apis/rbac.authorization.k8s.io/v1/namespaces/apps/roles', {
      metadata: { name: 'read-configmaps', namespace: 'apps' },
      rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list', 'watch'] }],
    });
    await must(cluster, 'POST', '/apis/rbac.authorization.k8s.io/v1/namespaces/apps/rolebindings', {
      metadata: { name: 'reader', namespace: 'apps' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'read-configmaps' },
      subjects: [{ kind: 'ServiceAccount', name: 'reader', namespace: 'apps' }],
    });
    const kubeconfig = await cluster.restrictedKubeconfig({ namespace: 'apps', serviceAccount: 'reader' });
    await must(cluster, 'POST', '/api/v1/namespaces/team-a/secrets', {
      metadata: { name: 'remote', namespace: 'team-a' },
      data: { value: Buffer.from(kubeconfig).toString('base64') },
    });
  });

  function newRegistry(t: { after(fn: () => Promise<void>): void }): Registry {
    const registry = registryWithKeeper({
      local: cluster.kubeConfig(),
      provider: (secrets) => new SecretProvider({ secrets }),
      clock: new FakeClock(Date.now()),
      credentialCheckIntervalMs: 0,
    });
    t.after(() => registry.close());
    return registry;
  }

  it('answers an impersonated ServiceAccount without rights with typed 403s, never the service\'s rights', async (t) => {
    const registry = newRegistry(t);
    const tenant = { namespace: 'team-a', name: 'pipe', identity: serviceAccountIdentity('team-a', 'no-rights') };
    await assert.rejects(registry.watchTargetAndGetReader({ kind: 'secret', name: 'remote' }, { gvk: configMaps, namespace: 'apps', name: 'app' }, tenant),
      (err: unknown) => err instanceof KubeApiError && err.statusCode === 403 && err.message.includes('system:serviceaccount:team-a:no-rights'));
    const reader = await registry.watchTargetAndGetReader({ kind: 'local' }, { gvk: configMaps, namespace: 'apps', name: 'app' }, tenant);
    await eventually('the cache reports the 403', () => reader.lastError instanceof KubeApiError && reader.lastError.statusCode === 403, 20_000);
    assert.equal(reader.get('apps', 'app'), undefined);
    await assert.rejects((await registry.connectionFor({ kind: 'local' }, tenant)).request({ method: 'GET', path: '/api/v1/namespaces/apps/configmaps/app' }),
      (err: unknown) => err instanceof KubeApiError && err.statusCode === 403);
    // The service's own identity reads the same object: the 403 was the tenant's, not the cluster's.
    const own = await registry.watchTargetAndGetReader({ kind: 'local' }, { gvk: configMaps, namespace: 'apps', name: 'app' }, { namespace: 'team-a', name: 'own' });
    await own.waitForSync(AbortSignal.timeout(20_000));
    assert.deepEqual(own.get('apps', 'app')?.data, { revision: 'v1' });
  });

  it('syncs a remote kubeconfig whose account has only a namespaced Role, by scoping the cache down', async (t) => {
    const registry = newRegistry(t);
    const owner = { namespace: 'team-a', name: 'pipe' };
    const remote: ClusterRef = { kind: 'secret', name: 'remote' };
    const target = { gvk: configMaps, namespace: 'apps', name: 'app' };
    await registry.watchTargetAndGetReader(remote, target, owner);
    await eventually('the cluster-wide cache is scoped down', () => registry.caches().every((c) => c.namespace === 'apps'), 20_000);
    const reader = await registry.watchTargetAndGetReader(remote, target, owner);
    await reader.waitForSync(AbortSignal.timeout(20_000));
    assert.deepEqual(reader.get('apps', 'app')?.data, { revision: 'v1' });
    assert.deepEqual(registry.caches().map((c) => [c.cluster, c.namespace, c.synced]), [['secret:team-a/remote', 'apps', true]]);
  });
});
