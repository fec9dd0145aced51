// Fleet snapshots against real kube-apiservers (two clusters): bootstrap held until both are
// listed, a 5,000-write burst coalesced into a bounded number of snapshots that end equal to the
// servers' state, and own writes visible in the next snapshot.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { eventually, useClusters, type TestCluster } from '../../e2e/harness/index.ts';
import { StaticProvider, type ClusterRef } from '../cluster/index.ts';
import { Registry } from '../registry/index.ts';
import type { KubeObject } from '../transport/index.ts';
import type { GroupVersionKind } from '../util/index.ts';
import { FleetAccumulator, registrySource, snapshotQuery, type FleetSnapshot, type QuerySet } from './index.ts';

interface ConfigMap extends KubeObject {
  readonly data?: Readonly<Record<string, string>>;
}

const CM: GroupVersionKind = { group: '', version: 'v1', kind: 'ConfigMap' };
const SECRET: GroupVersionKind = { group: '', version: 'v1', kind: 'Secret' };
const east: ClusterRef = { kind: 'static', name: 'east' };
const west: ClusterRef = { kind: 'static', name: 'west' };
const NS = 'snap';

const fixture = useClusters(2, { namePrefix: 'snapshot' });

async function ensureNamespace(cluster: TestCluster, name: string): Promise<void> {
  const res = await cluster.request('POST', '/api/v1/namespaces', { metadata: { name } });
  assert.ok(res.statusCode === 201 || res.statusCode === 409, JSON.stringify(res.body));
}

async function create(cluster: TestCluster, plural: string, name: string, data: Record<string, string> = {}): Promise<void> {
  const res = await cluster.request('POST', `/api/v1/namespaces/${NS}/${plural}`, { metadata: { name, namespace: NS }, data });
  assert.equal(res.statusCode, 201, JSON.stringify(res.body));
}

/** name → resourceVersion of what the server holds now. */
async function serverState(cluster: TestCluster, plural: string): Promise<Map<string, string>> {
  const res = await cluster.request('GET', `/api/v1/namespaces/${NS}/${plural}`);
  assert.equal(res.statusCode, 200);
  const items = (res.body as { items: KubeObject[] }).items;
  return new Map(items.map((o) => [o.metadata?.name ?? '', o.metadata?.resourceVersion ?? '']));
}

function stateOf(objs: readonly KubeObject[]): Map<string, string> {
  return new Map(objs.map((o) => [o.metadata?.name ?? '', o.metadata?.resourceVersion ?? '']));
}

/** Whether `promise` has settled after the event loop had a few turns. */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  void promise.then(() => { done = true; }, () => { done = true; });
  for (let i = 0; i < 10; i++) await new Promise<void>((resolve) => { setImmediate(resolve); });
  return done;
}

function pair(): readonly [TestCluster, TestCluster] {
  const [a, b] = fixture.clusters;
  assert.ok(a && b);
  return [a, b];
}

function registryFor(clusters: readonly TestCluster[]): Registry {
  const [a, b] = clusters;
  assert.ok(a && b);
  return new Registry({
    provider: new StaticProvider({ clusters: { east: a.adminKubeconfig, west: b.adminKubeconfig } }),
    credentialCheckIntervalMs: 0,
    informer: { backoff: { initialMs: 200, maxMs: 1_000 } },
  });
}

