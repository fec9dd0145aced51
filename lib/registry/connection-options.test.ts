// Connection settings (`connection`: http2, requestTimeoutMs, maxListsPerCluster, PING) given to the
// registry reach every connection its keeper opens, and bad ones are refused when it is built.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SimulatedCluster } from '../../fixtures/index.ts';
import { ClusterSet, StaticProvider, type ClusterRef } from '../cluster/index.ts';
import { SocketBudget } from '../transport/index.ts';
import { FakeClock, TransportError, type GroupVersionKind } from '../util/index.ts';
import { Registry } from './index.ts';
import { registryWithKeeper } from './testing.ts';
import { registryPastDiscovery } from './lists.test-util.ts';
import { eventually } from '../../fixtures/support/index.ts';

const configMaps: GroupVersionKind = { group: '', version: 'v1', kind: 'ConfigMap' };
const secrets: GroupVersionKind = { group: '', version: 'v1', kind: 'Secret' };
const sim: ClusterRef = { kind: 'static', name: 'sim' };
const owner = { namespace: 'team-a', name: 'o' };

/** Settles with the promise, or rejects with `message` if it has not settled within 10 s (a hang fails fast). */
function within<T>(promise: Promise<T>, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<never>((_resolve, reject) => { timer = setTimeout(() => { reject(new Error(message)); }, 10_000); });
  return Promise.race([promise, bound]).finally(() => { clearTimeout(timer); });
}

