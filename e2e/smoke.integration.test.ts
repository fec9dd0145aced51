// Two real clusters side by side: each holds only what was written to it.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CoreV1Api, CustomObjectsApi, VersionApi } from '@kubernetes/client-node';
import { kustomizationCrd } from '../fixtures/crds/index.ts';
import { useClusters } from './harness/index.ts';

describe('harness: two real clusters', () => {
  const env = useClusters(2, { namePrefix: 'smoke' });

  it('serve the pinned Kubernetes version', async () => {
    for (const cluster of env.clusters) {
      const version = await cluster.kubeConfig().makeApiClient(VersionApi).getCode();
      assert.equal(version.gitVersion, 'v1.34.4', `${cluster.name} /version`);
    }
  });

  it('keep namespaces, ConfigMaps and custom resources apart', async () => {
    const [a, b] = env.clusters;
    assert.ok(a !== undefined && b !== undefined);
    for (const [cluster, own] of [[a, 'only-in-a'], [b, 'only-in-b']] as const) {
      const core = cluster.kubeConfig().makeApiClient(CoreV1Api);
      await core.createNamespace({ body: { metadata: { name: own } } });
      await core.createNamespacedConfigMap({ namespace: own, body: { metadata: { name: 'settings' }, data: { cluster: cluster.name } } });
      await cluster.installCRDs([kustomizationCrd]);
      await cluster.kubeConfig().makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
        group: 'kustomize.toolkit.fluxcd.io', version: 'v1', namespace: own, plural: 'kustomizations',
        body: { apiVersion: 'kustomize.toolkit.fluxcd.io/v1', kind: 'Kustomization', metadata: { name: 'app' }, spec: { path: `./${own}` } },
      });
    }

    for (const [cluster, own, other] of [[a, 'only-in-a', 'only-in-b'], [b, 'only-in-b', 'only-in-a']] as const) {
      const core = cluster.kubeConfig().makeApiClient(CoreV1Api);
      const namespaces = (await core.listNamespace()).items.map((ns) => ns.metadata?.name);
      assert.ok(namespaces.includes(own), `${cluster.name} has ${own}`);
      assert.ok(!namespaces.includes(other), `${cluster.name} does not have ${other}`);

      const configMaps = await core.listConfigMapForAllNamespaces({ fieldSelector: 'metadata.name=settings' });
      assert.deepEqual(configMaps.items.map((cm) => [cm.metadata?.namespace, cm.data?.cluster]), [[own, cluster.name]]);

      const custom = (await cluster.kubeConfig().makeApiClient(CustomObjectsApi).listClusterCustomObject({
        group: 'kustomize.toolkit.fluxcd.io', version: 'v1', plural: 'kustomizations',
      })) as { items: { metadata: { namespace: string }; spec: { path: string } }[] };
      assert.deepEqual(custom.items.map((k) => [k.metadata.namespace, k.spec.path]), [[own, `./${own}`]]);
    }
  });

  it('mint restricted credentials that RBAC governs', async () => {
    const [a] = env.clusters;
    assert.ok(a !== undefined);
    const kc = new (await import('@kubernetes/client-node')).KubeConfig();
    kc.loadFromString(await a.restrictedKubeconfig({ namespace: 'smoke-rbac', serviceAccount: 'reader' }));
    const core = kc.makeApiClient(CoreV1Api);
    await assert.rejects(core.listNamespacedConfigMap({ namespace: 'smoke-rbac' }), (err: unknown) => (err as { code?: number }).code === 403);

    await a.request('POST', '/apis/rbac.authorization.k8s.io/v1/namespaces/smoke-rbac/roles', {
      metadata: { name: 'read-configmaps' }, rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list', 'watch'] }],
    });
    await a.request('POST', '/apis/rbac.authorization.k8s.io/v1/namespaces/smoke-rbac/rolebindings', {
      metadata: { name: 'reader' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'read-configmaps' },
      subjects: [{ kind: 'ServiceAccount', name: 'reader', namespace: 'smoke-rbac' }],
    });
    const list = await core.listNamespacedConfigMap({ namespace: 'smoke-rbac' });
    assert.ok(Array.isArray(list.items));
  });

  it('restart an apiserver against the same etcd', async () => {
    const [, b] = env.clusters;
    assert.ok(b !== undefined);
    await b.stopApiserver();
    await assert.rejects(b.request('GET', '/api/v1/namespaces/only-in-b'));
    await b.startApiserver();
    const res = await b.request('GET', '/api/v1/namespaces/only-in-b');
    assert.equal(res.statusCode, 200, 'data survived the apiserver restart');
  });

  it('report start time and memory', () => {
    for (const cluster of env.clusters) {
      const mib = (cluster.rssBytes() / 2 ** 20).toFixed(0);
      console.log(`# ${cluster.name}: etcd ready in ${cluster.timings.etcdMs} ms, apiserver ready in ${cluster.timings.apiserverMs} ms, RSS ${mib} MiB`);
      assert.ok(cluster.rssBytes() > 0);
    }
  });
});
