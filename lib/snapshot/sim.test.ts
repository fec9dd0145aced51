// The accumulator on the registry's caches, against the simulated API server: what a real server
// cannot do on demand (a 410 relist in the middle of a burst, a cluster down during bootstrap).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SimulatedCluster, type KubeObject as SimObject } from '../../fixtures/index.ts';
import { SecretProvider, StaticProvider, type ClusterRef, type SecretReader } from '../cluster/index.ts';
import type { GroupVersionKind } from '../util/index.ts';
import { FleetAccumulator, registrySource, type FleetSnapshot, type QuerySet } from './index.ts';
import { registryWithKeeper } from '../registry/testing.ts';
import { eventually } from '../../fixtures/support/index.ts';

const CM: GroupVersionKind = { group: '', version: 'v1', kind: 'ConfigMap' };
const SECRET: GroupVersionKind = { group: '', version: 'v1', kind: 'Secret' };
const east: ClusterRef = { kind: 'static', name: 'east' };
const west: ClusterRef = { kind: 'static', name: 'west' };

function configMap(name: string, v: string): SimObject {
  return { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: 'apps' }, data: { v } };
}

/** Whether `promise` has settled after the event loop had a few turns. */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  void promise.then(() => { done = true; }, () => { done = true; });
  for (let i = 0; i < 10; i++) await new Promise<void>((resolve) => { setImmediate(resolve); });
  return done;
}

function summary<Q extends QuerySet>(snap: FleetSnapshot<Q>): string[] {
  return snap.deltas.map((d) => `${d.type}:${d.object.metadata?.name}:${d.finalStateUnknown}`).sort();
}

/** Kubeconfig Secrets in memory, by `namespace/name` (what a SecretProvider reads). */
class Secrets implements SecretReader {
  readonly #kubeconfigs = new Map<string, string>();

  put(namespace: string, name: string, kubeconfig: string): void {
    this.#kubeconfigs.set(`${namespace}/${name}`, Buffer.from(kubeconfig).toString('base64'));
  }

  delete(namespace: string, name: string): void {
    this.#kubeconfigs.delete(`${namespace}/${name}`);
  }

  getSecret(namespace: string, name: string): Promise<{ data: Record<string, string> } | undefined> {
    const value = this.#kubeconfigs.get(`${namespace}/${name}`);
    return Promise.resolve(value === undefined ? undefined : { data: { value } });
  }
}

