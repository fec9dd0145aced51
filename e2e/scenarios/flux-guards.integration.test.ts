// Scenario: what real Flux does that a promotion must not be fooled by. A suspended Kustomization
// still reports Ready=True with observedGeneration current (kustomize-controller skips the apply
// but moves observedGeneration), and a Kustomization's lastAppliedRevision is the Git commit, which
// every commit — fleetcache's own included — changes. Against Flux's own controllers: a suspended
// staging holds prod back, one human commit yields exactly one fleetcache commit per environment,
// a Pipeline that would promote the commit itself (no revisionPath) is refused, committing nothing,
// and an approval holds prod back while staging runs the version.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { APP_NAMESPACE, PIPELINE_NAME, PIPELINE_NAMESPACE, readPipeline, updateObject, type Fleet } from '../fleet.ts';
import { appliedConfigVersion, childKustomization, FLUX_NAMESPACE, FLUX_REPOSITORY, GIT_REPOSITORIES, KUSTOMIZATIONS, releaseToDevInGit, VERSION_PATH } from '../flux/fleet.ts';
import { git, type GitServer } from '../git/server.ts';
import { eventually, type TestCluster } from '../harness/index.ts';
import { useFluxFleet } from '../flux/scenario.ts';

const PIPELINE_PATH = `/apis/fleetcache.dev/v1alpha1/namespaces/${PIPELINE_NAMESPACE}/pipelines/${PIPELINE_NAME}`;

interface Kustomization {
  readonly metadata: { readonly generation: number };
  readonly spec: { readonly suspend?: boolean; readonly postBuild?: { readonly substitute?: { readonly version?: string } } };
  readonly status?: { readonly observedGeneration?: number; readonly lastAppliedRevision?: string; readonly conditions?: readonly { readonly type: string; readonly status: string }[] };
}

async function kustomization(cluster: TestCluster, namespace: string, name: string): Promise<Kustomization> {
  return (await cluster.request('GET', `${KUSTOMIZATIONS}/namespaces/${namespace}/kustomizations/${name}`)).body as Kustomization;
}

function readyAt(k: Kustomization): boolean {
  return k.status?.observedGeneration === k.metadata.generation && k.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;
}

async function commitLog(server: GitServer): Promise<string[]> {
  return (await git(server.bare(FLUX_REPOSITORY), 'log', '--format=%an|%s', 'main')).trim().split('\n');
}

/** Every cluster's Flux fetched HEAD and applied it with both Kustomizations (unless suspended): nothing is left to react to. */
async function settledAtHead(fleet: Fleet, server: GitServer): Promise<boolean> {
  const head = `main@sha1:${(await git(server.bare(FLUX_REPOSITORY), 'rev-parse', 'main')).trim()}`;
  for (const cluster of [fleet.management, fleet.staging, fleet.prod]) {
    const source = (await cluster.request('GET', `${GIT_REPOSITORIES}/namespaces/${FLUX_NAMESPACE}/gitrepositories/fleet`)).body as { status?: { artifact?: { revision?: string } } };
    if (source.status?.artifact?.revision !== head) return false;
    for (const [ns, name] of [[FLUX_NAMESPACE, 'fleet'], [APP_NAMESPACE, 'podinfo']] as const) {
      const k = await kustomization(cluster, ns, name);
      // A suspended Kustomization applies nothing: it keeps the revision it had.
      if (!readyAt(k) || (k.spec.suspend !== true && k.status?.lastAppliedRevision !== head)) return false;
    }
  }
  return true;
}

