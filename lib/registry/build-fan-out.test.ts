// Bounded build fan-out (issue 12): asking for many clusters at once builds at most
// maxConcurrentBuilds caches at a time, in order of arrival; a caller waiting for its turn honours
// its signal and leaves the queue without taking a slot, waits past buildTimeoutMs when the builds
// ahead take that long (its turn comes: each of them is bounded), and a caller joining a build in
// flight does not queue at all.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SimulatedCluster, startSimulatedClusters } from '../../fixtures/index.ts';
import { StaticProvider, type ClusterAccess, type ClusterProvider, type ClusterRef, type ResolveContext } from '../cluster/index.ts';
import { ClosedError, FakeClock, toError, TransportError, type GroupVersionKind } from '../util/index.ts';
import { registryWithKeeper } from './testing.ts';

const configMaps: GroupVersionKind = { group: '', version: 'v1', kind: 'ConfigMap' };
const owner = { namespace: 'team-a', name: 'fleet' };

/** Records which clusters were resolved, in order; resolutions of clusters in `held` wait for `release`. */
class CountingProvider implements ClusterProvider {
  readonly resolved: string[] = [];
  readonly held = new Set<string>();
  readonly #gates = new Map<string, { promise: Promise<void>; open: () => void }>();
  readonly #inner: StaticProvider;
  readonly #onResolve: (name: string) => void;

  constructor(clusters: Record<string, string>, onResolve: (name: string) => void = () => undefined) {
    this.#inner = new StaticProvider({ clusters });
    this.#onResolve = onResolve;
  }

