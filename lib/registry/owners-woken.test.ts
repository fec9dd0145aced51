// Every change to a watched target requeues every owner that uses it, and owners whose target does
// not exist are woken once the answer is known. Each way of being woken is tested alone: nothing
// else changes while the test waits for the owner.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SimulatedCluster } from '../../fixtures/index.ts';
import { StaticProvider, type ClusterRef } from '../cluster/index.ts';
import { FakeClock, type GroupVersionKind } from '../util/index.ts';
import type { Registry} from './index.ts';
import { type CacheReader, type OwnerRef } from './index.ts';
import { registryWithKeeper } from './testing.ts';

const configMaps: GroupVersionKind = { group: '', version: 'v1', kind: 'ConfigMap' };
const sim: ClusterRef = { kind: 'static', name: 'sim' };

function configMap(name: string, value: string): { apiVersion: string; kind: string; metadata: { name: string; namespace: string }; data: Record<string, string> } {
  return { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: 'apps' }, data: { value } };
}

/**
 * Takes owner keys off the registry's queue until every one of `expected` was seen (true), or 5 s
 * passed (false). Each key taken is marked done and forgotten, as a worker would.
 */
async function requeued(registry: Registry, ...expected: string[]): Promise<boolean> {
  const missing = new Set(expected);
  const signal = AbortSignal.timeout(5_000);
  while (missing.size > 0) {
    const next = await registry.queue.get(signal).catch(() => undefined);
    if (next === undefined) return false;
    registry.queue.done(next.item);
    registry.queue.forget(next.item);
    missing.delete(next.item);
  }
  return true;
}

async function setup(t: { after(fn: () => Promise<void>): void }): Promise<{ cluster: SimulatedCluster; registry: Registry }> {
  const cluster = await SimulatedCluster.start({ namespaces: ['apps'] });
  t.after(() => cluster.close());
  // A fake clock: no GC check, resync or credential check runs while a test waits for an owner.
  const registry = registryWithKeeper({ provider: new StaticProvider({ clusters: { sim: cluster.kubeconfig } }), clock: new FakeClock(Date.now()), credentialCheckIntervalMs: 0 });
  t.after(() => registry.close());
  return { cluster, registry };
}

/** Watches `name` for `owner`, waits for the cache to sync and its watch to open, and takes the owner's wake-up at sync. */
async function watched(cluster: SimulatedCluster, registry: Registry, owner: OwnerRef, name: string): Promise<CacheReader> {
  const reader = await registry.watchTargetAndGetReader(sim, { gvk: configMaps, namespace: 'apps', name }, owner);
  await reader.waitForSync(AbortSignal.timeout(10_000));
  await cluster.waitFor((c) => c.openWatches === 1);
  return reader;
}

describe('Registry wakes owners', () => {
  it('requeues the owner of a target that is deleted', async (t) => {
    const { cluster, registry } = await setup(t);
    cluster.store.create(configMap('doomed', '1'));
    const reader = await watched(cluster, registry, { namespace: 'team-a', name: 'one' }, 'doomed');
    assert.ok(await requeued(registry, 'team-a/one'), 'woken when the cache synced');
    assert.equal(registry.queue.len, 0);

    cluster.store.delete({ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'apps', name: 'doomed' });
    assert.ok(await requeued(registry, 'team-a/one'), 'woken by the delete');
    assert.equal(reader.get('apps', 'doomed'), undefined);
  });

  it('requeues the owner of a target that appears after its cache synced', async (t) => {
    const { cluster, registry } = await setup(t);
    const reader = await watched(cluster, registry, { namespace: 'team-a', name: 'one' }, 'later');
    assert.ok(await requeued(registry, 'team-a/one'), 'woken when the cache synced');
    assert.equal(registry.queue.len, 0);

    cluster.store.create(configMap('later', '1'));
    assert.ok(await requeued(registry, 'team-a/one'), 'woken by the target\'s creation');
    assert.deepEqual(reader.get('apps', 'later')?.data, { value: '1' });
  });

  it('requeues owners whose target was missing when the cache synced', async (t) => {
    const { cluster, registry } = await setup(t);
    cluster.store.create(configMap('present', '1'));
    // No object event will ever come for these owners: only the sync can tell them "not found".
    const [reader] = await Promise.all([
      registry.watchTargetAndGetReader(sim, { gvk: configMaps, namespace: 'apps', name: 'absent' }, { namespace: 'team-a', name: 'waiting' }),
      registry.watchTargetAndGetReader(sim, { gvk: configMaps, namespace: 'apps', name: 'gone' }, { namespace: 'team-a', name: 'also-waiting' }),
    ]);
    assert.ok(await requeued(registry, 'team-a/waiting', 'team-a/also-waiting'), 'both woken once the cache synced without their targets');
    assert.equal(reader.synced, true);
    assert.equal(reader.get('apps', 'absent'), undefined);
  });

  it('requeues every owner of a changed object', async (t) => {
    const { cluster, registry } = await setup(t);
    const created = cluster.store.create(configMap('shared', '1'));
    const owners = ['first', 'second', 'third'].map((name) => ({ namespace: 'team-a', name }));
    await watched(cluster, registry, owners[0] as OwnerRef, 'shared');
    for (const owner of owners.slice(1)) await registry.watchTargetAndGetReader(sim, { gvk: configMaps, namespace: 'apps', name: 'shared' }, owner);
    assert.ok(await requeued(registry, 'team-a/first'), 'woken when the cache synced');
    assert.equal(registry.queue.len, 0);

    cluster.store.update({ ...created, data: { value: '2' } });
    assert.ok(await requeued(registry, 'team-a/first', 'team-a/second', 'team-a/third'), 'every owner of the object is woken');
  });
});
