// Fleet environments chosen by a clusterSelector, against real apiservers with RBAC: the service
// runs as config/rbac's ServiceAccount (Secrets `get` only, as shipped) with no default account.
// A Pipeline acting as a ServiceAccount with config/samples/fleet-tenant-role.yaml's Role promotes
// its selector fleet; one whose account may not list Secrets, and one acting as the service
// itself, are refused with a message saying what to grant; a fleet listed by name works as the
// service. The management apiserver's audit log shows the service never listed Secrets as itself
// and never touched another namespace's Secrets.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import { loadAll } from 'js-yaml';
import { helmReleaseCrd } from '../../fixtures/crds/index.ts';
import { pipelineCrd } from '../../lib/pipeline/index.ts';
import { FluxStandIn, HELM_RELEASE } from '../flux/standin.ts';
import { eventually, startCluster, useClusters, type TestCluster } from '../harness/index.ts';
import { dumpServiceLogOnFailure, helmRelease, HR, installServiceRbac, must, namespacedAccount, OTHER, PIPELINES, release, runService, setVersion, TENANT, type ServiceRun } from './tenants.ts';

const root = new URL('../../', import.meta.url).pathname;
const SERVICE_USER = 'system:serviceaccount:fleetcache-system:fleetcache';
/** Every request on Secrets, at Metadata level (who, as whom, which verb, which namespace), once impersonation is resolved. */
const AUDIT_POLICY = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
    resources: [{ group: "", resources: ["secrets"] }]
  - level: None
