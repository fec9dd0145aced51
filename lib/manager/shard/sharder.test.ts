import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Group, timing } from './group.test-util.ts';
import { peerLeaseName } from './names.ts';
import { rendezvousOwner } from './rendezvous.ts';

const tenants = (n: number): string[] => Array.from({ length: n }, (_, i) => `tenant-${i}`);
const sorted = (items: Iterable<string>): string[] => [...items].sort();

describe('Sharder', () => {
  it('converges three replicas so that every key has exactly the owner rendezvous hashing names', async () => {
    const group = new Group(tenants(60));
    const replicas = ['a', 'b', 'c'].map((name) => group.start(name));
    await group.until('convergence', () => group.converged());
    await group.advance(5_000);
    const peers = ['a', 'b', 'c'].map((identity) => ({ identity, weight: 1 }));
    for (const key of group.keys) assert.deepEqual(group.actors(key), [rendezvousOwner(key, peers)], key);
    for (const r of replicas) {
      const gained = r.changes.flatMap((c) => c.gained);
      // Keys a replica held briefly while the others joined moved on; those it holds now were announced.
      for (const key of group.ownedBy(r.name)) assert.ok(gained.includes(key), `${r.name} was not told it gained ${key}`);
      const status = r.sharder.status();
      assert.equal(status.joined, true);
      assert.deepEqual(status.peers.map((p) => [p.identity, p.live, p.self]), [['a', true, r.name === 'a'], ['b', true, r.name === 'b'], ['c', true, r.name === 'c']]);
      assert.deepEqual(status.owned, group.ownedBy(r.name));
      assert.deepEqual(status.unowned, []);
      assert.deepEqual(status.handoff, []);
    }
    for (const r of replicas) r.stop();
    await group.advance(2_000);
    assert.deepEqual(await Promise.all(replicas.map((r) => r.outcome)), ['released', 'released', 'released']);
  });

  it('moves only the new peer\'s keys when one joins, and only the leaver\'s when one stops, telling each side', async () => {
    const group = new Group(tenants(80));
    const [a, b, c] = ['a', 'b', 'c'].map((name) => group.start(name));
    assert.ok(a !== undefined && b !== undefined && c !== undefined);
    await group.until('convergence', () => group.converged());
    await group.advance(3_000);
    const before = new Map([...group.keys].map((k) => [k, group.actors(k)[0]]));
    for (const r of [a, b, c]) r.changes.length = 0;

    const d = group.start('d');
    const joinTook = await group.until('the join to settle', () => group.converged() && group.ownedBy('d').length > 0 && [...group.keys].every((k) => group.actors(k)[0] === rendezvousOwner(k, ['a', 'b', 'c', 'd'].map((identity) => ({ identity, weight: 1 })))));
    assert.ok(joinTook < timing.leaseDurationMs, `a join settles in a few retry periods, took ${joinTook} ms`);
    const toD = [...group.keys].filter((k) => group.actors(k)[0] === 'd');
    for (const key of group.keys) if (!toD.includes(key)) assert.equal(group.actors(key)[0], before.get(key), `${key} moved though it did not go to the new peer`);
    assert.ok(toD.length > 80 / 4 / 2 && toD.length < 80 / 4 * 2, `d got ${toD.length} of 80`);
    assert.deepEqual(sorted(d.changes.flatMap((ch) => ch.gained)), sorted(toD));
    for (const r of [a, b, c]) {
      assert.deepEqual(sorted(r.changes.flatMap((ch) => ch.lost)), sorted(toD.filter((k) => before.get(k) === r.name)), `${r.name} lost exactly its keys that went to d`);
      assert.deepEqual(r.changes.flatMap((ch) => ch.gained), []);
    }

    const ofB = group.ownedBy('b');
    for (const r of [a, b, c, d]) r.changes.length = 0;
    b.stop();
    const leaveTook = await group.until('b\'s keys to be owned again', () => b.settled() !== undefined && group.converged());
    assert.ok(leaveTook < timing.leaseDurationMs, `a clean stop hands over without waiting for its lease, took ${leaveTook} ms`);
    assert.equal(await b.outcome, 'released');
    assert.deepEqual(sorted(b.changes.flatMap((ch) => ch.lost)), ofB);
    assert.deepEqual(sorted([a, c, d].flatMap((r) => r.changes.flatMap((ch) => ch.gained))), ofB, 'the others gained exactly b\'s keys');
    for (const r of [a, c, d]) assert.deepEqual(r.changes.flatMap((ch) => ch.lost), []);
    assert.equal(group.leases.get(peerLeaseName('test', 'b')), undefined, 'b deleted its peer Lease');
    for (const r of [a, c, d]) r.stop();
    await group.advance(2_000);
  });

  it('re-reads the keys when nudged: a new key is owned within a tick, a removed one released', async () => {
    const group = new Group(tenants(10));
    const a = group.start('a');
    await group.until('convergence', () => group.converged());
    group.keys.add('late');
    a.sharder.keysChanged();
    await group.advance(100);
    assert.equal(a.sharder.owns('late'), true, 'taken at once after keysChanged, not at the next tick');
    group.keys.delete('tenant-3');
    a.sharder.keysChanged();
    await group.advance(100);
    assert.equal(a.sharder.owns('tenant-3'), false);
    assert.equal(group.leases.snapshot().filter((l) => l.role === 'fence').length, 10, 'the gone key\'s fence was released');
    a.stop();
    await group.advance(1_000);
  });

  it('on a clean stop, ends ownership, waits for work in flight, releases every fence, then deletes its peer Lease', async () => {
    const group = new Group(tenants(12));
    const a = group.start('a');
    await group.until('convergence', () => group.converged());
    let finish = (): void => undefined;
    let aborted = false;
    const work = a.sharder.whileOwned('tenant-1', (signal) => new Promise<string>((resolve) => {
      signal.addEventListener('abort', () => { aborted = true; });
      finish = () => { resolve('done'); };
    }));
    a.stop();
    await group.advance(3_000);
    assert.equal(aborted, true, 'the work was told ownership ended');
    assert.equal(a.sharder.owns('tenant-2'), false);
    assert.equal(a.settled(), undefined, 'stop waits for the work in flight');
    assert.ok(group.leases.snapshot().some((l) => l.role === 'fence' && l.key === 'tenant-1'), 'its fence is kept while the work runs');
    assert.ok(group.leases.get(peerLeaseName('test', 'a')) !== undefined);
    finish();
    assert.deepEqual(await work, { owned: true, value: 'done' });
    await group.advance(500);
    assert.equal(await a.outcome, 'released');
    assert.deepEqual(group.leases.snapshot(), [], 'no Lease left behind');
    const byA = group.leases.writes.filter((w) => w.by === 'a' && w.verb === 'delete').map((w) => w.name);
    assert.equal(byA.at(-1), peerLeaseName('test', 'a'), 'the peer Lease is deleted last, after every fence');
    assert.equal(byA.length, 13);
    assert.equal(group.clock.pendingTimers, 0, 'no timer left');
  });
});
