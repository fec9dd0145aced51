// An embedder's reads: `get({ namespace, name })` beside the positional form (namespace first, the
// reverse of client-node's ObjectCache), and client-node's models as the object type through Wire.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1ConfigMap } from '@kubernetes/client-node';
import { SimulatedCluster } from '../../fixtures/index.ts';
import { StaticProvider, type ClusterRef } from '../cluster/index.ts';
import type { Wire } from '../transport/index.ts';
import type { GroupVersionKind } from '../util/index.ts';
import { registryWithKeeper } from './testing.ts';

const configMaps: GroupVersionKind = { group: '', version: 'v1', kind: 'ConfigMap' };
const sim: ClusterRef = { kind: 'static', name: 'sim' };

describe('CacheReader.get', () => {
  it('finds an object by { namespace, name } and positionally, held or owned, and hands client-node models over as JSON (timestamps are strings)', async (t) => {
    const cluster = await SimulatedCluster.start({ namespaces: ['apps', 'other'] });
    t.after(() => cluster.close());
    cluster.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'web', namespace: 'apps' }, data: { mode: 'blue' } });
    cluster.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'apps', namespace: 'other' }, data: { mode: 'swapped' } });
    const registry = registryWithKeeper({ provider: new StaticProvider({ clusters: { sim: cluster.kubeconfig } }), credentialCheckIntervalMs: 0 });
    t.after(() => registry.close());
    const owner = { namespace: 'team-a', name: 'p' };
    const target = { gvk: configMaps, namespace: 'apps', name: 'web' };
    registry.setOwnerTargets(owner, [{ cluster: sim, target }]);
    const owned = await registry.watchTargetAndGetReader<Wire<V1ConfigMap>>(sim, target, owner);
    const held = await registry.reader<Wire<V1ConfigMap>>(sim, configMaps);
    t.after(() => { held.release(); });
    await owned.waitForSync(AbortSignal.timeout(10_000));
    await held.waitForSync(AbortSignal.timeout(10_000));
    for (const reader of [owned, held]) {
      const named = reader.get({ namespace: 'apps', name: 'web' });
      assert.equal(named?.data?.mode, 'blue');
      assert.equal(reader.get('apps', 'web'), named, 'the positional form: namespace first');
      // client-node's ObjectCache order (name, namespace) names another object: the trap the named form avoids.
      assert.equal(reader.get('web', 'apps'), undefined);
      assert.equal(reader.get({ namespace: 'other', name: 'apps' })?.data?.mode, 'swapped');
      assert.equal(reader.get({ name: 'web' }), undefined, 'no namespace: the cluster-scoped key');
      // Wire<V1ConfigMap> says string where V1ConfigMap says Date, as it is at run time.
      const created: string | undefined = named.metadata?.creationTimestamp;
      assert.equal(typeof created, 'string');
      assert.ok(!Number.isNaN(Date.parse(created ?? '')));
    }
  });
});
