// The process memory budget: over it, a call that would build a new cache is refused with a typed
// error naming cluster, kind, budget and figure, before any request; caches already built (on this
// cluster and others) and held readers carry on, and the next call once memory is back under the
// budget builds.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SimulatedCluster } from '../../fixtures/index.ts';
import { StaticProvider, type ClusterRef } from '../cluster/index.ts';
import { FakeClock, type GroupVersionKind } from '../util/index.ts';
import { MemoryBudgetExceededError, type Registry } from './index.ts';
import { registryWithKeeper } from './testing.ts';

const configMaps: GroupVersionKind = { group: '', version: 'v1', kind: 'ConfigMap' };
const secrets: GroupVersionKind = { group: '', version: 'v1', kind: 'Secret' };
const east: ClusterRef = { kind: 'static', name: 'east' };
const west: ClusterRef = { kind: 'static', name: 'west' };
const MiB = 2 ** 20;

function configMap(name: string, value: string): { apiVersion: string; kind: string; metadata: { name: string; namespace: string }; data: Record<string, string> } {
  return { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: 'apps' }, data: { value } };
}

/** Takes owner keys off the queue until `expected` comes (true) or 5 s pass (false). */
async function requeued(registry: Registry, expected: string): Promise<boolean> {
  const signal = AbortSignal.timeout(5_000);
  for (;;) {
    const next = await registry.queue.get(signal).catch(() => undefined);
    if (next === undefined) return false;
    registry.queue.done(next.item);
    registry.queue.forget(next.item);
    if (next.item === expected) return true;
  }
}

/** Two simulated clusters, a registry whose memory reader returns `memory.rss`, a budget of 100 MiB. */
async function setup(t: { after(fn: () => Promise<void>): void }): Promise<{ clusters: Record<'east' | 'west', SimulatedCluster>; registry: Registry; memory: { rss: number; reads: number } }> {
  const clusters = { east: await SimulatedCluster.start({ namespaces: ['apps'] }), west: await SimulatedCluster.start({ namespaces: ['apps'] }) };
  t.after(async () => { await clusters.east.close(); await clusters.west.close(); });
  const memory = { rss: 50 * MiB, reads: 0 };
  const registry = registryWithKeeper({
    provider: new StaticProvider({ clusters: { east: clusters.east.kubeconfig, west: clusters.west.kubeconfig } }),
    clock: new FakeClock(Date.now()),
    credentialCheckIntervalMs: 0,
    memoryBudget: { maxRssBytes: 100 * MiB, readRss: () => { memory.reads += 1; return memory.rss; } },
  });
  t.after(() => registry.close());
  return { clusters, registry, memory };
}