describe('scenario: real Flux behaviour a promotion must see through', () => {
  const scenario = useFluxFleet('flux-guards');
  let fleet: Fleet;
  let server: GitServer;
  before(() => { ({ fleet, server } = scenario); });

  it('one human commit yields exactly one fleetcache commit per environment, and none once Flux applied them', async () => {
    const before = (await commitLog(server)).length;
    await releaseToDevInGit(server, '1.1.0');
    await eventually('Flux applied 1.1.0 in prod', async () => await appliedConfigVersion(fleet.prod) === '1.1.0', 180_000);
    // Each fleetcache commit changed every Kustomization's lastAppliedRevision: once all of them
    // run HEAD and the promotions are recorded done, there is nothing a correct service commits.
    await eventually('both promotions succeeded (the environments run 1.1.0)', async () => {
      const records = (await readPipeline(fleet)).status?.promotions ?? [];
      return ['staging', 'prod'].every((e) => records.some((r) => r.environment === e && r.revision === '1.1.0' && r.state === 'Succeeded'));
    }, 120_000);
    await eventually('Flux settled at HEAD in every cluster', () => settledAtHead(fleet, server), 120_000);
    const log = await commitLog(server);
    assert.deepEqual(log.slice(0, log.length - before), [
      'fleetcache|promote delivery/podinfo to prod: 1.1.0',
      'fleetcache|promote delivery/podinfo to staging: 1.1.0',
      'seed|release podinfo 1.1.0 to dev',
    ]);
    const pipeline = await readPipeline(fleet);
    assert.equal(pipeline.status?.conditions?.find((c) => c.type === 'Ready')?.status, 'True');
  });

  it('a suspended staging is not ready: prod waits until staging runs the version', async () => {
    // Suspend staging's child through Git, as a team would.
    await server.commit(FLUX_REPOSITORY, { 'clusters/staging/podinfo.yaml': childKustomization('staging', '1.1.0', { suspend: true }) }, 'suspend staging');
    await eventually('staging\'s child is suspended', async () => (await kustomization(fleet.staging, APP_NAMESPACE, 'podinfo')).spec.suspend === true, 60_000);
    await eventually('the Pipeline sees staging suspended', async () => {
      const staging = (await readPipeline(fleet)).status?.environments?.find((e) => e.name === 'staging');
      return staging?.ready === false && (staging.targets[0] as { reason?: string } | undefined)?.reason === 'Suspended';
    }, 60_000);

    await releaseToDevInGit(server, '1.2.0');
    // fleetcache commits 1.2.0 for staging; Flux puts it into the suspended child, which then
    // looks reconciled (observedGeneration current, Ready=True) while nothing was applied.
    await eventually('staging\'s suspended child carries 1.2.0 and looks reconciled', async () => {
      const k = await kustomization(fleet.staging, APP_NAMESPACE, 'podinfo');
      return k.spec.postBuild?.substitute?.version === '1.2.0' && readyAt(k);
    }, 120_000);
    await eventually('Flux settled at HEAD in every cluster', () => settledAtHead(fleet, server), 120_000);
    assert.equal(await appliedConfigVersion(fleet.staging), '1.1.0', 'suspended: Flux applied nothing');
    assert.ok(!(await commitLog(server)).some((l) => l.includes('to prod: 1.2.0')), 'prod is not promoted past a suspended staging');
    assert.equal(await appliedConfigVersion(fleet.prod), '1.1.0');

    // Resumed, staging applies 1.2.0, and then prod gets it.
    await server.commit(FLUX_REPOSITORY, { 'clusters/staging/podinfo.yaml': (await server.show(FLUX_REPOSITORY, 'main', 'clusters/staging/podinfo.yaml')).replace('  suspend: true\n', '') }, 'resume staging');
    await eventually('Flux applied 1.2.0 in staging', async () => await appliedConfigVersion(fleet.staging) === '1.2.0', 120_000);
    await eventually('Flux applied 1.2.0 in prod', async () => await appliedConfigVersion(fleet.prod) === '1.2.0', 180_000);
  });

  it('without revisionPath a Kustomization Pipeline is InvalidSpec and commits nothing (its revision would be the commit)', async () => {
    // The documented default revision, status.lastAppliedRevision, is main@sha1:<commit> under Flux:
    // promoting it wrote commits into the version fields, and every such commit changed it again.
    await updateObject(fleet.management, PIPELINE_PATH, (current) => {
      const object = current as { spec: Record<string, unknown> };
      const { revisionPath: _dropped, ...spec } = object.spec;
      return { ...object, spec };
    });
    const ready = await eventually('the Pipeline is InvalidSpec', async () => {
      const condition = (await readPipeline(fleet)).status?.conditions?.find((c) => c.type === 'Ready');
      return condition?.reason === 'InvalidSpec' && condition;
    }, 60_000);
    assert.match(ready.message, /revisionPath/);
    const head = (await git(server.bare(FLUX_REPOSITORY), 'rev-parse', 'main')).trim();
    await releaseToDevInGit(server, '1.3.0');
    await eventually('Flux applied 1.3.0 in dev', async () => await appliedConfigVersion(fleet.management) === '1.3.0', 120_000);
    await eventually('Flux settled at HEAD in every cluster', () => settledAtHead(fleet, server), 120_000);
    const log = (await git(server.bare(FLUX_REPOSITORY), 'log', '--format=%an|%s', `${head}..main`)).trim().split('\n');
    assert.deepEqual(log, ['seed|release podinfo 1.3.0 to dev'], 'no fleetcache commit');
    assert.equal(await appliedConfigVersion(fleet.staging), '1.2.0');
  });

  it('with requireApproval on prod, prod waits for the approval while staging runs the version', async () => {
    // revisionPath back (the test before removed it), and prod behind an approval.
    await updateObject(fleet.management, PIPELINE_PATH, (current) => {
      const object = current as { spec: { environments: Record<string, unknown>[] } & Record<string, unknown> };
      const environments = object.spec.environments.map((e) => (e.name === 'prod' ? { ...e, requireApproval: true } : e));
      return { ...object, spec: { ...object.spec, revisionPath: VERSION_PATH, environments } };
    });
    await eventually('Flux applied 1.3.0 in staging', async () => await appliedConfigVersion(fleet.staging) === '1.3.0', 120_000);
    await eventually('prod\'s promotion awaits approval', async () => (await readPipeline(fleet)).status?.promotions?.some((r) => r.environment === 'prod' && r.revision === '1.3.0' && r.state === 'AwaitingApproval') === true, 60_000);
    await eventually('Flux settled at HEAD in every cluster', () => settledAtHead(fleet, server), 120_000);
    assert.ok(!(await commitLog(server)).some((l) => l.includes('to prod: 1.3.0')), 'no commit for prod before the approval');
    assert.equal(await appliedConfigVersion(fleet.prod), '1.2.0');

    // What the service's approval endpoint writes once the approver's right is checked (the
    // endpoint itself is proven in e2e/tenancy/approval.integration.test.ts): an approval in status.
    await updateObject(fleet.management, `${PIPELINE_PATH}/status`, (current) => {
      const object = current as { status?: { approvals?: readonly object[] } };
      const approval = { environment: 'prod', revision: '1.3.0', approver: { username: 'alice' }, approvedAt: new Date().toISOString().replace(/\.\d+Z$/, 'Z') };
      return { ...object, status: { ...object.status, approvals: [...(object.status?.approvals ?? []), approval] } };
    });
    await eventually('Flux applied 1.3.0 in prod', async () => await appliedConfigVersion(fleet.prod) === '1.3.0', 120_000);
    assert.equal((await commitLog(server)).filter((l) => l.includes('to prod: 1.3.0')).length, 1);
  });
});
