// Starts one cluster, prints its process ids as JSON, then hangs until killed. Used to prove that a
// killed test process leaves no etcd or kube-apiserver behind.
import { startCluster } from '../index.ts';

const cluster = await startCluster({ name: 'orphan-check' });
process.stdout.write(`${JSON.stringify(cluster.pids())}\n`);
setInterval(() => undefined, 60_000);
