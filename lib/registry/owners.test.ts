// watchOwners: the owner kind feeds the registry's queue, and deleted owners are forgotten.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SimulatedCluster, type KubeObject } from '../../fixtures/index.ts';
import { StaticProvider, type ClusterRef } from '../cluster/index.ts';
import { FakeClock, type GroupVersionKind } from '../util/index.ts';
import type { Registry} from './index.ts';
import { parseOwnerKey, watchOwners, type CacheInfo, type OwnerKey } from './index.ts';
import { registryWithKeeper } from './testing.ts';
import { eventually } from '../../fixtures/support/index.ts';

const widgets: GroupVersionKind = { group: 'example.com', version: 'v1', kind: 'Widget' };
const configMaps: GroupVersionKind = { group: '', version: 'v1', kind: 'ConfigMap' };
const sim: ClusterRef = { kind: 'static', name: 'sim' };

async function setup(t: { after(fn: () => Promise<void>): void }): Promise<{ cluster: SimulatedCluster; registry: Registry }> {
  const cluster = await SimulatedCluster.start({ namespaces: ['apps'], kinds: [{ ...widgets, plural: 'widgets', namespaced: true }] });
  t.after(() => cluster.close());
  // A fake clock: no GC check or credential check runs while a test reads the queue.
  const registry = registryWithKeeper({ provider: new StaticProvider({ clusters: { sim: cluster.kubeconfig } }), clock: new FakeClock(Date.now()), credentialCheckIntervalMs: 0 });
  t.after(() => registry.close());
  return { cluster, registry };
}

/** The next key on the registry's queue (marked done and forgotten, as a worker would), or undefined after 5 s. */
async function next(registry: Registry): Promise<OwnerKey | undefined> {
  const got = await registry.queue.get(AbortSignal.timeout(5_000)).catch(() => undefined);
  if (got === undefined) return undefined;
  registry.queue.done(got.item);
  registry.queue.forget(got.item);
  return got.item;
}

function widget(name: string, spec: Record<string, number>, labels: Record<string, string> = {}): KubeObject {
  return { apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name, namespace: 'apps', labels }, spec };
}

