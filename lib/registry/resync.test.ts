// `informer.resyncIntervalMs` requeues every owner of a cache at each resync (issue 13: it used to
// be accepted and do nothing). Driven by a fake clock: no real second passes.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SimulatedCluster } from '../../fixtures/index.ts';
import { StaticProvider, type ClusterRef } from '../cluster/index.ts';
import { FakeClock, type GroupVersionKind } from '../util/index.ts';
import type { Registry } from './index.ts';
import { registryWithKeeper } from './testing.ts';

const configMaps: GroupVersionKind = { group: '', version: 'v1', kind: 'ConfigMap' };
const sim: ClusterRef = { kind: 'static', name: 'sim' };

/** Owner keys taken off the queue (each done and forgotten, as a worker would) until it stays empty a moment. */
async function drain(registry: Registry): Promise<string[]> {
  const taken: string[] = [];
  for (;;) {
    const next = await registry.queue.get(AbortSignal.timeout(300)).catch(() => undefined);
    if (next === undefined) return taken;
    registry.queue.done(next.item);
    registry.queue.forget(next.item);
    taken.push(next.item);
  }
}

describe('Registry resync', () => {
  it('requeues every owner of a cache at each resync, an owner whose target does not exist included', async (t) => {
    const cluster = await SimulatedCluster.start({ namespaces: ['apps'] });
    t.after(() => cluster.close());
    cluster.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'present', namespace: 'apps' }, data: {} });
    const clock = new FakeClock(Date.now());
    const registry = registryWithKeeper({
      provider: new StaticProvider({ clusters: { sim: cluster.kubeconfig } }),
      clock,
      credentialCheckIntervalMs: 0,
      informer: { resyncIntervalMs: 500 },
    });
    t.after(() => registry.close());
    const reader = await registry.watchTargetAndGetReader(sim, { gvk: configMaps, namespace: 'apps', name: 'present' }, { namespace: 'apps', name: 'one' });
    await registry.watchTargetAndGetReader(sim, { gvk: configMaps, namespace: 'apps', name: 'absent' }, { namespace: 'apps', name: 'two' });
    await reader.waitForSync(AbortSignal.timeout(10_000));
    assert.deepEqual((await drain(registry)).sort(), ['apps/one', 'apps/two'], 'woken once synced');

    for (let pass = 1; pass <= 3; pass++) {
      // Jittered ×[0.9, 1.1): 550 ms always reaches the next pass and never the one after.
      clock.advance(550);
      assert.deepEqual((await drain(registry)).sort(), ['apps/one', 'apps/two'], `requeued by resync ${pass}`);
    }
    assert.deepEqual(await drain(registry), [], 'nothing without a resync');
  });
});
