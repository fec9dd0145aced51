// Pipelines acting as their own ServiceAccount, against real apiservers: the service runs as
// config/rbac's ServiceAccount with --default-service-account (impersonation mandatory) and even
// --allow-cross-namespace-targets, so only the tenant's RBAC stands between a Pipeline and what
// the service itself could reach. And a remote cluster reached with a ServiceAccount that has a
// namespaced Role only.
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { after, afterEach, before, describe, it } from 'node:test';
import { helmReleaseCrd, kustomizationCrd } from '../../fixtures/crds/index.ts';
import { FluxStandIn, HELM_RELEASE, KUSTOMIZATION } from '../flux/standin.ts';
import { eventually, useClusters, type AdminApi, type TestCluster } from '../harness/index.ts';
import { apiAs, everythingShown, helmRelease, HR, installServiceRbac, must, namespacedAccount, dumpServiceLogOnFailure, runService, release, setVersion, OTHER, PIPELINES, TENANT, tenantPipeline, type ServiceRun } from './tenants.ts';
import { pipelineCrd } from '../../lib/pipeline/index.ts';

const KS = '/apis/kustomize.toolkit.fluxcd.io/v1';
/** Revision-shaped markers where team-a's accounts cannot read (the service itself could). */
/** A commit SHA: the Kustomization reports `main@sha1:<it>` as Flux does. */
const MARK_KS = randomBytes(20).toString('hex');
const MARK_OTHER = `marker-other-${randomUUID().replaceAll('-', '')}`;

interface PipelineView {
  readonly status?: {
    readonly conditions?: readonly { readonly type: string; readonly status: string; readonly reason: string; readonly message: string }[];
    readonly environments?: readonly { readonly name: string; readonly ready: boolean; readonly revision?: string; readonly targets: readonly { readonly readable?: boolean; readonly error?: string; readonly revision?: string }[] }[];
    readonly promotions?: readonly { readonly environment: string; readonly revision: string; readonly state: string; readonly message?: string }[];
  };
}




