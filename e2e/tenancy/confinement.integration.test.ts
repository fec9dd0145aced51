// Tenants on a shared management cluster, against real apiservers: the service runs as the
// ServiceAccount of config/rbac with exactly its roles; a tenant that may only create Pipelines and
// Secrets in team-a tries to reach what it cannot read (flux-system's deploy key, team-b's app)
// and to write where it may not. Markers planted in those objects must never surface in any
// Pipeline's status, any Event or any log line.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, afterEach, before, describe, it } from 'node:test';
import { helmReleaseCrd, kustomizationCrd } from '../../fixtures/crds/index.ts';
import { FluxStandIn, HELM_RELEASE } from '../flux/standin.ts';
import { eventually, useClusters, type AdminApi, type TestCluster } from '../harness/index.ts';
import { apiAs, dumpServiceLogOnFailure, everythingShown, helmRelease, HR, installServiceRbac, must, namespacedAccount, OTHER, PIPELINES, release, runService, setVersion, shippedClusterRoleRules, TENANT, tenantPipeline, type ServiceRun } from './tenants.ts';
import { pipelineCrd } from '../../lib/pipeline/index.ts';

/** Unique, revision-shaped (so only confinement can keep them out of status), planted where team-a cannot read. */
const MARK_SECRET = `marker-secret-${randomUUID().replaceAll('-', '')}`;
const MARK_OTHER = `marker-other-${randomUUID().replaceAll('-', '')}`;
const MARK_PEEK = `marker-peek-${randomUUID().replaceAll('-', '')}`;

interface PipelineView {
  readonly metadata: { readonly generation: number };
  readonly status?: {
    readonly conditions?: readonly { readonly type: string; readonly status: string; readonly reason: string; readonly message: string }[];
    readonly environments?: readonly { readonly name: string; readonly ready: boolean; readonly revision?: string; readonly targets: readonly { readonly readable?: boolean; readonly error?: string }[] }[];
    readonly promotions?: readonly { readonly environment: string; readonly revision: string; readonly state: string }[];
  };
}


const remoteTarget = { namespace: 'apps', clusterRef: { kind: 'Secret', name: 'remote-kubeconfig' } };



