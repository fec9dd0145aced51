// Set targets (a namespace, or a label/field selector) wake their owner when an object enters,
// changes in, leaves or is deleted from the set, and only then; a set with selectors is read from a
// cache of its own that holds only what they select. "Not woken" is proved without timing: after
// the change under test, a sentinel object in each cache (an exact target of its own owner, or for a
// selector cache an object of a set in a namespace no set under test covers) is changed; each watch
// delivers in order, so once every sentinel's owner is taken off the queue, every owner the earlier
// change woke was too. A cache whose every object is in a set under test (a selector over every
// namespace) can have no sentinel: there the test waits for the reader to show the change.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SimulatedCluster } from '../../fixtures/index.ts';
import type { KubeObject } from '../../fixtures/sim/index.ts';
import { StaticProvider, type ClusterRef } from '../cluster/index.ts';
import { FakeClock, type GroupVersionKind } from '../util/index.ts';
import type { Registry} from './index.ts';
import { InvalidSelectorError, type CacheReader, type OwnerRef, type TargetRef } from './index.ts';
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

/** A sentinel of a selector cache: an object in `probes` with `labels`, in the set of its own owner. */
interface SelectorSentinel {
  readonly labels?: Record<string, string>;
  /** The object's name. Default `sentinel-<n>`. */
  readonly name?: string;
  readonly labelSelector?: string;
  readonly fieldSelector?: string;
}

interface Fixture {
  readonly cluster: SimulatedCluster;
  readonly registry: Registry;
  readonly clock: FakeClock;
  /** The sentinels' owners and objects: one per cache (see the top of the file). */
  readonly sentinels: { readonly owner: OwnerRef; readonly name: string; readonly target: TargetRef }[];
  /**
   * Owner keys the change made by `change` woke (each taken off the queue, done and forgotten),
   * once `settled` (default: at once) holds and every sentinel's owner was taken off the queue.
   */
  wokenBy(change: () => void, settled?: () => boolean): Promise<Set<string>>;
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
  const sentinels = [{ owner: sentinelOwner, name: 'sentinel', target: { gvk: configMaps, namespace: 'probes', name: 'sentinel' } as TargetRef }];
  let pokes = 1;
  const wokenBy = async (change: () => void, settled?: () => boolean): Promise<Set<string>> => {
    change();
    if (settled !== undefined) await eventually('the readers show the change', settled, EVERY_TURN);
    pokes += 1;
    for (const { name } of sentinels) {
      const sentinel = cluster.store.get(ref('probes', name));
      cluster.store.update({ ...sentinel, data: { value: String(pokes) } });
    }
    const waiting = new Set(sentinels.map(({ owner }) => `${owner.namespace}/${owner.name}`));
    const woken = new Set<string>();
    const signal = AbortSignal.timeout(10_000);
    while (waiting.size > 0) {
      const next = await registry.queue.get(signal);
      assert.ok(next !== undefined, 'queue shut down');
      registry.queue.done(next.item);
      registry.queue.forget(next.item);
      if (!waiting.delete(next.item)) woken.add(next.item);
    }
    return woken;
  };
  return { cluster, registry, clock, sentinels, wokenBy };
}

/**
 * Registers each owner's target and the sentinels' (the whole-kind cache's, and one for each of
 * `selectors`), waits for the `caches` caches to sync with their watches open, and takes the
 * wake-ups of the sync off the queue. Returns each owner's reader, in the order of `targets`.
 */
