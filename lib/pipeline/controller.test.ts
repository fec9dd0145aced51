import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { eventually } from '../../e2e/harness/index.ts';
import { StaticProvider, type ClusterProvider } from '../cluster/index.ts';
import { PipelineController } from './controller.ts';
import { registryWithKeeper } from '../registry/testing.ts';
import { kubeConfigFrom, PIPELINE_KIND, simulatedClusterForTest } from '../../fixtures/support/index.ts';

describe('PipelineController options', () => {
  const provider: ClusterProvider = { resolve: () => Promise.reject(new Error('no cluster in this test')) };
  const registry = registryWithKeeper({ provider });
  after(() => registry.close());

  it('checks the Flux options, naming each', () => {
    assert.doesNotThrow(() => new PipelineController({ registry, progressingGraceMs: 0, applyTimeoutMs: 1, promotionLoop: { maxPerEnvironment: 1 } }));
    const refused = (options: Record<string, unknown>, name: string): void => {
      assert.throws(() => new PipelineController({ registry, ...options }), (err: unknown) => err instanceof TypeError && err.message.includes(name), name);
    };
    refused({ progressingGraceMs: -1 }, 'option progressingGraceMs');
    refused({ applyTimeoutMs: 0 }, 'option applyTimeoutMs');
    refused({ promotionLoop: { maxPerEnvironment: 0 } }, 'option promotionLoop.maxPerEnvironment');
    refused({ promotionLoop: { windowMs: Number.NaN } }, 'option promotionLoop.windowMs');
  });

  it('takes a ServiceAccount name as defaultServiceAccount, and refuses anything else naming the option', () => {
    assert.doesNotThrow(() => new PipelineController({ registry, defaultServiceAccount: 'pipeline-runner' }));
    for (const bad of ['', 'Runner', 'system:serviceaccount:a:b', 'a'.repeat(254), 7]) {
      assert.throws(() => new PipelineController({ registry, defaultServiceAccount: bad as string }), (err: unknown) => err instanceof TypeError && err.message.includes('option defaultServiceAccount must be a ServiceAccount name'), String(bad));
    }
  });
});

describe('PipelineController on the registry', () => {
  it('reads Pipelines through one of the registry\'s caches and writes through the keeper: no connection of its own', async (t) => {
    const sim = await simulatedClusterForTest(t, { namespaces: ['apps'], kinds: [PIPELINE_KIND] });
    // An invalid spec: reconciling it only writes InvalidSpec to the status.
    sim.store.create({ apiVersion: 'fleetcache.dev/v1alpha1', kind: 'Pipeline', metadata: { namespace: 'apps', name: 'p' }, spec: {} });
    const kubeConfig = kubeConfigFrom(sim.kubeconfig);
    const registry = registryWithKeeper({ provider: new StaticProvider({ clusters: {} }), local: kubeConfig, credentialCheckIntervalMs: 0 });
    t.after(() => registry.close());
    const controller = new PipelineController({ registry, workers: 1 });
    const stop = new AbortController();
    const running = controller.run(stop.signal);
    t.after(async () => { stop.abort(); await running; });

    await eventually('the Pipeline reads InvalidSpec', () => sim.store.get({ apiVersion: 'fleetcache.dev/v1alpha1', kind: 'Pipeline', namespace: 'apps', name: 'p' })?.status !== undefined);
    assert.ok(controller.synced);
    assert.deepEqual(registry.caches().filter((c) => c.gvk.kind === 'Pipeline').map((c) => c.cluster), ['local'], 'the Pipeline cache is the registry\'s');
    assert.equal(sim.counters.openWatches, 1, 'one watch of Pipelines');
    assert.equal(sim.counters.openConnections, 1, 'one connection to the management cluster: the keeper\'s');
  });
});
