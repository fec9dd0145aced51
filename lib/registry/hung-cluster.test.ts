// A cluster whose credentials never come (a Secret read that hangs) or whose API server never
// answers: other clusters are served meanwhile (no I/O under the registry's lock), and the build
// fails with a typed error at its own deadline, on the injected clock.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SimulatedCluster } from '../../fixtures/index.ts';
import { StaticProvider, type ClusterAccess, type ClusterProvider, type ClusterRef, type ResolveContext } from '../cluster/index.ts';
import { ClosedError, FakeClock, toError, TransportError, type GroupVersionKind } from '../util/index.ts';
import { registryWithKeeper } from './testing.ts';
import { eventually, EVERY_TURN } from '../../fixtures/support/index.ts';

const configMaps: GroupVersionKind = { group: '', version: 'v1', kind: 'ConfigMap' };
const secrets: GroupVersionKind = { group: '', version: 'v1', kind: 'Secret' };
const namespaces: GroupVersionKind = { group: '', version: 'v1', kind: 'Namespace' };
const sim: ClusterRef = { kind: 'static', name: 'sim' };
const hung: ClusterRef = { kind: 'static', name: 'hung' };

/**
 * Serves the simulated cluster, except that resolving `hung` (for anyone) or anything for an owner
 * namespace listed in `hangFor` never answers: it waits, as a Secret read from a stuck cluster
 * would, until the caller's signal aborts.
 */
class HangingProvider implements ClusterProvider {
  readonly hangFor = new Set<string>();
  /** Resolutions still hanging. */
  hanging = 0;
  readonly #inner: StaticProvider;

  constructor(kubeconfig: string) {
    this.#inner = new StaticProvider({ clusters: { sim: kubeconfig, hung: kubeconfig } });
  }

  resolve(ref: ClusterRef, context: ResolveContext): Promise<ClusterAccess> {
    if ((ref.kind === 'static' && ref.name === 'hung') || this.hangFor.has(context.ownerNamespace)) {
      this.hanging += 1;
      return new Promise((_resolve, reject) => {
        const give = (): void => { this.hanging -= 1; reject(toError(context.signal?.reason)); };
        if (context.signal?.aborted === true) give();
        else context.signal?.addEventListener('abort', give, { once: true });
      });
    }
    return this.#inner.resolve(ref, context);
  }
}

/** Settles with the promise, or rejects with `message` if it has not settled within 10 s (a hang fails fast). */
function within<T>(promise: Promise<T>, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<never>((_resolve, reject) => { timer = setTimeout(() => { reject(new Error(message)); }, 10_000); });
  return Promise.race([promise, bound]).finally(() => { clearTimeout(timer); });
}

