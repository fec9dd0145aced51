// The setup of the tests that a cache's LIST waits on a limit (the registry's maxConcurrentLists, a
// connection's maxListsPerCluster): a registry on one cluster named `sim`, discovery already done.
import type { TestContext } from 'node:test';
import { StaticProvider, type ClusterRef } from '../cluster/index.ts';
import { FakeClock, type GroupVersionKind } from '../util/index.ts';
import type { Registry } from './index.ts';
import { registryWithKeeper, type RegistryWithKeeperOptions } from './testing.ts';

export const configMaps: GroupVersionKind = { group: '', version: 'v1', kind: 'ConfigMap' };
export const secrets: GroupVersionKind = { group: '', version: 'v1', kind: 'Secret' };
export const sim: ClusterRef = { kind: 'static', name: 'sim' };

/**
 * A registry (closed after the test) on the cluster at `kubeconfig` as `sim`, with the given limits,
 * that has already resolved ConfigMaps and Secrets: from then on the only requests its caches make
 * are LIST and WATCH.
 */
export async function registryPastDiscovery(t: TestContext, kubeconfig: string, limits: Pick<RegistryWithKeeperOptions, 'maxConcurrentLists' | 'connection'>): Promise<Registry> {
  const registry = registryWithKeeper({
    provider: new StaticProvider({ clusters: { sim: kubeconfig } }),
    clock: new FakeClock(Date.now()),
    credentialCheckIntervalMs: 0,
    ...limits,
  });
  t.after(() => registry.close());
  const connection = await registry.connectionFor(sim, { namespace: 'team-a', name: 'warm-up' });
  await connection.resolve(configMaps);
  await connection.resolve(secrets);
  return registry;
}
