import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import type { ClusterRef } from '../cluster/index.ts';
import type { KubeObject } from '../transport/index.ts';
import { FakeClock, TransportError, type GroupVersionKind } from '../util/index.ts';
import { FleetAccumulator, snapshotQuery, type FleetSnapshot, type QuerySet } from './index.ts';
import { FakeSnapshotSource, type FakeCache } from './testing.ts';
import { settle } from '../../fixtures/support/index.ts';
import { CM, east, SECRET, west, type ConfigMap } from './objects.test-util.ts';


function cm(name: string, data: Record<string, string> = {}, labels: Record<string, string> = {}, namespace = 'ns'): ConfigMap {
  return { metadata: { namespace, name, labels }, data };
}

const closing: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(closing.splice(0).map((close) => close()));
});

/** A consumer that pulls one snapshot at a time, so a test can see whether one is due. */
class Puller<Q extends QuerySet> {
  readonly #it: AsyncIterator<FleetSnapshot<Q>>;
  #pending: Promise<IteratorResult<FleetSnapshot<Q>>> | undefined;
  #result: IteratorResult<FleetSnapshot<Q>> | undefined;

  constructor(acc: FleetAccumulator<Q>, signal?: AbortSignal, options: { freshWithinMs?: number } = {}) {
    this.#it = acc.snapshots({ signal, ...options })[Symbol.asyncIterator]();
  }

  /** Asks for the next snapshot (if not already asking) and lets the accumulator run. */
  async poll(): Promise<FleetSnapshot<Q> | undefined> {
    if (this.#pending === undefined) {
      this.#result = undefined;
      this.#pending = this.#it.next();
      void this.#pending.then((r) => { this.#result = r; });
    }
    await settle(10);
    const result = this.#result;
    if (result === undefined) return undefined;
    this.#pending = undefined;
    this.#result = undefined;
    return result.done === true ? undefined : result.value;
  }

  /** Whether the iterator has ended (after a poll). */
  async ended(): Promise<boolean> {
    const pending = this.#pending ?? this.#it.next();
    this.#pending = pending;
    await settle(10);
    return (await Promise.race([pending, Promise.resolve(undefined)]))?.done === true;
  }
}

function setup<Q extends QuerySet>(queries: Q, options: { minIntervalMs?: number; checkIntervalMs?: number } = {}): { source: FakeSnapshotSource; clock: FakeClock; acc: FleetAccumulator<Q> } {
  const source = new FakeSnapshotSource();
  const clock = new FakeClock(1_000_000);
  const acc = new FleetAccumulator({ source, queries, clock, openBackoff: { jitter: 0 }, ...options });
  closing.push(() => acc.close());
  return { source, clock, acc };
}

function names(objs: readonly KubeObject[]): string[] {
  return objs.map((o) => o.metadata?.name ?? '').sort();
}

function dataOf(objs: readonly ConfigMap[], name: string): string | undefined {
  return objs.find((o) => o.metadata?.name === name)?.data?.v;
}

