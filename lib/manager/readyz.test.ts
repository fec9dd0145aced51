// /readyz with leader election: a replica is not ready before it has read the leader Lease once
// (controller-runtime's leader election check), so a rollout does not count a replica that cannot
// yet reach the management cluster. The simulated management cluster holds the Lease read back on
// a fake clock for as long as the test needs it held.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SimulatedCluster } from '../../fixtures/index.ts';
import { eventually } from '../../e2e/harness/index.ts';
import { ClusterSet, LocalProvider } from '../cluster/index.ts';
import { Registry } from '../registry/index.ts';
import { FakeClock, noopLogger } from '../util/index.ts';
import { Manager } from './index.ts';
import { kubeConfigFrom } from '../../fixtures/support/index.ts';

const leaseKind = { group: 'coordination.k8s.io', version: 'v1', kind: 'Lease', plural: 'leases', namespaced: true } as const;
const LEASE_PATH = '/apis/coordination.k8s.io/v1/namespaces/ops/leases/widgets-leader';

describe('Manager /readyz with leader election', () => {
  it('fails naming the Lease until the Lease has been read, then passes', { timeout: 120_000 }, async (t) => {
    const simClock = new FakeClock(Date.now());
    const cluster = await SimulatedCluster.start({ namespaces: ['ops'], kinds: [leaseKind], clock: simClock });
    t.after(() => cluster.close());
    const kubeConfig = kubeConfigFrom(cluster.kubeconfig);
    // Every request waits a second of the cluster's clock, which stands still until the test moves it.
    cluster.faults.setLatency(1_000);
    const manager = new Manager({
      clusters: ({ onRequest }) => new ClusterSet({ local: kubeConfig, provider: new LocalProvider({ kubeConfig }), onRequest, logger: noopLogger }),
      registry: ({ queue, clusters }) => new Registry({ clusters, queue, logger: noopLogger }),
      healthProbeBindAddress: { host: '127.0.0.1', port: 0 },
      leaderElection: { name: 'widgets-leader', namespace: 'ops' },
    });
    const stop = new AbortController();
    const done = manager.start(stop.signal);
    t.after(async () => {
      stop.abort();
      cluster.faults.setLatency(0);
      simClock.advance(1_000);
      await done;
    });

    const url = await eventually('the probe server', () => manager.probeUrl);
    await eventually('the Lease read reached the cluster, where it is held', () => cluster.recentRequests().some((r) => r.method === 'GET' && r.path === LEASE_PATH));
    const held = await fetch(`${url}/readyz`);
    assert.equal(held.status, 500, 'not ready while the Lease read is held');
    assert.match(await held.text(), /\[-\]leader-election failed: the Lease has not been read yet/);
    assert.equal(manager.isLeader, false);

    cluster.faults.setLatency(0);
    simClock.advance(1_000); // the held read is answered
    await eventually('ready once the Lease was read', async () => (await fetch(`${url}/readyz`)).status === 200 || undefined);
    assert.equal(await (await fetch(`${url}/readyz`)).text(), 'ok');
  });
});
