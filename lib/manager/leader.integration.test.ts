import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { ClusterConnection } from '../transport/index.ts';
import { useClusters } from '../../e2e/harness/index.ts';
import { KubeLeaseClient, LeaderElector, type ElectionOutcome, type LeaderElectorOptions, type LeaseClient } from './leader.ts';
import { eventually } from '../../fixtures/support/index.ts';

// Nothing here asserts how long something took: each step waits for a condition (bounded only so a
// failure ends with a message), and the ordering claims are read from the Lease and the callbacks.
// A follower measures expiry with the duration the holder recorded in the Lease, from when it last
// saw the record change; so `a`, which must not lose its lease on a loaded machine, gets a generous
// timing, and `b`, whose abandoned lease `c` must wait out, a shorter one.
type Timing = Pick<LeaderElectorOptions, 'leaseDurationMs' | 'renewDeadlineMs' | 'retryPeriodMs'>;
const steady: Timing = { leaseDurationMs: 30_000, renewDeadlineMs: 20_000, retryPeriodMs: 250 };
const medium: Timing = { leaseDurationMs: 6_000, renewDeadlineMs: 4_000, retryPeriodMs: 250 };
const quick: Timing = { leaseDurationMs: 3_000, renewDeadlineMs: 2_000, retryPeriodMs: 250 };

interface LeaseSpec { holderIdentity?: string; leaseTransitions?: number; renewTime?: string; acquireTime?: string }

describe('leader election on a real Lease', () => {
  const fixture = useClusters(1);
  const connections: ClusterConnection[] = [];
  after(async () => { await Promise.all(connections.map((c) => c.close())); });

  function candidate(identity: string, releaseOnCancel: boolean, timing: Timing, name = 'fleetcache-test', onRead?: () => void): { elector: LeaderElector; leaders: string[]; stop: () => Promise<ElectionOutcome> } {
    const cluster = fixture.clusters[0];
    const connection = new ClusterConnection({ name: `local-${identity}`, kubeConfig: cluster.kubeConfig() });
    connections.push(connection);
    const client = new KubeLeaseClient({ connection, namespace: 'default', name });
    const leases: LeaseClient = onRead === undefined ? client : {
      description: client.description,
      get: async (signal) => { const lease = await client.get(signal); onRead(); return lease; },
      create: (record, signal) => client.create(record, signal),
      update: (record, resourceVersion, signal) => client.update(record, resourceVersion, signal),
    };
    const elector = new LeaderElector({ leases, identity, releaseOnCancel, ...timing });
    const controller = new AbortController();
    const leaders: string[] = [];
    const outcome = elector.run(controller.signal, { onNewLeader: (holder) => leaders.push(holder) });
    return { elector, leaders, stop: () => { controller.abort(); return outcome; } };
  }

  async function lease(name = 'fleetcache-test'): Promise<LeaseSpec> {
    const res = await fixture.clusters[0].request('GET', `/apis/coordination.k8s.io/v1/namespaces/default/leases/${name}`);
    assert.equal(res.statusCode, 200);
    return (res.body as { spec: LeaseSpec }).spec;
  }

  it('lets one candidate lead, hands over on release, and only after expiry on a crash', async () => {
    const a = candidate('a', true, steady);
    await eventually('a to lead', () => a.elector.isLeader, 60_000);
    const b = candidate('b', false, medium);
    await eventually('b to read the lease', () => b.elector.state !== 'unknown', 60_000);
    // b stays a follower while a renews: watch three renewals go by rather than sleeping.
    const renewals = new Set<string>();
    await eventually('three renewals by a', async () => { renewals.add((await lease()).renewTime ?? ''); return renewals.size >= 3; }, 60_000);
    assert.equal(a.elector.isLeader, true);
    assert.equal(b.elector.state, 'following');
    assert.equal(b.elector.holder, 'a');
    assert.equal((await lease()).holderIdentity, 'a');

    // Graceful stop: a empties the holder, and b takes the lease because it is free, well before
    // its 30 s expiry: b saw the empty holder before becoming the holder itself.
    assert.equal(await a.stop(), 'released');
    await eventually('b to lead after the release', () => b.elector.isLeader, 60_000);
    assert.deepEqual(b.leaders, ['a', '', 'b'], 'b saw a, then the released lease, then itself');
    const afterRelease = await lease();
    assert.equal(afterRelease.holderIdentity, 'b');
    assert.equal(afterRelease.leaseTransitions, 1, 'a → (released) → b is one transition');

    // Crash: b stops renewing without releasing; c must wait a whole lease duration past b's last
    // renewal: b's recorded 6 s, not c's own 3 s.
    const c = candidate('c', true, quick);
    await eventually('c to read the lease', () => c.elector.state === 'following', 60_000);
    assert.equal(await b.stop(), 'released');
    const abandoned = await lease();
    assert.equal(abandoned.holderIdentity, 'b', 'no release on a crash');
    await eventually('c to lead after the lease expired', () => c.elector.isLeader, 60_000);
    const taken = await lease();
    assert.equal(taken.holderIdentity, 'c');
    assert.equal(taken.leaseTransitions, 2);
    // Both times were written from this machine's clock: c's first write as holder came at least a
    // lease duration after b's last renewal, however slowly the steps in between ran.
    const gap = Date.parse(taken.renewTime ?? '') - Date.parse(abandoned.renewTime ?? '');
    assert.ok(gap >= (medium.leaseDurationMs ?? 0), `c took the lease ${gap} ms after b's last renewal, less than b's recorded lease duration`);
    assert.equal(await c.stop(), 'released');
    assert.equal((await lease()).holderIdentity, '');
  });

  it('leaves a lease whose holder recorded an hour alone long past its own duration', async () => {
    const created = await fixture.clusters[0].request('POST', '/apis/coordination.k8s.io/v1/namespaces/default/leases', {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: 'held-for-an-hour' },
      spec: { holderIdentity: 'someone-else', leaseDurationSeconds: 3_600, leaseTransitions: 4, renewTime: new Date().toISOString().replace('Z', '000Z') },
    });
    assert.equal(created.statusCode, 201);
    const reads: number[] = [];
    const d = candidate('d', true, quick, 'held-for-an-hour', () => reads.push(Date.now()));
    // Wait for reads spread over three of d's own lease durations: d had every chance to take it.
    await eventually('d to read the lease over 9 s', () => reads.length > 1 && (reads.at(-1) ?? 0) - (reads[0] ?? 0) > 3 * (quick.leaseDurationMs ?? 0), 60_000);
    assert.equal(d.elector.isLeader, false);
    assert.equal(d.elector.state, 'following');
    const held = await lease('held-for-an-hour');
    assert.equal(held.holderIdentity, 'someone-else');
    assert.equal(held.leaseTransitions, 4);
    assert.equal(await d.stop(), 'stopped');
  });
});