describe('FleetAccumulator: consistent bootstrap', () => {
  it('delivers nothing until every query has completed its initial list, then all of it at once', async () => {
    const { source, acc } = setup({ maps: { cluster: east, gvk: CM }, secrets: { cluster: west, gvk: SECRET } });
    const maps = source.cache(east, CM);
    const secrets = source.cache(west, SECRET);
    maps.upsert(cm('a'));
    secrets.upsert(cm('s'));
    const puller = new Puller(acc);
    maps.sync();
    assert.equal(await puller.poll(), undefined, 'one query listed is not enough');
    assert.deepEqual(acc.status().waitingFor, ['secrets']);
    assert.equal(acc.status().bootstrapped, false);
    secrets.sync();
    const first = await puller.poll();
    assert.ok(first);
    assert.deepEqual(names(first.objects.maps), ['a']);
    assert.deepEqual(names(first.objects.secrets), ['s']);
    assert.deepEqual(first.deltas.map((d) => `${d.query}:${d.type}:${d.object.metadata?.name}`).sort(), ['maps:add:a', 'secrets:add:s']);
    assert.deepEqual(acc.status().waitingFor, []);
  });

  it('a query whose cluster is unreachable holds the first snapshot back, says why, and is retried until it is up', async () => {
    const { source, clock, acc } = setup({ maps: { cluster: east, gvk: CM }, secrets: { cluster: west, gvk: SECRET } });
    source.cache(east, CM).sync();
    const down = source.cache(west, SECRET);
    const refused = new TransportError({ cluster: 'static:west' }, 'connection refused');
    down.unreachable = refused;
    const puller = new Puller(acc);
    assert.equal(await puller.poll(), undefined);
    const status = acc.status();
    assert.deepEqual(status.waitingFor, ['secrets']);
    const secrets = status.queries.find((q) => q.name === 'secrets');
    assert.equal(secrets?.phase, 'opening');
    assert.equal(secrets.lastError, refused);
    clock.advance(10_000);
    assert.equal(await puller.poll(), undefined, 'still down: still held');
    down.unreachable = undefined;
    down.upsert(cm('s'));
    clock.advance(60_000);
    await settle(10);
    assert.equal(acc.status().queries.find((q) => q.name === 'secrets')?.phase, 'listing');
    assert.equal(await puller.poll(), undefined, 'reachable but not listed yet');
    down.sync();
    const first = await puller.poll();
    assert.deepEqual(names(first?.objects.secrets ?? []), ['s']);
  });

  it('a query whose LIST fails reports the cache\'s error while it waits', async () => {
    const { source, acc } = setup({ maps: { cluster: east, gvk: CM } });
    const cache = source.cache(east, CM);
    const forbidden = new TransportError({ cluster: 'static:east' }, 'list failed');
    cache.fail(forbidden);
    const puller = new Puller(acc);
    assert.equal(await puller.poll(), undefined);
    assert.equal(acc.status().queries[0]?.phase, 'listing');
    assert.equal(acc.status().queries[0]?.lastError, forbidden);
  });

  it('an empty world is a snapshot too, once listed', async () => {
    const { source, acc } = setup({ maps: { cluster: east, gvk: CM } });
    source.cache(east, CM).sync();
    const first = await new Puller(acc).poll();
    assert.deepEqual(first?.objects.maps, []);
    assert.deepEqual(first.deltas, []);
  });
});

async function bootstrapped<Q extends QuerySet>(acc: FleetAccumulator<Q>, caches: readonly FakeCache[]): Promise<{ puller: Puller<Q>; first: FleetSnapshot<Q> }> {
  for (const cache of caches) cache.sync();
  const puller = new Puller(acc);
  const first = await puller.poll();
  assert.ok(first, 'bootstrapped');
  return { puller, first };
}

describe('FleetAccumulator: coalescing', () => {
  it('a burst becomes one snapshot per interval, holding the newest state', async () => {
    const { source, clock, acc } = setup({ maps: snapshotQuery<ConfigMap>({ cluster: east, gvk: CM }) }, { minIntervalMs: 100 });
    const cache = source.cache(east, CM);
    const { puller } = await bootstrapped(acc, [cache]);
    for (let i = 0; i < 1000; i++) cache.upsert(cm(`o${i % 10}`, { v: String(i) }));
    assert.equal(await puller.poll(), undefined, 'the interval since the first snapshot has not passed');
    clock.advance(99);
    assert.equal(await puller.poll(), undefined);
    clock.advance(1);
    const snap = await puller.poll();
    assert.ok(snap);
    assert.equal(snap.objects.maps.length, 10);
    assert.equal(dataOf(snap.objects.maps, 'o9'), '999');
    assert.equal(snap.deltas.length, 10, 'one delta per object, however many changes');
    assert.equal(await puller.poll(), undefined, 'nothing changed since: no snapshot');
  });

  it('a slow consumer gets the newest state, not the intermediate ones', async () => {
    const { source, clock, acc } = setup({ maps: snapshotQuery<ConfigMap>({ cluster: east, gvk: CM }) }, { minIntervalMs: 100 });
    const cache = source.cache(east, CM);
    cache.upsert(cm('a', { v: '0' }));
    const it = acc.snapshots()[Symbol.asyncIterator]();
    cache.sync();
    await it.next();
    // The consumer is busy (not pulling) while the object changes three times over five intervals.
    for (let v = 1; v <= 3; v++) {
      cache.upsert(cm('a', { v: String(v) }));
      clock.advance(150);
      await settle(10);
    }
    const next = await it.next();
    assert.equal(next.done, false);
    assert.equal(dataOf(next.value.objects.maps, 'a'), '3');
    assert.deepEqual(next.value.deltas.map((d) => d.type), ['update']);
    await it.return();
  });

  it('with minIntervalMs 0, every pull after a change gets a snapshot at once', async () => {
    const { source, acc } = setup({ maps: { cluster: east, gvk: CM } }, { minIntervalMs: 0 });
    const cache = source.cache(east, CM);
    const { puller } = await bootstrapped(acc, [cache]);
    cache.upsert(cm('a'));
    assert.deepEqual(names((await puller.poll())?.objects.maps ?? []), ['a']);
  });
});

