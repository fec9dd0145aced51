// Scenario: GitOps. Staging and prod are reconciled from a Git repository (a stand-in for Flux's
// source- and kustomize-controller applies what the branch says; the Flux stand-in marks the
// HelmRelease Ready), so the fleetcache service promotes dev → staging → prod by committing to
// that repository (git http-backend on loopback) rather than by patching the clusters.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { appliedVersion, everyEnvironmentReady, FLEET_SERVICE_ARGS, PIPELINE_NAME, PIPELINE_NAMESPACE, readPipeline, releaseToDev, setUpFleet, startFlux, type Fleet } from '../fleet.ts';
import { git, GitServer } from '../git/server.ts';
import { startGitSync } from '../git/sync.ts';
import { eventually, useClusters, type TestCluster } from '../harness/index.ts';
import { startService, type ServiceProcess } from '../service.ts';

const REPO = 'acme/fleet';
const AUTH = { username: 'fleetcache', password: 'scenario-token' };

function release(env: string, version: string): string {
  return `apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: podinfo\n  namespace: apps\nspec:\n  chart:\n    spec:\n      chart: podinfo\n      version: ${version} # {"$promotion": "${PIPELINE_NAMESPACE}:${PIPELINE_NAME}:${env}"}\n`;
}

describe('scenario: promotion through Git', () => {
  const env = useClusters(3, { namePrefix: 'gitops' });
  let fleet: Fleet;
  let server: GitServer;
  let service: ServiceProcess | undefined;
  const stops: (() => Promise<void>)[] = [];

  before(async () => {
    const [management, staging, prod] = env.clusters as [TestCluster, TestCluster, TestCluster];
    fleet = { management, staging, prod };
    server = await GitServer.start({ auth: AUTH });
    await server.seed(REPO, { 'clusters/staging/podinfo.yaml': release('staging', '1.0.0'), 'clusters/prod/podinfo.yaml': release('prod', '1.0.0') });
    await setUpFleet(fleet, '1.0.0');
    // The Pipeline promotes through Git instead of patching.
    const path = `/apis/fleetcache.dev/v1alpha1/namespaces/${PIPELINE_NAMESPACE}/pipelines/${PIPELINE_NAME}`;
    const current = (await management.request('GET', path)).body as { spec: Record<string, unknown> };
    const spec = { ...current.spec, promotion: { strategy: 'git', git: { url: server.url(REPO), branch: 'main', path: 'clusters', secretRef: { name: 'fleet-git' } } } };
    assert.equal((await management.request('PUT', path, { ...current, spec })).statusCode, 200);
    assert.equal((await management.request('POST', `/api/v1/namespaces/${PIPELINE_NAMESPACE}/secrets`, { metadata: { name: 'fleet-git' }, stringData: AUTH })).statusCode, 201);
    stops.push(await startFlux(env.clusters));
    stops.push(startGitSync(server, REPO, 'main', [
      { file: 'clusters/staging/podinfo.yaml', cluster: staging, namespace: 'apps', name: 'podinfo' },
      { file: 'clusters/prod/podinfo.yaml', cluster: prod, namespace: 'apps', name: 'podinfo' },
    ]));
    service = await startService('gitops', management.adminKubeconfig, [...FLEET_SERVICE_ARGS, '--allow-private-git-hosts', '--allow-insecure-git-http']);
  }, { timeout: 300_000 });

  after(async () => {
    await service?.stop();
    for (const stop of stops.reverse()) await stop();
    await server.close();
  });

  it('promotes dev → staging → prod through commits that Flux applies', async () => {
    await everyEnvironmentReady(fleet, '1.0.0', 90_000);
    await releaseToDev(fleet, '1.1.0');
    await eventually('1.1.0 reaches prod', async () => await appliedVersion(fleet.prod) === '1.1.0', 90_000);
    assert.equal(await appliedVersion(fleet.staging), '1.1.0');

    const log = (await git(server.bare(REPO), 'log', '--format=%an|%s', 'main')).trim().split('\n');
    assert.deepEqual(log, [
      'fleetcache|promote delivery/podinfo to prod: 1.1.0',
      'fleetcache|promote delivery/podinfo to staging: 1.1.0',
      'seed|seed',
    ], 'one commit per environment, in order');
    const shas = (await git(server.bare(REPO), 'log', '--format=%H', 'main')).trim().split('\n');
    const records = await eventually('both promotions recorded', async () => {
      const r = ((await readPipeline(fleet)).status?.promotions ?? []) as readonly { environment: string; state: string; commit?: string }[];
      return r.length === 2 && r.every((p) => p.state === 'Succeeded') && r;
    }, 30_000);
    assert.deepEqual(records.map((r) => [r.environment, r.commit]), [['staging', shas[1]], ['prod', shas[0]]]);
  });
});
