// Set targets (a namespace, or a label/field selector) wake their owner when an object enters,
// changes in, leaves or is deleted from the set, and only then. "Not woken" is proved without
// timing: after the change under test, a sentinel object (an exact target of its own owner, in a
// namespace no set under test covers) is changed in the same cache; the watch delivers in order,
// so once the sentinel's owner is taken off the queue, every owner the earlier change woke was too.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SimulatedCluster } from '../../fixtures/index.ts';
import type { KubeObject } from '../../fixtures/sim/index.ts';
import { StaticProvider, type ClusterRef } from '../cluster/index.ts';
import { FakeClock, type GroupVersionKind } from '../util/index.ts';
import type { Registry} from './index.ts';
import { type CacheReader, type OwnerRef, type TargetRef } from './index.ts';
import { registryWithKeeper } from './testing.ts';
import { eventually, EVERY_TURN } from '../../fixtures/support/index.ts';

const configMaps: GroupVersionKind = { group: '', version: 'v1', kind: 'ConfigMap' };
const sim: ClusterRef = { kind: 'static', name: 'sim' };
const sentinelOwner: OwnerRef = { namespace: 'team-s', name: 'sentinel' };

function configMap(namespace: string, name: string, labels: Record<string, string> = {}, value = '1'): KubeObject {
  return { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace, labels }, data: { value } };
}

function ref(namespace: string, name: string): { apiVersion: string; kind: string; namespace: string; name: string } {
  return { apiVersion: 'v1', kind: 'ConfigMap', namespace, name };
}

interface Fixture {
  readonly cluster: SimulatedCluster;
  readonly registry: Registry;
  readonly clock: FakeClock;
  /** Owner keys the change made by `change` woke (each taken off the queue, done and forgotten). */
  wokenBy(change: () => void): Promise<Set<string>>;
}

async function setup(t: { after(fn: () => Promise<void>): void }): Promise<Fixture> {
  const cluster = await SimulatedCluster.start({ namespaces: ['apps', 'other', 'probes'] });
  t.after(() => cluster.close());
  // A fake clock: no GC check, resync or credential check runs unless a test advances it.
  const clock = new FakeClock(Date.now());
  const registry = registryWithKeeper({ provider: new StaticProvider({ clusters: { sim: cluster.kubeconfig } }), clock, credentialCheckIntervalMs: 0 });
  t.after(() => registry.close());
  // One event per poke (an update), so no second wake-up of the sentinel is left for the next call.
  cluster.store.create(configMap('probes', 'sentinel'));
  let pokes = 1;
  const wokenBy = async (change: () => void): Promise<Set<string>> => {
    change();
    const sentinel = cluster.store.get(ref('probes', 'sentinel'));
    cluster.store.update({ ...sentinel, data: { value: String(++pokes) } });
    const woken = new Set<string>();
    const signal = AbortSignal.timeout(10_000);
    for (;;) {
      const next = await registry.queue.get(signal);
      assert.ok(next !== undefined, 'queue shut down');
      registry.queue.done(next.item);
      registry.queue.forget(next.item);
      if (next.item === 'team-s/sentinel') return woken;
      woken.add(next.item);
    }
  };
  return { cluster, registry, clock, wokenBy };
}

/**
 * Registers each owner's target and the sentinel's, waits for the cache to sync with its watch
 * open, and takes the wake-ups of the sync off the queue.
 */
async function watched(f: Fixture, targets: readonly (readonly [OwnerRef, TargetRef])[]): Promise<CacheReader> {
  const readers = await Promise.all([
    ...targets.map(([owner, target]) => f.registry.watchTargetAndGetReader(sim, target, owner)),
    f.registry.watchTargetAndGetReader(sim, { gvk: configMaps, namespace: 'probes', name: 'sentinel' }, sentinelOwner),
  ]);
  const [reader] = readers;
  assert.equal(new Set(readers).size, 1, 'one cache serves every target');
  await reader.waitForSync(AbortSignal.timeout(10_000));
  await f.cluster.waitFor((c) => c.openWatches === 1);
  assert.equal(f.registry.caches().length, 1);
  // The sync woke every owner of the cache; take those wake-ups (and the sentinel's) off the queue.
  const all = new Set([...targets.map(([o]) => `${o.namespace}/${o.name}`), 'team-s/sentinel']);
  const signal = AbortSignal.timeout(10_000);
  while (all.size > 0) {
    const next = await f.registry.queue.get(signal);
    assert.ok(next !== undefined);
    f.registry.queue.done(next.item);
    f.registry.queue.forget(next.item);
    all.delete(next.item);
  }
  return reader;
}