/** One cache on east holding a and b, bootstrapped, then holding back its events (as a broken watch would). */
async function holdingAB(): Promise<{ cache: FakeCache; puller: Puller<{ maps: { cluster: ClusterRef; gvk: GroupVersionKind } }> }> {
  const { source, acc } = setup({ maps: { cluster: east, gvk: CM } }, { minIntervalMs: 0 });
  const cache = source.cache(east, CM);
  cache.upsert(cm('a'));
  cache.upsert(cm('b'));
  const { puller } = await bootstrapped(acc, [cache]);
  cache.holdEvents = true;
  return { cache, puller };
}

describe('FleetAccumulator: deltas and predicate', () => {
  it('reports add, update and delete since the consumer\'s previous snapshot, and nothing for an object that came and went', async () => {
    const { source, acc } = setup({ maps: { cluster: east, gvk: CM } }, { minIntervalMs: 0 });
    const cache = source.cache(east, CM);
    cache.upsert(cm('keep'));
    cache.upsert(cm('gone'));
    const { puller } = await bootstrapped(acc, [cache]);
    cache.upsert(cm('keep', { v: '2' }));
    cache.remove('ns', 'gone');
    cache.upsert(cm('new'));
    cache.upsert(cm('flash'));
    cache.remove('ns', 'flash');
    const snap = await puller.poll();
    assert.deepEqual(snap?.deltas.map((d) => `${d.type}:${d.object.metadata?.name}:${d.finalStateUnknown}`).sort(), ['add:new:false', 'delete:gone:false', 'update:keep:false']);
    assert.deepEqual(names(snap.objects.maps), ['keep', 'new']);
  });

  it('deletes inferred by a relist carry finalStateUnknown', async () => {
    const { cache, puller } = await holdingAB();
    cache.remove('ns', 'a');
    cache.sync(); // a 410 relist: the held DELETED is lost, the relist infers it
    const snap = await puller.poll();
    assert.deepEqual(snap?.deltas.map((d) => `${d.type}:${d.object.metadata?.name}:${d.finalStateUnknown}`), ['delete:a:true']);
  });

  it('a cache replaced after a credential rotation: what it no longer holds is deleted (finalStateUnknown), the rest is unchanged', async () => {
    const { cache, puller } = await holdingAB();
    cache.remove('ns', 'b'); // lost with the old cache
    cache.rotate();
    const snap = await puller.poll();
    assert.deepEqual(names(snap?.objects.maps ?? []), ['a']);
    assert.deepEqual(snap?.deltas.map((d) => `${d.type}:${d.object.metadata?.name}:${d.finalStateUnknown}`), ['delete:b:true'], 'a, replayed as the same state, is no change');
  });

  it('each consumer gets the deltas since its own previous snapshot', async () => {
    const { source, acc } = setup({ maps: { cluster: east, gvk: CM } }, { minIntervalMs: 0 });
    const cache = source.cache(east, CM);
    const { puller: one } = await bootstrapped(acc, [cache]);
    cache.upsert(cm('a'));
    assert.deepEqual((await one.poll())?.deltas.map((d) => d.type), ['add']);
    const two = new Puller(acc);
    assert.deepEqual((await two.poll())?.deltas.map((d) => `${d.type}:${d.object.metadata?.name}`), ['add:a'], 'a new consumer starts with the whole world as adds');
    cache.upsert(cm('a', { v: '2' }));
    assert.deepEqual((await one.poll())?.deltas.map((d) => d.type), ['update']);
    cache.remove('ns', 'a');
    assert.deepEqual((await one.poll())?.deltas.map((d) => d.type), ['delete']);
    // `two` missed the update and the delete: from its snapshot, a simply went.
    assert.deepEqual((await two.poll())?.deltas.map((d) => d.type), ['delete']);
  });

  it('runs the predicate once per new state of an object, never on resync or unchanged ones, and the snapshot holds what passes', async () => {
    let calls = 0;
    const { source, acc } = setup({
      maps: snapshotQuery<ConfigMap>({ cluster: east, gvk: CM, predicate: (o) => { calls++; return o.data?.v !== 'hide'; } }),
    }, { minIntervalMs: 0 });
    const cache = source.cache(east, CM);
    cache.upsert(cm('a'));
    cache.upsert(cm('b', { v: 'hide' }));
    const { puller, first } = await bootstrapped(acc, [cache]);
    assert.deepEqual(names(first.objects.maps), ['a']);
    assert.equal(calls, 2);
    cache.resync();
    cache.resync();
    assert.equal(calls, 2, 'a resync is no new state');
    cache.upsert(cm('a', { v: 'hide' }));
    assert.equal(calls, 3);
    const snap = await puller.poll();
    assert.deepEqual(names(snap?.objects.maps ?? []), []);
    assert.deepEqual(snap?.deltas.map((d) => `${d.type}:${d.object.metadata?.name}:${d.finalStateUnknown}`), ['delete:a:false'], 'leaving the predicate reads as a delete');
  });

  it('applies the label selector, field selector and namespace of each query to a shared cache', async () => {
    const { source, acc } = setup({
      web: { cluster: east, gvk: CM, labelSelector: 'app=web,tier notin (db)' },
      named: { cluster: east, gvk: CM, fieldSelector: 'metadata.name=b' },
      other: { cluster: east, gvk: CM, namespace: 'other' },
    });
    const cache = source.cache(east, CM);
    cache.upsert(cm('a', {}, { app: 'web' }));
    cache.upsert(cm('b', {}, { app: 'web', tier: 'db' }));
    cache.upsert(cm('c', {}, {}, 'other'));
    const { first } = await bootstrapped(acc, [cache]);
    assert.deepEqual(names(first.objects.web), ['a']);
    assert.deepEqual(names(first.objects.named), ['b']);
    assert.deepEqual(names(first.objects.other), ['c']);
    assert.equal(cache.opens, 3, 'each query holds the one shared cache');
  });
});

