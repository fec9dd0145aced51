// The rule for forgetOwner against reconciles in flight: a forgotten owner stays forgotten until
// setOwnerTargets registers it again; watchTargetAndGetReader calls meanwhile record nothing.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SimulatedCluster } from '../../fixtures/index.ts';
import { StaticProvider, type ClusterRef } from '../cluster/index.ts';
import { FakeClock, type GroupVersionKind } from '../util/index.ts';
import type { Registry } from './index.ts';
import { registryWithKeeper } from './testing.ts';

const configMaps: GroupVersionKind = { group: '', version: 'v1', kind: 'ConfigMap' };
const secrets: GroupVersionKind = { group: '', version: 'v1', kind: 'Secret' };
const sim: ClusterRef = { kind: 'static', name: 'sim' };

function ownersByKind(registry: Registry): Record<string, number> {
  return Object.fromEntries(registry.caches().map((c) => [c.gvk.kind, c.owners]));
}

describe('Registry.forgetOwner against a reconcile in flight', () => {
  it('does not let the reconcile re-register the owner; setOwnerTargets after the forget does', async (t) => {
    const cluster = await SimulatedCluster.start({ namespaces: ['apps'] });
    t.after(() => cluster.close());
    // A fake clock: the collector never runs, so the caches stay and their owner counts are read.
    const registry = registryWithKeeper({ provider: new StaticProvider({ clusters: { sim: cluster.kubeconfig } }), clock: new FakeClock(Date.now()), credentialCheckIntervalMs: 0 });
    t.after(() => registry.close());
    const owner = { namespace: 'team-a', name: 'p' };
    const first = { gvk: configMaps, namespace: 'apps', name: 'x' };
    const second = { gvk: secrets, namespace: 'apps', name: 'y' };
    const targets = [{ cluster: sim, target: first }, { cluster: sim, target: second }];

    // The reconcile: registers its targets, reads the first (its cache is built)...
    registry.setOwnerTargets(owner, targets);
    await (await registry.watchTargetAndGetReader(sim, first, owner)).waitForSync(AbortSignal.timeout(10_000));
    // ...asks for the second, whose cache is still being built when the owner's delete arrives...
    const building = registry.watchTargetAndGetReader(sim, second, owner);
    registry.forgetOwner(owner);
    const reader = await building;
    await reader.waitForSync(AbortSignal.timeout(10_000));
    // ...and reads its first target again before it ends.
    await registry.watchTargetAndGetReader(sim, first, owner);
    assert.deepEqual(ownersByKind(registry), { ConfigMap: 0, Secret: 0 }, 'the forgotten owner stays forgotten');
    assert.equal(reader.synced, true, 'the reader still reads while its cache lives');

    // A reconcile that reads the owner as present again registers it anew, and its reads record again.
    registry.setOwnerTargets(owner, [{ cluster: sim, target: first }]);
    assert.deepEqual(ownersByKind(registry), { ConfigMap: 1, Secret: 0 });
    await registry.watchTargetAndGetReader(sim, second, owner);
    assert.deepEqual(ownersByKind(registry), { ConfigMap: 1, Secret: 1 });
  });
});