describe('FleetAccumulator on the registry (simulated API server)', () => {
  it('a slow consumer gets one snapshot with the newest state of a whole burst, never the states in between', async (t) => {
    const cluster = await SimulatedCluster.start({ namespaces: ['apps'] });
    t.after(() => cluster.close());
    const registry = registryWithKeeper({ provider: new StaticProvider({ clusters: { east: cluster.kubeconfig } }), credentialCheckIntervalMs: 0 });
    t.after(() => registry.close());
    const acc = new FleetAccumulator({ source: registrySource(registry), queries: { maps: { cluster: east, gvk: CM, namespace: 'apps' } }, minIntervalMs: 10 });
    t.after(() => acc.close());
    const it = acc.snapshots()[Symbol.asyncIterator]();
    const first = await it.next();
    assert.deepEqual(first.value?.objects.maps, []);
    // The consumer is busy while 200 objects are created and each updated twice.
    for (let i = 0; i < 200; i++) cluster.store.create(configMap(`o${i}`, '0'));
    for (let round = 1; round <= 2; round++) {
      for (let i = 0; i < 200; i++) {
        const current = cluster.store.get({ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'apps', name: `o${i}` });
        cluster.store.update({ ...current, data: { v: String(round) } });
      }
    }
    const reader = await registry.reader(east, CM, { namespace: 'apps' });
    t.after(() => { reader.release(); });
    await eventually('the cache holds the last state', () => reader.list().filter((o) => (o as { data?: { v?: string } }).data?.v === '2').length === 200);
    const next = await it.next();
    const snap = next.value;
    assert.ok(snap);
    assert.equal(snap.objects.maps.length, 200);
    assert.ok(snap.objects.maps.every((o) => (o as { data?: { v?: string } }).data?.v === '2'), 'the newest state of every object');
    assert.equal(snap.deltas.length, 200, 'one add per object: the 600 changes were coalesced');
    assert.ok(snap.deltas.every((d) => d.type === 'add'));
    assert.equal(await settled(it.next()), false, 'nothing more is due: nothing was queued');
    await acc.close();
  });

  it('a 410 relist during a burst yields the synthesized deletes, marked finalStateUnknown, beside the burst\'s changes', async (t) => {
    const cluster = await SimulatedCluster.start({ namespaces: ['apps'] });
    t.after(() => cluster.close());
    for (let i = 0; i < 30; i++) cluster.store.create(configMap(`o${i}`, '0'));
    const registry = registryWithKeeper({
      provider: new StaticProvider({ clusters: { east: cluster.kubeconfig } }),
      credentialCheckIntervalMs: 0,
      informer: { backoff: { initialMs: 50, maxMs: 50, jitter: 0 } },
    });
    t.after(() => registry.close());
    const acc = new FleetAccumulator({ source: registrySource(registry), queries: { maps: { cluster: east, gvk: CM, namespace: 'apps' } }, minIntervalMs: 10 });
    t.after(() => acc.close());
    const it = acc.snapshots()[Symbol.asyncIterator]();
    assert.equal((await it.next()).value?.objects.maps.length, 30);
    await cluster.waitFor((c) => c.openWatches === 1, { timeoutMs: 10_000 });
    // The watch hears nothing of the burst: it is stalled, then reset, and its resourceVersion compacted away.
    cluster.faults.stallWatches(600_000);
    for (let i = 0; i < 10; i++) cluster.store.delete({ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'apps', name: `o${i}` });
    for (let i = 10; i < 20; i++) {
      const current = cluster.store.get({ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'apps', name: `o${i}` });
      cluster.store.update({ ...current, data: { v: '1' } });
    }
    for (let i = 0; i < 5; i++) cluster.store.create(configMap(`n${i}`, '1'));
    cluster.faults.compact();
    cluster.faults.cutWatches({ mode: 'reset' });
    cluster.faults.clear();
    await eventually('the cache relisted', () => acc.status().queries[0]?.objects === 25);
    const snap = (await it.next()).value;
    assert.ok(snap);
    const expected = [
      ...Array.from({ length: 10 }, (_, i) => `delete:o${i}:true`),
      ...Array.from({ length: 10 }, (_, i) => `update:o${i + 10}:false`),
      ...Array.from({ length: 5 }, (_, i) => `add:n${i}:false`),
    ].sort();
    assert.deepEqual(summary(snap), expected);
    assert.ok(cluster.counters.requests.list >= 2, 'the informer relisted');
  });

  it('a cluster down during bootstrap holds the first snapshot, status says why, and it is delivered once the cluster is up', async (t) => {
    const [up, down] = await Promise.all([SimulatedCluster.start({ namespaces: ['apps'] }), SimulatedCluster.start({ namespaces: ['apps'] })]);
    t.after(() => up.close());
    t.after(() => down.close());
    up.store.create(configMap('a', '1'));
    down.store.create({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 's', namespace: 'apps' }, data: {} });
    await down.faults.down({ mode: 'refuse' });
    const registry = registryWithKeeper({ provider: new StaticProvider({ clusters: { east: up.kubeconfig, west: down.kubeconfig } }), credentialCheckIntervalMs: 0 });
    t.after(() => registry.close());
    const acc = new FleetAccumulator({
      source: registrySource(registry),
      queries: { maps: { cluster: east, gvk: CM, namespace: 'apps' }, secrets: { cluster: west, gvk: SECRET, namespace: 'apps' } },
      openBackoff: { initialMs: 100, maxMs: 200 },
    });
    t.after(() => acc.close());
    const it = acc.snapshots()[Symbol.asyncIterator]();
    const first = it.next();
    await eventually('the down cluster\'s error is reported', () => acc.status().queries.find((q) => q.name === 'secrets')?.lastError !== undefined);
    await eventually('the other query is listed', () => acc.status().queries.find((q) => q.name === 'maps')?.phase === 'synced');
    const status = acc.status();
    assert.equal(status.bootstrapped, false);
    assert.deepEqual(status.waitingFor, ['secrets']);
    assert.match(String(status.queries.find((q) => q.name === 'secrets')?.lastError?.message), /west/);
    assert.equal(await settled(first), false, 'no partial world is delivered');
    await down.faults.up();
    const snap = (await first).value;
    assert.ok(snap);
    assert.deepEqual(snap.objects.maps.map((o) => o.metadata?.name), ['a']);
    assert.deepEqual(snap.objects.secrets.map((o) => o.metadata?.name), ['s']);
  });

  it('own writes are in the next snapshot while the watch is stalled, and the stalled events never roll them back', async (t) => {
    const cluster = await SimulatedCluster.start({ namespaces: ['apps'] });
    t.after(() => cluster.close());
    cluster.store.create(configMap('a', '0'));
    const registry = registryWithKeeper({ provider: new StaticProvider({ clusters: { east: cluster.kubeconfig } }), credentialCheckIntervalMs: 0 });
    t.after(() => registry.close());
    const acc = new FleetAccumulator({ source: registrySource(registry), queries: { maps: { cluster: east, gvk: CM, namespace: 'apps' } }, minIntervalMs: 0 });
    t.after(() => acc.close());
    const it = acc.snapshots()[Symbol.asyncIterator]();
    await it.next();
    await cluster.waitFor((c) => c.openWatches === 1, { timeoutMs: 10_000 });
    cluster.faults.stallWatches(600_000);
    const v = (o: Readonly<Record<string, unknown>> | undefined): unknown => (o?.data as { v?: string } | undefined)?.v;
    // Another writer's change, then ours: the watch will deliver both, the older first.
    const theirs = cluster.store.get({ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'apps', name: 'a' });
    cluster.store.update({ ...theirs, data: { v: 'theirs' } });
    await acc.client.patch('maps', { name: 'a' }, { data: { v: 'mine' } });
    await acc.client.create('maps', { metadata: { name: 'b' }, data: { v: 'new' } });
    const snap = (await it.next()).value;
    assert.ok(snap);
    assert.equal(v(snap.objects.maps.find((o) => o.metadata?.name === 'a')), 'mine');
    assert.equal(v(snap.objects.maps.find((o) => o.metadata?.name === 'b')), 'new');
    assert.equal(acc.status().queries[0]?.pendingWrites, 2, 'the cache has seen neither write');
    cluster.faults.resumeWatches();
    await eventually('the cache caught up', () => acc.status().queries[0]?.pendingWrites === 0);
    assert.equal(await settled(it.next()), false, 'the stalled events changed nothing: no snapshot is due');
  });

  it('a cluster whose kubeconfig Secret is deleted leaves the snapshot (finalStateUnknown deletes, gone); once the Secret is back it is followed again', async (t) => {
    const [hub, edge] = await Promise.all([SimulatedCluster.start({ namespaces: ['apps'] }), SimulatedCluster.start({ namespaces: ['apps'] })]);
    t.after(() => hub.close());
    t.after(() => edge.close());
    hub.store.create(configMap('h', '1'));
    edge.store.create(configMap('e1', '1'));
    edge.store.create(configMap('e2', '1'));
    const secrets = new Secrets();
    secrets.put('apps', 'hub', hub.kubeconfig);
    secrets.put('apps', 'edge', edge.kubeconfig);
    const registry = registryWithKeeper({ provider: new SecretProvider({ secrets }), credentialCheckIntervalMs: 0 });
    t.after(() => registry.close());
    const edgeRef: ClusterRef = { kind: 'secret', name: 'edge' };
    const acc = new FleetAccumulator({
      source: registrySource(registry),
      queries: { hub: { cluster: { kind: 'secret', name: 'hub' }, gvk: CM, namespace: 'apps' }, edge: { cluster: edgeRef, gvk: CM, namespace: 'apps' } },
      minIntervalMs: 0,
      checkIntervalMs: 50,
      openBackoff: { initialMs: 50, maxMs: 100 },
    });
    t.after(() => acc.close());
    const it = acc.snapshots()[Symbol.asyncIterator]();
    const first = (await it.next()).value;
    assert.deepEqual(first?.objects.edge.map((o) => o.metadata?.name).sort(), ['e1', 'e2']);
    assert.equal(first.freshness.edge.state, 'live');

    secrets.delete('apps', 'edge');
    await registry.checkCluster(edgeRef, 'apps');
    const gone = (await it.next()).value;
    assert.ok(gone);
    assert.deepEqual(summary(gone), ['delete:e1:true', 'delete:e2:true']);
    assert.deepEqual(gone.objects.edge, []);
    assert.deepEqual(gone.objects.hub.map((o) => o.metadata?.name), ['h']);
    assert.equal(gone.freshness.edge.state, 'gone');
    assert.equal(gone.freshness.hub.state, 'live');
    assert.equal(acc.status().queries.find((q) => q.name === 'edge')?.freshness.state, 'gone');
    edge.store.create(configMap('e3', '1'));
    const next = it.next();
    assert.equal(await settled(next), false, 'out of the fleet: nothing more about it');

    secrets.put('apps', 'edge', edge.kubeconfig);
    await eventually('the cluster is followed again', () => acc.status().queries.find((q) => q.name === 'edge')?.freshness.state === 'live');
    const back = (await next).value;
    assert.ok(back);
    assert.deepEqual(summary(back), ['add:e1:false', 'add:e2:false', 'add:e3:false']);
    assert.equal(back.freshness.edge.state, 'live');
    edge.store.create(configMap('e4', '1'));
    assert.deepEqual(summary((await it.next()).value ?? back), ['add:e4:false'], 'its watch is followed again');
  });

  it('a cluster down is stale in the snapshots, with the last time it was in sync, and live again once it is up', async (t) => {
    const cluster = await SimulatedCluster.start({ namespaces: ['apps'] });
    t.after(() => cluster.close());
    cluster.store.create(configMap('a', '1'));
    const registry = registryWithKeeper({
      provider: new StaticProvider({ clusters: { east: cluster.kubeconfig } }),
      credentialCheckIntervalMs: 0,
      informer: { backoff: { initialMs: 50, maxMs: 100, jitter: 0 } },
    });
    t.after(() => registry.close());
    const acc = new FleetAccumulator({ source: registrySource(registry), queries: { maps: { cluster: east, gvk: CM, namespace: 'apps' } }, minIntervalMs: 0, checkIntervalMs: 50 });
    t.after(() => acc.close());
    const it = acc.snapshots()[Symbol.asyncIterator]();
    const first = (await it.next()).value;
    assert.equal(first?.freshness.maps.state, 'live');
    await cluster.waitFor((c) => c.openWatches === 1, { timeoutMs: 10_000 });
    const downAt = Date.now();
    await cluster.faults.down({ mode: 'refuse' });
    const stale = (await it.next()).value;
    assert.ok(stale);
    assert.equal(stale.freshness.maps.state, 'stale');
    assert.deepEqual(stale.deltas, []);
    assert.deepEqual(stale.objects.maps.map((o) => o.metadata?.name), ['a'], 'its objects as last seen');
    const syncedAt = stale.freshness.maps.syncedAt ?? 0;
    assert.ok(syncedAt <= stale.takenAt && syncedAt >= downAt - 200, `last in sync just before it went down (${syncedAt - downAt} ms)`);
    await cluster.faults.up();
    const live = (await it.next()).value;
    assert.equal(live?.freshness.maps.state, 'live');
  });
});
