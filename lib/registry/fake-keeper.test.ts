// Single flight, garbage collection and the rotation swap on the in-memory keeper: no sockets, no
// API server, the fake clock. Each has a counterpart against real servers (single-flight.test.ts
// and gc.test.ts on the simulated API server, registry.integration.test.ts on kube-apiservers).
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { ClusterChangedError, type ClusterRef, type ConnectionKey } from '../cluster/index.ts';
import { FakeClusters } from '../cluster/testing.ts';
import { eventually } from '../../e2e/harness/index.ts';
import type { ResourceInfo } from '../transport/index.ts';
import { FakeResourceClient } from '../transport/testing.ts';
import { FakeClock, type GroupVersionKind } from '../util/index.ts';
import { ownerKey, Registry, type OwnerKey } from './index.ts';

const configMaps: GroupVersionKind = { group: '', version: 'v1', kind: 'ConfigMap' };
const east: ClusterRef = { kind: 'static', name: 'east' };
const owner = { namespace: 'team-a', name: 'web' };
const target = { gvk: configMaps, namespace: 'apps', name: 'settings' };

/** A promise and the function that settles it. */
function gate(): { readonly promise: Promise<void>; readonly open: () => void } {
  let open = (): void => undefined;
  const promise = new Promise<void>((resolve) => { open = resolve; });
  return { promise, open };
}

/** The owner keys waiting in the queue now, taken off it. */
async function take(registry: Registry): Promise<OwnerKey[]> {
  const items: OwnerKey[] = [];
  while (registry.queue.len > 0) {
    const next = await registry.queue.get();
    if (next === undefined) break;
    registry.queue.done(next.item);
    registry.queue.forget(next.item);
    items.push(next.item);
  }
  return items;
}

interface Fleet {
  readonly keeper: FakeClusters;
  readonly registry: Registry;
  readonly clock: FakeClock;
  /** The resource clients the registry's builds asked for, oldest first, with their generation. */
  readonly clients: { readonly generation: number; readonly client: FakeResourceClient }[];
  /** The connection key of `east` for `owner`. */
  readonly key: ConnectionKey;
}

/**
 * A registry on a fake keeper whose every generation serves a ConfigMap `apps/settings` whose
 * `data.generation` names the generation it is read from.
 */
function fleet(t: TestContext, options: { readonly discover?: (generation: number) => Promise<void>; readonly admit?: () => Promise<void> } = {}): Fleet {
  const clients: { generation: number; client: FakeResourceClient }[] = [];
  const keeper = new FakeClusters({
    client: (_key, info: ResourceInfo, generation) => {
      const client = new FakeResourceClient({ info });
      client.upsert({ metadata: { name: 'settings', namespace: 'apps' }, data: { generation: String(generation) } });
      clients.push({ generation, client });
      return client;
    },
    ...(options.discover === undefined ? {} : {
      discover: async (_key: string, gvk: GroupVersionKind, generation: number) => {
        await options.discover?.(generation);
        return { gvk, resource: 'configmaps', namespaced: true, verbs: ['list', 'watch'] };
      },
    }),
    ...(options.admit === undefined ? {} : { admit: options.admit }),
  });
  const clock = new FakeClock(Date.now());
  const registry = new Registry({ clusters: keeper, clock, gcInitialDelayMs: 1_000, gcMaxDelayMs: 1_000, gcGraceMs: 5_000 });
  t.after(async () => {
    await registry.close();
    await keeper.close();
  });
  return { keeper, registry, clock, clients, key: keeper.connectionKey(east, owner.namespace) };
}

describe('Registry on the fake keeper: single flight', () => {
  it('builds a missing cache once for many concurrent callers: one lease kept, one client, one LIST', async (t) => {
    const admitted = gate();
    const { keeper, registry, clients, key } = fleet(t, { admit: () => admitted.promise });
    const readers = Array.from({ length: 20 }, (_, i) => registry.watchTargetAndGetReader(east, target, { namespace: owner.namespace, name: `o${i}` }));
    admitted.open();
    const all = await Promise.all(readers);
    assert.ok(all.every((reader) => reader === all[0]), 'every caller gets the one reader of the key');
    assert.equal(clients.length, 1, 'one build');
    await all[0]?.waitForSync(AbortSignal.timeout(10_000));
    assert.equal(clients[0]?.client.listCalls.length, 1, 'one LIST');
    assert.equal(registry.caches().length, 1);
    assert.equal(keeper.acquired.length, 20, 'every caller was admitted on its own');
    assert.equal(keeper.leases(key), 1, 'only the cache holds a lease: every joining caller let its own go');
  });

  it('remembers no failed build: the callers sharing it fail together, the next call builds again', async (t) => {
    let refuse = true;
    const { registry, clients, keeper, key } = fleet(t, { discover: () => (refuse ? Promise.reject(new Error('discovery refused by the test')) : Promise.resolve()) });
    const failed = await Promise.allSettled([1, 2, 3].map(() => registry.watchTargetAndGetReader(east, target, owner)));
    assert.deepEqual(failed.map((r) => r.status), ['rejected', 'rejected', 'rejected']);
    assert.equal(clients.length, 0);
    assert.equal(keeper.leases(key), 0, 'a failed build holds nothing');
    refuse = false;
    const reader = await registry.watchTargetAndGetReader(east, target, owner);
    await reader.waitForSync(AbortSignal.timeout(10_000));
    // The failed builds' generation closed with their last lease: the retry connected anew.
    assert.deepEqual(clients.map((c) => c.generation), [2]);
    assert.deepEqual(reader.get('apps', 'settings')?.data, { generation: '2' });
  });
});

