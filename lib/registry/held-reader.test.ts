// Reading a cache without becoming an owner: the held reader reports sync state and
// resourceVersion, and its handler sees deletes inferred by a relist as finalStateUnknown.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SimulatedCluster } from '../../fixtures/index.ts';
import { StaticProvider, type ClusterRef } from '../cluster/index.ts';
import type { GroupVersionKind } from '../util/index.ts';
import { registryWithKeeper } from './testing.ts';
import { eventually } from '../../fixtures/support/index.ts';

const configMaps: GroupVersionKind = { group: '', version: 'v1', kind: 'ConfigMap' };
const sim: ClusterRef = { kind: 'static', name: 'sim' };

describe('Registry.reader (no owner)', () => {
  it('reports synced and resourceVersion, and hands a relist\'s inferred delete to its handler as finalStateUnknown', async (t) => {
    const cluster = await SimulatedCluster.start({ namespaces: ['apps'] });
    t.after(() => cluster.close());
    cluster.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'seen', namespace: 'apps' }, data: {} });
    cluster.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'gone', namespace: 'apps' }, data: {} });
    const registry = registryWithKeeper({ provider: new StaticProvider({ clusters: { sim: cluster.kubeconfig } }), credentialCheckIntervalMs: 0, informer: { backoff: { initialMs: 50, maxMs: 50, jitter: 0 } } });
    t.after(() => registry.close());
    const deletes: string[] = [];
    const reader = await registry.reader(sim, configMaps, { namespace: 'apps', handler: { delete: (obj, finalStateUnknown) => { deletes.push(`${obj.metadata?.name ?? ''}:${String(finalStateUnknown)}`); } } });
    t.after(() => { reader.release(); });
    assert.equal(reader.synced, false);
    await reader.waitForSync(AbortSignal.timeout(10_000));
    assert.equal(reader.synced, true);
    assert.match(reader.resourceVersion, /^\d+$/);
    assert.deepEqual(registry.caches().map((c) => c.owners), [0], 'no owner registered');
    await cluster.waitFor((c) => c.openWatches === 1, { timeoutMs: 10_000 });

    // The watch misses the delete (stalled, reset, its resourceVersion compacted): the relist infers it.
    cluster.faults.stallWatches(600_000);
    cluster.store.delete({ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'apps', name: 'gone' });
    cluster.faults.compact();
    cluster.faults.cutWatches({ mode: 'reset' });
    cluster.faults.clear();
    await eventually('the delete is delivered', () => deletes.length > 0, 10_000);
    assert.deepEqual(deletes, ['gone:true']);
    assert.equal(reader.get('apps', 'gone'), undefined);
  });
});
