import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { eventually } from '../../e2e/harness/index.ts';
import { StaticProvider } from '../cluster/index.ts';
import { registryWithKeeper } from '../registry/testing.ts';
import { AppKinds, DEFAULT_APP_KINDS, kindName } from './app-kinds.ts';
import { PipelineController } from './controller.ts';
import type { Pipeline } from './types.ts';
import { kubeConfigFrom, PIPELINE_KIND, simulatedClusterForTest } from '../../fixtures/support/index.ts';

describe('AppKinds', () => {
  it('matches group and kind, never the version', () => {
    const kinds = AppKinds.parse(['Deployment.apps', '*.argoproj.io', 'ConfigMap']);
    assert.equal(kinds.allows({ group: 'apps', kind: 'Deployment' }), true);
    assert.equal(kinds.allows({ group: 'apps', kind: 'ReplicaSet' }), false);
    assert.equal(kinds.allows({ group: 'argoproj.io', kind: 'ApplicationSet' }), true);
    assert.equal(kinds.allows({ group: '', kind: 'ConfigMap' }), true);
    assert.equal(kinds.allows({ group: 'example.com', kind: 'ConfigMap' }), false, 'a bare kind is the core group only');
    assert.equal(kinds.allows({ group: '', kind: 'Deployment' }), false);
  });

  it('has the documented defaults', () => {
    assert.deepEqual(AppKinds.defaults.patterns, DEFAULT_APP_KINDS);
    assert.equal(kindName({ group: '', kind: 'ConfigMap' }), 'ConfigMap');
    assert.equal(kindName({ group: 'apps', kind: 'Deployment' }), 'Deployment.apps');
  });

  it('is taken by PipelineController, which refuses a malformed list naming the option', () => {
    const registry = registryWithKeeper({ provider: { resolve: () => Promise.reject(new Error('no cluster in this test')) } });
    try {
      assert.throws(() => new PipelineController({ registry, appKinds: ['apps/Deployment'] }), (err: unknown) => err instanceof TypeError && err.message.startsWith('PipelineController option appKinds: "apps/Deployment"'));
      assert.doesNotThrow(() => new PipelineController({ registry, appKinds: ['*'] }));
    } finally {
      void registry.close();
    }
  });
});

describe('a Pipeline naming a kind outside the allow-list', () => {
  it('is Ready=False InvalidSpec, the kind named, and nothing of that kind is watched', async (t) => {
    const sim = await simulatedClusterForTest(t, { namespaces: ['apps'], kinds: [PIPELINE_KIND] });
    sim.store.create({
      apiVersion: 'fleetcache.dev/v1alpha1', kind: 'Pipeline', metadata: { namespace: 'apps', name: 'grab' },
      spec: {
        appRef: { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRoleBinding', name: 'cluster-admin' },
        environments: [{ name: 'dev', targets: [{ namespace: 'apps' }] }],
        promotion: { strategy: 'patch', patch: { path: '/subjects/0/name' } },
      },
    });
    const kubeConfig = kubeConfigFrom(sim.kubeconfig);
    const registry = registryWithKeeper({ provider: new StaticProvider({ clusters: {} }), local: kubeConfig, credentialCheckIntervalMs: 0 });
    t.after(() => registry.close());
    const controller = new PipelineController({ registry, workers: 1 });
    const stop = new AbortController();
    const running = controller.run(stop.signal);
    t.after(async () => { stop.abort(); await running; });

    const ready = await eventually('the Pipeline has a Ready condition', () => {
      const pipeline = sim.store.get({ apiVersion: 'fleetcache.dev/v1alpha1', kind: 'Pipeline', namespace: 'apps', name: 'grab' }) as Pipeline | undefined;
      return pipeline?.status?.conditions?.find((c) => c.type === 'Ready');
    });
    assert.equal(ready.status, 'False');
    assert.equal(ready.reason, 'InvalidSpec');
    assert.match(ready.message, /spec\.appRef: kind ClusterRoleBinding\.rbac\.authorization\.k8s\.io is not one this service promotes \(allowed: HelmRelease\.helm\.toolkit\.fluxcd\.io, /);
    assert.deepEqual(registry.caches().map((c) => c.gvk.kind), ['Pipeline'], 'no cache of ClusterRoleBindings');
  });
});
