// Registry behaviour that needs faults a real apiserver cannot produce on demand, against the
// simulated API server.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SimulatedCluster } from '../../fixtures/index.ts';
import { StaticProvider, type ClusterRef } from '../cluster/index.ts';
import { eventually } from '../../e2e/harness/index.ts';
import type { Registry } from './index.ts';
import { registryWithKeeper } from './testing.ts';

const configMaps = { group: '', version: 'v1', kind: 'ConfigMap' };
const ref: ClusterRef = { kind: 'static', name: 'sim' };

/** Takes owner keys off the queue until `expected` shows up; false after `timeoutMs`. */
async function requeued(registry: Registry, expected: string, timeoutMs: number): Promise<boolean> {
  const signal = AbortSignal.timeout(timeoutMs);
  for (;;) {
    const next = await registry.queue.get(signal).catch(() => undefined);
    if (next === undefined) return false;
    registry.queue.done(next.item);
    registry.queue.forget(next.item);
    if (next.item === expected) return true;
  }
}

describe('Registry on the simulated API server', () => {
  it('wakes a target\'s owners when its cache recovers, though no object changed', async (t) => {
    const sim = await SimulatedCluster.start({ namespaces: ['apps'], bookmarkIntervalMs: 60_000 });
    t.after(() => sim.close());
    sim.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'steady', namespace: 'apps' }, data: { v: '1' } });
    const registry = registryWithKeeper({
      provider: new StaticProvider({ clusters: { sim: sim.kubeconfig } }),
      credentialCheckIntervalMs: 0,
      informer: { backoff: { initialMs: 300, maxMs: 300, jitter: 0 } },
    });
    t.after(() => registry.close());
    const owner = { namespace: 'apps', name: 'pipeline' };
    const reader = await registry.watchTargetAndGetReader(ref, { gvk: configMaps, namespace: 'apps', name: 'steady' }, owner);
    await reader.waitForSync(AbortSignal.timeout(10_000));
    await sim.waitFor((c) => c.openWatches === 1, { timeoutMs: 10_000 });
    assert.ok(await requeued(registry, 'apps/pipeline', 5_000), 'woken once the answer is known');

    // One broken stream: the error wakes the owner (so its status can say why)...
    assert.equal(sim.faults.cutWatches({ mode: 'reset' }), 1);
    await eventually('the cache reports the broken stream', () => reader.lastError !== undefined);
    assert.ok(await requeued(registry, 'apps/pipeline', 5_000), 'woken by the error');
    // ...and the watch resumed from its resourceVersion, with no relist and no object event, wakes
    // it again (so its status can say the error is gone).
    await eventually('the cache recovers', () => reader.lastError === undefined);
    assert.ok(await requeued(registry, 'apps/pipeline', 2_000), 'woken by the recovery');
    assert.equal(sim.counters.requests.list, 1, 'recovered without a relist');
    assert.deepEqual(reader.get('apps', 'steady')?.data, { v: '1' });
  });
});
