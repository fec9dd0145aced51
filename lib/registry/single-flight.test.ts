// Single flight and "nothing failed is remembered", each observed on its own through the I/O it
// causes: credential resolutions counted by the provider, discovery and LIST requests counted by
// the simulated API server.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SimulatedCluster } from '../../fixtures/index.ts';
import { InvalidClusterRefError, StaticProvider, type ClusterAccess, type ClusterProvider, type ClusterRef, type ResolveContext } from '../cluster/index.ts';
import { FakeClock, KubeApiError, type GroupVersionKind } from '../util/index.ts';
import type { Registry } from './index.ts';
import { registryWithKeeper } from './testing.ts';

const configMaps: GroupVersionKind = { group: '', version: 'v1', kind: 'ConfigMap' };
const secrets: GroupVersionKind = { group: '', version: 'v1', kind: 'Secret' };
const sim: ClusterRef = { kind: 'static', name: 'sim' };

/** The simulated cluster behind a static reference, counting resolutions per owner namespace; `failNext` makes calls throw. */
class CountingProvider implements ClusterProvider {
  readonly calls = new Map<string, number>();
  failNext = 0;
  readonly #inner: StaticProvider;

  constructor(kubeconfig: string) {
    this.#inner = new StaticProvider({ clusters: { sim: kubeconfig } });
  }

  callsFor(namespace: string): number {
    return this.calls.get(namespace) ?? 0;
  }

  async resolve(ref: ClusterRef, context: ResolveContext): Promise<ClusterAccess> {
    this.calls.set(context.ownerNamespace, this.callsFor(context.ownerNamespace) + 1);
    await Promise.resolve(); // a real provider reads a Secret: never answer in the same tick
    if (this.failNext > 0) {
      this.failNext -= 1;
      throw new InvalidClusterRefError(ref, 'refused once by the test');
    }
    return this.#inner.resolve(ref, context);
  }
}

/** LIST requests the simulated server received for a resource path suffix (e.g. `/secrets`). */
function lists(cluster: SimulatedCluster, resource: string): number {
  return cluster.recentRequests().filter((r) => r.verb === 'list' && r.path.endsWith(`/${resource}`)).length;
}

async function setup(t: { after(fn: () => Promise<void>): void }): Promise<{ cluster: SimulatedCluster; provider: CountingProvider; registry: Registry }> {
  const cluster = await SimulatedCluster.start({ namespaces: ['apps'] });
  t.after(() => cluster.close());
  const provider = new CountingProvider(cluster.kubeconfig);
  // A fake clock: no GC check, credential check or build deadline fires on its own.
  const registry = registryWithKeeper({ provider, clock: new FakeClock(Date.now()), credentialCheckIntervalMs: 0 });
  t.after(() => registry.close());
  return { cluster, provider, registry };
}

describe('Registry single flight', () => {
  it('builds a missing cache once for many concurrent callers: one admission, one LIST', async (t) => {
    const { cluster, provider, registry } = await setup(t);
    // The cluster is known (team-a connected it); team-b's owners are not admitted yet, so every
    // build of the missing key would run the provider's admission for team-b.
    const first = await registry.watchTargetAndGetReader(sim, { gvk: configMaps, namespace: 'apps', name: 'a' }, { namespace: 'team-a', name: 'first' });
    await first.waitForSync(AbortSignal.timeout(10_000));
    assert.equal(provider.callsFor('team-a'), 1);
    const discoveryBefore = cluster.counters.requests.discovery;

    const callers = 25;
    const readers = await Promise.all(Array.from({ length: callers }, (_, i) =>
      registry.watchTargetAndGetReader(sim, { gvk: secrets, namespace: 'apps', name: `s-${i}` }, { namespace: 'team-b', name: `owner-${i}` })));
    assert.equal(new Set(readers).size, 1, 'every caller gets the same reader');
    assert.equal(provider.callsFor('team-b'), 1, `${callers} concurrent callers shared one build: one admission`);
    await readers[0]?.waitForSync(AbortSignal.timeout(10_000));
    assert.equal(lists(cluster, 'secrets'), 1, 'exactly one LIST reached the server');
    assert.ok(cluster.counters.requests.discovery - discoveryBefore <= 1, 'at most one discovery request');
    assert.equal(registry.caches().length, 2);
    assert.equal(registry.caches().find((c) => c.gvk.kind === 'Secret')?.owners, callers);
  });
});

describe('Registry remembers nothing failed', () => {
  it('retries a build whose credentials failed, with new I/O, and caches the one that succeeds', async (t) => {
    const { cluster, provider, registry } = await setup(t);
    const target = { gvk: configMaps, namespace: 'apps', name: 'a' };
    const owner = { namespace: 'team-a', name: 'pipe' };
    provider.failNext = 1;
    await assert.rejects(registry.watchTargetAndGetReader(sim, target, owner), InvalidClusterRefError);
    assert.equal(provider.callsFor('team-a'), 1);
    assert.equal(registry.caches().length, 0, 'a failed build is not cached');

    const reader = await registry.watchTargetAndGetReader(sim, target, owner);
    assert.equal(provider.callsFor('team-a'), 2, 'the second call resolved the credentials again');
    await reader.waitForSync(AbortSignal.timeout(10_000));
    assert.equal(registry.caches().length, 1);
    assert.equal(lists(cluster, 'configmaps'), 1);
  });

  it('retries a build whose discovery failed, with a new discovery request', async (t) => {
    const { cluster, registry } = await setup(t);
    const target = { gvk: configMaps, namespace: 'apps', name: 'a' };
    const owner = { namespace: 'team-a', name: 'pipe' };
    const fault = cluster.faults.failNext({ verb: 'discovery', path: '/api/v1', count: 1, status: 500 });
    await assert.rejects(registry.watchTargetAndGetReader(sim, target, owner),
      (err: unknown) => err instanceof KubeApiError && err.statusCode === 500 && err.cluster === 'static:sim');
    assert.equal(fault.hits, 1);
    assert.equal(registry.caches().length, 0, 'a failed build is not cached');
    const discoveryAfterFailure = cluster.counters.requests.discovery;

    const reader = await registry.watchTargetAndGetReader(sim, target, owner);
    assert.ok(cluster.counters.requests.discovery > discoveryAfterFailure, 'the second call asked discovery again');
    await reader.waitForSync(AbortSignal.timeout(10_000));
    assert.equal(registry.caches().length, 1);
  });
});
