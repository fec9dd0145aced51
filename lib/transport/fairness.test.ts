// Per-cluster fairness of the shared LIST limiter: an API server that accepts LISTs and never
// answers holds at most its cluster's share of the slots, so another cluster's LIST still runs.
// Observed through the simulated servers' counters, never through timing.
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { SimulatedCluster } from '../../fixtures/sim/index.ts';
import { loadKubeconfig } from '../cluster/index.ts';
import { ClusterConnection, createListLimiter } from './index.ts';

const configMaps = { gvk: { group: '', version: 'v1', kind: 'ConfigMap' }, resource: 'configmaps', namespaced: true, verbs: ['list'] } as const;

async function cluster(t: TestContext, name: string): Promise<SimulatedCluster> {
  const sim = await SimulatedCluster.start({ name, namespaces: ['apps'] });
  t.after(() => sim.close());
  sim.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'cm', namespace: 'apps' } });
  return sim;
}

describe('LIST fairness between clusters', () => {
  it('a hung cluster holds only its share of the shared LIST slots; a healthy cluster still lists', async (t) => {
    const listLimiter = createListLimiter(3);
    t.after(() => listLimiter.stop());
    const hung = await cluster(t, 'hung');
    const healthy = await cluster(t, 'healthy');
    // Accepts every request and answers none (within the test).
    hung.faults.setLatency(600_000);
    const connect = (sim: SimulatedCluster): ClusterConnection => {
      const conn = new ClusterConnection({ name: sim.name, kubeConfig: loadKubeconfig(sim.kubeconfig, { cluster: sim.name }), listLimiter, maxListsPerCluster: 2, qps: 1000, burst: 1000 });
      t.after(() => conn.close());
      return conn;
    };
    const stuck = new AbortController();
    const hungClient = connect(hung).resourceClient(configMaps);
    const pending = Array.from({ length: 4 }, () => hungClient.list({ namespace: 'apps', signal: stuck.signal }).then(() => 'answered', () => 'aborted'));
    await hung.waitFor((c) => c.requests.list === 2);

    const page = await connect(healthy).resourceClient(configMaps).list({ namespace: 'apps', signal: AbortSignal.timeout(30_000) });
    assert.equal(page.items.length, 1, 'the healthy cluster listed while the hung one held its share');
    assert.equal(hung.counters.requests.list, 2, 'the hung cluster\'s other LISTs wait in its share, not in the shared slots');
    stuck.abort();
    assert.deepEqual(await Promise.all(pending), ['aborted', 'aborted', 'aborted', 'aborted']);
  });

  it('rejects an invalid share with a TypeError naming the option', async (t) => {
    const sim = await cluster(t, 'opts');
    assert.throws(() => new ClusterConnection({ name: 'x', kubeConfig: loadKubeconfig(sim.kubeconfig, { cluster: 'x' }), maxListsPerCluster: 0 }), /maxListsPerCluster/);
  });
});
