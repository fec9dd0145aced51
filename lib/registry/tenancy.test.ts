// Admission, rotation and collection racing each other, identities and namespace scopes, on the
// simulated API server with a provider the test controls step by step.
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { SimulatedCluster } from '../../fixtures/index.ts';
import {
  ClusterChangedError,
  ClusterSet,
  loadKubeconfig,
  SecretProvider,
  serviceAccountIdentity,
  StaticProvider,
  type ClusterAccess,
  type ClusterProvider,
  type ClusterRef,
  type ResolveContext,
} from '../cluster/index.ts';
import { ClosedError, FakeClock, KubeApiError, KubeconfigRefusedError, type GroupVersionKind } from '../util/index.ts';
import { eventually } from '../../e2e/harness/index.ts';
import { CacheGoneError, Registry, type TargetRef } from './index.ts';
import { registryWithKeeper, type RegistryWithKeeperOptions } from './testing.ts';

const configMaps: GroupVersionKind = { group: '', version: 'v1', kind: 'ConfigMap' };
const secrets: GroupVersionKind = { group: '', version: 'v1', kind: 'Secret' };
const east: ClusterRef = { kind: 'static', name: 'east' };

/**
 * Serves `east` from a kubeconfig the test can swap (a rotation), admits only the namespaces it is
 * told to (a stand-in for the cross-namespace rule), and can hold the resolutions of one
 * namespace until released.
 */
class ControlledProvider implements ClusterProvider {
  readonly resolved: string[] = [];
  readonly #admit: ReadonlySet<string>;
  #inner: StaticProvider;
  readonly #gates = new Map<string, { promise: Promise<void>; release: () => void }>();

  constructor(kubeconfig: string, admit: readonly string[]) {
    this.#inner = new StaticProvider({ clusters: { east: kubeconfig } });
    this.#admit = new Set(admit);
  }

  rotate(kubeconfig: string): void {
    this.#inner = new StaticProvider({ clusters: { east: kubeconfig } });
  }

