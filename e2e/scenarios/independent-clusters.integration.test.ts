// Scenario: two clusters side by side each hold only what was written to them, and credentials
// minted in one are governed by its RBAC. Runs on local apiservers (make test) and on kind
// (make e2e-kind).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { ApiException, CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { kustomizationCrd } from '../../fixtures/crds/index.ts';
import { useClusters } from '../harness/index.ts';

describe('scenario: independent clusters', () => {
  const env = useClusters(2, { namePrefix: 'smoke' });
  // Unique per run: on kind the clusters outlive one run (KEEP_CLUSTERS=1).
  const run = Date.now().toString(36);
  const onlyA = `only-in-a-${run}`;
  const onlyB = `only-in-b-${run}`;
  const rbacNs = `smoke-rbac-${run}`;

  it('keep namespaces, ConfigMaps and custom resources apart', async () => {
    const [a, b] = env.clusters;
    assert.ok(a !== undefined && b !== undefined);
    for (const [cluster, own] of [[a, onlyA], [b, onlyB]] as const) {
      const core = cluster.kubeConfig().makeApiClient(CoreV1Api);
      await core.createNamespace({ body: { metadata: { name: own } } });
      await core.createNamespacedConfigMap({ namespace: own, body: { metadata: { name: 'settings' }, data: { cluster: cluster.name } } });
      await cluster.installCRDs([kustomizationCrd]);
      await cluster.kubeConfig().makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
        group: 'kustomize.toolkit.fluxcd.io', version: 'v1', namespace: own, plural: 'kustomizations',
        body: { apiVersion: 'kustomize.toolkit.fluxcd.io/v1', kind: 'Kustomization', metadata: { name: 'app' }, spec: { path: `./${own}` } },
      });
    }

    for (const [cluster, own, other] of [[a, onlyA, onlyB], [b, onlyB, onlyA]] as const) {
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
    const kc = new KubeConfig();
    kc.loadFromString(await a.restrictedKubeconfig({ namespace: rbacNs, serviceAccount: 'reader' }));
    const core = kc.makeApiClient(CoreV1Api);
    await assert.rejects(core.listNamespacedConfigMap({ namespace: rbacNs }), (err: unknown) => err instanceof ApiException && err.code === 403);

    await a.request('POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${rbacNs}/roles`, {
      metadata: { name: 'read-configmaps' }, rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list', 'watch'] }],
    });
    await a.request('POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${rbacNs}/rolebindings`, {
      metadata: { name: 'reader' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'read-configmaps' },
      subjects: [{ kind: 'ServiceAccount', name: 'reader', namespace: rbacNs }],
    });
    // The authorizer learns of the binding through its own watch: allow it a moment.
    const deadline = Date.now() + 15_000;
    for (;;) {
      try {
        const list = await core.listNamespacedConfigMap({ namespace: rbacNs });
        assert.ok(Array.isArray(list.items));
        break;
      } catch (err) {
        if (!(err instanceof ApiException && err.code === 403) || Date.now() > deadline) throw err;
        await delay(100);
      }
    }
  });

});