describe('FleetAccumulator: read/write coherence', () => {
  it('an own create, update, patch and delete are in the next snapshot before the watch delivers them', async () => {
    const { source, acc } = setup({ maps: snapshotQuery<ConfigMap>({ cluster: east, gvk: CM, namespace: 'ns' }) }, { minIntervalMs: 0 });
    const cache = source.cache(east, CM, 'ns');
    cache.upsert(cm('old'));
    const { puller } = await bootstrapped(acc, [cache]);
    cache.holdEvents = true;
    const created = await acc.client.create('maps', cm('new', { v: '1' }));
    assert.equal(created.metadata?.name, 'new');
    let snap = await puller.poll();
    assert.equal(dataOf(snap?.objects.maps ?? [], 'new'), '1');
    assert.deepEqual(snap?.deltas.map((d) => `${d.type}:${d.object.metadata?.name}`), ['add:new']);
    await acc.client.update('maps', { ...created, data: { v: '2' } });
    assert.equal(dataOf((await puller.poll())?.objects.maps ?? [], 'new'), '2');
    await acc.client.patch('maps', { name: 'new' }, { data: { v: '3' } });
    assert.equal(dataOf((await puller.poll())?.objects.maps ?? [], 'new'), '3');
    await acc.client.delete('maps', { name: 'old' });
    snap = await puller.poll();
    assert.deepEqual(names(snap?.objects.maps ?? []), ['new']);
    assert.deepEqual(cache.cachedObjects().map((o) => o.metadata?.name), ['old'], 'the cache has seen none of it');
    assert.equal(acc.status().queries[0]?.pendingWrites, 2);
    cache.flush();
    assert.equal(acc.status().queries[0]?.pendingWrites, 0, 'the cache caught up: the written states are let go');
    snap = await puller.poll();
    assert.equal(snap, undefined, 'catching up changes nothing the consumer has not seen');
  });

  it('a later cache state with an older resourceVersion never rolls a write back, resync included', async () => {
    const { source, acc } = setup({ maps: snapshotQuery<ConfigMap>({ cluster: east, gvk: CM }) }, { minIntervalMs: 0 });
    const cache = source.cache(east, CM);
    const a = cache.upsert(cm('a', { v: 'theirs-1' }));
    const { puller } = await bootstrapped(acc, [cache]);
    cache.holdEvents = true;
    cache.upsert(cm('a', { v: 'theirs-2' })); // held: the watch is behind
    await acc.client.patch('maps', { namespace: 'ns', name: a.metadata?.name ?? '' }, { data: { v: 'mine' } });
    assert.equal(dataOf((await puller.poll())?.objects.maps ?? [], 'a'), 'mine');
    cache.resync(); // the cache still holds theirs-1
    assert.equal(await puller.poll(), undefined, 'the older cached state does not replace the write');
    cache.holdEvents = false;
    cache.flush(); // theirs-2 arrives, older than mine, then mine
    const snap = await puller.poll();
    assert.equal(snap, undefined, 'neither the older state nor the echo of the write changed anything');
    cache.upsert(cm('a', { v: 'theirs-3' }));
    assert.equal(dataOf((await puller.poll())?.objects.maps ?? [], 'a'), 'theirs-3', 'a newer state replaces the write');
  });

  it('a written delete stands until the cache drops the object', async () => {
    const { source, acc } = setup({ maps: { cluster: east, gvk: CM } }, { minIntervalMs: 0 });
    const cache = source.cache(east, CM);
    cache.upsert(cm('a'));
    const { puller } = await bootstrapped(acc, [cache]);
    cache.holdEvents = true;
    await acc.client.delete('maps', { namespace: 'ns', name: 'a' });
    assert.deepEqual(names((await puller.poll())?.objects.maps ?? [{}]), []);
    cache.resync();
    assert.equal(await puller.poll(), undefined, 'the cached state does not bring it back');
    cache.flush();
    assert.equal(acc.status().queries[0]?.pendingWrites, 0);
    assert.equal(await puller.poll(), undefined);
  });

  it('an own create and delete a relist never showed are let go once the cache is past the delete', async () => {
    const { source, acc } = setup({ maps: snapshotQuery<ConfigMap>({ cluster: east, gvk: CM, namespace: 'ns' }) }, { minIntervalMs: 0 });
    const cache = source.cache(east, CM, 'ns');
    const { puller } = await bootstrapped(acc, [cache]);
    cache.holdEvents = true;
    await acc.client.create('maps', cm('brief'));
    await acc.client.delete('maps', { name: 'brief' });
    assert.equal(acc.status().queries[0]?.pendingWrites, 1, 'the delete stands: the create\'s ADDED may still come');
    cache.sync(); // a 410 relist: both held events are lost, and the LIST never held the object
    cache.holdEvents = false;
    cache.upsert(cm('other')); // the cache moves past the delete
    assert.equal(acc.status().queries[0]?.pendingWrites, 0, 'the tombstone is let go');
    assert.deepEqual(names((await puller.poll())?.objects.maps ?? []), ['other']);
  });

  it('with opaque resourceVersions, a write stands until the cache changes that object', async () => {
    const { source, acc } = setup({ maps: snapshotQuery<ConfigMap>({ cluster: east, gvk: CM }) }, { minIntervalMs: 0 });
    const cache = source.cache(east, CM);
    cache.opaqueVersions = true;
    cache.upsert(cm('a', { v: 'theirs-1' }));
    const { puller } = await bootstrapped(acc, [cache]);
    cache.holdEvents = true;
    await acc.client.patch('maps', { namespace: 'ns', name: 'a' }, { data: { v: 'mine' } });
    assert.equal(dataOf((await puller.poll())?.objects.maps ?? [], 'a'), 'mine');
    cache.resync();
    assert.equal(await puller.poll(), undefined, 'the unchanged cached state does not replace the write');
    cache.flush();
    assert.equal(acc.status().queries[0]?.pendingWrites, 0, 'the echo (same resourceVersion) ends it');
  });

  it('a failed write changes nothing', async () => {
    const { source, acc } = setup({ maps: { cluster: east, gvk: CM } }, { minIntervalMs: 0 });
    const cache = source.cache(east, CM);
    cache.upsert(cm('a'));
    const { puller } = await bootstrapped(acc, [cache]);
    await assert.rejects(acc.client.create('maps', cm('a')), /409/);
    assert.equal(await puller.poll(), undefined);
    assert.equal(acc.status().queries[0]?.pendingWrites, 0);
  });
});