async function watched(f: Fixture, targets: readonly (readonly [OwnerRef, TargetRef])[], selectors: readonly SelectorSentinel[] = [], caches = 1 + selectors.length): Promise<CacheReader[]> {
  for (const [i, s] of selectors.entries()) {
    const name = s.name ?? `sentinel-${i}`;
    f.cluster.store.create(configMap('probes', name, s.labels));
    f.sentinels.push({ owner: { namespace: 'team-s', name: `sentinel-${i}` }, name, target: { gvk: configMaps, namespace: 'probes', labelSelector: s.labelSelector, fieldSelector: s.fieldSelector } });
  }
  const readers = await Promise.all([
    ...targets.map(([owner, target]) => f.registry.watchTargetAndGetReader(sim, target, owner)),
    ...f.sentinels.map(({ owner, target }) => f.registry.watchTargetAndGetReader(sim, target, owner)),
  ]);
  assert.equal(new Set(readers).size, caches, 'one reader per cache');
  await Promise.all(readers.map((r) => r.waitForSync(AbortSignal.timeout(10_000))));
  await f.cluster.waitFor((c) => c.openWatches === caches);
  assert.equal(f.registry.caches().length, caches);
  // The sync woke every owner of the caches; take those wake-ups (and the sentinels') off the queue.
  const all = new Set([...targets, ...f.sentinels.map((s) => [s.owner] as const)].map(([o]) => `${o.namespace}/${o.name}`));
  const signal = AbortSignal.timeout(10_000);
  while (all.size > 0) {
    const next = await f.registry.queue.get(signal);
    assert.ok(next !== undefined);
    f.registry.queue.done(next.item);
    f.registry.queue.forget(next.item);
    all.delete(next.item);
  }
  return readers.slice(0, targets.length);
}

