import { readFileSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import { adminApi, rawRequest } from './api.ts';
import type { TestCluster } from './cluster.ts';

/**
 * A cluster the harness did not start (kind, or any cluster an admin kubeconfig reaches). It offers
 * the same admin API; what needs control of the processes (stopping the apiserver) is refused
 * with an error, so a scenario that needs it fails loudly instead of passing vacuously.
 */
export function externalCluster(name: string, kubeconfigPath: string): TestCluster {
  const adminKubeconfig = readFileSync(kubeconfigPath, 'utf8');
  const kc = new KubeConfig();
  kc.loadFromString(adminKubeconfig);
  const cluster = kc.getCurrentCluster();
  if (cluster === null) throw new Error(`harness: ${kubeconfigPath} has no current cluster`);
  const caData = cluster.caData === undefined ? '' : Buffer.from(cluster.caData, 'base64').toString('utf8');

  const api = adminApi(name, cluster.server, caData, async (method, path, body) => {
    const opts: { headers?: Record<string, string>; cert?: string | Buffer; key?: string | Buffer; ca?: string | Buffer } = {};
    await kc.applyToHTTPSOptions(opts);
    return rawRequest(`${cluster.server}${path}`, {
      method,
      headers: { ...opts.headers, accept: 'application/json', 'content-type': 'application/json' },
      ...(opts.ca === undefined ? {} : { ca: opts.ca.toString() }),
      ...(opts.cert === undefined ? {} : { cert: opts.cert }),
      ...(opts.key === undefined ? {} : { key: opts.key }),
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  });
  const unsupported = (what: string) => (): Promise<void> => Promise.reject(new Error(`harness: ${what} is not possible on external cluster ${name}`));

  return {
    name,
    server: cluster.server,
    etcdEndpoint: '',
    adminKubeconfig,
    caData,
    timings: { etcdMs: 0, apiserverMs: 0 },
    kubeConfig() {
      const copy = new KubeConfig();
      copy.loadFromString(adminKubeconfig);
      return copy;
    },
    ...api,
    stopApiserver: unsupported('stopping the apiserver'),
    startApiserver: unsupported('starting the apiserver'),
    logs: () => `(external cluster ${name}: see its own logs, e.g. kind export logs)`,
    pids: () => [],
    rssBytes: () => 0,
    stop: () => Promise.resolve(),
  };
}

/**
 * Clusters named by FLEETCACHE_KUBECONFIGS (`name=path` pairs, comma-separated), as `make e2e-kind`
 * sets it; undefined when unset, meaning the harness starts its own.
 */
export function externalClustersFromEnv(): TestCluster[] | undefined {
  const spec = process.env.FLEETCACHE_KUBECONFIGS;
  if (spec === undefined || spec.trim() === '') return undefined;
  return spec.split(',').map((entry) => {
    const eq = entry.indexOf('=');
    if (eq <= 0) throw new Error(`harness: FLEETCACHE_KUBECONFIGS entry ${JSON.stringify(entry)} is not name=path`);
    return externalCluster(entry.slice(0, eq).trim(), entry.slice(eq + 1).trim());
  });
}