describe('FleetAccumulator: lifecycle and options', () => {
  it('close ends every iterator and releases every reader; an abort ends one iterator', async () => {
    const { source, acc } = setup({ maps: { cluster: east, gvk: CM }, secrets: { cluster: west, gvk: SECRET } });
    const maps = source.cache(east, CM);
    const secrets = source.cache(west, SECRET);
    const { puller } = await bootstrapped(acc, [maps, secrets]);
    const controller = new AbortController();
    const other = new Puller(acc, controller.signal);
    await other.poll();
    controller.abort();
    assert.equal(await other.ended(), true);
    await acc.close();
    assert.equal(await puller.ended(), true);
    assert.equal(maps.releases, 1);
    assert.equal(secrets.releases, 1);
    assert.equal(maps.handlers + secrets.handlers, 0);
    assert.throws(() => { acc.start(); }, /closed/);
  });

  it('close while a cluster is unreachable stops retrying and leaves no timer', async () => {
    const { source, clock, acc } = setup({ maps: { cluster: east, gvk: CM } });
    source.cache(east, CM).unreachable = new TransportError({ cluster: 'static:east' }, 'down');
    acc.start();
    await settle(10);
    await acc.close();
    assert.equal(clock.pendingTimers, 0);
  });

  it('rejects invalid options with a TypeError naming the option', () => {
    const source = new FakeSnapshotSource();
    assert.throws(() => new FleetAccumulator({ source, queries: {} }), /queries/);
    assert.throws(() => new FleetAccumulator({ source, queries: { a: { cluster: east, gvk: CM } }, minIntervalMs: -1 }), /minIntervalMs/);
    assert.throws(() => new FleetAccumulator({ source, queries: { a: { cluster: east, gvk: CM, labelSelector: 'a in (b' } } }), /a\.labelSelector/);
    assert.throws(() => new FleetAccumulator({ source, queries: { a: { cluster: east, gvk: CM, fieldSelector: 'nonsense' } } }), /a\.fieldSelector/);
    assert.throws(() => new FleetAccumulator({ source: {} as never, queries: { a: { cluster: east, gvk: CM } } }), /source/);
  });
});

