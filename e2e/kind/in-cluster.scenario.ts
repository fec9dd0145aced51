// The last step of `make e2e-kind` (e2e/kind/run.sh): the service as deployed — the image built
// and loaded into the kind management cluster, config/default applied, its own ServiceAccount and
// ClusterRole — promotes a release dev → staging → prod. The Pipeline's kubeconfig Secrets hold
// the workload clusters' `kind get kubeconfig --internal` kubeconfigs (FLEETCACHE_INTERNAL_KUBECONFIGS):
// the addresses a pod on the kind network reaches, not the host's 127.0.0.1 ports. The Flux
// stand-ins run here, on the host, through the usual kubeconfigs (FLEETCACHE_KUBECONFIGS).
// Not a *.test.ts file: it needs a deployed service, so only run.sh runs it.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { helmReleaseCrd } from '../../fixtures/crds/index.ts';
import { ensureNamespace, must, putKubeconfigSecret } from '../../fixtures/support/index.ts';
import { startFlux } from '../fleet.ts';
import { eventually, externalClustersFromEnv, type TestCluster } from '../harness/index.ts';

/** Not `delivery`/`apps` of the scenarios: the deployed service allows no cross-namespace targets, so the Pipeline lives beside its dev target. */
const NS = 'kind-in-cluster';
const HR = `/apis/helm.toolkit.fluxcd.io/v2/namespaces/${NS}/helmreleases`;
const PIPELINE = `/apis/fleetcache.dev/v1alpha1/namespaces/${NS}/pipelines/podinfo`;

interface Release { readonly spec: { readonly chart: { readonly spec: { readonly version: string } } }; readonly status?: { readonly history?: readonly { readonly chartVersion?: string }[] } }
interface PipelineView { readonly status?: { readonly environments?: readonly { readonly ready: boolean; readonly revision?: string }[]; readonly promotions?: readonly { readonly environment: string; readonly revision: string; readonly state: string }[] } }

/** `name=path` pairs, as FLEETCACHE_KUBECONFIGS. */
function internalKubeconfigs(): Map<string, string> {
  const spec = process.env.FLEETCACHE_INTERNAL_KUBECONFIGS ?? '';
  assert.ok(spec !== '', 'FLEETCACHE_INTERNAL_KUBECONFIGS names the workload clusters\' --internal kubeconfigs (run.sh sets it)');
  return new Map(spec.split(',').map((entry) => {
    const eq = entry.indexOf('=');
    return [entry.slice(0, eq), readFileSync(entry.slice(eq + 1), 'utf8')];
  }));
}

function helmRelease(version: string): object {
  return { apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease', metadata: { name: 'podinfo', namespace: NS }, spec: { interval: '1m', chart: { spec: { chart: 'podinfo', version, sourceRef: { kind: 'HelmRepository', name: 'podinfo' } } } } };
}

void describe('scenario: the deployed service promotes across kind clusters', () => {
  let clusters: TestCluster[] = [];
  let stopFlux: (() => Promise<void>) | undefined;

  before(async () => {
    // mgmt, workload-1 and workload-2 of run.sh's clusters (the fourth is for the waves scenario).
    clusters = (externalClustersFromEnv() ?? []).slice(0, 3);
    assert.equal(clusters.length, 3, 'FLEETCACHE_KUBECONFIGS names mgmt, workload-1, workload-2 first');
    const [mgmt, staging, prod] = clusters as [TestCluster, TestCluster, TestCluster];
    const internal = internalKubeconfigs();
    await must(mgmt, 'GET', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/pipelines.fleetcache.dev'); // from config/default
    for (const c of clusters) {
      await c.installCRDs([helmReleaseCrd]);
      await ensureNamespace(c, NS);
      await must(c, 'POST', HR, helmRelease('1.0.0'), [409]);
    }
    for (const [env, cluster, role] of [['staging', staging, 'workload-1'], ['prod', prod, 'workload-2']] as const) {
      const kubeconfig = internal.get(role);
      assert.ok(kubeconfig !== undefined, `an --internal kubeconfig for ${role} (${cluster.name})`);
      await putKubeconfigSecret(mgmt, NS, `${env}-kubeconfig`, kubeconfig);
    }
    stopFlux = await startFlux(clusters);
    const target = (env: string): object => (env === 'dev' ? { namespace: NS } : { namespace: NS, clusterRef: { kind: 'Secret', name: `${env}-kubeconfig` } });
    await must(mgmt, 'POST', `/apis/fleetcache.dev/v1alpha1/namespaces/${NS}/pipelines`, {
      apiVersion: 'fleetcache.dev/v1alpha1',
      kind: 'Pipeline',
      metadata: { name: 'podinfo', namespace: NS },
      spec: {
        appRef: { apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease', name: 'podinfo' },
        promotion: { strategy: 'patch', patch: { path: '/spec/chart/spec/version' } },
        environments: ['dev', 'staging', 'prod'].map((env) => ({ name: env, targets: [target(env)] })),
      },
    }, [409]);
  }, { timeout: 300_000 });

  after(async () => { await stopFlux?.(); });

  void it('sees every environment at 1.0.0, then carries 1.1.0 from dev to prod', async () => {
    const [mgmt, , prod] = clusters as [TestCluster, TestCluster, TestCluster];
    await eventually('the deployed service sees dev, staging and prod ready at 1.0.0', async () => {
      const envs = ((await must(mgmt, 'GET', PIPELINE)) as PipelineView).status?.environments ?? [];
      return envs.length === 3 && envs.every((e) => e.ready && e.revision === '1.0.0');
    }, 180_000);
    for (;;) {
      const current = await must(mgmt, 'GET', `${HR}/podinfo`) as Release & object;
      const res = await mgmt.request('PUT', `${HR}/podinfo`, { ...current, spec: { ...current.spec, chart: { spec: { ...current.spec.chart.spec, version: '1.1.0' } } } });
      if (res.statusCode === 200) break;
      assert.equal(res.statusCode, 409, JSON.stringify(res.body));
    }
    await eventually('1.1.0 promoted to prod by the deployed service', async () => ((await must(mgmt, 'GET', PIPELINE)) as PipelineView).status?.promotions?.some((p) => p.environment === 'prod' && p.revision === '1.1.0' && p.state === 'Succeeded') === true, 180_000);
    assert.equal(((await must(prod, 'GET', `${HR}/podinfo`)) as Release).spec.chart.spec.version, '1.1.0');
  });
});
