// The registry's own LIST limiter (maxConcurrentLists) reaches the connections it builds: LISTs
// of different caches wait for each other, observed in the simulated server's request log.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SimulatedCluster, startSimulatedClusters } from '../../fixtures/index.ts';
import { StaticProvider, type ClusterRef } from '../cluster/index.ts';
import { FakeClock } from '../util/index.ts';
import { registryWithKeeper } from './testing.ts';
import { configMaps, registryPastDiscovery, secrets, sim } from './lists.test-util.ts';


describe('Registry limits', () => {
  it('passes maxConcurrentLists to its connections: with 1, a second cache\'s LIST waits for the first', async (t) => {
    // The server's clock is fake: with latency set, a request it received is answered only when
    // the test advances that clock, and the log records on that clock when each one arrived.
    const serverClock = new FakeClock(1_000_000);
    const cluster = await SimulatedCluster.start({ namespaces: ['apps'], clock: serverClock });
    t.after(() => cluster.close());
    // Discovery first, so that from here on the only requests the caches make are LIST and WATCH.
    const registry = await registryPastDiscovery(t, cluster.kubeconfig, { maxConcurrentLists: 1 });

    cluster.faults.setLatency(1_000);
    const owner = { namespace: 'team-a', name: 'both' };
    const readers = await Promise.all([configMaps, secrets].map((gvk) => registry.watchTargetAndGetReader(sim, { gvk, namespace: 'apps', name: 'x' }, owner)));
    await cluster.waitFor((c) => c.requests.list >= 1);
    // Without the limit the second LIST would arrive now; give it the chance before releasing the first.
    await cluster.waitFor((c) => c.requests.list >= 2, { timeoutMs: 1_000 }).catch(() => undefined);
    serverClock.advance(1_000); // answers the first LIST
    await cluster.waitFor((c) => c.requests.list >= 2);
    serverClock.advance(1_000); // answers the second
    cluster.faults.setLatency(0);
    await Promise.all(readers.map((r) => r.waitForSync(AbortSignal.timeout(10_000))));

    const listed = cluster.recentRequests().filter((r) => r.verb === 'list');
    assert.equal(listed.length, 2);
    const [first, second] = listed;
    assert.ok(first !== undefined && second !== undefined);
    assert.ok(second.at >= first.at + 1_000,
      `the second LIST reached the server only once the first was answered (arrived at +${second.at - first.at} ms of server time)`);
  });

  it('allows 50 concurrent LISTs across clusters by default', async (t) => {
    const serverClock = new FakeClock(1_000_000);
    const clusters = await startSimulatedClusters(51, { namespaces: ['apps'], clock: serverClock });
    t.after(() => Promise.all(clusters.map((c) => c.close())));
    const registry = registryWithKeeper({
      provider: new StaticProvider({ clusters: Object.fromEntries(clusters.map((c) => [c.name, c.kubeconfig])) }),
      clock: new FakeClock(Date.now()),
      credentialCheckIntervalMs: 0,
    });
    t.after(() => registry.close());
    const refs: ClusterRef[] = clusters.map((c) => ({ kind: 'static', name: c.name }));
    for (const ref of refs) await (await registry.connectionFor(ref, { namespace: 'team-a', name: 'warm-up' })).resolve(configMaps);

    for (const c of clusters) c.faults.setLatency(1_000);
    const owner = { namespace: 'team-a', name: 'fleet' };
    const readers = await Promise.all(refs.map((ref) => registry.watchTargetAndGetReader(ref, { gvk: configMaps, namespace: 'apps', name: 'x' }, owner)));
    const lists = (): number => clusters.reduce((sum, c) => sum + c.counters.requests.list, 0);
    const deadline = Date.now() + 20_000;
    while (lists() < 50 && Date.now() < deadline) await new Promise((resolve) => { setImmediate(resolve); });
    // Give a 51st LIST the chance to arrive (it would at once without the limit).
    await Promise.all(clusters.map((c) => c.waitFor((n) => n.requests.list >= 1, { timeoutMs: 1_000 }).catch(() => undefined)));
    assert.equal(lists(), 50, 'fifty LISTs reached the fleet while none was answered');
    serverClock.advance(1_000);
    await Promise.all(clusters.map((c) => c.waitFor((n) => n.requests.list >= 1)));
    for (const c of clusters) c.faults.setLatency(0);
    serverClock.advance(1_000);
    await Promise.all(readers.map((r) => r.waitForSync(AbortSignal.timeout(20_000))));
    assert.equal(lists(), 51);
  });
});
