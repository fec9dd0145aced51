// Starts one cluster, prints its process ids as JSON, then hangs until killed. Used to prove that a
// killed test process leaves no etcd or kube-apiserver behind.
import { startCluster } from '../index.ts';

// argv[2]: the base directory to make the cluster's directory in (the test's own).
const baseDir = process.argv[2];
const cluster = await startCluster({ name: 'orphan-check', ...(baseDir === undefined ? {} : { baseDir }) });
process.stdout.write(`${JSON.stringify(cluster.pids())}\n`);
setInterval(() => undefined, 60_000);