describe('Registry connection options', () => {
  it('fails a build against a server that never answers at connection.requestTimeoutMs, before buildTimeoutMs', async (t) => {
    const cluster = await SimulatedCluster.start({ namespaces: ['apps'] });
    t.after(() => cluster.close());
    const clock = new FakeClock(Date.now());
    const registry = registryWithKeeper({
      provider: new StaticProvider({ clusters: { sim: cluster.kubeconfig } }),
      clock,
      credentialCheckIntervalMs: 0,
      buildTimeoutMs: 30_000,
      connection: { requestTimeoutMs: 2_000 },
    });
    t.after(() => registry.close());
    await cluster.faults.down({ mode: 'hang' }); // accepts connections, never answers
    let settled = false;
    const build = registry.watchTargetAndGetReader(sim, { gvk: configMaps, namespace: 'apps', name: 'x' }, owner);
    void build.catch(() => undefined).finally(() => { settled = true; });
    await cluster.waitFor((c) => c.openConnections >= 1); // discovery is under way
    clock.advance(1_999);
    await new Promise((resolve) => { setImmediate(resolve); });
    assert.equal(settled, false, 'not before the request timeout');
    clock.advance(1);
    await assert.rejects(within(build, 'the build did not fail at the request timeout'),
      (err: unknown) => err instanceof TransportError && err.message.includes('no complete response within 2000 ms'));
    assert.equal(registry.caches().length, 0);
  });

  for (const http2 of [true, false]) {
    it(`connection.http2 ${String(http2)} reaches the connections: two watches share ${http2 ? 'one TCP connection' : 'nothing (one socket each)'}`, async (t) => {
      const cluster = await SimulatedCluster.start({ namespaces: ['apps'] });
      t.after(() => cluster.close());
      const registry = registryWithKeeper({
        provider: new StaticProvider({ clusters: { sim: cluster.kubeconfig } }),
        clock: new FakeClock(Date.now()),
        credentialCheckIntervalMs: 0,
        connection: { http2 },
      });
      t.after(() => registry.close());
      const readers = await Promise.all([configMaps, secrets].map((gvk) => registry.watchTargetAndGetReader(sim, { gvk, namespace: 'apps', name: 'x' }, owner)));
      await Promise.all(readers.map((r) => r.waitForSync(AbortSignal.timeout(10_000))));
      const counters = await cluster.waitFor((c) => c.openWatches === 2);
      const connection = await registry.connectionFor(sim, owner);
      if (http2) {
        assert.equal(counters.openConnections, 1, 'every request and watch on one HTTP/2 connection');
        assert.equal(connection.protocol, 'h2');
      } else {
        // Each open watch holds a socket of the HTTP/1.1 agent.
        assert.ok(counters.openConnections >= 2, `one socket per watch over HTTP/1.1, saw ${counters.openConnections} connections`);
        assert.equal(connection.protocol, 'http/1.1');
      }
    });
  }

  it('passes connection.maxListsPerCluster: with 1, a second cache\'s LIST on the cluster waits for the first', async (t) => {
    const serverClock = new FakeClock(1_000_000);
    const cluster = await SimulatedCluster.start({ namespaces: ['apps'], clock: serverClock });
    t.after(() => cluster.close());
    // Plenty of shared slots: only the cluster's share can make the second LIST wait.
    const registry = await registryPastDiscovery(t, cluster.kubeconfig, { maxConcurrentLists: 50, connection: { maxListsPerCluster: 1 } });

    cluster.faults.setLatency(1_000);
    const readers = await Promise.all([configMaps, secrets].map((gvk) => registry.watchTargetAndGetReader(sim, { gvk, namespace: 'apps', name: 'x' }, owner)));
    await cluster.waitFor((c) => c.requests.list >= 1);
    // With the default share of 5 the second LIST would arrive now; give it the chance.
    await cluster.waitFor((c) => c.requests.list >= 2, { timeoutMs: 1_000 }).catch(() => undefined);
    assert.equal(cluster.counters.requests.list, 1, 'the second LIST waits for the cluster\'s one slot');
    serverClock.advance(1_000);
    await cluster.waitFor((c) => c.requests.list >= 2);
    cluster.faults.setLatency(0);
    serverClock.advance(1_000);
    await Promise.all(readers.map((r) => r.waitForSync(AbortSignal.timeout(10_000))));
  });

  it('passes connection.socketBudget: every socket of the registry\'s connections takes a slot of that budget', async (t) => {
    const cluster = await SimulatedCluster.start({ namespaces: ['apps'] });
    t.after(() => cluster.close());
    const socketBudget = new SocketBudget({ maxSockets: 4 });
    const registry = registryWithKeeper({
      provider: new StaticProvider({ clusters: { sim: cluster.kubeconfig } }),
      credentialCheckIntervalMs: 0,
      connection: { socketBudget },
    });
    const reader = await registry.watchTargetAndGetReader(sim, { gvk: configMaps, namespace: 'apps', name: 'x' }, owner);
    await reader.waitForSync(AbortSignal.timeout(10_000));
    assert.equal(socketBudget.inUse, 1, 'one HTTP/2 session, counted in the budget given');
    await registry.close();
    // The slot comes back on the socket's 'close', a few turns after the session is destroyed.
    const inUse = (): number => socketBudget.inUse; // read afresh: the assertion above narrowed the getter
    await eventually('the slot comes back', () => inUse() === 0, { timeoutMs: 2_000, pollMs: 10 });
    assert.equal(inUse(), 0, 'closing the registry gives the slot back');
  });

  it('refuses bad connection options with a TypeError naming the option', () => {
    const provider = new StaticProvider({ clusters: {} });
    const cases: [unknown, RegExp][] = [
      [{ requestTimeoutMs: 0 }, /^ClusterSet option connection\.requestTimeoutMs must be a positive number \(ms\), got 0$/],
      [{ requestTimeoutMs: Number.NaN }, /connection\.requestTimeoutMs .*NaN/],
      [{ maxListsPerCluster: 0 }, /^ClusterSet option connection\.maxListsPerCluster must be a positive integer/],
      [{ maxListsPerCluster: 1.5 }, /^ClusterSet option connection\.maxListsPerCluster must be a positive integer, got 1\.5$/],
      [{ http2: 'yes' }, /^ClusterSet option connection\.http2 must be a boolean, got "yes"$/],
      [{ pingIntervalMs: -1 }, /connection\.pingIntervalMs/],
      [{ pingTimeoutMs: Infinity }, /connection\.pingTimeoutMs/],
      [{ requestTimeout: 5 }, /^ClusterSet option connection\.requestTimeout is not a connection option/],
      [{ toString: 5 }, /connection\.toString is not a connection option/],
      [{ socketBudget: { maxSockets: 4 } }, /^ClusterSet option connection\.socketBudget must be a SocketBudget, got another object$/],
      ['fast', /^ClusterSet option connection must be an object, got string$/],
    ];
    for (const [connection, message] of cases) {
      assert.throws(() => new ClusterSet({ provider, connection: connection as never }), (err: unknown) => err instanceof TypeError && message.test(err.message), JSON.stringify(connection));
    }
    const clusters = new ClusterSet({ provider, connection: { http2: false, requestTimeoutMs: 1_000 } });
    assert.throws(() => new Registry({ clusters, connection: { http2: false } } as never),
      (err: unknown) => err instanceof TypeError && err.message.startsWith('registry option connection configures the keeper'));
    return clusters.close();
  });
});