  /** Resolutions for `namespace` wait until the returned function is called. */
  hold(namespace: string): () => void {
    let release: () => void = () => undefined;
    const promise = new Promise<void>((resolve) => { release = resolve; });
    this.#gates.set(namespace, { promise, release });
    return () => { this.#gates.delete(namespace); release(); };
  }

  async resolve(ref: ClusterRef, context: ResolveContext): Promise<ClusterAccess> {
    await this.#gates.get(context.ownerNamespace)?.promise;
    this.resolved.push(context.ownerNamespace);
    if (!this.#admit.has(context.ownerNamespace)) {
      throw new KubeconfigRefusedError({ cluster: 'static:east', rule: 'cross-namespace', subject: `cluster east referenced from namespace ${context.ownerNamespace}`, hint: 'test' });
    }
    return this.#inner.resolve(ref, context);
  }
}

async function startSim(t: TestContext, options: { clock?: FakeClock } = {}): Promise<SimulatedCluster> {
  const sim = await SimulatedCluster.start({ namespaces: ['apps', 'team-a', 'team-b'], bookmarkIntervalMs: 60_000, ...options });
  t.after(() => sim.close());
  return sim;
}

function newRegistry(t: TestContext, options: RegistryWithKeeperOptions): Registry {
  const registry = registryWithKeeper({ credentialCheckIntervalMs: 0, ...options });
  t.after(() => registry.close());
  return registry;
}

/**
 * Holds team-a's admission, asks for `target` as team-a then, while that build waits on its
 * admission, as team-b; team-a gets it once released, team-b is refused as cross-namespace.
 */
async function assertThiefRefusedDuringAdmission(registry: Registry, provider: ControlledProvider, target: TargetRef): Promise<void> {
  const releaseA = provider.hold('team-a');
  const a = registry.watchTargetAndGetReader(east, target, { namespace: 'team-a', name: 'mine' });
  const b = registry.watchTargetAndGetReader(east, target, { namespace: 'team-b', name: 'thief' });
  b.catch(() => undefined);
  releaseA();
  await a;
  await assert.rejects(b, (err: unknown) => err instanceof KubeconfigRefusedError && err.rule === 'cross-namespace');
}

describe('admission: every caller runs its own', () => {
  it('refuses an owner of another namespace that asks while the first owner\'s build is in flight', async (t) => {
    const sim = await startSim(t);
    const provider = new ControlledProvider(sim.kubeconfig, ['team-a']);
    const registry = newRegistry(t, { provider, clock: new FakeClock() });
    const target = { gvk: configMaps, namespace: 'apps', name: 'x' };
    await assertThiefRefusedDuringAdmission(registry, provider, target);
    assert.deepEqual(provider.resolved.sort(), ['team-a', 'team-b'], 'team-b\'s admission ran');
    // Nor does the published cache let team-b in through the hot path.
    await assert.rejects(registry.watchTargetAndGetReader(east, target, { namespace: 'team-b', name: 'thief' }), KubeconfigRefusedError);
    await assert.rejects(registry.connectionFor(east, { namespace: 'team-b', name: 'thief' }), KubeconfigRefusedError);
  });

  it('refuses an owner of another namespace that asks while a third namespace\'s admission to the connected cluster is in flight', async (t) => {
    const sim = await startSim(t);
    const provider = new ControlledProvider(sim.kubeconfig, ['team-a', 'team-c']);
    const registry = newRegistry(t, { provider, clock: new FakeClock() });
    const target = { gvk: configMaps, namespace: 'apps', name: 'x' };
    await registry.watchTargetAndGetReader(east, target, { namespace: 'team-c', name: 'first' }); // connected, cache published
    await assertThiefRefusedDuringAdmission(registry, provider, target);
  });
});

describe('a cluster changing under a caller never looks like a closed registry', () => {
  it('moves a build whose discovery is in flight on the old connection to the rotated one', async (t) => {
    const oldClock = new FakeClock();
    const old = await startSim(t, { clock: oldClock });
    const fresh = await startSim(t);
    fresh.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x', namespace: 'apps' }, data: { from: 'fresh' } });
    const provider = new ControlledProvider(old.kubeconfig, ['team-a']);
    const registry = newRegistry(t, { provider });
    // Every request to the old server waits for its clock: the build's discovery hangs there.
    old.faults.setLatency(1_000);
    const building = registry.watchTargetAndGetReader(east, { gvk: configMaps, namespace: 'apps', name: 'x' }, { namespace: 'team-a', name: 'p' });
    await old.waitFor((c) => c.totalRequests >= 1, { timeoutMs: 10_000 });

    provider.rotate(fresh.kubeconfig);
    await registry.checkCluster(east, 'team-a');
    oldClock.advance(1_000); // the old server answers the discovery now

    const reader = await building;
    await reader.waitForSync(AbortSignal.timeout(10_000));
    assert.deepEqual(reader.get('apps', 'x')?.data, { from: 'fresh' }, 'the cache reads the rotated cluster');
    assert.equal(registry.caches().length, 1);
    assert.equal(old.counters.openWatches, 0, 'nothing watches the old cluster');
    await old.waitFor((c) => c.openConnections === 0, { timeoutMs: 10_000 }); // its connection closed once released
  });

  it('gives up with the retryable ClusterChangedError, not ClosedError, when credentials keep rotating under one build', async (t) => {
    const clock = new FakeClock();
    const sim = await startSim(t, { clock });
    const provider = new ControlledProvider(sim.kubeconfig, ['team-a']);
    const registry = newRegistry(t, { provider });
    sim.faults.setLatency(1_000); // every request waits for the test to advance the server's clock
    const building = registry.watchTargetAndGetReader(east, { gvk: configMaps, namespace: 'apps', name: 'x' }, { namespace: 'team-a', name: 'p' });
    building.catch(() => undefined);
    for (let rotation = 1; rotation <= 3; rotation++) {
      await sim.waitFor((c) => c.totalRequests >= rotation, { timeoutMs: 10_000 }); // this attempt's discovery is in flight
      provider.rotate(`${sim.kubeconfig}\n# rotation ${rotation}\n`);
      await registry.checkCluster(east, 'team-a');
      clock.advance(1_000);
    }
    await assert.rejects(building, (err: unknown) => err instanceof ClusterChangedError && err.code === 'ERR_CLUSTER_CHANGED');
    sim.faults.setLatency(0);
    clock.advance(1_000);
    const reader = await registry.watchTargetAndGetReader(east, { gvk: configMaps, namespace: 'apps', name: 'x' }, { namespace: 'team-a', name: 'p' });
    await reader.waitForSync(AbortSignal.timeout(10_000));
  });

  it('admits a new owner namespace while the cluster\'s last cache is being collected', async (t) => {
    const sim = await startSim(t);
    const provider = new ControlledProvider(sim.kubeconfig, ['team-a', 'team-b']);
    const clock = new FakeClock();
    const registry = newRegistry(t, { provider, clock, gcGraceMs: 1_000 });
    const first = { namespace: 'team-a', name: 'first' };
    await (await registry.watchTargetAndGetReader(east, { gvk: configMaps, namespace: 'apps', name: 'x' }, first)).waitForSync(AbortSignal.timeout(10_000));
    registry.forgetOwner(first);

    // A new owner namespace is being admitted (its Secret read, say, is slow)...
    const releaseB = provider.hold('team-b');
    const second = registry.watchTargetAndGetReader(east, { gvk: secrets, namespace: 'apps', name: 'y' }, { namespace: 'team-b', name: 'second' });
    await eventually('team-b\'s admission started', () => registry.caches().length === 1);
    // ...while the collector stops the cluster's last cache.
    clock.advance(1_000);
    await eventually('the last cache is collected', () => registry.caches().length === 0);
    releaseB();

    const reader = await second; // neither ClosedError nor "rebuilt, try again"
    await reader.waitForSync(AbortSignal.timeout(10_000));
    assert.equal(reader.synced, true);
    assert.deepEqual(registry.caches().map((c) => c.gvk.kind), ['Secret']);
  });

  it('tells a reader waiting for a cache that was collected to ask again (CacheGoneError), and one waiting at close that it is closed', async (t) => {
    const sim = await startSim(t);
    sim.faults.failNext({ path: /configmaps$/, verb: 'list', count: Infinity, status: 500 }); // never syncs
    const clock = new FakeClock();
    const registry = registryWithKeeper({ provider: new StaticProvider({ clusters: { east: sim.kubeconfig } }), clock, gcGraceMs: 1_000, credentialCheckIntervalMs: 0 });
    const owner = { namespace: 'team-a', name: 'p' };
    const reader = await registry.watchTargetAndGetReader(east, { gvk: configMaps, namespace: 'apps', name: 'x' }, owner);
    const waiting = reader.waitForSync();
    registry.forgetOwner(owner);
    clock.advance(1_000);
    await assert.rejects(waiting, (err: unknown) => err instanceof CacheGoneError && err.code === 'ERR_CACHE_GONE');

    const again = await registry.watchTargetAndGetReader(east, { gvk: configMaps, namespace: 'apps', name: 'x' }, owner);
    const atClose = again.waitForSync();
    atClose.catch(() => undefined); // asserted below, after close() resolves
    await registry.close();
    await assert.rejects(atClose, (err: unknown) => err instanceof ClosedError && err.message === 'registry is closed');
  });

  it('answers ClosedError once closed, and only then', async (t) => {
    const sim = await startSim(t);
    const provider = new ControlledProvider(sim.kubeconfig, ['team-a']);
    const registry = registryWithKeeper({ provider, clock: new FakeClock(), credentialCheckIntervalMs: 0 });
    const release = provider.hold('team-a');
    const pending = registry.watchTargetAndGetReader(east, { gvk: configMaps, namespace: 'apps', name: 'x' }, { namespace: 'team-a', name: 'p' });
    const closing = registry.close();
    release();
    await assert.rejects(pending, ClosedError);
    await closing;
    await assert.rejects(registry.watchTargetAndGetReader(east, { gvk: configMaps, namespace: 'apps', name: 'x' }, { namespace: 'team-a', name: 'p' }), ClosedError);
  });
});

describe('identities on the management cluster', () => {
  const deployer = serviceAccountIdentity('team-a', 'deployer');

  it('reads, writes and reads Secrets as the owner\'s ServiceAccount, on a connection of its own', async (t) => {
    const sim = await startSim(t);
    sim.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'app', namespace: 'team-a' }, data: { v: '1' } });
    const registry = newRegistry(t, {
      local: loadKubeconfig(sim.kubeconfig, { cluster: 'local' }),
      provider: (secretReader) => new SecretProvider({ secrets: secretReader }),
      clock: new FakeClock(),
      scope: 'namespace',
    });
    const local: ClusterRef = { kind: 'local' };
    const tenant = { namespace: 'team-a', name: 'pipe', identity: deployer };
    const reader = await registry.watchTargetAndGetReader(local, { gvk: configMaps, namespace: 'team-a', name: 'app' }, tenant);
    await reader.waitForSync(AbortSignal.timeout(10_000));
    assert.equal(reader.cluster, 'local[as=system:serviceaccount:team-a:deployer;groups=system:authenticated,system:serviceaccounts,system:serviceaccounts:team-a]');
    await (await registry.watchTargetAndGetReader(local, { gvk: configMaps, namespace: 'team-a', name: 'app' }, { namespace: 'team-a', name: 'own' })).waitForSync(AbortSignal.timeout(10_000));
    assert.equal(registry.caches().length, 2, 'the service\'s own cache and the tenant\'s are apart');

    const connection = await registry.connectionFor(local, tenant);
    await connection.request({ method: 'PATCH', path: '/api/v1/namespaces/team-a/configmaps/app', body: { data: { v: '2' } }, contentType: 'application/merge-patch+json' });
    // A kubeconfig Secret is read as the tenant too (the Secret does not exist: the GET is what counts).
    await assert.rejects(registry.watchTargetAndGetReader({ kind: 'secret', name: 'remote' }, { gvk: configMaps, namespace: 'apps', name: 'x' }, tenant));

    const asTenant = sim.recentRequests().filter((r) => r.user === 'system:serviceaccount:team-a:deployer');
    assert.deepEqual(new Set(asTenant.map((r) => `${r.verb} ${r.path}`)), new Set([
      'discovery /api/v1',
      'list /api/v1/namespaces/team-a/configmaps',
      'watch /api/v1/namespaces/team-a/configmaps',
      'patch /api/v1/namespaces/team-a/configmaps/app',
      'get /api/v1/namespaces/team-a/secrets/remote',
    ]));
    assert.ok(asTenant.every((r) => r.impersonateGroups.length === 0), 'a ServiceAccount\'s groups are left to the API server to derive');
    assert.ok(sim.recentRequests().some((r) => r.verb === 'list' && r.user === 'sim-admin'), 'the own-identity cache reads as the service');
  });

  it('gives a typed 403 when the ServiceAccount may not read the kubeconfig Secret or list the kind', async (t) => {
    const sim = await startSim(t);
    sim.faults.failNext({ path: /\/secrets(\/|$)/, user: deployer.kind === 'impersonate' ? deployer.user : '', count: Infinity, status: 403 });
    const registry = newRegistry(t, {
      local: loadKubeconfig(sim.kubeconfig, { cluster: 'local' }),
      provider: (secretReader) => new SecretProvider({ secrets: secretReader }),
      clock: new FakeClock(),
    });
    const tenant = { namespace: 'team-a', name: 'pipe', identity: deployer };
    await assert.rejects(registry.watchTargetAndGetReader({ kind: 'secret', name: 'remote' }, { gvk: configMaps, namespace: 'apps', name: 'x' }, tenant),
      (err: unknown) => err instanceof KubeApiError && err.statusCode === 403 && err.message.includes('system:serviceaccount:team-a:deployer'));
    const reader = await registry.watchTargetAndGetReader({ kind: 'local' }, { gvk: secrets, namespace: 'team-a', name: 'deploy-key' }, tenant);
    await eventually('the cache reports the 403', () => reader.lastError instanceof KubeApiError && reader.lastError.statusCode === 403);
    assert.equal(reader.synced, false);
    assert.deepEqual(reader.list(), []);
  });
});

