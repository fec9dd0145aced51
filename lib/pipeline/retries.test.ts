// The controller's retry rule, on the simulated API server: a reconcile that keeps failing is
// retried with the queue's backoff for as long as it fails, never dropped (controller-runtime's
// semantics); the backoff doubles up to the rate limiter's cap and stays there.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { eventually } from '../../e2e/harness/index.ts';
import { StaticProvider } from '../cluster/index.ts';
import { ItemExponentialRateLimiter, RateLimitingWorkQueue } from '../queue/index.ts';
import { ownerKey, type OwnerKey } from '../registry/index.ts';
import { FakeClock } from '../util/index.ts';
import { PipelineController } from './index.ts';
import { registryWithKeeper } from '../registry/testing.ts';
import { kubeConfigFrom, PIPELINE_KIND, RecordingLogger, simulatedClusterForTest } from '../../fixtures/support/index.ts';


describe('PipelineController retries', () => {
  it('retries a failing reconcile past 15 failures with capped backoff, and never drops the Pipeline', async (t) => {
    const sim = await simulatedClusterForTest(t, { namespaces: ['apps'], kinds: [PIPELINE_KIND] });
    // An invalid spec needs no target: each reconcile only writes InvalidSpec to the status, and
    // that write always fails. 403 is an answer no layer underneath retries on its own.
    sim.store.create({ apiVersion: 'fleetcache.dev/v1alpha1', kind: 'Pipeline', metadata: { namespace: 'apps', name: 'broken' }, spec: {} });
    const statusWrites = sim.faults.failNext({ method: 'PUT', path: '/apis/fleetcache.dev/v1alpha1/namespaces/apps/pipelines/broken/status', count: Infinity, status: 403 });

    // The queue's delays run on a fake clock the test advances by exactly the delay it scheduled,
    // so each gap between attempts is read off the clock: 1 ms doubling, capped at 64 ms.
    const clock = new FakeClock(1_000_000);
    const queue = new RateLimitingWorkQueue<OwnerKey>({ name: 'owners', clock, rateLimiter: new ItemExponentialRateLimiter({ baseDelayMs: 1, maxDelayMs: 64 }) });
    const kubeConfig = kubeConfigFrom(sim.kubeconfig);
    // The management cluster: the controller's Pipeline cache is one of the registry's.
    const registry = registryWithKeeper({ provider: new StaticProvider({ clusters: {} }), local: kubeConfig, queue, credentialCheckIntervalMs: 0 });
    t.after(() => registry.close());
    const logger = new RecordingLogger();
    const { lines } = logger;
    const controller = new PipelineController({ registry, logger, workers: 1 });
    const stop = new AbortController();
    const running = controller.run(stop.signal);
    t.after(async () => { stop.abort(); await running; });

    const gaps: number[] = [];
    for (let failure = 1; failure <= 25; failure++) {
      // The failed attempt is done and its retry scheduled: exactly one delay is pending.
      const delay = await eventually(`retry ${failure} is scheduled`, () => (statusWrites.hits === failure && clock.pendingTimers === 1 ? clock.nextTimerIn : undefined), 30_000);
      gaps.push(delay);
      clock.advance(delay);
    }
    await eventually('attempt 26 ran', () => statusWrites.hits >= 26 || undefined, 30_000);

    assert.deepEqual(gaps.slice(0, 8), [1, 2, 4, 8, 16, 32, 64, 64], 'exponential backoff up to the cap');
    assert.deepEqual(new Set(gaps.slice(6)), new Set([64]), 'and capped from then on');
    assert.equal(lines.filter((l) => l.message.startsWith('dropping')).length, 0, 'never dropped');
    // Pipelines are owners of their kind: the queue carries kind-qualified keys.
    const key = ownerKey({ group: 'fleetcache.dev', kind: 'Pipeline', namespace: 'apps', name: 'broken' });
    assert.ok(queue.numRequeues(key) >= 25, `every failure counted, none forgotten (${queue.numRequeues(key)})`);
    assert.ok(controller.stats().reconcileErrors >= 26, 'the first attempt and 25 retries, all reconciles');

    // Each reconcile logs through its own logger: controller and a fresh reconcileID on its lines.
    const reconcileLines = lines.filter((l) => l.message === 'invalid spec');
    assert.ok(reconcileLines.length >= 26, String(reconcileLines.length));
    for (const line of reconcileLines) {
      assert.equal(line.fields.controller, 'pipeline');
      assert.equal(line.fields.pipeline, 'apps/broken');
      assert.match(String(line.fields.reconcileID), /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    }
    assert.equal(new Set(reconcileLines.map((l) => l.fields.reconcileID)).size, reconcileLines.length, 'one ID per reconcile');
    const retry = lines.find((l) => l.message.startsWith(`Reconciler error for ${key}`) && l.level === 'error');
    assert.ok(retry !== undefined && reconcileLines.some((l) => l.fields.reconcileID === retry.fields.reconcileID), 'the runner\'s retry line shares the reconcile\'s ID');
  });
});
