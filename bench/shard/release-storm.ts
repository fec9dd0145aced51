// Reproduction of two Sharder issues found by the sharding benchmark (issue 25), both fixed since
// (fence releases 8 at a time; a run under a reused identity lets go of the earlier run's fences); not a benchmark:
// `node bench/shard/release-storm.ts [keys] [--rerun]`. Replica a alone owns every key; b joins; a releases
// about half its fences at once. The DELETEs queue on a's connection (qps 20, burst 30, the
// connection's and the service's default) ahead of the renewals of a's peer Lease, which miss the
// renew deadline: a "lost the shard group" and stops acting for every key, including the half it
// keeps. With 1,000 keys: lost about 6 s after b joined. Lease 10 s, renew 7 s, retry 1 s.
// With --rerun, a runs again under the same identity once its run ended 'lost' (as the Sharder
// allows): the fences its first run still held for keys now assigned to b are never released (the
// new run only releases what it holds itself, and b does not take a fence whose holder is live),
// so those keys stay unowned for good and b reports them orphaned.
import { KubeConfig } from '@kubernetes/client-node';
import { SimulatedCluster } from '../../fixtures/index.ts';
import { KubeShardLeaseStore, Sharder } from '../../lib/manager/index.ts';
import { ClusterConnection } from '../../lib/transport/index.ts';
import type { Logger } from '../../lib/util/index.ts';

const sim = await SimulatedCluster.start({ namespaces: ['ops'], kinds: [{ group: 'coordination.k8s.io', version: 'v1', kind: 'Lease', plural: 'leases', namespaced: true }] });
const keys = Array.from({ length: Number(process.argv.slice(2).find((a) => !a.startsWith('--')) ?? 1000) }, (_, i) => `k${i}`);
const rerun = process.argv.includes('--rerun');
const t0 = Date.now();
const at = (): string => `${((Date.now() - t0) / 1000).toFixed(1)} s`;
const logger = (id: string): Logger => ({
  error: (m) => { console.log(`${at()} ${id} ERROR ${m}`); },
  warn: () => undefined,
  info: () => undefined,
  debug: () => undefined,
  child() { return this; },
});
const start = (id: string): { sharder: Sharder; stop: () => Promise<void> } => {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromString(sim.kubeconfig);
  const connection = new ClusterConnection({ name: id, kubeConfig });
  const sharder = new Sharder({ leases: new KubeShardLeaseStore({ connection, namespace: 'ops', group: 'g' }), group: 'g', identity: id, leaseDurationMs: 10_000, renewDeadlineMs: 7_000, retryPeriodMs: 1_000, keys: () => keys, logger: logger(id) });
  const controller = new AbortController();
  const done = (async (): Promise<void> => {
    for (;;) {
      const outcome = await sharder.run(controller.signal);
      console.log(`${at()} ${id} run ended: ${outcome}`);
      if (outcome !== 'lost' || !rerun) return;
    }
  })();
  return { sharder, stop: async () => { controller.abort(); await done; await connection.close(); } };
};
const sleep = (ms: number): Promise<void> => new Promise((resolve) => { setTimeout(resolve, ms); });

const a = start('a');
while (a.sharder.status().owned.length < keys.length) await sleep(200);
console.log(`${at()} a owns all ${keys.length} keys; b joins`);
const b = start('b');
for (let i = 0; i < (rerun ? 60 : 15); i++) {
  await sleep(1_000);
  const status = b.sharder.status();
  console.log(`${at()} a owns ${a.sharder.status().owned.length}, b owns ${status.owned.length}, unowned ${status.unowned.length} (${status.orphaned.length} past the bound of ${status.boundMs} ms)`);
}
await Promise.all([a.stop(), b.stop()]);
await sim.close();