describe('Registry with a hung cluster', () => {
  it('serves other clusters and namespaces while a credential read hangs', async (t) => {
    const cluster = await SimulatedCluster.start({ namespaces: ['apps'] });
    t.after(() => cluster.close());
    const provider = new HangingProvider(cluster.kubeconfig);
    const registry = registryWithKeeper({ provider, clock: new FakeClock(Date.now()), credentialCheckIntervalMs: 0 });
    const settled: string[] = [];
    // Resolves with how the call ended (its error, or 'served'); handled at once, so never unhandled.
    const track = (name: string, p: Promise<unknown>): Promise<unknown> =>
      p.then(() => 'served', (err: unknown) => err).finally(() => { settled.push(name); });

    // A cluster whose first resolution hangs (the connect path)...
    const hungConnect = track('hung connect', registry.watchTargetAndGetReader(hung, { gvk: configMaps, name: 'x' }, { namespace: 'team-a', name: 'stuck' }));
    // ...and a known cluster whose admission of a new owner namespace hangs.
    const healthy = await within(
      registry.watchTargetAndGetReader(sim, { gvk: configMaps, namespace: 'apps', name: 'x' }, { namespace: 'team-a', name: 'ok' }),
      'a healthy cluster was not served while another one\'s credentials hung');
    provider.hangFor.add('team-b');
    const hungAdmission = track('hung admission', registry.watchTargetAndGetReader(sim, { gvk: secrets, namespace: 'apps', name: 'y' }, { namespace: 'team-b', name: 'stuck' }));
    await within(eventually('the two resolutions started', () => provider.hanging === 2, EVERY_TURN), 'the two resolutions did not start');

    // Meanwhile a new cache on the healthy cluster is built and published (under the lock).
    const second = await within(
      registry.watchTargetAndGetReader(sim, { gvk: namespaces, name: 'apps' }, { namespace: 'team-a', name: 'ok' }),
      'a new cache was not published while credential reads hung');
    await within(healthy.waitForSync(), 'the healthy cache did not sync');
    await within(second.waitForSync(), 'the second healthy cache did not sync');
    assert.deepEqual(settled, [], 'the hung calls are still waiting');
    assert.equal(registry.caches().length, 2);

    // close() aborts what still hangs.
    await within(registry.close(), 'close() waited on a hung credential read');
    assert.ok(await hungConnect instanceof ClosedError);
    assert.ok(await hungAdmission instanceof ClosedError);
    assert.equal(provider.hanging, 0);
  });

  it('fails a build whose credential read hangs at buildTimeoutMs on the injected clock, with a typed error', async (t) => {
    const cluster = await SimulatedCluster.start({ namespaces: ['apps'] });
    t.after(() => cluster.close());
    const clock = new FakeClock(Date.now());
    const provider = new HangingProvider(cluster.kubeconfig);
    const registry = registryWithKeeper({ provider, clock, credentialCheckIntervalMs: 0, buildTimeoutMs: 5_000 });
    t.after(() => registry.close());
    let settled = false;
    const build = registry.watchTargetAndGetReader(hung, { gvk: configMaps, name: 'x' }, { namespace: 'team-a', name: 'stuck' });
    void build.catch(() => undefined).finally(() => { settled = true; });
    assert.equal(provider.hanging, 1);
    clock.advance(4_999);
    await new Promise((resolve) => { setImmediate(resolve); });
    assert.equal(settled, false, 'not before the deadline');
    clock.advance(1);
    await assert.rejects(within(build, 'the build did not fail at its deadline'),
      (err: unknown) => err instanceof TransportError && err.cluster === 'static:hung' && err.message.includes('5000 ms'));
    assert.equal(provider.hanging, 0, 'the credential read was aborted');
    assert.equal(registry.caches().length, 0);
    assert.equal(clock.pendingTimers, 0, 'the deadline timer is released');
  });

  it('fails a build whose API server never answers at buildTimeoutMs, not at the request timeout', async (t) => {
    const cluster = await SimulatedCluster.start({ namespaces: ['apps'] });
    t.after(() => cluster.close());
    const clock = new FakeClock(Date.now());
    const registry = registryWithKeeper({ provider: new StaticProvider({ clusters: { sim: cluster.kubeconfig } }), clock, credentialCheckIntervalMs: 0, buildTimeoutMs: 5_000 });
    t.after(() => registry.close());
    await cluster.faults.down({ mode: 'hang' }); // accepts connections, never answers
    const build = registry.watchTargetAndGetReader(sim, { gvk: configMaps, name: 'x' }, { namespace: 'team-a', name: 'stuck' });
    void build.catch(() => undefined);
    // Discovery is under way: the server holds its connection.
    await cluster.waitFor((c) => c.openConnections >= 1);
    clock.advance(5_000); // well short of the 60 s request timeout, on the same clock
    await assert.rejects(within(build, 'the build did not fail at its deadline'),
      (err: unknown) => err instanceof TransportError && err.cluster === 'static:sim' && err.message.includes('5000 ms'));
    assert.equal(registry.caches().length, 0);
  });
});