describe('namespace scopes', () => {
  it('scopes an auto cache down to its targets\' namespaces when listing at the cluster scope is forbidden', async (t) => {
    const sim = await startSim(t);
    sim.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x', namespace: 'apps' }, data: { v: '1' } });
    sim.faults.failNext({ path: '/api/v1/configmaps', verb: 'list', count: Infinity, status: 403 });
    const registry = newRegistry(t, { provider: new StaticProvider({ clusters: { east: sim.kubeconfig } }), informer: { backoff: { initialMs: 50, maxMs: 50, jitter: 0 } } });
    const owner = { namespace: 'team-a', name: 'p' };
    const target = { gvk: configMaps, namespace: 'apps', name: 'x' };
    const wide = await registry.watchTargetAndGetReader(east, target, owner);
    await eventually('the forbidden cluster-wide cache is dropped', () => registry.caches().every((c) => c.namespace === 'apps'), 10_000);
    assert.equal(wide.synced, false);
    const narrow = await registry.watchTargetAndGetReader(east, target, owner);
    await narrow.waitForSync(AbortSignal.timeout(10_000));
    assert.deepEqual(narrow.get('apps', 'x')?.data, { v: '1' });
    assert.deepEqual(registry.caches().map((c) => [c.cluster, c.namespace, c.synced]), [['static:east', 'apps', true]]);
    const lists = sim.recentRequests().filter((r) => r.verb === 'list').map((r) => r.path);
    assert.ok(lists.filter((p) => p === '/api/v1/configmaps').length <= 3, 'the 403 was answered by scoping down, not by retrying');
  });

  it('scopes a forbidden selector cache down to its target\'s namespace, still selecting on the server', async (t) => {
    const sim = await startSim(t);
    sim.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'web', namespace: 'apps', labels: { tier: 'web' } }, data: { v: '1' } });
    sim.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'db', namespace: 'apps', labels: { tier: 'db' } }, data: { v: '1' } });
    sim.faults.failNext({ path: '/api/v1/configmaps', verb: 'list', count: Infinity, status: 403 });
    const registry = newRegistry(t, { provider: new StaticProvider({ clusters: { east: sim.kubeconfig } }), informer: { backoff: { initialMs: 50, maxMs: 50, jitter: 0 } } });
    const owner = { namespace: 'team-a', name: 'p' };
    const target: TargetRef = { gvk: configMaps, namespace: 'apps', labelSelector: 'tier=web' };
    await registry.watchTargetAndGetReader(east, target, owner);
    await eventually('the forbidden cluster-wide cache is dropped', () => registry.caches().every((c) => c.namespace === 'apps'), 10_000);
    const narrow = await registry.watchTargetAndGetReader(east, target, owner);
    await narrow.waitForSync(AbortSignal.timeout(10_000));
    assert.deepEqual(narrow.list().map((o) => o.metadata?.name), ['web'], 'only what the selector selects, in the namespace the credentials may list');
    assert.deepEqual(registry.caches().map((c) => [c.namespace, c.labelSelector, c.synced]), [['apps', 'tier=web', true]]);
  });

  it('scopes down for a target added after the first probe found only forbidden namespaces, without waiting for the next retry', async (t) => {
    const sim = await startSim(t);
    sim.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x', namespace: 'apps' }, data: { v: '1' } });
    sim.faults.failNext({ path: '/api/v1/configmaps', verb: 'list', count: Infinity, status: 403 });
    sim.faults.failNext({ path: '/api/v1/namespaces/team-b/configmaps', verb: 'list', count: Infinity, status: 403 });
    // The refused LIST is retried only after ten minutes: only the new target can start the scope-down.
    const registry = newRegistry(t, { provider: new StaticProvider({ clusters: { east: sim.kubeconfig } }), informer: { slowBackoff: { initialMs: 600_000, maxMs: 600_000, jitter: 0 } } });
    const locked = await registry.watchTargetAndGetReader(east, { gvk: configMaps, namespace: 'team-b', name: 'x' }, { namespace: 'team-a', name: 'first' });
    await eventually('the cluster-wide cache reports the 403', () => locked.lastError instanceof KubeApiError && locked.lastError.statusCode === 403, 10_000);
    await eventually('team-b was probed and refused', () => sim.recentRequests().some((r) => r.verb === 'list' && r.path === '/api/v1/namespaces/team-b/configmaps'), 10_000);
    assert.deepEqual(registry.caches().map((c) => c.namespace), [undefined], 'nothing to scope down to yet');
    const owner = { namespace: 'team-a', name: 'second' };
    const target = { gvk: configMaps, namespace: 'apps', name: 'x' };
    await registry.watchTargetAndGetReader(east, target, owner);
    await eventually('the forbidden cluster-wide cache is dropped', () => registry.caches().every((c) => c.namespace !== undefined), 10_000);
    const narrow = await registry.watchTargetAndGetReader(east, target, owner);
    await narrow.waitForSync(AbortSignal.timeout(10_000));
    assert.deepEqual(narrow.get('apps', 'x')?.data, { v: '1' });
  });

  it('keeps one cache per namespace under scope namespace, and one for all under scope cluster', async (t) => {
    const sim = await startSim(t);
    const registry = newRegistry(t, { provider: new StaticProvider({ clusters: { east: sim.kubeconfig } }), scope: 'namespace' });
    const owner = { namespace: 'team-a', name: 'p' };
    await registry.watchTargetAndGetReader(east, { gvk: configMaps, namespace: 'apps', name: 'x' }, owner);
    await registry.watchTargetAndGetReader(east, { gvk: configMaps, namespace: 'team-a', name: 'x' }, owner);
    await registry.watchTargetAndGetReader(east, { gvk: configMaps, namespace: 'team-b', name: 'x', scope: 'cluster' }, owner);
    assert.deepEqual(registry.caches().map((c) => c.namespace).sort(), ['apps', 'team-a', undefined]);
    const shared = new ClusterSet({ provider: new StaticProvider({ clusters: {} }) });
    t.after(() => shared.close());
    assert.throws(() => new Registry({ clusters: shared, scope: 'everything' as 'auto' }), /scope/);
    assert.throws(() => new Registry({ clusters: shared, qps: 5 } as never), /option qps configures the keeper/);
    assert.throws(() => new Registry({ clusters: {} as never }), { name: 'TypeError', message: 'registry option clusters must be a keeper of clusters (a ClusterSet)' });
    assert.throws(() => new Registry({} as never), /registry option clusters must be a keeper/);
  });
});