describe('tenants confined on a shared management cluster', () => {
  const env = useClusters(2, { namePrefix: 'tenancy' });
  let mgmt: TestCluster;
  let remote: TestCluster;
  let tenant: AdminApi;
  let serviceKubeconfig: string;
  let service: ServiceRun | undefined;
  const fluxes: FluxStandIn[] = [];
  let otherGeneration = 0;

  const readPipeline = async (name: string): Promise<PipelineView> => (await must(mgmt, 'GET', `${PIPELINES}/${name}`)).body as PipelineView;
  const ready = (p: PipelineView): { status: string; reason: string; message: string } | undefined => p.status?.conditions?.find((c) => c.type === 'Ready');

  before(async () => {
    [mgmt, remote] = env.clusters as [TestCluster, TestCluster];
    await Promise.all([mgmt.installCRDs([pipelineCrd, helmReleaseCrd, kustomizationCrd]), remote.installCRDs([helmReleaseCrd])]);
    serviceKubeconfig = await installServiceRbac(mgmt, 'fleetcache-system');
    // The tenant: Pipelines and Secrets in its own namespace, nothing else.
    tenant = apiAs(mgmt, await namespacedAccount(mgmt, TENANT, 'tenant', [
      { apiGroups: ['fleetcache.dev'], resources: ['pipelines'], verbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'] },
      { apiGroups: [''], resources: ['secrets'], verbs: ['get', 'list', 'create', 'update', 'delete'] },
    ]));
    // The account team-a's Pipelines act as: its app kind and its Secrets, in team-a only.
    await namespacedAccount(mgmt, TENANT, 'deployer', [
      { apiGroups: ['helm.toolkit.fluxcd.io'], resources: ['helmreleases'], verbs: ['get', 'list', 'watch', 'patch'] },
      { apiGroups: [''], resources: ['secrets'], verbs: ['get'] },
    ]);
    for (const ns of [OTHER, 'flux-system']) await must(mgmt, 'POST', '/api/v1/namespaces', { metadata: { name: ns } }, [409]);
    await must(remote, 'POST', '/api/v1/namespaces', { metadata: { name: 'apps' } }, [409]);
    // What team-a must never see: the platform's deploy key, team-b's app and kubeconfig.
    await must(mgmt, 'POST', '/api/v1/namespaces/flux-system/secrets', { metadata: { name: 'flux-system' }, data: { identity: Buffer.from(MARK_SECRET).toString('base64') } });
    await must(mgmt, 'POST', `/api/v1/namespaces/${OTHER}/secrets`, { metadata: { name: 'remote-kubeconfig' }, data: { value: Buffer.from(remote.adminKubeconfig).toString('base64') } });
    await must(mgmt, 'POST', `${HR}/namespaces/${OTHER}/helmreleases`, helmRelease(OTHER, MARK_OTHER));
    await must(mgmt, 'POST', `${HR}/namespaces/${OTHER}/helmreleases`, helmRelease(OTHER, MARK_PEEK, 'billing'));
    await must(mgmt, 'POST', `${HR}/namespaces/${TENANT}/helmreleases`, helmRelease(TENANT, '1.0.0'));
    await must(remote, 'POST', `${HR}/namespaces/apps/helmreleases`, helmRelease('apps', '1.0.0'));
    for (const [cluster, kubeconfig] of [[mgmt, mgmt.adminKubeconfig], [remote, remote.adminKubeconfig]] as const) {
      const flux = new FluxStandIn({ name: cluster.name, kubeconfig, kinds: [HELM_RELEASE] });
      fluxes.push(flux);
      await flux.start();
    }
    await eventually('team-b\'s apps are ready at their markers', async () => (await release(mgmt, OTHER)).status?.history?.[0]?.chartVersion === MARK_OTHER && (await release(mgmt, OTHER, 'billing')).status?.history?.[0]?.chartVersion === MARK_PEEK, 40_000);
    otherGeneration = (await release(mgmt, OTHER)).metadata.generation;

    // The tenant itself cannot read any of it.
    assert.equal((await tenant.request('GET', '/api/v1/namespaces/flux-system/secrets/flux-system')).statusCode, 403);
    assert.equal((await tenant.request('GET', `${HR}/namespaces/${OTHER}/helmreleases/podinfo`)).statusCode, 403);
    assert.equal((await tenant.request('GET', `/api/v1/namespaces/${OTHER}/secrets/remote-kubeconfig`)).statusCode, 403);

    service = await runService('tenancy', serviceKubeconfig, []);
    // Everything below is created by the tenant, with the tenant's own token.
    await must(tenant, 'POST', `/api/v1/namespaces/${TENANT}/secrets`, { metadata: { name: 'remote-kubeconfig' }, data: { value: Buffer.from(remote.adminKubeconfig).toString('base64') } });
    await must(tenant, 'POST', PIPELINES, tenantPipeline('shop', { serviceAccountName: 'deployer', environments: [{ name: 'dev', targets: [remoteTarget] }, { name: 'prod', targets: [{ namespace: TENANT }] }] }));
    await must(tenant, 'POST', PIPELINES, tenantPipeline('peek', { appRef: { apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease', name: 'billing' }, environments: [{ name: 'dev', targets: [{ namespace: OTHER }] }] }));
    await must(tenant, 'POST', PIPELINES, tenantPipeline('borrow', { environments: [{ name: 'dev', targets: [{ namespace: 'apps', clusterRef: { kind: 'Secret', name: 'remote-kubeconfig', namespace: OTHER } }] }] }));
    await must(tenant, 'POST', PIPELINES, tenantPipeline('push', { environments: [{ name: 'dev', targets: [remoteTarget] }, { name: 'prod', targets: [{ namespace: OTHER }] }] }));
  }, { timeout: 300_000 });

  afterEach((t) => { dumpServiceLogOnFailure(t, service); });

  after(async () => {
    await service?.stop();
    await Promise.all(fluxes.map((f) => f.stop()));
  });

  it('ships a ClusterRole that reads Secrets by name only and impersonates ServiceAccounts', () => {
    const rules = shippedClusterRoleRules();
    const verbs = (group: string, resource: string): string[] => rules.filter((r) => r.apiGroups.includes(group) && r.resources.includes(resource)).flatMap((r) => [...r.verbs]).sort();
    assert.deepEqual(verbs('', 'secrets'), ['get'], 'the code only GETs Secrets');
    assert.deepEqual(verbs('', 'events'), ['create']);
    assert.deepEqual(verbs('fleetcache.dev', 'pipelines/status'), ['update']);
    assert.deepEqual(verbs('', 'serviceaccounts'), ['impersonate']);
    assert.ok(!rules.some((r) => r.verbs.includes('*') || r.resources.includes('*') || r.apiGroups.includes('*')), 'no wildcards');
  });

  it('promotes, running under exactly config/rbac\'s roles, a Pipeline that names its ServiceAccount', async () => {
    await eventually('shop is Ready with both environments at 1.0.0', async () => {
      const p = await readPipeline('shop');
      return ready(p)?.status === 'True' && p.status?.environments?.every((e) => e.ready && e.revision === '1.0.0') === true;
    }, 60_000);
    await setVersion(remote, 'apps', '1.1.0');
    await eventually('prod (team-a on the management cluster) is patched to 1.1.0', async () => (await release(mgmt, TENANT)).spec.chart.spec.version === '1.1.0', 60_000);
    const promoted = await eventually('the promotion is recorded as succeeded', async () => (await readPipeline('shop')).status?.promotions?.find((r) => r.state === 'Succeeded'), 60_000);
    assert.deepEqual([promoted.environment, promoted.revision], ['prod', '1.1.0']);
  });

  it('(a) refuses the flux-system Secret trick: core Secrets never, other namespaces of the management cluster not by default', async () => {
    for (const targets of [[{ namespace: 'flux-system' }], [{ namespace: TENANT }]]) {
      const trick = await tenant.request('POST', PIPELINES, tenantPipeline('deploy-key', {
        appRef: { apiVersion: 'v1', kind: 'Secret', name: 'flux-system' },
        revisionPath: '/data/identity',
        environments: [{ name: 'dev', targets }],
      }));
      assert.equal(trick.statusCode, 422, JSON.stringify(trick.body));
      assert.match(JSON.stringify(trick.body), /a core v1 Secret is never an app or target kind/);
    }
    const peek = await eventually('peek is Ready=False InvalidSpec', async () => { const p = await readPipeline('peek'); return ready(p)?.reason === 'InvalidSpec' && p; }, 60_000);
    assert.equal(ready(peek)?.status, 'False');
    assert.match(ready(peek)?.message ?? '', /spec\.environments\[0\]\.targets\[0\]\.namespace: a target on the management cluster \(no clusterRef\) must be in the Pipeline's own namespace "team-a", got "team-b" \(the service runs without --allow-cross-namespace-targets\)/);
    assert.deepEqual(peek.status?.environments ?? [], [], 'nothing read for an invalid spec');
    // Another team's kubeconfig Secret: refused by the Secret provider, nothing of the remote read.
    const borrow = await eventually('borrow is Ready=False TargetNotReadable', async () => { const p = await readPipeline('borrow'); return ready(p)?.reason === 'TargetNotReadable' && p; }, 60_000);
    const [dev] = borrow.status?.environments ?? [];
    assert.equal(dev?.revision, undefined);
    assert.equal(dev?.targets[0]?.readable, false);
  });

  it('(d) never writes outside the tenant\'s namespace: a patch target in team-b is an invalid spec, and team-b is untouched by the release', async () => {
    const push = await eventually('push is Ready=False InvalidSpec', async () => { const p = await readPipeline('push'); return ready(p)?.reason === 'InvalidSpec' && p; }, 60_000);
    assert.match(ready(push)?.message ?? '', /spec\.environments\[1\]\.targets\[0\]\.namespace: .*got "team-b"/);
    assert.equal((await remote.request('GET', `${HR}/namespaces/apps/helmreleases/podinfo`)).statusCode, 200);
    // The release to remote dev (the test above) happened while push existed: team-b never changed.
    assert.equal((await release(remote, 'apps')).spec.chart.spec.version, '1.1.0', 'the release this test relies on happened');
    const other = await release(mgmt, OTHER);
    assert.equal(other.spec.chart.spec.version, MARK_OTHER);
    assert.equal(other.metadata.generation, otherGeneration);
    assert.deepEqual((await readPipeline('push')).status?.promotions ?? [], []);
  });

  it('(c) shows no marker from an object the tenant cannot read in any status, Event or log line', async () => {
    const shown = await everythingShown(mgmt);
    const logs = service?.output() ?? '';
    assert.ok(logs.includes('"msg":"promoted"'), 'the service logged its work (debug level)');
    const secrets: readonly [string, string][] = [
      ['flux-system\'s deploy key', MARK_SECRET],
      ['team-b\'s app revision', MARK_OTHER],
      ['the revision of the team-b app peek names', MARK_PEEK],
      ['the remote cluster\'s admin token', /"token": "([^"]+)"/.exec(remote.adminKubeconfig)?.[1] ?? 'missing'],
      ['the service\'s own token', /"token": "([^"]+)"/.exec(serviceKubeconfig)?.[1] ?? 'missing'],
    ];
    for (const [what, value] of secrets) {
      assert.ok(value.length > 20, what);
      assert.ok(!shown.includes(value), `${what} appears in a status or an Event`);
      assert.ok(!logs.includes(value), `${what} appears in the service's logs`);
    }
  });

  it('lets the service widen the reach with --allow-cross-namespace-targets, and only then', async () => {
    assert.equal(await service?.stop(), 0);
    service = await runService('tenancy-widened', serviceKubeconfig, ['--allow-cross-namespace-targets']);
    const peek = await eventually('peek is no longer an invalid spec', async () => { const p = await readPipeline('peek'); const r = ready(p); return r !== undefined && r.reason !== 'InvalidSpec' && p; }, 60_000);
    assert.ok(peek.status?.environments?.length === 1, JSON.stringify(peek.status));
  });
});
