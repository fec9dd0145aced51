// The controller against a simulated management cluster, for the two promises a tenant relies on
// most: a Pipeline reads and patches its targets as its own ServiceAccount (never with the
// service's rights), and an environment that requires approval is promoted only for the revision
// approved (an approval of another revision opens nothing).
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { SimulatedCluster } from '../../fixtures/index.ts';
import { eventually } from '../../e2e/harness/index.ts';
import { StaticProvider } from '../cluster/index.ts';
import { registryWithKeeper } from '../registry/testing.ts';
import { PipelineController } from './controller.ts';
import { kubeConfigFrom, PIPELINE_KIND } from '../../fixtures/support/index.ts';

const NS = 'team-a';
const HR = { apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease' } as const;
const PIPELINE = { apiVersion: 'fleetcache.dev/v1alpha1', kind: 'Pipeline' } as const;
const SERVICE_ACCOUNT = `system:serviceaccount:${NS}:deployer`;

interface Approval {
  readonly environment: string;
  readonly revision: string;
  readonly approver: { readonly username: string };
  readonly approvedAt: string;
}

/** Writes `approvals` to the Pipeline's status, as the approval endpoint does. */
function approve(sim: SimulatedCluster, approvals: readonly Approval[]): void {
  const list = approvals.map((a) => ({ environment: a.environment, revision: a.revision, approver: { username: a.approver.username }, approvedAt: a.approvedAt }));
  sim.store.patch({ ...PIPELINE, namespace: NS, name: 'podinfo' }, { status: { approvals: list } }, { subresource: 'status' });
}

interface Setup {
  readonly sim: SimulatedCluster;
  readonly controller: PipelineController;
  /** The chart version in the spec of the HelmRelease in `namespace`. */
  readonly version: (namespace: string) => string | undefined;
  readonly pipeline: () => { readonly status?: { readonly promotions?: readonly { readonly environment: string; readonly revision: string; readonly state: string }[] } } | undefined;
}

/**
 * A Pipeline in team-a whose dev (namespace `dev`) runs 1.1.0 and prod (namespace `prod`) 1.0.0,
 * both Ready: the controller's next step is promoting 1.1.0 to prod.
 */
async function start(t: TestContext, spec: Record<string, unknown>, approvals: readonly Approval[] = []): Promise<Setup> {
  const sim = await SimulatedCluster.start({
    namespaces: [NS, 'dev', 'prod'],
    kinds: [
      PIPELINE_KIND,
      { group: 'helm.toolkit.fluxcd.io', version: 'v2', kind: 'HelmRelease', plural: 'helmreleases', namespaced: true, status: true },
    ],
  });
  t.after(() => sim.close());
  for (const [namespace, version] of [['dev', '1.1.0'], ['prod', '1.0.0']] as const) {
    sim.store.create({ ...HR, metadata: { namespace, name: 'podinfo' }, spec: { chart: { spec: { chart: 'podinfo', version } } } });
    sim.store.patch({ ...HR, namespace, name: 'podinfo' }, { status: { observedGeneration: 1, conditions: [{ type: 'Ready', status: 'True' }], history: [{ chartVersion: version }] } }, { subresource: 'status' });
  }
  sim.store.create({
    ...PIPELINE,
    metadata: { namespace: NS, name: 'podinfo' },
    spec: {
      appRef: { ...HR, name: 'podinfo' },
      promotion: { strategy: 'patch', patch: { path: '/spec/chart/spec/version' } },
      environments: [{ name: 'dev', targets: [{ namespace: 'dev' }] }, { name: 'prod', targets: [{ namespace: 'prod' }] }],
      ...spec,
    },
  });
  if (approvals.length > 0) approve(sim, approvals);
  const kubeConfig = kubeConfigFrom(sim.kubeconfig);
  const registry = registryWithKeeper({ provider: new StaticProvider({ clusters: {} }), local: kubeConfig, credentialCheckIntervalMs: 0 });
  t.after(() => registry.close());
  const controller = new PipelineController({ registry, workers: 1, allowCrossNamespaceTargets: true });
  const stop = new AbortController();
  const running = controller.run(stop.signal);
  t.after(async () => { stop.abort(); await running; });
  return {
    sim,
    controller,
    version: (namespace) => {
      const spec = sim.store.get({ ...HR, namespace, name: 'podinfo' })?.spec as { chart?: { spec?: { version?: string } } } | undefined;
      return spec?.chart?.spec?.version;
    },
    pipeline: () => sim.store.get({ ...PIPELINE, namespace: NS, name: 'podinfo' }) as ReturnType<Setup['pipeline']>,
  };
}

describe('PipelineController acting for a tenant', () => {
  it('reads and patches its targets as the Pipeline\'s ServiceAccount (impersonated), never as the service', async (t) => {
    const { sim, version } = await start(t, { serviceAccountName: 'deployer' });
    await eventually('prod promoted to 1.1.0', () => version('prod') === '1.1.0');
    const onTargets = sim.recentRequests().filter((r) => r.path.includes('/helmreleases'));
    assert.ok(onTargets.some((r) => r.method === 'PATCH' && r.path.endsWith('/namespaces/prod/helmreleases/podinfo')), 'the promotion patched prod');
    assert.ok(onTargets.some((r) => r.verb === 'watch' || r.verb === 'list'), 'the targets were read');
    for (const r of onTargets) assert.equal(r.user, SERVICE_ACCOUNT, `${r.method} ${r.path} acted as ${r.user}`);
  });

  it('does not open the gate for an approval of another revision, and promotes once the revision waiting is approved', async (t) => {
    const other = { environment: 'prod', revision: '1.0.5', approver: { username: 'alice' }, approvedAt: '2026-01-01T00:00:00Z' };
    const { sim, version, pipeline } = await start(t, {
      environments: [{ name: 'dev', targets: [{ namespace: 'dev' }] }, { name: 'prod', requireApproval: true, targets: [{ namespace: 'prod' }] }],
    }, [other]);
    // Decided on the controller's own record, not a wait: it has reconciled and chosen to hold.
    // (or prod moved: then fail at once rather than at the wait's end).
    const waiting = (): boolean => pipeline()?.status?.promotions?.some((p) => p.environment === 'prod' && p.revision === '1.1.0' && p.state === 'AwaitingApproval') === true;
    await eventually('prod waits for the approval of 1.1.0', () => waiting() || version('prod') !== '1.0.0');
    assert.ok(waiting(), 'the promotion of 1.1.0 to prod is recorded as awaiting approval');
    assert.equal(version('prod'), '1.0.0', 'the approval of 1.0.5 did not promote 1.1.0');
    assert.ok(!sim.recentRequests().some((r) => r.method === 'PATCH' && r.path.includes('/helmreleases/')), 'nothing patched');
    approve(sim, [other, { ...other, revision: '1.1.0' }]);
    await eventually('prod promoted to 1.1.0 once approved', () => version('prod') === '1.1.0');
  });
});
