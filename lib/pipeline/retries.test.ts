// The controller's retry budget, on the simulated API server: a reconcile that keeps failing is
// retried 15 times (linkerd's budget, as the controller sets it), then dropped with a warning.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { SimulatedCluster } from '../../fixtures/index.ts';
import { eventually } from '../../e2e/harness/index.ts';
import { StaticProvider } from '../cluster/index.ts';
import { ItemExponentialRateLimiter, RateLimitingWorkQueue } from '../queue/index.ts';
import { Registry, type OwnerKey } from '../registry/index.ts';
import { noopLogger, type LogFields, type Logger } from '../util/index.ts';
import { PipelineController } from './index.ts';

/** Keeps warn lines (with their fields) from every child. */
function warnings(): { readonly logger: Logger; readonly lines: { readonly message: string; readonly fields: LogFields }[] } {
  const lines: { message: string; fields: LogFields }[] = [];
  const logger: Logger = {
    ...noopLogger,
    warn: (message, fields = {}) => { lines.push({ message, fields }); },
    child: () => logger,
  };
  return { logger, lines };
}

describe('PipelineController retries', () => {
  it('retries a failing reconcile 15 times, then drops the Pipeline with a warning', async (t) => {
    const sim = await SimulatedCluster.start({
      namespaces: ['apps'],
      kinds: [{ group: 'fleetcache.dev', version: 'v1alpha1', kind: 'Pipeline', plural: 'pipelines', namespaced: true, status: true }],
    });
    t.after(() => sim.close());
    // An invalid spec needs no target: each reconcile only writes InvalidSpec to the status, and
    // that write always fails. 403 is an answer no layer underneath retries on its own.
    sim.store.create({ apiVersion: 'fleetcache.dev/v1alpha1', kind: 'Pipeline', metadata: { namespace: 'apps', name: 'broken' }, spec: {} });
    const statusWrites = sim.faults.failNext({ method: 'PUT', path: '/apis/fleetcache.dev/v1alpha1/namespaces/apps/pipelines/broken/status', count: Infinity, status: 403 });

    // The budget is the controller's; the backoff between attempts is the queue's: 1 ms here.
    const queue = new RateLimitingWorkQueue<OwnerKey>({ name: 'owners', rateLimiter: new ItemExponentialRateLimiter({ baseDelayMs: 1, maxDelayMs: 1 }) });
    const registry = new Registry({ provider: new StaticProvider({ clusters: {} }), queue, credentialCheckIntervalMs: 0 });
    t.after(() => registry.close());
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromString(sim.kubeconfig);
    const { logger, lines } = warnings();
    const controller = new PipelineController({ registry, localKubeConfig: kubeConfig, logger, workers: 1 });
    const stop = new AbortController();
    const running = controller.run(stop.signal);
    t.after(async () => { stop.abort(); await running; });

    const dropped = await eventually('the Pipeline is dropped out of the queue', () => lines.find((l) => l.message.startsWith('dropping apps/broken')), 30_000);
    assert.equal(dropped.fields.retries, 15, dropped.message);
    assert.equal(controller.stats().reconcileErrors, 16, 'the first attempt and 15 retries');
    assert.equal(statusWrites.hits, 16);
  });
});