describe('Registry on the fake keeper: garbage collection', () => {
  it('stops a cache once its last owner has been gone for the grace period, and lets its cluster go', async (t) => {
    const { keeper, registry, clock, clients, key } = fleet(t);
    const reader = await registry.watchTargetAndGetReader(east, target, owner);
    await reader.waitForSync(AbortSignal.timeout(10_000));
    const client = clients[0]?.client;
    assert.ok(client !== undefined);
    await eventually('the watch is open', () => client.streams.length === 1);
    registry.forgetOwner(owner);
    clock.advance(4_999); // checks at 1 s intervals find it unused, but within the grace period
    await eventually('the GC checks ran', () => registry.caches()[0]?.nextGcCheckInMs !== undefined);
    assert.equal(registry.caches().length, 1, 'kept through the grace period');
    assert.equal(keeper.leases(key), 1);
    clock.advance(1_001);
    await eventually('the cache is collected', () => registry.caches().length === 0);
    await eventually('its watch is closed', () => client.streams.length === 0);
    assert.equal(keeper.leases(key), 0, 'its lease released');
    assert.equal(keeper.generation(key), undefined, 'the cluster closed with it');
  });

  it('keeps a cache a held reader holds: each check finds it used, until it is released', async (t) => {
    const { registry, clock } = fleet(t);
    const held = await registry.reader(east, configMaps, { namespace: 'apps', ownerNamespace: owner.namespace });
    const check = (): number | undefined => registry.caches()[0]?.nextGcCheckInMs;
    for (let round = 0; round < 7; round++) {
      // A check that finds the cache used schedules the next one a backoff step (1 s) away; one
      // that found it unused would wait out the grace period (5 s) instead, then collect it.
      clock.advance(1_000);
      await eventually(`check ${round + 1} found the held cache used`, () => check() === 1_000);
    }
    held.release();
    clock.advance(5_000);
    await eventually('the released cache is collected', () => registry.caches().length === 0);
  });
});

describe('Registry on the fake keeper: rotation', () => {
  it('rebuilds every cache on the new generation, swaps it under the same reader, requeues its owners and closes the old generation', async (t) => {
    const { keeper, registry, clients, key } = fleet(t);
    const reader = await registry.watchTargetAndGetReader(east, target, owner);
    await reader.waitForSync(AbortSignal.timeout(10_000));
    await take(registry);
    assert.deepEqual(reader.get('apps', 'settings')?.data, { generation: '1' });

    await keeper.rotate(key);
    assert.deepEqual(clients.map((c) => c.generation), [1, 2], 'rebuilt on generation 2');
    assert.equal(keeper.openGenerations(key), 1, 'the old generation closed once its cache stopped');
    assert.equal(keeper.leases(key), 1, 'the new cache holds the one lease');
    await reader.waitForSync(AbortSignal.timeout(10_000));
    assert.deepEqual(reader.get('apps', 'settings')?.data, { generation: '2' }, 'the same reader reads the new cache');
    assert.ok((await take(registry)).includes(ownerKey(owner)), 'its owner requeued');
    assert.equal(registry.caches().length, 1);
  });

  it('drops the caches of a removed cluster and requeues their owners; the next call builds afresh', async (t) => {
    const { keeper, registry, key, clients } = fleet(t);
    const reader = await registry.watchTargetAndGetReader(east, target, owner);
    await reader.waitForSync(AbortSignal.timeout(10_000));
    await take(registry);
    await keeper.remove(key);
    assert.equal(registry.caches().length, 0);
    assert.equal(keeper.leases(key), 0);
    assert.ok((await take(registry)).includes(ownerKey(owner)), 'its owner requeued');
    const again = await registry.watchTargetAndGetReader(east, target, owner);
    await again.waitForSync(AbortSignal.timeout(10_000));
    assert.deepEqual(clients.map((c) => c.generation), [1, 2]);
  });

  it('moves a build in flight to the generation that replaced its own', async (t) => {
    const first = gate();
    const discovered: number[] = [];
    const { keeper, registry, clients, key } = fleet(t, {
      discover: (generation) => {
        discovered.push(generation);
        return generation === 1 ? first.promise : Promise.resolve();
      },
    });
    const building = registry.watchTargetAndGetReader(east, target, owner);
    await eventually('the build is discovering on generation 1', () => discovered.includes(1));
    // The cache under construction is not published yet: the rotation has nothing to swap, and
    // the build must notice under the lock that its generation was replaced.
    await keeper.rotate(key);
    first.open();
    const reader = await building;
    await reader.waitForSync(AbortSignal.timeout(10_000));
    const current = keeper.generation(key);
    assert.ok(current !== undefined && current > 1);
    assert.deepEqual(clients.map((c) => c.generation), [1, current], 'the cache built on generation 1 was never published');
    assert.deepEqual(reader.get('apps', 'settings')?.data, { generation: String(current) });
    assert.equal(keeper.openGenerations(key), 1, 'generation 1 closed once the build let it go');
    assert.equal(clients[0]?.client.listCalls.length ?? 0, 0, 'the unpublished cache never listed');
  });

  it('gives up with ClusterChangedError when the cluster keeps rotating under one build', async (t) => {
    let rotate = (): void => undefined;
    const { keeper, registry, key } = fleet(t, { discover: () => { rotate(); return Promise.resolve(); } });
    rotate = (): void => { void keeper.rotate(key); };
    await assert.rejects(registry.watchTargetAndGetReader(east, target, owner), ClusterChangedError);
    assert.equal(registry.caches().length, 0);
  });
});