describe('Pipelines acting as their ServiceAccount', () => {
  const env = useClusters(2, { namePrefix: 'impersonation' });
  let mgmt: TestCluster;
  let remote: TestCluster;
  let tenant: AdminApi;
  let service: ServiceRun | undefined;
  const fluxes: FluxStandIn[] = [];
  let otherGeneration = 0;

  const readPipeline = async (name: string): Promise<PipelineView> => (await must(mgmt, 'GET', `${PIPELINES}/${name}`)).body as PipelineView;
  const ready = (p: PipelineView): { status: string; reason: string; message: string } | undefined => p.status?.conditions?.find((c) => c.type === 'Ready');

  before(async () => {
    [mgmt, remote] = env.clusters as [TestCluster, TestCluster];
    await Promise.all([mgmt.installCRDs([pipelineCrd, helmReleaseCrd, kustomizationCrd]), remote.installCRDs([helmReleaseCrd])]);
    const serviceKubeconfig = await installServiceRbac(mgmt, 'fleetcache-system');
    tenant = apiAs(mgmt, await namespacedAccount(mgmt, TENANT, 'tenant', [
      { apiGroups: ['fleetcache.dev'], resources: ['pipelines'], verbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'] },
      { apiGroups: [''], resources: ['secrets'], verbs: ['get', 'list', 'create', 'update', 'delete'] },
    ]));
    // What team-a's Pipelines act as: HelmReleases and Secrets in team-a; no Kustomizations.
    await namespacedAccount(mgmt, TENANT, 'deployer', [
      { apiGroups: ['helm.toolkit.fluxcd.io'], resources: ['helmreleases'], verbs: ['get', 'list', 'watch', 'patch'] },
      { apiGroups: [''], resources: ['secrets'], verbs: ['get'] },
    ]);
    // A read-only account: HelmReleases without patch, and of the Secrets only the kubeconfig.
    await namespacedAccount(mgmt, TENANT, 'viewer', [
      { apiGroups: ['helm.toolkit.fluxcd.io'], resources: ['helmreleases'], verbs: ['get', 'list', 'watch'] },
      { apiGroups: [''], resources: ['secrets'], verbs: ['get'], resourceNames: ['remote-kubeconfig'] },
    ]);
    // The remote cluster's credentials for team-a: HelmReleases in `edge` only, no cluster-wide list.
    const agent = await namespacedAccount(remote, 'edge', 'agent', [
      { apiGroups: ['helm.toolkit.fluxcd.io'], resources: ['helmreleases'], verbs: ['get', 'list', 'watch', 'patch'] },
    ]);
    assert.equal((await apiAs(remote, agent).request('GET', `${HR}/helmreleases`)).statusCode, 403, 'the agent cannot list across namespaces');
    await must(mgmt, 'POST', '/api/v1/namespaces', { metadata: { name: OTHER } }, [409]);
    await must(remote, 'POST', '/api/v1/namespaces', { metadata: { name: 'apps' } }, [409]);
    await must(mgmt, 'POST', `${HR}/namespaces/${OTHER}/helmreleases`, helmRelease(OTHER, MARK_OTHER));
    await must(mgmt, 'POST', `${KS}/namespaces/${TENANT}/kustomizations`, { apiVersion: 'kustomize.toolkit.fluxcd.io/v1', kind: 'Kustomization', metadata: { name: 'podinfo', namespace: TENANT }, spec: { interval: '10m', path: './apps', prune: true, sourceRef: { kind: 'GitRepository', name: 'fleet' } } });
    await must(mgmt, 'POST', `${HR}/namespaces/${TENANT}/helmreleases`, helmRelease(TENANT, '1.0.0'));
    for (const ns of ['apps', 'edge']) await must(remote, 'POST', `${HR}/namespaces/${ns}/helmreleases`, helmRelease(ns, '1.0.0'));
    for (const name of ['web', 'api']) {
      await must(mgmt, 'POST', `${HR}/namespaces/${TENANT}/helmreleases`, helmRelease(TENANT, '1.0.0', name));
      await must(remote, 'POST', `${HR}/namespaces/apps/helmreleases`, helmRelease('apps', '1.0.0', name));
    }
    for (const [cluster, kinds] of [[mgmt, [HELM_RELEASE, KUSTOMIZATION]], [remote, [HELM_RELEASE]]] as const) {
      const flux = new FluxStandIn({ name: cluster.name, kubeconfig: cluster.adminKubeconfig, kinds, sourceRevision: () => `main@sha1:${MARK_KS}` });
      fluxes.push(flux);
      await flux.start();
    }
    await eventually('team-b\'s app is ready at its marker', async () => (await release(mgmt, OTHER)).status?.history?.[0]?.chartVersion === MARK_OTHER, 40_000);
    await eventually('team-a\'s Kustomization reports its marker commit', async () => ((await must(mgmt, 'GET', `${KS}/namespaces/${TENANT}/kustomizations/podinfo`)).body as { status?: { lastAppliedRevision?: string } }).status?.lastAppliedRevision === `main@sha1:${MARK_KS}`, 40_000);
    otherGeneration = (await release(mgmt, OTHER)).metadata.generation;

    service = await runService('impersonation', serviceKubeconfig, ['--default-service-account=deployer', '--allow-cross-namespace-targets']);
    await must(tenant, 'POST', `/api/v1/namespaces/${TENANT}/secrets`, { metadata: { name: 'remote-kubeconfig' }, data: { value: Buffer.from(remote.adminKubeconfig).toString('base64') } });
    await must(tenant, 'POST', `/api/v1/namespaces/${TENANT}/secrets`, { metadata: { name: 'edge-kubeconfig' }, data: { value: Buffer.from(agent).toString('base64') } });
    await must(tenant, 'POST', `/api/v1/namespaces/${TENANT}/secrets`, { metadata: { name: 'hook-url' }, data: { url: Buffer.from('http://127.0.0.1:9/never-called').toString('base64') } });
    const web = { apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease', name: 'web' };
    const api = { apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease', name: 'api' };
    await must(tenant, 'POST', PIPELINES, tenantPipeline('ro', { appRef: web, serviceAccountName: 'viewer', environments: [{ name: 'dev', targets: [{ namespace: 'apps', clusterRef: { kind: 'Secret', name: 'remote-kubeconfig' } }] }, { name: 'prod', targets: [{ namespace: TENANT }] }] }));
    await must(tenant, 'POST', PIPELINES, tenantPipeline('hook', {
      appRef: api,
      serviceAccountName: 'viewer',
      environments: [{ name: 'dev', targets: [{ namespace: TENANT }] }, { name: 'prod', targets: [{ namespace: 'apps', clusterRef: { kind: 'Secret', name: 'remote-kubeconfig' } }] }],
      promotion: { strategy: 'webhook', webhook: { secretRef: { name: 'hook-url' } } },
    }));
    await must(tenant, 'POST', PIPELINES, tenantPipeline('kust', { appRef: { apiVersion: 'kustomize.toolkit.fluxcd.io/v1', kind: 'Kustomization', name: 'podinfo' }, revisionPath: '/spec/postBuild/substitute/version', environments: [{ name: 'dev', targets: [{ namespace: TENANT }] }] }));
    await must(tenant, 'POST', PIPELINES, tenantPipeline('push', { environments: [{ name: 'dev', targets: [{ namespace: 'apps', clusterRef: { kind: 'Secret', name: 'remote-kubeconfig' } }] }, { name: 'prod', targets: [{ namespace: OTHER }] }] }));
    await must(tenant, 'POST', PIPELINES, tenantPipeline('edge', { serviceAccountName: 'deployer', environments: [{ name: 'dev', targets: [{ namespace: TENANT }] }, { name: 'prod', targets: [{ namespace: 'edge', clusterRef: { kind: 'Secret', name: 'edge-kubeconfig' } }] }] }));
  }, { timeout: 300_000 });

  afterEach((t) => { dumpServiceLogOnFailure(t, service); });

  after(async () => {
    await service?.stop();
    await Promise.all(fluxes.map((f) => f.stop()));
  });

  it('(b) reports TargetNotReadable with the 403 when the Pipeline\'s account may not read the kind, though the service could', async () => {
    const kust = await eventually('kust is Ready=False TargetNotReadable', async () => { const p = await readPipeline('kust'); return ready(p)?.reason === 'TargetNotReadable' && p; }, 60_000);
    assert.match(ready(kust)?.message ?? '', /403/);
    const [dev] = kust.status?.environments ?? [];
    const target = dev?.targets[0];
    assert.equal(dev?.revision, undefined);
    assert.match(target?.error ?? '', /HTTP 403/);
    assert.equal(target?.readable, false);
  });

  it('(d) writes nothing the Pipeline\'s account may not: a target in team-b stays unreadable and unpatched through a release', async () => {
    const push = await eventually('push cannot read team-b', async () => { const p = await readPipeline('push'); return ready(p)?.reason === 'TargetNotReadable' && p; }, 60_000);
    assert.match(ready(push)?.message ?? '', /prod: local namespace team-b: .*403/);
    await setVersion(remote, 'apps', '1.1.0');
    await eventually('push sees dev at 1.1.0', async () => (await readPipeline('push')).status?.environments?.[0]?.revision === '1.1.0', 60_000);
    const other = await release(mgmt, OTHER);
    assert.equal(other.spec.chart.spec.version, MARK_OTHER);
    assert.equal(other.metadata.generation, otherGeneration);
    assert.ok(!((await readPipeline('push')).status?.promotions ?? []).some((r) => r.state === 'Succeeded'));
  });

  it('(d) patches as the Pipeline\'s account: an account without patch gets a failed promotion with the 403', async () => {
    await eventually('ro is Ready at 1.0.0', async () => { const p = await readPipeline('ro'); return ready(p)?.status === 'True' && p.status?.environments?.every((e) => e.ready && e.revision === '1.0.0') === true; }, 60_000);
    const before = await release(mgmt, TENANT, 'web');
    await setVersion(remote, 'apps', '1.3.0', 'web');
    const failed = await eventually('the promotion into team-a fails', async () => (await readPipeline('ro')).status?.promotions?.find((r) => r.state === 'Failed'), 60_000);
    assert.match(failed.message ?? '', /403/);
    const after = await release(mgmt, TENANT, 'web');
    assert.equal(after.spec.chart.spec.version, '1.0.0');
    assert.equal(after.metadata.generation, before.metadata.generation);
  });

  it('reads the webhook Secret as the Pipeline\'s account: one it may not read fails the promotion with the 403', async () => {
    await eventually('hook is Ready at 1.0.0', async () => { const p = await readPipeline('hook'); return ready(p)?.status === 'True' && p.status?.environments?.every((e) => e.ready && e.revision === '1.0.0') === true; }, 60_000);
    await setVersion(mgmt, TENANT, '1.1.0', 'api');
    const failed = await eventually('the webhook promotion fails', async () => (await readPipeline('hook')).status?.promotions?.find((r) => r.state === 'Failed'), 60_000);
    assert.match(failed.message ?? '', /reading the webhook Secret team-a\/hook-url: HTTP 403/);
  });

  it('(e) syncs and promotes to a remote cluster whose credentials hold a namespaced Role only', async () => {
    await eventually('edge is Ready with prod readable at 1.0.0', async () => {
      const p = await readPipeline('edge');
      return ready(p)?.status === 'True' && p.status?.environments?.every((e) => e.ready && e.revision === '1.0.0') === true;
    }, 60_000);
    await setVersion(mgmt, TENANT, '1.2.0');
    await eventually('the remote edge/podinfo is patched to 1.2.0', async () => (await release(remote, 'edge')).spec.chart.spec.version === '1.2.0', 60_000);
    await eventually('the promotion is recorded as succeeded', async () => (await readPipeline('edge')).status?.promotions?.some((r) => r.state === 'Succeeded' && r.revision === '1.2.0') === true, 60_000);
  });

  it('(c) shows no marker from an object the Pipelines\' accounts cannot read in any status, Event or log line', async () => {
    const shown = await everythingShown(mgmt);
    const logs = service?.output() ?? '';
    assert.ok(logs.includes('"msg":"promoted"'), 'the service logged its work (debug level)');
    for (const [what, value] of [['team-a\'s Kustomization (deployer may not read it)', MARK_KS], ['team-b\'s app revision', MARK_OTHER]] as const) {
      assert.ok(!shown.includes(value), `${what} appears in a status or an Event`);
      assert.ok(!logs.includes(value), `${what} appears in the service's logs`);
    }
  });
});