describe('Registry set targets', () => {
  it('wakes a namespace target\'s owner for its namespace only: appears, changes, deleted', async (t) => {
    const f = await setup(t);
    const owner: OwnerRef = { namespace: 'team-a', name: 'apps-lister' };
    const reader = await watched(f, [[owner, { gvk: configMaps, namespace: 'apps' }]]);

    assert.deepEqual([...await f.wokenBy(() => { f.cluster.store.create(configMap('other', 'elsewhere')); })], [], 'an object in another namespace wakes no one');
    let created: KubeObject | undefined;
    assert.deepEqual([...await f.wokenBy(() => { created = f.cluster.store.create(configMap('apps', 'new')); })], ['team-a/apps-lister'], 'an object appearing in the namespace');
    assert.ok(created !== undefined);
    assert.equal(reader.list({ namespace: 'apps' }).length, 1);
    const updated = created;
    assert.deepEqual([...await f.wokenBy(() => { f.cluster.store.update({ ...updated, data: { value: '2' } }); })], ['team-a/apps-lister'], 'a change in the namespace');
    assert.deepEqual([...await f.wokenBy(() => { f.cluster.store.update({ ...f.cluster.store.get(ref('other', 'elsewhere')), data: { value: '2' } }); })], [], 'a change in another namespace');
    assert.deepEqual([...await f.wokenBy(() => { f.cluster.store.delete(ref('apps', 'new')); })], ['team-a/apps-lister'], 'a delete in the namespace');
  });

  it('wakes a selector target\'s owner when an object appears, changes while matching, stops or starts matching, or is deleted while matching', async (t) => {
    const f = await setup(t);
    const owner: OwnerRef = { namespace: 'team-a', name: 'web-lister' };
    await watched(f, [[owner, { gvk: configMaps, namespace: 'apps', labelSelector: 'tier=web' }]]);
    const me = 'team-a/web-lister';
    const current = (name: string): KubeObject => {
      const obj = f.cluster.store.get(ref('apps', name));
      assert.ok(obj !== undefined, name);
      return obj;
    };

    assert.deepEqual([...await f.wokenBy(() => { f.cluster.store.create(configMap('apps', 'db', { tier: 'db' })); })], [], 'a new object that does not match');
    assert.deepEqual([...await f.wokenBy(() => { f.cluster.store.create(configMap('apps', 'web', { tier: 'web' })); })], [me], 'a new matching object');
    assert.deepEqual([...await f.wokenBy(() => { f.cluster.store.update({ ...current('web'), data: { value: '2' } }); })], [me], 'changed while matching');
    assert.deepEqual([...await f.wokenBy(() => { const o = current('web'); f.cluster.store.update({ ...o, metadata: { ...o.metadata, labels: {} } }); })], [me], 'stopped matching: label removed');
    assert.deepEqual([...await f.wokenBy(() => { f.cluster.store.update({ ...current('web'), data: { value: '3' } }); })], [], 'changed while not matching');
    assert.deepEqual([...await f.wokenBy(() => { const o = current('db'); f.cluster.store.update({ ...o, metadata: { ...o.metadata, labels: { tier: 'web' } } }); })], [me], 'started matching: label changed');
    assert.deepEqual([...await f.wokenBy(() => { f.cluster.store.delete(ref('apps', 'web')); })], [], 'deleted while not matching');
    assert.deepEqual([...await f.wokenBy(() => { f.cluster.store.delete(ref('apps', 'db')); })], [me], 'deleted while matching');
  });

  it('wakes two owners with different selectors on one cache each for their own objects only', async (t) => {
    const f = await setup(t);
    const web: OwnerRef = { namespace: 'team-a', name: 'web' };
    const api: OwnerRef = { namespace: 'team-b', name: 'api' };
    const named: OwnerRef = { namespace: 'team-c', name: 'named' };
    await watched(f, [
      [web, { gvk: configMaps, labelSelector: 'app=web' }], // every namespace
      [api, { gvk: configMaps, namespace: 'apps', labelSelector: 'app in (api,gateway)' }],
      [named, { gvk: configMaps, namespace: 'other', fieldSelector: 'metadata.name=special' }],
    ]);

    assert.deepEqual([...await f.wokenBy(() => { f.cluster.store.create(configMap('other', 'w', { app: 'web' })); })], ['team-a/web']);
    assert.deepEqual([...await f.wokenBy(() => { f.cluster.store.create(configMap('apps', 'a', { app: 'api' })); })], ['team-b/api']);
    assert.deepEqual([...await f.wokenBy(() => { f.cluster.store.create(configMap('other', 'a', { app: 'api' })); })], [], 'api\'s selector is for apps only');
    assert.deepEqual([...await f.wokenBy(() => { f.cluster.store.create(configMap('other', 'special')); })], ['team-c/named']);
    assert.deepEqual([...await f.wokenBy(() => { f.cluster.store.create(configMap('apps', 'special')); })], [], 'named\'s field selector is for other only');
    assert.deepEqual([...(await f.wokenBy(() => { f.cluster.store.create(configMap('apps', 'both', { app: 'web' })); }))], ['team-a/web']);
  });

  it('wakes a selector target\'s owner for a delete inferred by a relist (final state unknown), not the others', async (t) => {
    const f = await setup(t);
    const owner: OwnerRef = { namespace: 'team-a', name: 'web-lister' };
    const other: OwnerRef = { namespace: 'team-b', name: 'db-lister' };
    f.cluster.store.create(configMap('apps', 'web', { tier: 'web' }));
    f.cluster.store.create(configMap('apps', 'cache', { tier: 'cache' }));
    await watched(f, [[owner, { gvk: configMaps, namespace: 'apps', labelSelector: 'tier=web' }], [other, { gvk: configMaps, namespace: 'apps', labelSelector: 'tier=db' }]]);
    // A held reader on the same cache sees how the deletes were delivered.
    const deletes: string[] = [];
    const held = await f.registry.reader(sim, configMaps, { handler: { delete: (obj, finalStateUnknown) => { deletes.push(`${obj.metadata?.name ?? ''}:${String(finalStateUnknown)}`); } } });
    t.after(() => { held.release(); });
    assert.equal(f.registry.caches().length, 1, 'the held reader shares the owners\' cache');

    // An event on the open watch first: a watch that ends with none counts as a failure (which requeues every owner).
    assert.deepEqual([...await f.wokenBy(() => undefined)], []);
    // Every WATCH answers 410 (a relist, not an error: nothing requeues every owner): the first
    // relists at once, the second backs off on the fake clock, where the informer then waits.
    const failed = f.cluster.counters.injectedFailures;
    const gone = f.cluster.faults.failNext({ verb: 'watch', path: /\/configmaps$/, count: Infinity, status: 410 });
    f.cluster.faults.cutWatches({ mode: 'end' });
    await eventually('two WATCHes were answered 410', () => f.cluster.counters.injectedFailures >= failed + 2 && f.cluster.counters.openWatches === 0, EVERY_TURN);
    // No watch open: only the relist after the backoff can tell the informer these went.
    f.cluster.store.delete(ref('apps', 'web'));
    f.cluster.store.delete(ref('apps', 'cache'));
    gone.cancel();
    const listsBefore = f.cluster.counters.requests.list;
    // The informer may not be asleep yet: move the clock on, a second a turn, until it relists.
    await eventually('the informer relisted', () => {
      if (f.cluster.counters.requests.list > listsBefore) return true;
      f.clock.advance(1_000);
      return false;
    }, EVERY_TURN);
    await f.cluster.waitFor((c) => c.openWatches === 1, { timeoutMs: 10_000 });
    assert.deepEqual([...await f.wokenBy(() => undefined)], ['team-a/web-lister'], 'the inferred delete of a matching object');
    assert.deepEqual(deletes.sort(), ['cache:true', 'web:true'], 'both deletes were inferred by the relist');
  });

  it('forgets a set target with its owner, and a reconcile still in flight does not register it again', async (t) => {
    const f = await setup(t);
    const owner: OwnerRef = { namespace: 'team-a', name: 'deleted' };
    const target: TargetRef = { gvk: configMaps, namespace: 'apps' };
    await watched(f, [[owner, target]]);
    f.registry.forgetOwner(owner);
    await f.registry.watchTargetAndGetReader(sim, target, owner); // the reconcile that was in flight
    assert.equal(f.registry.caches()[0]?.owners, 1, 'the sentinel only');
    assert.deepEqual([...await f.wokenBy(() => { f.cluster.store.create(configMap('apps', 'new')); })], []);
  });

  it('keeps a cache used only by a selector target through GC checks, and collects it once the owner drops the target', async (t) => {
    const f = await setup(t);
    const owner: OwnerRef = { namespace: 'team-a', name: 'only' };
    const reader = await f.registry.watchTargetAndGetReader(sim, { gvk: configMaps, namespace: 'apps', labelSelector: 'tier=web' }, owner);
    await reader.waitForSync(AbortSignal.timeout(10_000));
    const info = (): { nextGcCheckInMs: number | undefined; owners: number } | undefined => f.registry.caches()[0];
    assert.equal(info()?.owners, 1, 'the selector target counts as a use');
    // Backoff checks at 2, 4, 8 and 16 s after publication: 30 s, past the default grace period.
    for (const due of [2_000, 4_000, 8_000, 16_000]) {
      assert.equal(info()?.nextGcCheckInMs, due);
      f.clock.advance(due);
      await eventually('the check ran', () => info() === undefined || (info()?.nextGcCheckInMs ?? 0) > 0, EVERY_TURN);
      assert.equal(f.registry.caches().length, 1, `still used after the check due at ${due} ms`);
    }
    assert.equal(reader.synced, true);

    // Replacing the owner's targets releases the selector target.
    f.registry.setOwnerTargets(owner, []);
    assert.equal(info()?.owners, 0);
    assert.equal(info()?.nextGcCheckInMs, 30_000, 'eligible a grace period later');
    f.clock.advance(30_000);
    await eventually('the cache is collected', () => f.registry.caches().length === 0, EVERY_TURN);
    assert.equal(reader.synced, false);
  });

  it('registers set targets through setOwnerTargets, and refuses a target with both a name and selectors', async (t) => {
    const f = await setup(t);
    const owner: OwnerRef = { namespace: 'team-a', name: 'declared' };
    await watched(f, []); // the cache, built for the sentinel alone
    // Declared only: no watchTargetAndGetReader call for it.
    f.registry.setOwnerTargets(owner, [{ cluster: sim, target: { gvk: configMaps, namespace: 'apps', labelSelector: 'tier=web' } }]);
    assert.equal(f.registry.caches()[0]?.owners, 2, 'the owner and the sentinel');
    assert.deepEqual([...await f.wokenBy(() => { f.cluster.store.create(configMap('apps', 'web', { tier: 'web' })); })], ['team-a/declared']);

    const both = { gvk: configMaps, namespace: 'apps', name: 'x', labelSelector: 'tier=web' } as unknown as TargetRef;
    assert.throws(() => { f.registry.setOwnerTargets(owner, [{ cluster: sim, target: both }]); }, (err: unknown) => err instanceof TypeError && err.message.includes('name one object'));
    await assert.rejects(f.registry.watchTargetAndGetReader(sim, { gvk: configMaps, labelSelector: 'a in (b' }, owner), (err: unknown) => err instanceof TypeError && err.message.includes('target labelSelector'));
    await assert.rejects(f.registry.watchTargetAndGetReader(sim, { gvk: configMaps, fieldSelector: 'status.phase=Running' }, owner), (err: unknown) => err instanceof TypeError && err.message.includes('target fieldSelector'));
    assert.deepEqual([...await f.wokenBy(() => { f.cluster.store.create(configMap('apps', 'web-2', { tier: 'web' })); })], ['team-a/declared'], 'a refused call leaves the declared targets as they were');
  });
});

