import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { after, describe, it } from 'node:test';
import { ClusterConnection } from '../lib/transport/index.ts';
import { useClusters } from '../e2e/harness/index.ts';
import { KubeLeaseClient, LeaderElector, type ElectionOutcome } from './leader.ts';

// Short durations so that expiry takes seconds: lease 2 s, renew deadline 1 s, retry 250 ms.
const timing = { leaseDurationMs: 2_000, renewDeadlineMs: 1_000, retryPeriodMs: 250 };

async function until(what: string, condition: () => boolean, timeoutMs = 10_000): Promise<number> {
  const start = Date.now();
  while (!condition()) {
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await delay(25);
  }
  return Date.now() - start;
}

describe('leader election on a real Lease', () => {
  const fixture = useClusters(1);
  const connections: ClusterConnection[] = [];
  after(async () => { await Promise.all(connections.map((c) => c.close())); });

  function candidate(identity: string, releaseOnCancel: boolean): { elector: LeaderElector; stop: () => Promise<ElectionOutcome> } {
    const cluster = fixture.clusters[0];
    assert.ok(cluster !== undefined);
    const connection = new ClusterConnection({ name: `local-${identity}`, kubeConfig: cluster.kubeConfig() });
    connections.push(connection);
    const elector = new LeaderElector({ leases: new KubeLeaseClient({ connection, namespace: 'default', name: 'fleetcache-test' }), identity, releaseOnCancel, ...timing });
    const controller = new AbortController();
    const outcome = elector.run(controller.signal);
    return { elector, stop: () => { controller.abort(); return outcome; } };
  }

  async function holder(): Promise<{ holderIdentity?: string; leaseTransitions?: number }> {
    const res = await fixture.clusters[0]?.request('GET', '/apis/coordination.k8s.io/v1/namespaces/default/leases/fleetcache-test');
    return (res?.body as { spec: { holderIdentity?: string; leaseTransitions?: number } }).spec;
  }

  it('lets one candidate lead, hands over quickly on release, and only after expiry on a crash', async () => {
    const a = candidate('a', true);
    await until('a to lead', () => a.elector.isLeader);
    const b = candidate('b', false);
    await until('b to read the lease', () => b.elector.state !== 'unknown');
    await delay(1_500); // several renewals: b must stay a follower
    assert.equal(a.elector.isLeader, true);
    assert.equal(b.elector.state, 'following');
    assert.equal(b.elector.holder, 'a');
    assert.equal((await holder()).holderIdentity, 'a');

    // Graceful stop: a releases, b takes over at its next attempt, long before a lease duration.
    assert.equal(await a.stop(), 'released');
    const handover = await until('b to lead after the release', () => b.elector.isLeader);
    assert.ok(handover < timing.leaseDurationMs, `handover after release took ${handover} ms`);
    const afterRelease = await holder();
    assert.equal(afterRelease.holderIdentity, 'b');
    assert.equal(afterRelease.leaseTransitions, 1, 'a → (released) → b is one transition');

    // Crash: b stops renewing without releasing; c must wait for the lease to expire.
    const c = candidate('c', true);
    await until('c to read the lease', () => c.elector.state === 'following');
    assert.equal(await b.stop(), 'released');
    assert.equal((await holder()).holderIdentity, 'b', 'no release on a crash');
    await delay(1_000);
    assert.equal(c.elector.isLeader, false, 'the lease is still valid 1 s after the last renewal');
    await until('c to lead after the lease expired', () => c.elector.isLeader, 10_000);
    assert.equal((await holder()).holderIdentity, 'c');
    assert.equal(await c.stop(), 'released');
    assert.equal((await holder()).holderIdentity, '');
  });
});
