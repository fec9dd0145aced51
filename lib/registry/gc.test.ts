// Garbage collection on the fake clock with the default timings: a cache whose last owner left
// is kept through the grace period (30 s), even though a backoff check (2 s) falls due first.
// And close(), which must await every informer's stop.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SimulatedCluster } from '../../fixtures/index.ts';
import { StaticProvider, type ClusterRef } from '../cluster/index.ts';
import { FakeClock, type GroupVersionKind, type Timer } from '../util/index.ts';
import { registryWithKeeper } from './testing.ts';
import { eventually, EVERY_TURN } from '../../fixtures/support/index.ts';

const configMaps: GroupVersionKind = { group: '', version: 'v1', kind: 'ConfigMap' };
const sim: ClusterRef = { kind: 'static', name: 'sim' };

describe('Registry garbage collection', () => {
  it('keeps a cache through the grace period after its last owner left, though a backoff check runs first', async (t) => {
    const cluster = await SimulatedCluster.start({ namespaces: ['apps'] });
    t.after(() => cluster.close());
    const clock = new FakeClock(Date.now());
    const registry = registryWithKeeper({ provider: new StaticProvider({ clusters: { sim: cluster.kubeconfig } }), clock, credentialCheckIntervalMs: 0 });
    t.after(() => registry.close());
    const owner = { namespace: 'team-a', name: 'leaving' };
    const reader = await registry.watchTargetAndGetReader(sim, { gvk: configMaps, namespace: 'apps', name: 'x' }, owner);
    await reader.waitForSync(AbortSignal.timeout(10_000));
    await cluster.waitFor((c) => c.openWatches === 1);
    const info = (): { nextGcCheckInMs: number | undefined; owners: number } | undefined => registry.caches()[0];
    assert.equal(info()?.nextGcCheckInMs, 2_000, 'the first backoff check is 2 s away');

    registry.forgetOwner(owner);
    assert.equal(info()?.owners, 0);
    // The backoff check falls due and runs: it finds no owner, but the grace period is not over.
    clock.advance(2_000);
    await eventually('the 2 s check ran', () => registry.caches().length === 0 || (info()?.nextGcCheckInMs ?? 0) > 0, EVERY_TURN);
    assert.equal(registry.caches().length, 1, 'not collected at the backoff check, 2 s after the last owner left');
    assert.equal(info()?.nextGcCheckInMs, 28_000, 'checked again when the grace period ends');
    assert.equal(reader.synced, true);
    assert.equal(cluster.counters.openWatches, 1);

    clock.advance(27_999);
    assert.equal(info()?.nextGcCheckInMs, 1, 'nothing is due before the grace period ends');
    clock.advance(1);
    await eventually('the cache is collected', () => registry.caches().length === 0, EVERY_TURN);
    assert.equal(reader.synced, false);
    await cluster.waitFor((c) => c.openWatches === 0);
  });
});

/** A credential-check interval no other timer uses: cancelling its timer marks close() dropping the clusters. */
const CHECK_INTERVAL_MS = 7_777_777;

/** A fake clock that reports, when a timer of `marker` ms is cancelled, how many other timers are pending. */
class MarkedClock extends FakeClock {
  readonly pendingAtMarker: number[] = [];
  readonly #marker: number;

  constructor(start: number, marker: number) {
    super(start);
    this.#marker = marker;
  }

  override setTimer(ms: number, fn: () => void): Timer {
    const timer = super.setTimer(ms, fn);
    if (ms !== this.#marker) return timer;
    return {
      cancel: () => {
        timer.cancel();
        this.pendingAtMarker.push(this.pendingTimers);
      },
    };
  }
}

describe('Registry close()', () => {
  it('has stopped every informer, timers released, before it drops the clusters and resolves', async (t) => {
    const cluster = await SimulatedCluster.start({ namespaces: ['apps'] });
    t.after(() => cluster.close());
    const clock = new MarkedClock(Date.now(), CHECK_INTERVAL_MS);
    const registry = registryWithKeeper({ provider: new StaticProvider({ clusters: { sim: cluster.kubeconfig } }), clock, credentialCheckIntervalMs: CHECK_INTERVAL_MS });
    const owner = { namespace: 'team-a', name: 'many' };
    const readers = await Promise.all(['ConfigMap', 'Secret', 'Namespace'].map((kind) =>
      registry.watchTargetAndGetReader(sim, { gvk: { group: '', version: 'v1', kind }, namespace: kind === 'Namespace' ? undefined : 'apps', name: 'x' }, owner)));
    await Promise.all(readers.map((r) => r.waitForSync(AbortSignal.timeout(10_000))));
    await cluster.waitFor((c) => c.openWatches === 3);
    assert.ok(clock.pendingTimers > 3, 'the running informers hold timers (watch deadlines) on the injected clock');

    await registry.close();
    // The cluster's credential-check timer is cancelled when close() drops the clusters: by
    // then every informer must have stopped, so no timer of theirs is left.
    assert.deepEqual(clock.pendingAtMarker, [0], 'every informer had released its timers when the clusters were dropped');
    assert.equal(clock.pendingTimers, 0);
    assert.ok(readers.every((r) => !r.synced));
  });
});
