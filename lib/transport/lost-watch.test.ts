// A watch whose stream or connection dies is always noticed: the informer gets a TransportError
// (never a stream that just goes quiet) and catches up on what changed meanwhile. One case per way
// a watch dies on each protocol.
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { eventually } from '../../e2e/harness/index.ts';
import { SimulatedCluster } from '../../fixtures/sim/index.ts';
import { loadKubeconfig } from '../cluster/index.ts';
import { ResourceInformer } from '../informer/index.ts';
import { TransportError, type GroupVersionKind } from '../util/index.ts';
import { ClusterConnection, createListLimiter, SocketBudget } from './index.ts';

const CONFIGMAP: GroupVersionKind = { group: '', version: 'v1', kind: 'ConfigMap' };
const listLimiter = createListLimiter();

interface Case {
  readonly name: string;
  readonly http2: boolean;
  readonly kill: (sim: SimulatedCluster) => Promise<void>;
}

const CASES: readonly Case[] = [
  { name: 'HTTP/2 stream reset (RST_STREAM)', http2: true, kill: (sim) => { assert.equal(sim.faults.cutWatches({ mode: 'reset' }), 1); return Promise.resolve(); } },
  { name: 'HTTP/2 session destroyed (every connection reset)', http2: true, kill: async (sim) => { await sim.faults.down(); await sim.faults.up(); } },
  { name: 'HTTP/1.1 socket reset in the middle of an event', http2: false, kill: (sim) => { assert.equal(sim.faults.cutWatches({ mode: 'reset', midEvent: true }), 1); return Promise.resolve(); } },
  { name: 'HTTP/1.1 connection reset', http2: false, kill: async (sim) => { await sim.faults.down(); await sim.faults.up(); } },
];

async function watching(t: TestContext, http2: boolean): Promise<{ sim: SimulatedCluster; inf: ResourceInformer; errors: Error[] }> {
  const sim = await SimulatedCluster.start({ namespaces: ['a'], http2 });
  t.after(() => sim.close());
  sim.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'before', namespace: 'a' } });
  const budget = new SocketBudget({ maxSockets: 8 });
  const conn = new ClusterConnection({ name: 'lost', kubeConfig: loadKubeconfig(sim.kubeconfig, { cluster: 'lost' }), listLimiter, qps: 1000, burst: 1000, http2, socketBudget: budget });
  t.after(async () => {
    await conn.close();
    await eventually('the budget is back to 0 in use', () => budget.inUse === 0);
  });
  // The inactivity deadline is far away: only the transport can notice the loss.
  const inf = new ResourceInformer({ connection: conn, gvk: CONFIGMAP, namespace: 'a', backoff: { initialMs: 20, maxMs: 200, jitter: 0 }, watchInactivityTimeoutMs: 600_000 });
  t.after(() => inf.stop());
  const errors: Error[] = [];
  inf.on('error', (e) => { errors.push(e); });
  inf.start();
  await inf.waitForSync(AbortSignal.timeout(30_000));
  await sim.waitFor((c) => c.openWatches === 1);
  return { sim, inf, errors };
}

describe('a lost watch is always noticed', () => {
  for (const c of CASES) {
    it(`${c.name}: the informer gets a TransportError and catches up`, async (t) => {
      const { sim, inf, errors } = await watching(t, c.http2);
      await c.kill(sim);
      await eventually('the loss surfaced as a TransportError', () => errors.some((e) => e instanceof TransportError), 20_000);
      sim.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'after', namespace: 'a' } });
      await eventually('the change made after the loss arrives', () => inf.store.getByName('a', 'after') !== undefined, 20_000);
      assert.equal(inf.store.list().length, 2);
    });
  }
});