describe('reading without an owner', () => {
  it('holds a cache against collection, hands every event to the handler, and lets it go on release', async (t) => {
    const sim = await startSim(t);
    sim.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'a', namespace: 'apps' } });
    const clock = new FakeClock();
    const registry = newRegistry(t, { provider: new StaticProvider({ clusters: { east: sim.kubeconfig } }), clock, gcGraceMs: 1_000, gcInitialDelayMs: 100, gcMaxDelayMs: 100 });
    const seen: string[] = [];
    const held = await registry.reader(east, configMaps, {
      ownerNamespace: 'team-a',
      handler: { add: (obj) => { seen.push(`add ${obj.metadata?.name ?? ''}`); }, delete: (obj) => { seen.push(`delete ${obj.metadata?.name ?? ''}`); } },
    });
    await held.waitForSync(AbortSignal.timeout(10_000));
    sim.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'b', namespace: 'apps' } });
    await eventually('the handler saw both objects', () => seen.includes('add a') && seen.includes('add b'));
    assert.equal(registry.queue.len, 0, 'no owner is requeued: there is none');
    assert.equal(registry.caches()[0]?.owners, 0);

    for (let i = 0; i < 5; i++) {
      clock.advance(1_000);
      await new Promise((resolve) => setImmediate(resolve));
    }
    assert.equal(registry.caches().length, 1, 'held: never collected');
    held.release();
    held.release();
    clock.advance(1_000);
    await eventually('collected after the grace period once released', () => registry.caches().length === 0);
    assert.equal(held.synced, false);
  });

  it('moves a held reader and its handler onto the rotated cluster\'s cache', async (t) => {
    const old = await startSim(t);
    const fresh = await startSim(t);
    fresh.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'after', namespace: 'apps' } });
    const provider = new ControlledProvider(old.kubeconfig, ['team-a']);
    const registry = newRegistry(t, { provider });
    const seen: string[] = [];
    const held = await registry.reader(east, configMaps, { ownerNamespace: 'team-a', handler: { add: (obj) => { seen.push(obj.metadata?.name ?? ''); } } });
    await held.waitForSync(AbortSignal.timeout(10_000));
    provider.rotate(fresh.kubeconfig);
    await registry.checkCluster(east, 'team-a');
    await held.waitForSync(AbortSignal.timeout(10_000));
    await eventually('the handler hears the rotated cluster\'s objects', () => seen.includes('after'));
    assert.equal(held.get('apps', 'after')?.metadata?.name, 'after');
    held.release();
  });
});