function summary<Q extends QuerySet>(snap: FleetSnapshot<Q> | undefined): string[] {
  return (snap?.deltas ?? []).map((d) => `${d.query}:${d.type}:${d.object.metadata?.name}:${d.finalStateUnknown}`).sort();
}

describe('FleetAccumulator: fleet truth', () => {
  it('a cluster that leaves the fleet yields deletes marked finalStateUnknown and says gone; when it comes back it is followed again', async () => {
    const { source, clock, acc } = setup({ maps: { cluster: east, gvk: CM }, secrets: { cluster: west, gvk: SECRET } }, { minIntervalMs: 0 });
    const maps = source.cache(east, CM);
    const secrets = source.cache(west, SECRET);
    maps.upsert(cm('a'));
    secrets.upsert(cm('s1'));
    secrets.upsert(cm('s2'));
    const { puller, first } = await bootstrapped(acc, [maps, secrets]);
    assert.deepEqual(first.freshness.secrets, { state: 'live', syncedAt: first.takenAt });

    // west's kubeconfig Secret is deleted: the registry drops its caches, and reopening fails.
    const left = new TransportError({ cluster: 'static:west' }, 'kubeconfig Secret not found');
    secrets.drop();
    secrets.unreachable = left;
    assert.equal(await puller.poll(), undefined, 'a dropped cache sends no event: the check finds it');
    clock.advance(1_000);
    const gone = await puller.poll();
    assert.deepEqual(summary(gone), ['secrets:delete:s1:true', 'secrets:delete:s2:true']);
    assert.deepEqual(names(gone?.objects.secrets ?? []), []);
    assert.deepEqual(names(gone?.objects.maps ?? []), ['a'], 'the other cluster is untouched');
    assert.equal(gone?.freshness.secrets.state, 'gone');
    assert.equal(gone.freshness.secrets.syncedAt, first.takenAt, 'the last check that saw it live');
    assert.equal(gone.freshness.maps.state, 'live');
    const status = acc.status().queries.find((q) => q.name === 'secrets');
    assert.equal(status?.freshness.state, 'gone');
    assert.equal(status.phase, 'opening');
    assert.equal(status.objects, 0);
    assert.equal(secrets.releases, 1, 'the dropped reader is released');
    clock.advance(10_000);
    assert.equal(await puller.poll(), undefined, 'still out of the fleet: nothing new');

    // The Secret comes back: the query is opened again (with backoff) and its objects re-added.
    secrets.unreachable = undefined;
    secrets.upsert(cm('s3'));
    clock.advance(30_000);
    await settle(10);
    assert.equal(acc.status().queries.find((q) => q.name === 'secrets')?.phase, 'listing', 'reopened');
    secrets.sync();
    const back = await puller.poll();
    assert.deepEqual(summary(back), ['secrets:add:s1:false', 'secrets:add:s2:false', 'secrets:add:s3:false']);
    assert.equal(back?.freshness.secrets.state, 'live');
    assert.equal(back.freshness.secrets.syncedAt, back.takenAt);
    secrets.upsert(cm('s4'));
    assert.deepEqual(summary(await puller.poll()), ['secrets:add:s4:false'], 'its watch is followed again');
  });

  it('own writes not yet seen by a cluster that leaves go with it', async () => {
    const { source, clock, acc } = setup({ maps: { cluster: east, gvk: CM } }, { minIntervalMs: 0 });
    const maps = source.cache(east, CM);
    const { puller } = await bootstrapped(acc, [maps]);
    maps.holdEvents = true;
    await acc.client.create('maps', cm('mine'));
    assert.deepEqual(names((await puller.poll())?.objects.maps ?? []), ['mine']);
    maps.drop();
    maps.unreachable = new TransportError({ cluster: 'static:east' }, 'gone');
    clock.advance(1_000);
    const gone = await puller.poll();
    assert.deepEqual(summary(gone), ['maps:delete:mine:true']);
    assert.equal(acc.status().queries[0]?.pendingWrites, 0);
  });

  it('a cache rebuilt and still listing is stale, not gone: nothing is deleted, and it is live once listed', async () => {
    const { source, clock, acc } = setup({ maps: { cluster: east, gvk: CM } }, { minIntervalMs: 0 });
    const maps = source.cache(east, CM);
    maps.upsert(cm('a'));
    const { puller } = await bootstrapped(acc, [maps]);
    maps.rebuild();
    clock.advance(1_000);
    assert.equal(await puller.poll(), undefined, 'the first check only asks whether it still exists');
    clock.advance(1_000);
    const stale = await puller.poll();
    assert.deepEqual(stale?.deltas, []);
    assert.deepEqual(names(stale.objects.maps), ['a'], 'as last seen');
    assert.equal(stale.freshness.maps.state, 'stale');
    maps.remove('ns', 'a');
    maps.upsert(cm('b'));
    maps.sync();
    clock.advance(1_000);
    // The replay's adds may come a snapshot before the catch-up's deletes (as after any rotation).
    const live = await puller.poll();
    const rest = await puller.poll();
    assert.deepEqual([...summary(live), ...summary(rest)].sort(), ['maps:add:b:false', 'maps:delete:a:true']);
    const last = rest ?? live;
    assert.deepEqual(names(last?.objects.maps ?? []), ['b']);
    assert.equal(last?.freshness.maps.state, 'live');
    assert.equal(maps.releases, 0, 'the same reader throughout');
  });

  it('each snapshot says how fresh each cluster is: a failing watch is stale with its last sync time, and live again once it recovers', async () => {
    const { source, clock, acc } = setup({ maps: { cluster: east, gvk: CM }, secrets: { cluster: west, gvk: SECRET } }, { minIntervalMs: 0 });
    const maps = source.cache(east, CM);
    const secrets = source.cache(west, SECRET);
    secrets.upsert(cm('s'));
    const { puller, first } = await bootstrapped(acc, [maps, secrets]);
    clock.advance(1_000);
    const lastLive = clock.now();
    assert.equal(await puller.poll(), undefined, 'a check that changes no freshness wakes no one');
    secrets.fail(new TransportError({ cluster: 'static:west' }, 'connection refused'));
    clock.advance(1_000);
    const stale = await puller.poll();
    assert.ok(stale, 'a cluster going stale is a change');
    assert.deepEqual(stale.deltas, []);
    assert.equal(stale.objects.secrets, first.objects.secrets, 'its objects as last seen');
    assert.deepEqual(stale.freshness.secrets, { state: 'stale', syncedAt: lastLive });
    assert.deepEqual(stale.freshness.maps, { state: 'live', syncedAt: stale.takenAt });
    assert.deepEqual(acc.status().queries.find((q) => q.name === 'secrets')?.freshness, { state: 'stale', syncedAt: lastLive });
    clock.advance(5_000);
    assert.equal(await puller.poll(), undefined, 'still stale: nothing new');
    secrets.fail(undefined);
    clock.advance(1_000);
    const live = await puller.poll();
    assert.deepEqual(live?.freshness.secrets, { state: 'live', syncedAt: live?.takenAt });
    // A blip between two checks of a consumer's pulls is no change for that consumer.
    secrets.fail(new TransportError({ cluster: 'static:west' }, 'blip'));
    clock.advance(1_000);
    secrets.fail(undefined);
    clock.advance(1_000);
    assert.equal(await puller.poll(), undefined, 'stale and live again since the last snapshot: nothing to deliver');
  });

  it('freshWithinMs holds snapshots back while a cluster has been stale longer than that, and a gone cluster does not', async () => {
    const { source, clock, acc } = setup({ maps: { cluster: east, gvk: CM }, secrets: { cluster: west, gvk: SECRET } }, { minIntervalMs: 0 });
    const maps = source.cache(east, CM);
    const secrets = source.cache(west, SECRET);
    maps.sync();
    secrets.sync();
    const strict = new Puller(acc, undefined, { freshWithinMs: 5_000 });
    const plain = new Puller(acc);
    assert.ok(await strict.poll());
    assert.ok(await plain.poll());
    secrets.fail(new TransportError({ cluster: 'static:west' }, 'connection refused'));
    clock.advance(1_000);
    assert.equal((await strict.poll())?.freshness.secrets.state, 'stale', 'stale, but in sync 1 s ago: within 5 s');
    assert.ok(await plain.poll());
    clock.advance(10_000);
    maps.upsert(cm('a'));
    assert.deepEqual(summary(await plain.poll()), ['maps:add:a:false']);
    assert.equal(await strict.poll(), undefined, 'west was last in sync 10 s ago: held back');
    secrets.fail(undefined);
    clock.advance(1_000);
    const caughtUp = await strict.poll();
    assert.deepEqual(summary(caughtUp), ['maps:add:a:false']);
    assert.equal(caughtUp?.freshness.secrets.state, 'live');
    secrets.drop();
    secrets.unreachable = new TransportError({ cluster: 'static:west' }, 'kubeconfig Secret not found');
    clock.advance(1_000);
    assert.equal((await strict.poll())?.freshness.secrets.state, 'gone', 'a cluster out of the fleet holds nothing back');
    await assert.rejects(acc.snapshots({ freshWithinMs: -1 }).next(), /freshWithinMs/);
  });

  it('a consumer busy while an object is created and deleted again is not woken', async () => {
    const { source, clock, acc } = setup({ maps: { cluster: east, gvk: CM } });
    const maps = source.cache(east, CM);
    maps.upsert(cm('keep'));
    const { puller } = await bootstrapped(acc, [maps]);
    const pending = puller.poll();
    maps.upsert(cm('flash'));
    maps.remove('ns', 'flash');
    assert.equal(await pending, undefined);
    clock.advance(1_000);
    assert.equal(await puller.poll(), undefined, 'zero deltas and identical objects: no snapshot');
    maps.upsert(cm('real'));
    clock.advance(1_000);
    assert.deepEqual(summary(await puller.poll()), ['maps:add:real:false'], 'the next real change is delivered, alone');
  });
});