describe('watchOwners', () => {
  it('requeues owners that exist, appear and change, and forgets those deleted', async (t) => {
    const { cluster, registry } = await setup(t);
    cluster.store.create(widget('old', { size: 1 }));
    const owners = await watchOwners(registry, { cluster: sim, gvk: widgets });
    t.after(() => { owners.release(); });
    await owners.waitForSync(AbortSignal.timeout(10_000));
    assert.equal(await next(registry), 'example.com/Widget/apps/old', 'an owner of the initial list');
    await cluster.waitFor((c) => c.openWatches === 1);

    cluster.store.create(widget('new', { size: 1 }));
    assert.equal(await next(registry), 'example.com/Widget/apps/new', 'an owner that appears');
    const current = cluster.store.get({ apiVersion: 'example.com/v1', kind: 'Widget', namespace: 'apps', name: 'new' })!;
    cluster.store.update({ ...current, spec: { size: 2 } });
    assert.equal(await next(registry), 'example.com/Widget/apps/new', 'an owner that changes');

    // The owner uses a target; deleting the owner releases it.
    const owner = { group: 'example.com', kind: 'Widget', namespace: 'apps', name: 'new' };
    registry.setOwnerTargets(owner, [{ cluster: sim, target: { gvk: configMaps, namespace: 'apps', name: 'x' } }]);
    await registry.watchTargetAndGetReader(sim, { gvk: configMaps, namespace: 'apps', name: 'x' }, owner);
    const ownersOfConfigMaps = (): number | undefined => registry.caches().find((c) => c.gvk.kind === 'ConfigMap')?.owners;
    assert.equal(ownersOfConfigMaps(), 1);
    cluster.store.delete({ apiVersion: 'example.com/v1', kind: 'Widget', namespace: 'apps', name: 'new' });
    await eventually('the deleted owner is forgotten', () => ownersOfConfigMaps() === 0, 10_000);
    assert.equal(ownersOfConfigMaps(), 0, 'the deleted owner was forgotten');

    owners.release();
    cluster.store.create(widget('after', { size: 1 }));
    assert.equal(await next(registry), undefined, 'released: nothing more is queued');
  });

  it('with updates: generation, requeues on spec changes only', async (t) => {
    const { cluster, registry } = await setup(t);
    cluster.store.create(widget('w', { size: 1 }));
    const owners = await watchOwners(registry, { cluster: sim, gvk: widgets, updates: 'generation' });
    t.after(() => { owners.release(); });
    await owners.waitForSync(AbortSignal.timeout(10_000));
    assert.equal(await next(registry), 'example.com/Widget/apps/w');
    await cluster.waitFor((c) => c.openWatches === 1);
    const ref = { apiVersion: 'example.com/v1', kind: 'Widget', namespace: 'apps', name: 'w' };
    const stored = (): KubeObject => cluster.store.get(ref)!;
    cluster.store.update({ ...stored(), metadata: { ...stored().metadata, labels: { seen: 'yes' } } });
    await eventually('the label change is seen', () => owners.get('apps', 'w')?.metadata?.labels?.seen === 'yes', 10_000);
    assert.equal(owners.get('apps', 'w')?.metadata?.labels?.seen, 'yes', 'the label change was seen...');
    assert.equal(registry.queue.len, 0, '...and queued nothing');
    cluster.store.update({ ...stored(), spec: { size: 2 } });
    assert.equal(await next(registry), 'example.com/Widget/apps/w', 'the spec change');
  });

  it('lets two owner kinds share one cache: each is woken, and forgetting one leaves the other', async (t) => {
    const gadgets: GroupVersionKind = { group: 'example.com', version: 'v1', kind: 'Gadget' };
    const { cluster, registry } = await setup(t);
    cluster.registerKind({ ...gadgets, plural: 'gadgets', namespaced: true });
    cluster.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'shared', namespace: 'apps' }, data: { v: '1' } });
    cluster.store.create(widget('same', { size: 1 }));
    cluster.store.create({ apiVersion: 'example.com/v1', kind: 'Gadget', metadata: { name: 'same', namespace: 'apps' }, spec: { size: 1 } });
    const widgetOwners = await watchOwners(registry, { cluster: sim, gvk: widgets });
    const gadgetOwners = await watchOwners(registry, { cluster: sim, gvk: gadgets });
    t.after(() => { widgetOwners.release(); gadgetOwners.release(); });
    await widgetOwners.waitForSync(AbortSignal.timeout(10_000));
    await gadgetOwners.waitForSync(AbortSignal.timeout(10_000));
    const keys = new Set([await next(registry), await next(registry)]);
    assert.deepEqual([...keys].sort(), ['example.com/Gadget/apps/same', 'example.com/Widget/apps/same'], 'same namespace/name, two owners');

    const target = { gvk: configMaps, namespace: 'apps', name: 'shared' };
    for (const key of keys) {
      const owner = parseOwnerKey(key ?? assert.fail('no owner was requeued'));
      registry.setOwnerTargets(owner, [{ cluster: sim, target }]);
      await (await registry.watchTargetAndGetReader(sim, target, owner)).waitForSync(AbortSignal.timeout(10_000));
    }
    const configMapCaches = (): CacheInfo[] => registry.caches().filter((c) => c.gvk.kind === 'ConfigMap');
    assert.equal(configMapCaches().length, 1, 'one cache for both controllers');
    assert.equal(configMapCaches()[0]?.owners, 2);
    await next(registry); // the wake-up at sync
    await cluster.waitFor((c) => c.openWatches === 3);
    while (registry.queue.len > 0) await next(registry);

    const current = cluster.store.get({ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'apps', name: 'shared' })!;
    cluster.store.update({ ...current, data: { v: '2' } });
    assert.deepEqual(new Set([await next(registry), await next(registry)]), keys, 'a change of the shared target wakes both kinds');

    cluster.store.delete({ apiVersion: 'example.com/v1', kind: 'Widget', namespace: 'apps', name: 'same' });
    await eventually('one owner left on the cache', () => configMapCaches()[0]?.owners === 1, 10_000);
    assert.equal(configMapCaches()[0]?.owners, 1, 'the Gadget of the same namespace/name still uses the cache');
  });

  it('refuses an unknown updates option', async (t) => {
    const { registry } = await setup(t);
    assert.throws(() => watchOwners(registry, { cluster: sim, gvk: widgets, updates: 'some' as 'any' }), (err: unknown) => err instanceof TypeError && err.message.includes('updates'));
  });

  it('with a labelSelector, holds and requeues only the owners it selects, and forgets one whose labels stop matching', async (t) => {
    const { cluster, registry } = await setup(t);
    cluster.store.create(widget('mine', { size: 1 }, { team: 'a' }));
    cluster.store.create(widget('theirs', { size: 1 }, { team: 'b' }));
    const owners = await watchOwners(registry, { cluster: sim, gvk: widgets, labelSelector: 'team = a' });
    t.after(() => { owners.release(); });
    await owners.waitForSync(AbortSignal.timeout(10_000));
    assert.equal(await next(registry), 'example.com/Widget/apps/mine');
    assert.equal(await next(registry), undefined, 'the unselected owner is never queued');
    assert.deepEqual(owners.list().map((o) => o.metadata?.name), ['mine'], 'the cache holds only what is selected');
    assert.deepEqual(registry.caches().filter((c) => c.gvk.kind === 'Widget').map((c) => c.labelSelector), ['team=a'], 'sent to the server, canonical');
    await cluster.waitFor((c) => c.openWatches === 1);

    // The selected owner uses a target; relabelled out of the selection, it is forgotten.
    const owner = { group: 'example.com', kind: 'Widget', namespace: 'apps', name: 'mine' };
    registry.setOwnerTargets(owner, [{ cluster: sim, target: { gvk: configMaps, namespace: 'apps', name: 'x' } }]);
    await registry.watchTargetAndGetReader(sim, { gvk: configMaps, namespace: 'apps', name: 'x' }, owner);
    const ownersOfConfigMaps = (): number | undefined => registry.caches().find((c) => c.gvk.kind === 'ConfigMap')?.owners;
    assert.equal(ownersOfConfigMaps(), 1);
    const ref = (name: string): { apiVersion: string; kind: string; namespace: string; name: string } => ({ apiVersion: 'example.com/v1', kind: 'Widget', namespace: 'apps', name });
    const relabel = (name: string, team: string): void => {
      const o = cluster.store.get(ref(name))!;
      cluster.store.update({ ...o, metadata: { ...o.metadata, labels: { team } } });
    };
    relabel('mine', 'b');
    await eventually('the owner that left the selection is forgotten', () => ownersOfConfigMaps() === 0, 10_000);
    assert.equal(owners.get({ namespace: 'apps', name: 'mine' }), undefined);
    relabel('theirs', 'a');
    assert.equal(await next(registry), 'example.com/Widget/apps/theirs', 'an owner entering the selection is queued');
  });
});