describe('Registry memory budget', () => {
  it('refuses a new cache over the budget, before any request, with cluster, kind, budget and figure', async (t) => {
    const { clusters, registry, memory } = await setup(t);
    memory.rss = 120 * MiB;
    const before = clusters.east.counters.totalRequests;
    await assert.rejects(registry.watchTargetAndGetReader(east, { gvk: configMaps, namespace: 'apps', name: 'a' }, { namespace: 'team-a', name: 'o' }), (err: unknown) => {
      assert.ok(err instanceof MemoryBudgetExceededError);
      assert.equal(err.code, 'ERR_MEMORY_BUDGET_EXCEEDED');
      assert.equal(err.cluster, 'static:east');
      assert.deepEqual(err.gvk, configMaps);
      assert.equal(err.maxRssBytes, 100 * MiB);
      assert.equal(err.rssBytes, 120 * MiB);
      assert.match(err.message, /^cluster static:east, v1, Kind=ConfigMap: new cache refused: .*\(120 MiB\) is over its budget of 100 MiB/);
      return true;
    });
    await assert.rejects(registry.watchTargetAndGetReader(east, { gvk: configMaps, namespace: 'apps', name: 'b' }, { namespace: 'team-b', name: 'o' }), MemoryBudgetExceededError);
    assert.equal(clusters.east.counters.totalRequests, before, 'nothing was requested');
    assert.equal(registry.caches().length, 0);
    assert.deepEqual(registry.memoryBudget(), { maxRssBytes: 100 * MiB, refusals: 2 });
    // A held reader (the owners' own cache) is not refused: without it nothing is reconciled.
    const owners = await registry.reader(east, secrets, { namespace: 'apps' });
    await owners.waitForSync(AbortSignal.timeout(10_000));
    owners.release();
    assert.equal(registry.memoryBudget()?.refusals, 2);

    // Nothing refused is remembered: back under the budget, the next call builds.
    memory.rss = 99 * MiB;
    const reader = await registry.watchTargetAndGetReader(east, { gvk: configMaps, namespace: 'apps', name: 'a' }, { namespace: 'team-a', name: 'o' });
    await reader.waitForSync(AbortSignal.timeout(10_000));
    assert.equal(registry.memoryBudget()?.refusals, 2);
  });

  it('lets caches already built carry on, on the refused cluster and on others, and callers join them', async (t) => {
    const { clusters, registry, memory } = await setup(t);
    clusters.east.store.create(configMap('a', '1'));
    clusters.west.store.create(configMap('b', '1'));
    const eastReader = await registry.watchTargetAndGetReader(east, { gvk: configMaps, namespace: 'apps', name: 'a' }, { namespace: 'team-a', name: 'east-owner' });
    const westReader = await registry.watchTargetAndGetReader(west, { gvk: configMaps, namespace: 'apps', name: 'b' }, { namespace: 'team-a', name: 'west-owner' });
    await eastReader.waitForSync(AbortSignal.timeout(10_000));
    await westReader.waitForSync(AbortSignal.timeout(10_000));
    await clusters.east.waitFor((c) => c.openWatches === 1);
    await clusters.west.waitFor((c) => c.openWatches === 1);
    const reads = memory.reads;

    memory.rss = 500 * MiB;
    // New caches are refused on both clusters...
    await assert.rejects(registry.watchTargetAndGetReader(east, { gvk: secrets, namespace: 'apps', name: 's' }, { namespace: 'team-a', name: 'east-owner' }), MemoryBudgetExceededError);
    await assert.rejects(registry.watchTargetAndGetReader(west, { gvk: secrets, namespace: 'apps', name: 's' }, { namespace: 'team-a', name: 'west-owner' }), MemoryBudgetExceededError);
    // ...while a cache already built serves a new owner, of a namespace not admitted before (no memory read: nothing is built)...
    const joined = await registry.watchTargetAndGetReader(west, { gvk: configMaps, namespace: 'apps', name: 'b' }, { namespace: 'team-b', name: 'another' });
    assert.deepEqual(joined.get('apps', 'b')?.data, { value: '1' });
    assert.equal(memory.reads, reads + 2, 'memory is read only for the two new caches');
    // ...and both clusters' caches keep taking events and waking their owners (the wake-ups of their syncs taken first).
    while (registry.queue.len > 0) {
      const next = await registry.queue.get();
      if (next !== undefined) registry.queue.done(next.item);
    }
    clusters.east.store.update(configMap('a', '2'));
    assert.ok(await requeued(registry, 'team-a/east-owner'), 'the east owner is woken');
    clusters.west.store.update(configMap('b', '2'));
    assert.ok(await requeued(registry, 'team-a/west-owner'), 'the west owner is woken');
    assert.deepEqual(eastReader.get('apps', 'a')?.data, { value: '2' });
    assert.deepEqual(westReader.get('apps', 'b')?.data, { value: '2' });
    assert.equal(registry.caches().length, 2);
    assert.equal(registry.memoryBudget()?.refusals, 2);
  });

  it('lets a caller join a build that started under the budget', async (t) => {
    const { registry, memory } = await setup(t);
    const first = registry.watchTargetAndGetReader(east, { gvk: configMaps, namespace: 'apps', name: 'a' }, { namespace: 'team-a', name: 'one' });
    memory.rss = 500 * MiB; // while the build is in flight
    const second = registry.watchTargetAndGetReader(east, { gvk: configMaps, namespace: 'apps', name: 'a' }, { namespace: 'team-a', name: 'two' });
    const [a, b] = await Promise.all([first, second]);
    assert.equal(a, b, 'one cache, one reader');
    assert.equal(registry.memoryBudget()?.refusals, 0);
  });

  it('refuses a budget that is not a positive number, and a reader that is not a function', async (t) => {
    const cluster = await SimulatedCluster.start();
    t.after(() => cluster.close());
    const provider = new StaticProvider({ clusters: { east: cluster.kubeconfig } });
    assert.throws(() => registryWithKeeper({ provider, memoryBudget: { maxRssBytes: 0 } }), /registry option memoryBudget\.maxRssBytes must be a positive number, got 0/);
    assert.throws(() => registryWithKeeper({ provider, memoryBudget: { maxRssBytes: 1, readRss: 5 as never } }), /registry option memoryBudget\.readRss must be a function/);
    assert.throws(() => registryWithKeeper({ provider, memoryBudget: null as never }), /registry option memoryBudget must be an object/);
  });
});