  /** Lets the held resolutions of `name` (default: of every cluster) go on. */
  release(name?: string): void {
    for (const [held, gate] of this.#gates) if (name === undefined || name === held) gate.open();
  }

  async resolve(ref: ClusterRef, context: ResolveContext): Promise<ClusterAccess> {
    const name = ref.kind === 'static' ? ref.name : ref.kind;
    this.resolved.push(name);
    this.#onResolve(name);
    if (this.held.has(name)) {
      let entry = this.#gates.get(name);
      if (entry === undefined) {
        let open: () => void = () => undefined;
        const promise = new Promise<void>((resolve) => { open = resolve; });
        entry = { promise, open };
        this.#gates.set(name, entry);
      }
      const gate = entry.promise;
      await new Promise<void>((resolve, reject) => {
        void gate.then(resolve);
        context.signal?.addEventListener('abort', () => { reject(toError(context.signal?.reason)); }, { once: true });
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

async function turns(n: number): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((resolve) => { setImmediate(resolve); });
}

describe('Registry build fan-out', () => {
  it('builds 200 clusters asked for at once at most maxConcurrentBuilds at a time, in order of arrival, and completes them all', async (t) => {
    const N = 8;
    const clusters = await startSimulatedClusters(200, { namespaces: ['apps'], namePrefix: 'fan' });
    t.after(() => Promise.all(clusters.map((c) => c.close())));
    let completed = 0;
    let peak = 0;
    // A build starts with the resolution of its cluster and ends when its caller has the reader.
    const provider = new CountingProvider(Object.fromEntries(clusters.map((c) => [c.name, c.kubeconfig])), () => {
      peak = Math.max(peak, provider.resolved.length - completed);
    });
    const registry = registryWithKeeper({ provider, clock: new FakeClock(Date.now()), credentialCheckIntervalMs: 0, maxConcurrentBuilds: N });
    t.after(() => registry.close());
    const names = clusters.map((c) => c.name);
    const readers = await within(Promise.all(names.map(async (name) => {
      const reader = await registry.watchTargetAndGetReader({ kind: 'static', name }, { gvk: configMaps, namespace: 'apps', name: 'x' }, owner);
      completed += 1;
      return reader;
    })), 'the 200 builds did not complete');
    assert.equal(peak, N, `at most ${N} builds in flight, and the bound is used (peak ${peak})`);
    assert.deepEqual(provider.resolved, names, 'builds start in the order they were asked for');
    await within(Promise.all(readers.map((r) => r.waitForSync())), 'the 200 caches did not sync');
    assert.equal(registry.caches().length, 200);
  });

  it('rejects a queued build whose signal aborts at once, without it ever taking a slot', async (t) => {
    const sims = await startSimulatedClusters(3, { namespaces: ['apps'], namePrefix: 'q' });
    t.after(() => Promise.all(sims.map((c) => c.close())));
    const [a, b, c] = sims.map((s) => s.name) as [string, string, string];
    const provider = new CountingProvider(Object.fromEntries(sims.map((s) => [s.name, s.kubeconfig])));
    provider.held.add(a);
    const registry = registryWithKeeper({ provider, clock: new FakeClock(Date.now()), credentialCheckIntervalMs: 0, maxConcurrentBuilds: 1 });
    t.after(() => registry.close());
    const target = { gvk: configMaps, namespace: 'apps', name: 'x' };
    const first = registry.watchTargetAndGetReader({ kind: 'static', name: a }, target, owner);
    await turns(3);
    assert.deepEqual(provider.resolved, [a], 'the first build holds the only slot');
    const abort = new AbortController();
    const queued = registry.watchTargetAndGetReader({ kind: 'static', name: b }, target, owner, abort.signal);
    const third = registry.watchTargetAndGetReader({ kind: 'static', name: c }, target, owner);
    await turns(3);
    const reason = new Error('the caller gave up');
    abort.abort(reason);
    await assert.rejects(within(queued, 'the aborted queued build did not reject'), (err: unknown) => err === reason);
    assert.deepEqual(provider.resolved, [a], 'the aborted caller is rejected while the slot is still held');
    provider.release();
    await within(Promise.all([first, third]), 'the other builds did not complete');
    assert.deepEqual(provider.resolved, [a, c], 'the aborted build was never started');
    assert.deepEqual(registry.caches().map((info) => info.cluster).sort(), [`static:${a}`, `static:${c}`]);
  });

  it('rejects the builds still queued with ClosedError when the registry closes', async (t) => {
    const sims = await startSimulatedClusters(2, { namespaces: ['apps'], namePrefix: 'z' });
    t.after(() => Promise.all(sims.map((c) => c.close())));
    const [a, b] = sims.map((s) => s.name) as [string, string];
    const provider = new CountingProvider(Object.fromEntries(sims.map((s) => [s.name, s.kubeconfig])));
    provider.held.add(a);
    const registry = registryWithKeeper({ provider, clock: new FakeClock(Date.now()), credentialCheckIntervalMs: 0, maxConcurrentBuilds: 1 });
    const target = { gvk: configMaps, namespace: 'apps', name: 'x' };
    const first = registry.watchTargetAndGetReader({ kind: 'static', name: a }, target, owner);
    await turns(3);
    const queued = registry.watchTargetAndGetReader({ kind: 'static', name: b }, target, owner, new AbortController().signal);
    await turns(3);
    assert.deepEqual(provider.resolved, [a], 'the second waits for the only slot');
    const closing = registry.close();
    await assert.rejects(within(queued, 'the queued build did not reject'), ClosedError);
    await assert.rejects(within(first, 'the build in flight did not reject'), ClosedError);
    provider.release();
    await closing;
    assert.deepEqual(provider.resolved, [a], 'the queued build never started');
  });

  it('waits for its turn past buildTimeoutMs while the builds ahead time out one by one, then is built', async (t) => {
    const hung = await SimulatedCluster.start({ namespaces: ['apps'], name: 'hung' });
    t.after(() => hung.close());
    const other = await SimulatedCluster.start({ namespaces: ['apps'], name: 'other' });
    t.after(() => other.close());
    const clock = new FakeClock(Date.now());
    // Two clusters whose API server accepts connections and never answers, then a healthy one.
    const provider = new CountingProvider({ hung1: hung.kubeconfig, hung2: hung.kubeconfig, other: other.kubeconfig });
    const registry = registryWithKeeper({ provider, clock, credentialCheckIntervalMs: 0, buildTimeoutMs: 5_000, maxConcurrentBuilds: 1 });
    t.after(() => registry.close());
    await hung.faults.down({ mode: 'hang' });
    const target = { gvk: configMaps, namespace: 'apps', name: 'x' };
    const first = registry.watchTargetAndGetReader({ kind: 'static', name: 'hung1' }, target, owner);
    const second = registry.watchTargetAndGetReader({ kind: 'static', name: 'hung2' }, target, owner);
    let settled = false;
    const queued = registry.watchTargetAndGetReader({ kind: 'static', name: 'other' }, target, owner);
    void queued.catch(() => undefined).finally(() => { settled = true; });
    await hung.waitFor((c) => c.openConnections >= 1);
    clock.advance(5_000);
    await assert.rejects(within(first, 'the first build did not fail at its deadline'), (err: unknown) => err instanceof TransportError && err.message.includes('took longer than 5000 ms'));
    await hung.waitFor((c) => c.openConnections >= 2);
    clock.advance(4_999);
    await turns(3);
    assert.equal(settled, false, 'still waiting for its turn behind the second build');
    clock.advance(1); // t = 10 000: twice buildTimeoutMs after the call, which does not fail for that
    await assert.rejects(within(second, 'the second build did not fail at its deadline'), (err: unknown) => err instanceof TransportError);
    const reader = await within(queued, 'the queued build was not built once its turn came');
    await within(reader.waitForSync(), 'the queued cache did not sync');
    assert.deepEqual(provider.resolved, ['hung1', 'hung2', 'other'], 'built in order of arrival');
  });

  it('lets a caller join a build in flight without queueing behind other clusters\' builds', async (t) => {
    const sims = await startSimulatedClusters(2, { namespaces: ['apps'], namePrefix: 'join' });
    t.after(() => Promise.all(sims.map((c) => c.close())));
    const [a, b] = sims.map((s) => s.name) as [string, string];
    const provider = new CountingProvider(Object.fromEntries(sims.map((s) => [s.name, s.kubeconfig])));
    provider.held.add(a);
    provider.held.add(b);
    const registry = registryWithKeeper({ provider, clock: new FakeClock(Date.now()), credentialCheckIntervalMs: 0, maxConcurrentBuilds: 1 });
    t.after(() => registry.close());
    const target = { gvk: configMaps, namespace: 'apps', name: 'x' };
    const first = registry.watchTargetAndGetReader({ kind: 'static', name: a }, target, owner);
    await turns(3);
    const queued = registry.watchTargetAndGetReader({ kind: 'static', name: b }, target, owner);
    void queued.catch(() => undefined);
    await turns(3);
    const joiner = registry.watchTargetAndGetReader({ kind: 'static', name: a }, target, { namespace: owner.namespace, name: 'another' });
    provider.release(a);
    // b's build now holds the only slot and stays held: the joiner must not be behind it.
    const [mine, theirs] = await within(Promise.all([first, joiner]), 'the caller joining the build in flight waited for a slot');
    await within(mine.waitForSync(), 'the cache did not sync');
    assert.equal(theirs.synced, true, 'both callers read the one cache');
    assert.equal(registry.caches().length, 1);
    provider.release(b);
    await within(queued, 'the queued build did not complete');
  });

  it('refuses a maxConcurrentBuilds that is not a positive integer', () => {
    const provider = new StaticProvider({ clusters: {} });
    for (const value of [0, -1, 1.5, Number.NaN]) {
      assert.throws(() => registryWithKeeper({ provider, maxConcurrentBuilds: value }),
        (err: unknown) => err instanceof TypeError && err.message === `registry option maxConcurrentBuilds must be a positive integer, got ${value}`);
    }
  });
});
