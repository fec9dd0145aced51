import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { SimulatedCluster } from '../../fixtures/index.ts';
import { ClosedError, FakeClock } from '../util/index.ts';
import {
  ClusterSet,
  loadKubeconfig,
  serviceAccountIdentity,
  StaticProvider,
  type ClusterAccess,
  type ClusterChange,
  type ClusterLease,
  type ClusterProvider,
  type ClusterRef,
  type ResolveContext,
} from './index.ts';

const east: ClusterRef = { kind: 'static', name: 'east' };

/** Serves `east` from a swappable kubeconfig; resolutions of a namespace can be held. */
class Provider implements ClusterProvider {
  readonly calls: string[] = [];
  #inner: StaticProvider;
  #gate: Promise<void> | undefined;

  constructor(kubeconfig: string) {
    this.#inner = new StaticProvider({ clusters: { east: kubeconfig } });
  }

  rotate(kubeconfig: string): void {
    this.#inner = new StaticProvider({ clusters: { east: kubeconfig } });
  }

  hold(): () => void {
    let release: () => void = () => undefined;
    this.#gate = new Promise((resolve) => { release = resolve; });
    return () => { this.#gate = undefined; release(); };
  }

  async resolve(ref: ClusterRef, context: ResolveContext): Promise<ClusterAccess> {
    this.calls.push(context.ownerNamespace);
    await this.#gate;
    return this.#inner.resolve(ref, context);
  }
}

async function setup(t: TestContext): Promise<{ sim: SimulatedCluster; provider: Provider; set: ClusterSet }> {
  const sim = await SimulatedCluster.start({ namespaces: ['apps'] });
  const provider = new Provider(sim.kubeconfig);
  const set = new ClusterSet({ provider, local: loadKubeconfig(sim.kubeconfig, { cluster: 'local' }), clock: new FakeClock(), credentialCheckIntervalMs: 0 });
  t.after(async () => { await set.close(); await sim.close(); });
  return { sim, provider, set };
}

describe('ClusterSet', () => {
  it('gives a purpose a connection of its own, with its own rate bucket, shared by callers of that purpose', async (t) => {
    const sim = await SimulatedCluster.start({ namespaces: ['apps'] });
    // A burst of 2 and a refill far too slow to matter: a spent bucket stays spent for the test.
    const observed = new Set<string>();
    const set = new ClusterSet({
      provider: new Provider(sim.kubeconfig), local: loadKubeconfig(sim.kubeconfig, { cluster: 'local' }), clock: new FakeClock(), credentialCheckIntervalMs: 0, qps: 0.001, burst: 2,
      onRequest: ({ cluster }) => { observed.add(cluster); },
    });
    t.after(async () => { await set.close(); await sim.close(); });
    const shared = await set.acquire({ kind: 'local' }, { ownerNamespace: 'apps' });
    const election = await set.acquire({ kind: 'local' }, { ownerNamespace: 'apps', purpose: 'leader-election' });
    const again = await set.acquire({ kind: 'local' }, { ownerNamespace: 'kube-system', purpose: 'leader-election' });
    t.after(() => { for (const lease of [shared, election, again]) lease.release(); });
    assert.equal(election.key, 'local#leader-election');
    assert.notEqual(election.connection, shared.connection, 'a connection apart from the shared one');
    assert.equal(again.connection, election.connection, 'one connection per purpose');

    const path = '/api/v1/namespaces/apps/configmaps';
    const lists = (): number => sim.counters.requests.list;
    const before = lists();
    await Promise.all([shared.connection.request({ method: 'GET', path }), shared.connection.request({ method: 'GET', path })]);
    const aborted = new AbortController();
    const held = shared.connection.request({ method: 'GET', path, signal: aborted.signal });
    await election.connection.request({ method: 'GET', path });
    assert.equal(lists() - before, 3, 'the purpose\'s request went through while the shared bucket was spent');
    aborted.abort();
    await assert.rejects(held);
    assert.equal(lists() - before, 3, 'the third shared request never left');
    assert.deepEqual([...observed], ['local'], 'metrics name the cluster, not the connection');
    assert.throws(() => ClusterSet.connectionKey({ kind: 'local' }, 'apps', undefined, 'Leader Election'), TypeError);

    // A purpose may ask for its own rate: a burst of 5 where the set's is 2.
    const sharding = await set.acquire({ kind: 'local' }, { ownerNamespace: 'apps', purpose: 'sharding', limits: { qps: 0.001, burst: 5 } });
    t.after(() => { sharding.release(); });
    const beforeSharding = lists();
    await Promise.all(Array.from({ length: 5 }, () => sharding.connection.request({ method: 'GET', path })));
    assert.equal(lists() - beforeSharding, 5, 'the purpose\'s own burst, not the set\'s');
    await assert.rejects(set.acquire({ kind: 'local' }, { ownerNamespace: 'apps', purpose: 'other', limits: { qps: 0, burst: 5 } }), /limits\.qps/);
  });

  it('resolves a cluster once however many ask at once, and admits each namespace itself', async (t) => {
    const { provider, set } = await setup(t);
    const release = provider.hold();
    const pending = [set.acquire(east, { ownerNamespace: 'a' }), set.acquire(east, { ownerNamespace: 'a' }), set.acquire(east, { ownerNamespace: 'b' })];
    release();
    const leases = await Promise.all(pending);
    assert.equal(new Set(leases.map((l) => l.connection)).size, 1, 'one connection');
    assert.deepEqual(provider.calls.sort(), ['a', 'b'], 'one resolution for a (shared), b\'s own admission');
    for (const lease of leases) lease.release();
  });

  it('keeps a generation open while a caller is being admitted to it, though its last other holder lets go', async (t) => {
    const { provider, set } = await setup(t);
    const first = await set.acquire(east, { ownerNamespace: 'a' });
    const release = provider.hold();
    const admitting = set.acquire(east, { ownerNamespace: 'b' });
    await new Promise((resolve) => setImmediate(resolve));
    first.release(); // the last cache on the cluster was collected
    release();
    const second = await admitting;
    assert.equal(second.connection, first.connection, 'the same generation');
    assert.equal(second.current, true);
    await second.connection.request({ method: 'GET', path: '/api/v1/namespaces/apps/configmaps' });
    second.release();
    await assert.rejects(second.connection.request({ method: 'GET', path: '/api' }), ClosedError, 'closed once nobody holds it');
  });

  it('rotates to new credentials, announcing it, and closes the old connection only after its last lease', async (t) => {
    const { sim, provider, set } = await setup(t);
    const heard: ClusterChange[] = [];
    let moved: ClusterLease | undefined;
    // As the registry does: move what it holds onto the new generation when told.
    set.subscribe((change) => { heard.push(change); moved = set.retain(change.key); });
    const old = await set.acquire(east, { ownerNamespace: 'a' });
    provider.rotate(`${sim.kubeconfig}\n# rotated\n`);
    await set.check(ClusterSet.connectionKey(east, 'a'));
    assert.deepEqual(heard, [{ type: 'rotated', key: 'static:east' }]);
    assert.equal(old.current, false);
    await old.connection.request({ method: 'GET', path: '/api' }); // still open: in use
    const fresh = await set.acquire(east, { ownerNamespace: 'a' });
    assert.notEqual(fresh.connection, old.connection);
    assert.equal(fresh.connection, moved?.connection);
    assert.equal(provider.calls.filter((ns) => ns === 'a').length, 2, 'the admission carried over: only the check resolved again');
    old.release();
    assert.equal(old.signal.aborted, true, 'the old generation\'s signal ends with it');
    await assert.rejects(old.connection.request({ method: 'GET', path: '/api' }), ClosedError);
    fresh.release();
    moved?.release();
  });

  it('keys the management cluster by identity, and remote clusters by cluster alone', async (t) => {
    const { sim, set } = await setup(t);
    const tenant = serviceAccountIdentity('team-a', 'deployer');
    assert.equal(ClusterSet.connectionKey(east, 'a', tenant), 'static:east');
    assert.match(ClusterSet.connectionKey({ kind: 'local' }, 'a', tenant), /^local\[as=system:serviceaccount:team-a:deployer;/);
    const own = await set.acquire({ kind: 'local' }, { ownerNamespace: 'team-a' });
    const asTenant = await set.acquire({ kind: 'local' }, { ownerNamespace: 'team-a', identity: tenant });
    assert.notEqual(own.connection, asTenant.connection);
    await asTenant.connection.request({ method: 'GET', path: '/api/v1/namespaces/apps/configmaps' });
    await own.connection.request({ method: 'GET', path: '/api/v1/namespaces/apps/configmaps' });
    assert.deepEqual(sim.recentRequests().filter((r) => r.path === '/api/v1/namespaces/apps/configmaps').map((r) => r.user), ['system:serviceaccount:team-a:deployer', 'sim-admin']);
    await set.secrets.getSecret('apps', 'missing', undefined, tenant);
    assert.equal(sim.recentRequests().at(-1)?.user, 'system:serviceaccount:team-a:deployer', 'Secrets are read as the caller');
    own.release();
    asTenant.release();
  });

  it('takes the CRD’s spelling of a kind (Secret) as the type’s: one connection, the provider sees `secret`', async (t) => {
    const sim = await SimulatedCluster.start({ namespaces: ['apps'] });
    const inner = new StaticProvider({ clusters: { east: sim.kubeconfig } });
    const seen: string[] = [];
    const provider: ClusterProvider = {
      resolve: (ref, context) => { seen.push(ref.kind); return inner.resolve(east, context); },
    };
    const set = new ClusterSet({ provider, clock: new FakeClock(), credentialCheckIntervalMs: 0 });
    t.after(async () => { await set.close(); await sim.close(); });
    const crd = await set.acquire({ kind: 'Secret', name: 'east-kubeconfig' } as unknown as ClusterRef, { ownerNamespace: 'team-a' });
    const typed = await set.acquire({ kind: 'secret', name: 'east-kubeconfig' }, { ownerNamespace: 'team-a' });
    assert.equal(crd.connection, typed.connection);
    assert.deepEqual(seen, ['secret']);
    await assert.rejects(set.acquire({ kind: 'Kubeconfig', name: 'x' } as unknown as ClusterRef, { ownerNamespace: 'team-a' }), /unknown kind "Kubeconfig"; valid kinds: "local", "secret" \(or "Secret"\)/);
    crd.release();
    typed.release();
  });

  it('refuses with ClosedError once closed, and closes every connection, held or not', async (t) => {
    const { set } = await setup(t);
    const held = await set.acquire(east, { ownerNamespace: 'a' });
    await set.close();
    await set.close();
    assert.equal(held.signal.aborted, true);
    await assert.rejects(held.connection.request({ method: 'GET', path: '/api' }), ClosedError);
    await assert.rejects(set.acquire(east, { ownerNamespace: 'a' }), ClosedError);
  });

  it('closes a cluster nobody holds after idleTimeoutMs, and reuses it until then', async (t) => {
    const sim = await SimulatedCluster.start({ namespaces: ['apps'] });
    const clock = new FakeClock();
    const set = new ClusterSet({ provider: new Provider(sim.kubeconfig), clock, credentialCheckIntervalMs: 0, idleTimeoutMs: 30_000 });
    t.after(async () => { await set.close(); await sim.close(); });
    const first = await set.acquire(east, { ownerNamespace: 'a' });
    await new Promise((resolve) => setImmediate(resolve)); // the keeper's own hold on a new connection ends here
    first.release();
    clock.advance(29_999);
    const again = await set.acquire(east, { ownerNamespace: 'a' });
    assert.equal(again.connection, first.connection, 'still connected within the idle timeout');
    again.release();
    clock.advance(30_000);
    assert.equal(again.signal.aborted, true, 'closed once idle that long');
    assert.deepEqual(set.keys(), []);
  });

  it('refuses invalid options with a TypeError naming the option', () => {
    const provider = new StaticProvider({ clusters: {} });
    assert.throws(() => new ClusterSet({ provider: {} as ClusterProvider }), /option provider/);
    assert.throws(() => new ClusterSet({ provider, qps: 0 }), /option qps/);
    assert.throws(() => new ClusterSet({ provider, idleTimeoutMs: -1 }), /option idleTimeoutMs/);
    assert.throws(() => new ClusterSet({ provider, credentialCheckIntervalMs: Number.NaN }), /option credentialCheckIntervalMs/);
  });
});