`;
const auditDir = mkdtempSync(path.join(tmpdir(), 'fleetcache-fleet-rbac-audit-'));
const policyFile = path.join(auditDir, 'policy.yaml');
writeFileSync(policyFile, AUDIT_POLICY);

interface AuditEvent {
  readonly verb: string;
  readonly user: { readonly username: string };
  readonly impersonatedUser?: { readonly username: string };
  readonly objectRef?: { readonly namespace?: string; readonly name?: string };
  readonly responseStatus?: { readonly code?: number };
}

interface PipelineView {
  readonly status?: {
    readonly conditions?: readonly { readonly type: string; readonly status: string; readonly reason: string; readonly message: string }[];
    readonly environments?: readonly { readonly name: string; readonly ready: boolean; readonly revision?: string; readonly fleet?: { readonly total?: number; readonly error?: string } }[];
    readonly promotions?: readonly { readonly environment: string; readonly revision: string; readonly state: string }[];
  };
}

/** dev (team-a on the management cluster) → prod (a fleet in namespace `apps` of its member clusters). */
function fleetPipeline(name: string, app: string, fleet: Record<string, unknown>, serviceAccountName?: string): object {
  return {
    apiVersion: 'fleetcache.dev/v1alpha1',
    kind: 'Pipeline',
    metadata: { name, namespace: TENANT },
    spec: {
      appRef: { apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease', name: app },
      ...(serviceAccountName === undefined ? {} : { serviceAccountName }),
      promotion: { strategy: 'patch', patch: { path: '/spec/chart/spec/version' } },
      environments: [{ name: 'dev', targets: [{ namespace: TENANT }] }, { name: 'prod', fleet: { namespace: 'apps', ...fleet } }],
    },
  };
}

const SELECTOR = { clusterSelector: { matchLabels: { fleet: 'prod' } } };
const APPS = ['podinfo', 'web', 'api', 'edge'];

describe('fleet selectors and RBAC', () => {
  const env = useClusters(2, { namePrefix: 'fleet-rbac-member' });
  let mgmt: TestCluster;
  /** Set once the audited management apiserver started (the harness does not stop it). */
  let started: TestCluster | undefined;
  let members: TestCluster[];
  let service: ServiceRun | undefined;
  const fluxes: FluxStandIn[] = [];
  const auditLog = (): AuditEvent[] => readFileSync(path.join(auditDir, 'mgmt.log'), 'utf8').split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as AuditEvent);
  const readPipeline = async (name: string): Promise<PipelineView> => (await must(mgmt, 'GET', `${PIPELINES}/${name}`)).body as PipelineView;
  const ready = (p: PipelineView): { status: string; reason: string; message: string } | undefined => p.status?.conditions?.find((c) => c.type === 'Ready');

  before(async () => {
    members = [...env.clusters];
    mgmt = await startCluster({ name: 'fleet-rbac-mgmt', apiserverFlags: [`--audit-policy-file=${policyFile}`, `--audit-log-path=${path.join(auditDir, 'mgmt.log')}`, '--audit-log-mode=blocking'] });
    started = mgmt;
    await Promise.all([mgmt.installCRDs([pipelineCrd, helmReleaseCrd]), ...members.map((c) => c.installCRDs([helmReleaseCrd]))]);
    const serviceKubeconfig = await installServiceRbac(mgmt, 'fleetcache-system');
    for (const ns of [TENANT, OTHER]) await must(mgmt, 'POST', '/api/v1/namespaces', { metadata: { name: ns } }, [409]);
    // The sample, applied as shipped (it names team-a): ServiceAccount, Role, RoleBinding.
    for (const doc of loadAll(readFileSync(path.join(root, 'config/samples/fleet-tenant-role.yaml'), 'utf8')) as { kind: string; metadata: { namespace: string } }[]) {
      assert.equal(doc.metadata.namespace, TENANT);
      const plural = { ServiceAccount: '/api/v1', Role: '/apis/rbac.authorization.k8s.io/v1', RoleBinding: '/apis/rbac.authorization.k8s.io/v1' }[doc.kind];
      assert.ok(plural !== undefined, doc.kind);
      await must(mgmt, 'POST', `${plural}/namespaces/${TENANT}/${doc.kind.toLowerCase()}s`, doc, [409]);
    }
    // An account that reads its Secrets by name and its app, but may not list Secrets.
    await namespacedAccount(mgmt, TENANT, 'getter', [
      { apiGroups: [''], resources: ['secrets'], verbs: ['get'] },
      { apiGroups: ['helm.toolkit.fluxcd.io'], resources: ['helmreleases'], verbs: ['get', 'list', 'watch', 'patch'] },
    ]);
    for (const app of APPS) await must(mgmt, 'POST', `${HR}/namespaces/${TENANT}/helmreleases`, helmRelease(TENANT, '1.0.0', app));
    for (const c of members) {
      await must(c, 'POST', '/api/v1/namespaces', { metadata: { name: 'apps' } }, [409]);
      for (const app of APPS) await must(c, 'POST', `${HR}/namespaces/apps/helmreleases`, helmRelease('apps', '1.0.0', app));
    }
    const kubeconfigSecret = (ns: string, name: string, kubeconfig: string): object => ({ metadata: { name, namespace: ns, labels: { fleet: 'prod' } }, data: { value: Buffer.from(kubeconfig).toString('base64') } });
    for (const [i, c] of members.entries()) await must(mgmt, 'POST', `/api/v1/namespaces/${TENANT}/secrets`, kubeconfigSecret(TENANT, `member-${i + 1}`, c.adminKubeconfig));
    // Another team's Secret, labelled the same: never a member of team-a's fleet, never read.
    await must(mgmt, 'POST', `/api/v1/namespaces/${OTHER}/secrets`, kubeconfigSecret(OTHER, 'member-b', members[0]?.adminKubeconfig ?? ''));
    for (const c of [mgmt, ...members]) {
      const flux = new FluxStandIn({ name: c.name, kubeconfig: c.adminKubeconfig, kinds: [HELM_RELEASE] });
      fluxes.push(flux);
      await flux.start();
    }
    service = await runService('fleet-rbac', serviceKubeconfig, []);
    await must(mgmt, 'POST', PIPELINES, fleetPipeline('by-account', 'podinfo', SELECTOR, 'fleet-deployer'));
    await must(mgmt, 'POST', PIPELINES, fleetPipeline('no-list', 'web', SELECTOR, 'getter'));
    await must(mgmt, 'POST', PIPELINES, fleetPipeline('as-service', 'api', SELECTOR));
    await must(mgmt, 'POST', PIPELINES, fleetPipeline('by-name', 'edge', { clusters: [{ kind: 'Secret', name: 'member-1' }, { kind: 'Secret', name: 'member-2' }] }));
  }, { timeout: 300_000 });

  afterEach((t) => { dumpServiceLogOnFailure(t, service); });

  after(async () => {
    await service?.stop();
    await Promise.all(fluxes.map((f) => f.stop()));
    await started?.stop();
    rmSync(auditDir, { recursive: true, force: true });
  });

  it('promotes a selector fleet for a Pipeline acting as an account with the sample Role, and by name as the service', async () => {
    for (const name of ['by-account', 'by-name']) {
      await eventually(`${name} sees its fleet of 2 ready at 1.0.0`, async () => {
        const p = await readPipeline(name);
        return ready(p)?.status === 'True' && p.status?.environments?.[1]?.fleet?.total === 2 && p.status.environments.every((e) => e.ready && e.revision === '1.0.0');
      }, 60_000);
    }
    for (const app of APPS) await setVersion(mgmt, TENANT, '1.1.0', app);
    for (const [name, app] of [['by-account', 'podinfo'], ['by-name', 'edge']] as const) {
      await eventually(`${name}: 1.1.0 promoted to both members`, async () => (await readPipeline(name)).status?.promotions?.some((r) => r.environment === 'prod' && r.revision === '1.1.0' && r.state === 'Succeeded') === true, 90_000);
      for (const c of members) assert.equal((await release(c, 'apps', app)).spec.chart.spec.version, '1.1.0', `${app} in ${c.name}`);
    }
  });

  it('refuses a selector for an account that may not list Secrets, and for the service itself, saying what to grant', async () => {
    const noList = await eventually('no-list is Ready=False TargetNotReadable', async () => { const p = await readPipeline('no-list'); return ready(p)?.reason === 'TargetNotReadable' && p; }, 60_000);
    const noListMessage = ready(noList)?.message ?? '';
    assert.match(noListMessage, /prod: the cluster list: .*403/);
    assert.match(noListMessage, /cannot list resource "secrets"/);
    assert.match(noListMessage, /the Pipeline's account needs get, list and watch on "secrets" in namespace team-a \(example: config\/samples\/fleet-tenant-role\.yaml\)/);

    const asService = await eventually('as-service is Ready=False TargetNotReadable', async () => { const p = await readPipeline('as-service'); return ready(p)?.reason === 'TargetNotReadable' && p; }, 60_000);
    const message = ready(asService)?.message ?? '';
    assert.match(message, /prod: the cluster list: a clusterSelector lists and watches Secrets in namespace team-a, which the service's own identity may not/);
    assert.match(message, /set spec\.serviceAccountName \(or the service's --default-service-account\) to a ServiceAccount whose Role in team-a grants get, list and watch on "secrets"/);
    assert.match(message, /config\/samples\/fleet-tenant-role\.yaml/);
    assert.equal(asService.status?.environments?.[1]?.fleet?.error !== undefined, true);

    // Released in dev (the first test), neither refused fleet got it.
    await eventually('both see dev at 1.1.0', async () => (await Promise.all(['no-list', 'as-service'].map(readPipeline))).every((p) => p.status?.environments?.[0]?.revision === '1.1.0'), 60_000);
    for (const name of ['no-list', 'as-service']) assert.ok(!((await readPipeline(name)).status?.promotions ?? []).some((r) => r.environment === 'prod'), name);
    for (const c of members) for (const app of ['web', 'api']) assert.equal((await release(c, 'apps', app)).spec.chart.spec.version, '1.0.0', `${app} in ${c.name}`);
  });

  it('never lists Secrets as the service, and never reads another namespace\'s', () => {
    const byService = auditLog().filter((e) => e.user.username === SERVICE_USER);
    const lists = byService.filter((e) => e.verb === 'list' || e.verb === 'watch');
    assert.ok(lists.length > 0, 'the account\'s listing is in the log');
    for (const e of lists) {
      assert.ok(e.impersonatedUser !== undefined, `the service listed Secrets as itself: ${JSON.stringify(e)}`);
      assert.equal(e.objectRef?.namespace, TENANT, JSON.stringify(e));
    }
    assert.ok(lists.some((e) => e.impersonatedUser?.username === `system:serviceaccount:${TENANT}:fleet-deployer` && (e.responseStatus?.code ?? 0) < 300));
    assert.deepEqual(byService.filter((e) => e.objectRef?.namespace !== TENANT), [], 'no request on Secrets outside team-a');
  });
});