describe('Registry set targets', () => {
  it('wakes a namespace target\'s owner for its namespace only: appears, changes, deleted', async (t) => {
    const f = await setup(t);
    const owner: OwnerRef = { namespace: 'team-a', name: 'apps-lister' };
    const [reader] = await watched(f, [[owner, { gvk: configMaps, namespace: 'apps' }]]);

    assert.deepEqual([...await f.wokenBy(() => { f.cluster.store.create(configMap('other', 'elsewhere')); })], [], 'an object in another namespace wakes no one');
    let created: KubeObject | undefined;
    assert.deepEqual([...await f.wokenBy(() => { created = f.cluster.store.create(configMap('apps', 'new')); })], ['team-a/apps-lister'], 'an object appearing in the namespace');
    assert.ok(created !== undefined && reader !== undefined);
    assert.equal(reader.list({ namespace: 'apps' }).length, 1);
    const updated = created;
    assert.deepEqual([...await f.wokenBy(() => { f.cluster.store.update({ ...updated, data: { value: '2' } }); })], ['team-a/apps-lister'], 'a change in the namespace');
    assert.deepEqual([...await f.wokenBy(() => { f.cluster.store.update({ ...f.cluster.store.get(ref('other', 'elsewhere')), data: { value: '2' } }); })], [], 'a change in another namespace');
    assert.deepEqual([...await f.wokenBy(() => { f.cluster.store.delete(ref('apps', 'new')); })], ['team-a/apps-lister'], 'a delete in the namespace');
  });

  it('caches only what a selector target selects, and wakes its owner when an object appears, changes while matching, stops or starts matching (a delete from the watch), or is deleted while matching', async (t) => {
    const f = await setup(t);
    const owner: OwnerRef = { namespace: 'team-a', name: 'web-lister' };
    const [reader] = await watched(f, [[owner, { gvk: configMaps, namespace: 'apps', labelSelector: 'tier=web' }]], [{ labels: { tier: 'web' }, labelSelector: 'tier = web' }]);
    assert.ok(reader !== undefined);
    const me = 'team-a/web-lister';
    const current = (name: string): KubeObject => {
      const obj = f.cluster.store.get(ref('apps', name));
      assert.ok(obj !== undefined, name);
      return obj;
    };
    const cached = (): string[] => reader.list({ namespace: 'apps' }).map((o) => o.metadata?.name ?? '').sort();
    assert.deepEqual(f.registry.caches().map((c) => c.labelSelector ?? '').sort(), ['', 'tier=web'], 'the whole kind (the sentinel\'s) and the selector\'s, sent to the server as written canonically');

    assert.deepEqual([...await f.wokenBy(() => { f.cluster.store.create(configMap('apps', 'db', { tier: 'db' })); })], [], 'a new object that does not match');
    assert.deepEqual(cached(), [], 'an object the selector does not select is not cached');
    assert.deepEqual([...await f.wokenBy(() => { f.cluster.store.create(configMap('apps', 'web', { tier: 'web' })); })], [me], 'a new matching object');
    assert.deepEqual(cached(), ['web']);
    assert.deepEqual([...await f.wokenBy(() => { f.cluster.store.update({ ...current('web'), data: { value: '2' } }); })], [me], 'changed while matching');
    assert.deepEqual([...await f.wokenBy(() => { const o = current('web'); f.cluster.store.update({ ...o, metadata: { ...o.metadata, labels: {} } }); })], [me], 'stopped matching: label removed');
    assert.deepEqual(cached(), [], 'an object whose labels leave the selection is deleted from the cache');
    assert.deepEqual([...await f.wokenBy(() => { f.cluster.store.update({ ...current('web'), data: { value: '3' } }); })], [], 'changed while not matching');
    assert.deepEqual([...await f.wokenBy(() => { const o = current('db'); f.cluster.store.update({ ...o, metadata: { ...o.metadata, labels: { tier: 'web' } } }); })], [me], 'started matching: label changed');
    assert.deepEqual(cached(), ['db']);
    assert.deepEqual([...await f.wokenBy(() => { f.cluster.store.delete(ref('apps', 'web')); })], [], 'deleted while not matching');
    assert.deepEqual([...await f.wokenBy(() => { f.cluster.store.delete(ref('apps', 'db')); })], [me], 'deleted while matching');
    assert.deepEqual(cached(), []);
  });

  it('gives two owners with different selectors a cache each, holding and waking each for its own objects only', async (t) => {
    const f = await setup(t);
    const web: OwnerRef = { namespace: 'team-a', name: 'web' };
    const api: OwnerRef = { namespace: 'team-b', name: 'api' };
    const named: OwnerRef = { namespace: 'team-c', name: 'named' };
    // web's set is its whole cache (every namespace): no sentinel fits there, so its changes are awaited in its reader.
    const readers = await watched(f, [
      [web, { gvk: configMaps, labelSelector: 'app=web' }], // every namespace
      [api, { gvk: configMaps, namespace: 'apps', labelSelector: 'app in (api,gateway)' }],
      [named, { gvk: configMaps, namespace: 'other', fieldSelector: 'metadata.name=special' }],
    ], [{ labels: { app: 'gateway' }, labelSelector: 'app in (gateway, api)' }, { name: 'special', fieldSelector: 'metadata.name==special' }], 4);
    const [webs, apis, specials] = readers;
    assert.ok(webs !== undefined && apis !== undefined && specials !== undefined);
    const has = (reader: CacheReader, namespace: string, name: string) => (): boolean => reader.get(namespace, name) !== undefined;

    assert.deepEqual([...await f.wokenBy(() => { f.cluster.store.create(configMap('other', 'w', { app: 'web' })); }, has(webs, 'other', 'w'))], ['team-a/web']);
    assert.deepEqual([...await f.wokenBy(() => { f.cluster.store.create(configMap('apps', 'a', { app: 'api' })); })], ['team-b/api']);
    assert.deepEqual([...await f.wokenBy(() => { f.cluster.store.create(configMap('other', 'a', { app: 'api' })); })], [], 'api\'s selector is for apps only');
    assert.deepEqual([...await f.wokenBy(() => { f.cluster.store.create(configMap('other', 'special')); })], ['team-c/named']);
    assert.deepEqual([...await f.wokenBy(() => { f.cluster.store.create(configMap('apps', 'special')); })], [], 'named\'s field selector is for other only');
    assert.deepEqual([...(await f.wokenBy(() => { f.cluster.store.create(configMap('apps', 'both', { app: 'web' })); }, has(webs, 'apps', 'both')))], ['team-a/web']);

    const names = (reader: CacheReader): string[] => reader.list().map((o) => `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`).sort();
    assert.deepEqual(names(webs), ['apps/both', 'other/w'], 'each cache holds what its selector selects, in every namespace it watches');
    assert.deepEqual(names(apis), ['apps/a', 'other/a', 'probes/sentinel-0']);
    assert.deepEqual(names(specials), ['apps/special', 'other/special', 'probes/special']);
  });

  it('wakes a selector target\'s owner for a delete inferred by a relist (final state unknown), not the others', async (t) => {
    const f = await setup(t);
    const owner: OwnerRef = { namespace: 'team-a', name: 'web-lister' };
    const other: OwnerRef = { namespace: 'team-b', name: 'db-lister' };
    f.cluster.store.create(configMap('apps', 'web', { tier: 'web' }));
    f.cluster.store.create(configMap('apps', 'cache', { tier: 'cache' }));
    const [webs] = await watched(f, [[owner, { gvk: configMaps, namespace: 'apps', labelSelector: 'tier=web' }], [other, { gvk: configMaps, namespace: 'apps', labelSelector: 'tier=db' }]], [{ labels: { tier: 'web' }, labelSelector: 'tier=web' }, { labels: { tier: 'db' }, labelSelector: 'tier=db' }]);
    assert.ok(webs !== undefined);
    assert.deepEqual(webs.list({ namespace: 'apps' }).map((o) => o.metadata?.name), ['web']);
    // A held reader of the whole kind sees how the deletes were delivered there.
    const deletes: string[] = [];
    const held = await f.registry.reader(sim, configMaps, { handler: { delete: (obj, finalStateUnknown) => { deletes.push(`${obj.metadata?.name ?? ''}:${String(finalStateUnknown)}`); } } });
    t.after(() => { held.release(); });
    const caches = f.registry.caches().length;
    assert.equal(caches, 3, 'the held reader shares the whole-kind cache of the sentinel');

    // An event on each open watch first: a watch that ends with none counts as a failure (which requeues every owner).
    assert.deepEqual([...await f.wokenBy(() => undefined)], []);
    // Every WATCH answers 410 (a relist, not an error: nothing requeues every owner): for each cache
    // the first relists at once, the second backs off on the fake clock, where the informer then waits.
    const failed = f.cluster.counters.injectedFailures;
    const gone = f.cluster.faults.failNext({ verb: 'watch', path: /\/configmaps$/, count: Infinity, status: 410 });
    f.cluster.faults.cutWatches({ mode: 'end' });
    await eventually('two WATCHes per cache were answered 410', () => f.cluster.counters.injectedFailures >= failed + 2 * caches && f.cluster.counters.openWatches === 0, EVERY_TURN);
    // No watch open: only the relists after the backoff can tell the informers these went.
    f.cluster.store.delete(ref('apps', 'web'));
    f.cluster.store.delete(ref('apps', 'cache'));
    gone.cancel();
    // The informers may not be asleep yet: move the clock on, a second a turn, until each watches again.
    await eventually('the informers relisted', () => {
      if (f.cluster.counters.openWatches === caches) return true;
      f.clock.advance(1_000);
      return false;
    }, EVERY_TURN);
    assert.deepEqual([...await f.wokenBy(() => undefined)], ['team-a/web-lister'], 'the inferred delete of a matching object');
    assert.deepEqual(deletes.sort(), ['cache:true', 'web:true'], 'both deletes were inferred by the relist');
    assert.deepEqual(webs.list({ namespace: 'apps' }), []);
  });

  it('shares one cache between equal selectors written differently, and refuses invalid ones with a typed error listing what is accepted', async (t) => {
    const f = await setup(t);
    const spellings = ['a=1,b=2', 'b=2, a=1', 'b in (2),a==1', 'a=1,b=2,a=1'];
    const readers = await Promise.all(spellings.map((labelSelector, i) => f.registry.watchTargetAndGetReader(sim, { gvk: configMaps, labelSelector }, { namespace: 'team-a', name: `o${i}` })));
    assert.equal(new Set(readers).size, 1, 'one reader, one cache');
    assert.deepEqual(f.registry.caches().map((c) => [c.labelSelector, c.owners]), [['a=1,b=2', 4]]);
    // A different set of values is a different cache; `in` values are sorted.
    await f.registry.watchTargetAndGetReader(sim, { gvk: configMaps, labelSelector: 'env in (b,a)' }, { namespace: 'team-a', name: 'o9' });
    assert.deepEqual(f.registry.caches().map((c) => c.labelSelector).sort(), ['a=1,b=2', 'env in (a,b)']);

    const owner: OwnerRef = { namespace: 'team-a', name: 'bad' };
    const refused = async (target: TargetRef, option: string, why: string): Promise<void> => {
      await assert.rejects(f.registry.watchTargetAndGetReader(sim, target, owner), (err: unknown) => err instanceof InvalidSelectorError && err.code === 'ERR_SELECTOR_INVALID'
        && err.message.startsWith(`target ${option}`) && err.message.includes(why) && err.message.includes('accepted: ') && err.message.includes('at most 32 requirements'), JSON.stringify(target));
      assert.throws(() => { f.registry.setOwnerTargets(owner, [{ cluster: sim, target }]); }, InvalidSelectorError);
    };
    await refused({ gvk: configMaps, labelSelector: 'a in (b' }, 'labelSelector', 'unbalanced');
    await refused({ gvk: configMaps, labelSelector: 'a=-b' }, 'labelSelector', 'invalid label value');
    await refused({ gvk: configMaps, labelSelector: Array.from({ length: 33 }, (_, i) => `k${i}=v`).join(',') }, 'labelSelector', '33 requirements is over the limit');
    await refused({ gvk: configMaps, labelSelector: `a in (${Array.from({ length: 200 }, (_, i) => `value-${i}`).join(',')})` }, 'labelSelector', 'characters is over the limit');
    await refused({ gvk: configMaps, fieldSelector: 'status.phase=Running' }, 'fieldSelector', 'not a supported field');
    await refused({ gvk: configMaps, fieldSelector: 'metadata.name=a=b' }, 'fieldSelector', 'invalid value');
    assert.equal(f.registry.caches().length, 2, 'nothing was built for a refused selector');
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
    const info = (): { nextGcCheckInMs: number | undefined; owners: number; labelSelector?: string | undefined } | undefined => f.registry.caches()[0];
    assert.equal(info()?.owners, 1, 'the selector target counts as a use');
    assert.equal(info()?.labelSelector, 'tier=web', 'the one cache is the selector\'s');
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
    // The selector's cache, built for its sentinel alone (the sentinel's set is in another namespace).
    await watched(f, [], [{ labels: { tier: 'web' }, labelSelector: 'tier=web' }]);
    // Declared only: no watchTargetAndGetReader call for it.
    f.registry.setOwnerTargets(owner, [{ cluster: sim, target: { gvk: configMaps, namespace: 'apps', labelSelector: 'tier=web' } }]);
    assert.equal(f.registry.caches().find((c) => c.labelSelector === 'tier=web')?.owners, 2, 'the owner and the sentinel');
    assert.deepEqual([...await f.wokenBy(() => { f.cluster.store.create(configMap('apps', 'web', { tier: 'web' })); })], ['team-a/declared']);

    const both = { gvk: configMaps, namespace: 'apps', name: 'x', labelSelector: 'tier=web' } as unknown as TargetRef;
    assert.throws(() => { f.registry.setOwnerTargets(owner, [{ cluster: sim, target: both }]); }, (err: unknown) => err instanceof TypeError && err.message.includes('name one object'));
    await assert.rejects(f.registry.watchTargetAndGetReader(sim, { gvk: configMaps, labelSelector: 'a in (b' }, owner), (err: unknown) => err instanceof InvalidSelectorError && err.message.includes('target labelSelector'));
    await assert.rejects(f.registry.watchTargetAndGetReader(sim, { gvk: configMaps, fieldSelector: 'status.phase=Running' }, owner), (err: unknown) => err instanceof InvalidSelectorError && err.message.includes('target fieldSelector'));
    assert.deepEqual([...await f.wokenBy(() => { f.cluster.store.create(configMap('apps', 'web-2', { tier: 'web' })); })], ['team-a/declared'], 'a refused call leaves the declared targets as they were');
  });
});

