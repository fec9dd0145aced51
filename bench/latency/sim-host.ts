// The simulated API server of the registry latency benchmark, in a process of its own so that its
// work (serialising and sending events) is not counted against the registry's, and so that how
// late it sends is measured on its own clock. argv: objects. Creates ConfigMaps lat-0 … lat-(n-1)
// in namespace `bench`, prints one JSON line { kubeconfig } on stdout, then for each line
// { "rate", "total", "from" } read on stdin updates object (seq mod n) with data.seq = seq for
// seq = from … from+total-1 at `rate` per second, and prints { "sent", "lagMs" }: how late each
// update left (after the write returned) against its schedule, in sequence order (lagMs[i] for
// seq from + i). Ends when stdin closes.
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { SimulatedCluster } from '../../fixtures/index.ts';

const objects = Number(process.argv[2] ?? 1_000);
const sim = await SimulatedCluster.start({ name: 'latency', namespaces: ['bench'] });
for (let k = 0; k < objects; k++) {
  sim.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `lat-${k}`, namespace: 'bench' }, data: { seq: 'initial' } });
}
process.stdout.write(`${JSON.stringify({ kubeconfig: sim.kubeconfig })}\n`);

interface Run { readonly rate: number; readonly total: number; readonly from: number }

/** Sends `run` on its schedule: every update whose time has come, then a timer until the next one is due; lags in sequence order. */
async function send(run: Run): Promise<number[]> {
  const interval = 1000 / run.rate;
  const lags: number[] = [];
  const begin = performance.now();
  let i = 0;
  while (i < run.total) {
    const now = performance.now();
    while (i < run.total && begin + i * interval <= now) {
      const seq = run.from + i;
      const name = `lat-${seq % objects}`;
      const current = sim.store.get({ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'bench', name });
      if (current === undefined) throw new Error(`${name} vanished`);
      sim.store.update({ ...current, data: { seq: String(seq) } });
      lags.push(performance.now() - (begin + i * interval));
      i += 1;
    }
    if (i < run.total) await new Promise((resolve) => setTimeout(resolve, Math.max(0, begin + i * interval - performance.now())));
  }
  return lags;
}

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  const lagMs = await send(JSON.parse(line) as Run);
  process.stdout.write(`${JSON.stringify({ sent: lagMs.length, lagMs })}\n`);
}
await sim.close();
