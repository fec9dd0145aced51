import { after, afterEach, before } from 'node:test';
import { startClusters, type StartClusterOptions, type TestCluster } from './cluster.ts';
import { externalClustersFromEnv } from './external.ts';

/**
 * `N` clusters as a tuple when `N` is a literal (`useClusters(2)` gives `[TestCluster, TestCluster]`,
 * so `const [dev, prod] = env.clusters` needs no check under `noUncheckedIndexedAccess`), else an array.
 */
export type Clusters<N extends number, Acc extends readonly TestCluster[] = []> =
  number extends N ? readonly TestCluster[] : Acc['length'] extends N ? Acc : Acc['length'] extends 32 ? readonly TestCluster[] : Clusters<N, readonly [...Acc, TestCluster]>;

/** The clusters of {@link useClusters}, available once the suite's `before` hook has run. */
export interface ClusterFixture<N extends number = number> {
  readonly clusters: Clusters<N>;
}

/**
 * For node:test: starts `count` clusters before the tests of the enclosing suite (or file), stops
 * them after, and prints their logs after any test that failed. Call it at the top of a `describe`
 * or of a test file.
 *
 * With FLEETCACHE_KUBECONFIGS set (`make e2e-kind`), the first `count` of those clusters are used
 * instead and left running; fewer than `count` is an error, never a silent skip.
 */
export function useClusters<const N extends number>(count: N, options: Omit<StartClusterOptions, 'name'> & { readonly namePrefix?: string } = {}): ClusterFixture<N> {
  let clusters: TestCluster[] | undefined;
  const external = externalClustersFromEnv();
  before(async () => {
    if (external === undefined) {
      clusters = await startClusters(count, options);
      return;
    }
    if (external.length < count) throw new Error(`useClusters: the test needs ${count} clusters, FLEETCACHE_KUBECONFIGS names ${external.length}`);
    clusters = external.slice(0, count);
  }, { timeout: 300_000 });
  afterEach((t) => {
    // afterEach runs for tests, never suites; SuiteContext has no `passed`.
    if (!('passed' in t) || t.passed || clusters === undefined) return;
    for (const c of clusters) process.stderr.write(`\n=== logs of ${c.name} after failed test "${t.name}" ===\n${c.logs()}\n`);
  });
  after(async () => {
    await Promise.all((clusters ?? []).map((c) => c.stop()));
  });
  return {
    get clusters(): Clusters<N> {
      if (clusters === undefined) throw new Error('useClusters: clusters are started in before(); use them inside tests');
      return clusters as readonly TestCluster[] as Clusters<N>; // `count` of them, by construction (or an error above)
    },
  };
}
