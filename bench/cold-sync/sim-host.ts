// The simulated cluster of the cold-sync benchmark, in a process of its own so that its memory is
// not counted against fleetcache's. argv: objects (default 100 000). Seeds ConfigMaps of about 1 KB,
// prints one JSON line `{ kubeconfig }` on stdout and serves until stdin closes.
import { SimulatedCluster } from '../../fixtures/index.ts';

const objects = Number(process.argv[2] ?? 100_000);
const sim = await SimulatedCluster.start({ name: 'cold', namespaces: ['apps'] });
const filler = 'x'.repeat(850);
for (let i = 0; i < objects; i++) {
  sim.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `obj-${i}`, namespace: 'apps', labels: { app: `app-${i % 10}` } }, data: { blob: filler } });
}
process.stdout.write(`${JSON.stringify({ kubeconfig: sim.kubeconfig })}\n`);
process.stdin.resume();
process.stdin.on('end', () => { void sim.close().then(() => { process.exit(0); }); });
