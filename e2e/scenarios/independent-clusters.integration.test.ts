// Scenario: one fleetcache registry over two clusters — the first is the management cluster, the
// second is reached through a kubeconfig Secret on it. Each cache holds its own cluster's objects
// and wakes only the owners of what changed there; credentials that the second cluster's RBAC
// forbids surface as a typed 403 naming the cluster and kind, and the same cache recovers by itself
// once access is granted. Runs on local apiservers (make test) and on kind (make e2e-kind).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CompositeProvider, CoreV1SecretReader, LocalProvider, SecretProvider, type ClusterRef } from '../../lib/cluster/index.ts';
import type { Registry} from '../../lib/registry/index.ts';
import { ownerKey, type OwnerKey } from '../../lib/registry/index.ts';
import { KubeApiError } from '../../lib/util/index.ts';
import { eventually, useClusters, type TestCluster } from '../harness/index.ts';
import { registryWithKeeper } from '../../lib/registry/testing.ts';

const configMaps = { group: '', version: 'v1', kind: 'ConfigMap' };

describe('scenario: independent clusters', () => {
  const env = useClusters(2, { namePrefix: 'smoke' });
  // Unique per run: on kind the clusters outlive one run (KEEP_CLUSTERS=1).
  const run = Date.now().toString(36);
  const ownerNs = `fleet-${run}`;
  const onlyA = `only-in-a-${run}`;
  const onlyB = `only-in-b-${run}`;
  const rbacNs = `smoke-rbac-${run}`;
  let a: TestCluster;
  let b: TestCluster;
  let registry: Registry;

  async function must(cluster: TestCluster, method: string, path: string, body?: unknown): Promise<unknown> {
    const res = await cluster.request(method, path, body);
    assert.ok(res.statusCode >= 200 && res.statusCode < 300, `${cluster.name}: ${method} ${path} → HTTP ${res.statusCode} ${JSON.stringify(res.body)}`);
    return res.body;
  }

  before(async () => {
    [a, b] = env.clusters as [TestCluster, TestCluster];
    for (const [cluster, own] of [[a, onlyA], [b, onlyB]] as const) {
      await must(cluster, 'POST', '/api/v1/namespaces', { metadata: { name: own } });
      await must(cluster, 'POST', `/api/v1/namespaces/${own}/configmaps`, { metadata: { name: 'settings' }, data: { cluster: cluster.name } });
    }
    await must(a, 'POST', '/api/v1/namespaces', { metadata: { name: ownerNs } });
    const secret = (name: string, kubeconfig: string): object => ({ metadata: { name }, data: { value: Buffer.from(kubeconfig).toString('base64') } });
    await must(a, 'POST', `/api/v1/namespaces/${ownerNs}/secrets`, secret('b-kubeconfig', b.adminKubeconfig));
    // A ServiceAccount of b with no RBAC yet: its token authenticates, and is allowed nothing.
    await must(a, 'POST', `/api/v1/namespaces/${ownerNs}/secrets`, secret('b-reader-kubeconfig', await b.restrictedKubeconfig({ namespace: rbacNs, serviceAccount: 'reader' })));
    await must(b, 'POST', `/api/v1/namespaces/${rbacNs}/configmaps`, { metadata: { name: 'settings' }, data: { cluster: b.name } });

    const kubeConfig = a.kubeConfig();
    registry = registryWithKeeper({
      provider: new CompositeProvider({ byKind: { local: new LocalProvider({ kubeConfig }), secret: new SecretProvider({ secrets: new CoreV1SecretReader({ kubeConfig: a.kubeConfig() }) }) } }),
      // Retry a forbidden LIST every second rather than the default 5 s doubling to 60 s.
      informer: { slowBackoff: { initialMs: 1_000, maxMs: 1_000, jitter: 0 } },
    });
  });
  after(async () => { await registry.close(); });

  /** Takes owner keys off the registry's queue until every one of `expected` has shown up; returns the others seen on the way. */
  async function requeued(...expected: OwnerKey[]): Promise<OwnerKey[]> {
    const missing = new Set(expected);
    const others: OwnerKey[] = [];
    const signal = AbortSignal.timeout(30_000);
    while (missing.size > 0) {
      const next = await registry.queue.get(signal).catch(() => undefined);
      assert.ok(next !== undefined, `timed out waiting for ${[...missing].join(', ')} to be requeued (saw ${others.join(', ') || 'nothing else'})`);
      registry.queue.done(next.item);
      registry.queue.forget(next.item);
      if (!missing.delete(next.item)) others.push(next.item);
    }
    return others;
  }

  it('keeps each cluster\'s objects in its own cache, and wakes only the owners of what changed', async () => {
    const local: ClusterRef = { kind: 'local' };
    const remote: ClusterRef = { kind: 'secret', name: 'b-kubeconfig' };
    const ownerA = { namespace: ownerNs, name: 'on-a' };
    const ownerB = { namespace: ownerNs, name: 'on-b' };
    const readerA = await registry.watchTargetAndGetReader(local, { gvk: configMaps, namespace: onlyA, name: 'settings' }, ownerA);
    const readerB = await registry.watchTargetAndGetReader(remote, { gvk: configMaps, namespace: onlyB, name: 'settings' }, ownerB);
    await Promise.all([readerA.waitForSync(AbortSignal.timeout(30_000)), readerB.waitForSync(AbortSignal.timeout(30_000))]);
    assert.deepEqual(readerA.get(onlyA, 'settings')?.data, { cluster: a.name });
    assert.equal(readerA.get(onlyB, 'settings'), undefined, `${a.name}'s cache has nothing of ${b.name}'s`);
    assert.deepEqual(readerB.get(onlyB, 'settings')?.data, { cluster: b.name });
    assert.equal(readerB.get(onlyA, 'settings'), undefined, `${b.name}'s cache has nothing of ${a.name}'s`);
    assert.deepEqual(registry.caches().map((c) => c.cluster).sort(), ['local', `secret:${ownerNs}/b-kubeconfig`]);

    // Both owners are woken once their caches have synced; then a change on b wakes b's owner only.
    const key = (o: { namespace: string; name: string }): OwnerKey => ownerKey(o);
    await requeued(key(ownerA), key(ownerB));
    await must(b, 'PUT', `/api/v1/namespaces/${onlyB}/configmaps/settings`, { metadata: { name: 'settings', namespace: onlyB }, data: { cluster: b.name, changed: 'yes' } });
    assert.deepEqual(await requeued(key(ownerB)), [], 'no other owner was woken first');
    assert.deepEqual(readerB.get(onlyB, 'settings')?.data, { cluster: b.name, changed: 'yes' });
    assert.deepEqual(readerA.get(onlyA, 'settings')?.data, { cluster: a.name });
  });

  it('reports what the remote cluster\'s RBAC forbids as a typed 403, and recovers once it is granted', async (t) => {
    const restricted: ClusterRef = { kind: 'secret', name: 'b-reader-kubeconfig' };
    const reader = await registry.watchTargetAndGetReader(restricted, { gvk: configMaps, namespace: rbacNs, name: 'settings' }, { namespace: ownerNs, name: 'reader' });
    const error = await eventually('the cache reports the forbidden LIST', () => reader.lastError);
    assert.ok(error instanceof KubeApiError, `a KubeApiError, got ${error.name}: ${error.message}`);
    assert.equal(error.statusCode, 403);
    assert.equal(error.cluster, `secret:${ownerNs}/b-reader-kubeconfig`);
    assert.deepEqual(error.gvk, configMaps);
    assert.equal(reader.synced, false);

    // A cache covers its kind in the whole cluster, so the grant is cluster-wide (named per run:
    // on kind, cluster-scoped objects outlive the run).
    const role = `fleetcache-smoke-reader-${run}`;
    await must(b, 'POST', '/apis/rbac.authorization.k8s.io/v1/clusterroles', {
      metadata: { name: role }, rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list', 'watch'] }],
    });
    await must(b, 'POST', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      metadata: { name: role }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
      subjects: [{ kind: 'ServiceAccount', name: 'reader', namespace: rbacNs }],
    });
    t.after(async () => {
      await b.request('DELETE', `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${role}`);
      await b.request('DELETE', `/apis/rbac.authorization.k8s.io/v1/clusterroles/${role}`);
    });
    // The same cache keeps retrying on its own: nobody asks the registry again.
    await eventually('the cache syncs once the binding is in force', () => reader.synced, 60_000);
    assert.equal(reader.lastError, undefined);
    assert.deepEqual(reader.get(rbacNs, 'settings')?.data, { cluster: b.name });
  });
});