describe('FleetAccumulator on real apiservers', () => {
  it('holds the first snapshot of two clusters × two kinds until both clusters are listed (one started late)', async (t) => {
    const [a, b] = pair();
    for (const c of [a, b]) await ensureNamespace(c, NS);
    await create(a, 'configmaps', 'boot-a');
    await create(a, 'secrets', 'boot-a');
    await create(b, 'configmaps', 'boot-b');
    await create(b, 'secrets', 'boot-b');
    await b.stopApiserver();
    let restarted = false;
    t.after(async () => { if (!restarted) await b.startApiserver(); });
    const registry = registryFor(fixture.clusters);
    t.after(() => registry.close());
    const acc = new FleetAccumulator({
      source: registrySource(registry),
      queries: {
        eastMaps: { cluster: east, gvk: CM, namespace: NS },
        eastSecrets: { cluster: east, gvk: SECRET, namespace: NS },
        westMaps: { cluster: west, gvk: CM, namespace: NS },
        westSecrets: { cluster: west, gvk: SECRET, namespace: NS },
      },
      openBackoff: { initialMs: 200, maxMs: 1_000 },
    });
    t.after(() => acc.close());
    const it = acc.snapshots()[Symbol.asyncIterator]();
    const first = it.next();
    await eventually('the east queries are listed', () => acc.status().queries.filter((q) => q.phase === 'synced').length === 2, 30_000);
    await eventually('the west queries say why they wait', () => acc.status().queries.filter((q) => q.name.startsWith('west') && q.lastError !== undefined).length === 2, 30_000);
    assert.deepEqual([...acc.status().waitingFor].sort(), ['westMaps', 'westSecrets']);
    assert.equal(await settled(first), false, 'no snapshot of half the fleet');
    await b.startApiserver();
    restarted = true;
    const snap = (await first).value;
    assert.ok(snap);
    assert.deepEqual(snap.objects.eastMaps.map((o) => o.metadata?.name).filter((n) => n === 'boot-a'), ['boot-a']);
    assert.deepEqual(snap.objects.eastSecrets.map((o) => o.metadata?.name), ['boot-a']);
    assert.deepEqual(snap.objects.westMaps.map((o) => o.metadata?.name).filter((n) => n === 'boot-b'), ['boot-b']);
    assert.deepEqual(snap.objects.westSecrets.map((o) => o.metadata?.name), ['boot-b']);
  });

  it('coalesces a burst of 5,000 writes into a bounded number of snapshots, the last equal to the servers\' state', async (t) => {
    const [a, b] = pair();
    for (const c of [a, b]) await ensureNamespace(c, NS);
    const registry = registryFor(fixture.clusters);
    t.after(() => registry.close());
    const minIntervalMs = 100;
    const acc = new FleetAccumulator({
      source: registrySource(registry),
      queries: { east: { cluster: east, gvk: CM, namespace: NS, labelSelector: 'burst' }, west: { cluster: west, gvk: CM, namespace: NS, labelSelector: 'burst' } },
      minIntervalMs,
    });
    t.after(() => acc.close());
    const controller = new AbortController();
    let notifications = 0;
    let latest: FleetSnapshot<QuerySet> | undefined;
    const consumer = (async () => {
      for await (const snap of acc.snapshots(controller.signal)) {
        notifications++;
        latest = snap;
      }
    })();
    await eventually('the first snapshot', () => latest !== undefined, 30_000);
    const before = notifications;
    const startedAt = Date.now();
    const writes: Promise<unknown>[] = [];
    const concurrency = 32;
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < 5_000) {
        const i = next++;
        const cluster = i % 2 === 0 ? a : b;
        const res = await cluster.request('POST', `/api/v1/namespaces/${NS}/configmaps`, { metadata: { name: `burst-${i}`, namespace: NS, labels: { burst: 'yes' } }, data: { i: String(i) } });
        assert.equal(res.statusCode, 201, JSON.stringify(res.body));
      }
    };
    for (let w = 0; w < concurrency; w++) writes.push(worker());
    await Promise.all(writes);
    const [eastServer, westServer] = await Promise.all([serverState(a, 'configmaps'), serverState(b, 'configmaps')]);
    const burstOnly = (m: Map<string, string>): Map<string, string> => new Map([...m].filter(([name]) => name.startsWith('burst-')));
    await eventually('a snapshot holds the whole burst', () => {
      const snap = latest;
      if (snap === undefined) return false;
      const e = stateOf(snap.objects.east ?? []);
      const w = stateOf(snap.objects.west ?? []);
      // Equal to the servers once the caches caught up (checked whole below).
      return e.size === 2_500 && w.size === 2_500;
    }, 120_000);
    const elapsed = Date.now() - startedAt;
    controller.abort();
    await consumer;
    const snap = latest;
    assert.ok(snap);
    assert.deepEqual(stateOf(snap.objects.east ?? []), burstOnly(eastServer), 'east: equal to the server, resourceVersions included');
    assert.deepEqual(stateOf(snap.objects.west ?? []), burstOnly(westServer), 'west: equal to the server, resourceVersions included');
    const during = notifications - before;
    // At most one per interval (plus the one that may be due at the start): the coalescing bound.
    assert.ok(during <= Math.ceil(elapsed / minIntervalMs) + 1, `${during} snapshots in ${elapsed} ms`);
    assert.ok(during < 5_000 / 10, `${during} snapshots for 5,000 writes`);
    t.diagnostic(`5,000 writes: ${during} snapshots in ${elapsed} ms`);
  });

  it('makes own writes visible in the next snapshot', async (t) => {
    const [a] = fixture.clusters;
    assert.ok(a);
    await ensureNamespace(a, NS);
    const registry = registryFor(fixture.clusters);
    t.after(() => registry.close());
    const queries = { maps: snapshotQuery<ConfigMap>({ cluster: east, gvk: CM, namespace: NS, labelSelector: 'own' }) };
    const acc = new FleetAccumulator({ source: registrySource(registry), queries, minIntervalMs: 0 });
    t.after(() => acc.close());
    const it = acc.snapshots()[Symbol.asyncIterator]();
    const take = async (): Promise<FleetSnapshot<typeof queries>> => {
      const r = await it.next();
      assert.ok(r.done !== true, 'the iterator ended');
      return r.value;
    };
    const own = (snap: { objects: { maps: readonly ConfigMap[] } }): ConfigMap | undefined => snap.objects.maps.find((o) => o.metadata?.name === 'own-1');
    await take();
    const created = await acc.client.create('maps', { metadata: { name: 'own-1', labels: { own: 'yes' } }, data: { v: '1' } });
    assert.equal(own(await take())?.metadata?.resourceVersion, created.metadata?.resourceVersion);
    const updated = await acc.client.update('maps', { ...created, data: { v: '2' } });
    const afterUpdate = own(await take());
    assert.equal(afterUpdate?.data?.v, '2');
    assert.equal(afterUpdate.metadata?.resourceVersion, updated.metadata?.resourceVersion);
    const patched = await acc.client.patch('maps', { name: 'own-1' }, { data: { v: '3' } });
    assert.equal(own(await take())?.metadata?.resourceVersion, patched.metadata?.resourceVersion);
    await acc.client.delete('maps', { name: 'own-1' });
    assert.equal(own(await take()), undefined);
    await eventually('the cache caught up with the writes', () => acc.status().queries[0]?.pendingWrites === 0, 20_000);
  });
});
