import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Group, timing } from './group.test-util.ts';
import { fenceLeaseName, peerLeaseName } from './names.ts';
import { rendezvousOwner } from './rendezvous.ts';
import type { PartitionMode } from './memory-store.ts';
import type { ShardOrphans } from './sharder.ts';

const tenants = (n: number): string[] => Array.from({ length: n }, (_, i) => `tenant-${i}`);

describe('Sharder under faults', () => {
  for (const mode of ['hanging', 'failing'] as const satisfies readonly PartitionMode[]) {
    it(`stops a partitioned replica (${mode}) within renewDeadline; the others take its keys only after leaseDuration`, async () => {
      const group = new Group(tenants(45));
      const replicas = ['a', 'b', 'c'].map((name) => group.start(name));
      await group.until('convergence', () => group.converged());
      await group.advance(2_000);
      const c = replicas[2];
      assert.ok(c !== undefined);
      const ofC = group.ownedBy('c');
      assert.ok(ofC.length > 5);
      c.changes.length = 0;
      const cutAt = group.clock.now();
      c.client.mode = mode;
      const stoppedAfter = await group.until('c to stop acting', () => group.ownedBy('c').length === 0);
      assert.ok(stoppedAfter <= timing.renewDeadlineMs, `c stopped acting ${stoppedAfter} ms after the cut`);
      assert.deepEqual(c.changes.flatMap((ch) => ch.lost).sort(), ofC, 'c was told it lost every key');
      await group.until('c\'s run to end', () => c.settled() !== undefined);
      assert.equal(c.settled(), 'lost');
      await group.until('c\'s keys to be owned again', () => group.converged());
      const sinceCut = group.clock.now() - cutAt;
      // c's last renewal started at most a retry period before the cut; the others count its lease from when they saw it.
      for (const key of ofC) {
        const history = group.history.get(key) ?? [];
        assert.equal(history.at(-2), 'c', `${key}: ${history.join(' → ')}`);
      }
      assert.ok(sinceCut >= timing.leaseDurationMs - timing.retryPeriodMs, `taken ${sinceCut} ms after the cut: before c's lease could lapse`);
      assert.ok(sinceCut <= timing.leaseDurationMs + 2 * timing.retryPeriodMs, `taken ${sinceCut} ms after the cut: past the bound`);
      for (const r of replicas) r.stop();
      c.client.mode = 'connected';
      await group.advance(2_000);
    });
  }

  it('aborts whileOwned\'s signal when the key moves, and releases the fence only after the work settled', async () => {
    const group = new Group(tenants(30));
    const a = group.start('a');
    const b = group.start('b');
    await group.until('convergence', () => group.converged());
    const both = [{ identity: 'a', weight: 1 }, { identity: 'b', weight: 1 }];
    const withC = [...both, { identity: 'c', weight: 1 }];
    const key = [...group.keys].find((k) => rendezvousOwner(k, both) === 'a' && rendezvousOwner(k, withC) === 'c');
    assert.ok(key !== undefined);
    assert.deepEqual(await b.sharder.whileOwned(key, () => { throw new Error('must not run'); }), { owned: false });

    let finish = (): void => undefined;
    let reason: unknown;
    const work = a.sharder.whileOwned(key, (signal) => new Promise<number>((resolve) => {
      signal.addEventListener('abort', () => { reason = signal.reason; });
      finish = () => { resolve(7); };
    }));
    group.start('c');
    await group.until('a to stop acting for the key', () => !a.sharder.owns(key));
    assert.match(String(reason), /moved to another replica/);
    await group.advance(3 * timing.retryPeriodMs);
    assert.deepEqual(group.actors(key), [], 'nobody acts while the old owner\'s work runs');
    assert.equal(group.leases.snapshot().find((l) => l.role === 'fence' && l.key === key)?.record.holderIdentity, 'a', 'the fence stays with a');
    assert.ok(a.sharder.status().handoff.includes(key), 'a reports the key in handoff while its work settles');
    assert.ok(group.replicas.get('c')?.sharder.status().handoff.includes(key), 'c reports it in handoff until it takes the fence');
    finish();
    assert.deepEqual(await work, { owned: true, value: 7 });
    await group.until('c to own the key', () => group.actors(key)[0] === 'c', 3 * timing.retryPeriodMs);
    for (const r of group.replicas.values()) r.stop();
    await group.advance(2_000);
  });

  it('bounds fence takes by the rate limit, and widens the no-orphan bound by its delay', async () => {
    const group = new Group(tenants(40));
    const a = group.start('a', { maxFenceTakesPerSecond: 2, fenceTakeBurst: 5 });
    // 40 keys at 2/s after a burst of 5: 17.5 s of delay on top of the lease bound.
    group.boundMs = timing.leaseDurationMs + 3 * timing.retryPeriodMs * 1.2 + 17_500;
    const start = group.clock.now();
    const creates = (): number => group.leases.writes.filter((w) => w.verb === 'create' && w.name !== peerLeaseName('test', 'a')).length;
    let worst = 0;
    while (creates() < 40) {
      await group.advance(500);
      const elapsed = (group.clock.now() - start) / 1000;
      worst = Math.max(worst, creates() - (5 + 2 * elapsed));
      assert.ok(creates() <= 5 + 2 * elapsed + 1e-9, `${creates()} fences taken after ${elapsed} s`);
      assert.ok(elapsed < 60, 'every fence taken eventually');
    }
    assert.equal(a.sharder.status().boundMs, group.boundMs);
    assert.deepEqual(a.sharder.status().orphaned, []);
    a.stop();
    await group.advance(2_000);
  });

  it('takes the fences of a replica that died at the recovery rate, not at the rate of free fences', async () => {
    const group = new Group(tenants(120));
    const rates = { maxFenceTakesPerSecond: 2, fenceTakeBurst: 5, maxRecoveryTakesPerSecond: 40, recoveryTakeBurst: 50 };
    group.boundMs = Infinity; // converging at 2 takes a second is slow on purpose
    const a = group.start('a', rates);
    const b = group.start('b', rates);
    await group.until('convergence', () => group.converged(), 120_000, 500);
    const ofB = group.ownedBy('b');
    assert.ok(ofB.length > 40, `b owns ${ofB.length}`);
    // From now on the bound holds without the free-fence rate's delay: only the recovery burst's.
    group.boundMs = timing.leaseDurationMs + 2 * timing.retryPeriodMs + 1_000;
    const writesBefore = group.leases.writes.length;
    const cutAt = group.clock.now();
    b.client.mode = 'failing';
    await group.until('b\'s keys to be owned by a', () => group.ownedBy('a').length === 120);
    const took = group.clock.now() - cutAt;
    assert.ok(took <= timing.leaseDurationMs + 2 * timing.retryPeriodMs + 1_000, `owned again ${took} ms after the cut (the free rate would need ${(ofB.length - 5) / 2} s more)`);
    const taken = group.leases.writes.slice(writesBefore).filter((w) => w.by === 'a' && w.verb === 'update' && w.name !== peerLeaseName('test', 'a'));
    assert.deepEqual(taken.map((w) => w.name).sort(), ofB.map((k) => fenceLeaseName('test', k)).sort(), 'a took exactly b\'s fences, each once');
    assert.deepEqual(a.sharder.status().orphaned, []);
    a.stop();
    b.client.mode = 'connected';
    await group.advance(2_000);
  });

  it('takes the fences of a holder it never saw renew (dead before it joined: a cold start) at the rate of free fences', async () => {
    const group = new Group(tenants(40));
    const b = group.start('b');
    await group.until('convergence', () => group.converged());
    b.client.mode = 'failing';
    await group.until('b to stop', () => b.settled() !== undefined);
    group.boundMs = Infinity; // b's keys wait for its lease, then for the slow rate
    const a = group.start('a', { maxFenceTakesPerSecond: 2, fenceTakeBurst: 5, maxRecoveryTakesPerSecond: 1_000, recoveryTakeBurst: 1_000 });
    const takes = (): number => group.leases.writes.filter((w) => w.by === 'a' && w.verb === 'update' && w.name !== peerLeaseName('test', 'a')).length;
    await group.until('a\'s first take', () => takes() > 0, 3 * timing.leaseDurationMs);
    const start = group.clock.now();
    while (takes() < 40) {
      await group.advance(500);
      const elapsed = (group.clock.now() - start) / 1000;
      assert.ok(takes() <= 5 + 2 * elapsed + 1e-9, `${takes()} fences taken after ${elapsed} s: past the free-fence rate`);
      assert.ok(elapsed < 60, 'every fence taken eventually');
    }
    assert.equal(group.ownedBy('a').length, 40);
    a.stop();
    await group.advance(2_000);
  });

  it('collects the peer Lease of a replica that died, once it was not renewed for 10 lease durations', async () => {
    const group = new Group(tenants(10));
    const a = group.start('a');
    const b = group.start('b');
    await group.until('convergence', () => group.converged());
    b.client.mode = 'failing';
    await group.until('b\'s keys to be owned again', () => group.ownedBy('a').length === 10);
    assert.ok(group.leases.get(peerLeaseName('test', 'b')) !== undefined, 'kept while it could still come back');
    assert.deepEqual(a.sharder.status().peers.map((p) => [p.identity, p.live]), [['a', true], ['b', false]]);
    const gone = await group.until('b\'s peer Lease to be collected', () => group.leases.get(peerLeaseName('test', 'b')) === undefined, 20 * timing.leaseDurationMs, 1_000);
    assert.ok(gone >= 10 * timing.leaseDurationMs - 2 * timing.leaseDurationMs, `collected after ${gone} ms`);
    assert.ok(group.leases.writes.some((w) => w.by === 'a' && w.verb === 'delete' && w.name === peerLeaseName('test', 'b')));
    await group.advance(2 * timing.retryPeriodMs);
    assert.deepEqual(a.sharder.status().peers.map((p) => p.identity), ['a']);
    a.stop();
    await group.advance(2_000);
  });

  it('tells orphan listeners of a key past the bound, with exactly one live replica reporting it (the runner-up, not the failing assignee), then of its recovery', async () => {
    const keys = tenants(20);
    const peers = ['a', 'b', 'c'].map((identity) => ({ identity, weight: 1 }));
    const stuck = keys.find((k) => rendezvousOwner(k, peers) === 'a');
    assert.ok(stuck !== undefined);
    const runnerUp = rendezvousOwner(stuck, peers.filter((p) => p.identity !== 'a'));
    const group = new Group(keys);
    group.boundMs = Infinity; // this test makes an orphan on purpose
    const reports = new Map<string, ShardOrphans[]>();
    const replicas = ['a', 'b', 'c'].map((name) => {
      const r = group.start(name);
      reports.set(name, []);
      r.sharder.subscribeOrphans((orphans) => { reports.get(name)?.push(orphans); });
      return r;
    });
    const a = replicas[0];
    assert.ok(a !== undefined);
    a.client.refuse = (verb, name) => verb === 'create' && name === fenceLeaseName('test', stuck);
    await group.until('every other key to be owned', () => keys.every((k) => k === stuck || group.actors(k).length === 1));
    assert.deepEqual([...reports.values()].flat(), [], 'no report while nothing is past the bound');
    const boundMs = a.sharder.status().boundMs;
    await group.advance(boundMs + 2 * timing.retryPeriodMs);
    for (const [name, seen] of reports) {
      const last = seen.at(-1);
      assert.ok(last !== undefined, `${name} was told`);
      assert.deepEqual(last.orphaned.map((o) => o.key), [stuck], `${name} sees the orphan`);
      const [orphan] = last.orphaned;
      assert.ok(orphan !== undefined);
      assert.equal(orphan.boundMs, boundMs);
      assert.ok(group.clock.now() - orphan.since > boundMs, 'since: before the bound');
      assert.deepEqual(last.reported.map((o) => o.key), name === runnerUp ? [stuck] : [], `${name} reports it only if it is the runner-up ${runnerUp}`);
      assert.deepEqual(seen.flatMap((r) => r.recovered), []);
      assert.ok(seen.length >= 2, `${name}: reported at every read of the group while orphaned (level-triggered)`);
    }
    a.client.refuse = undefined;
    await group.until('the stuck key to be owned', () => group.actors(stuck).length === 1);
    await group.advance(2 * timing.retryPeriodMs);
    for (const [name, seen] of reports) {
      assert.deepEqual(seen.at(-1), { orphaned: [], reported: [], recovered: [stuck] }, `${name} was told it recovered`);
    }
    const counts = [...reports.values()].map((seen) => seen.length);
    await group.advance(3 * timing.retryPeriodMs);
    assert.deepEqual([...reports.values()].map((seen) => seen.length), counts, 'no report once nothing is orphaned');
    for (const r of replicas) r.stop();
    await group.advance(2_000);
  });

  it('reports a key nobody can take as unowned, then orphaned past the bound, logging it once', async () => {
    const group = new Group(['stuck', 'fine']);
    group.boundMs = Infinity; // this test makes an orphan on purpose
    const errors: string[] = [];
    const logger = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: (msg: string) => { errors.push(msg); }, child: () => logger };
    const a = group.start('a', { logger });
    a.client.refuse = (verb, name) => verb === 'create' && name === fenceLeaseName('test', 'stuck');
    await group.until('fine to be owned', () => group.actors('fine').length === 1);
    let status = a.sharder.status();
    assert.deepEqual(status.unowned.map((u) => u.key), ['stuck']);
    assert.deepEqual(status.handoff, ['stuck']);
    assert.deepEqual(status.orphaned, []);
    await group.advance(status.boundMs + timing.retryPeriodMs);
    status = a.sharder.status();
    assert.deepEqual(status.orphaned, ['stuck']);
    assert.ok((status.unowned[0]?.forMs ?? 0) > status.boundMs);
    assert.deepEqual(errors.filter((e) => e.includes('no owner')).length, 1, 'logged once, not at every tick');
    a.client.refuse = undefined;
    await group.advance(2 * timing.retryPeriodMs);
    assert.deepEqual(a.sharder.status().orphaned, []);
    assert.deepEqual(group.actors('stuck'), ['a']);
    a.stop();
    await group.advance(2_000);
  });
});
