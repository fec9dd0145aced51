// Scenario: GitOps with real Flux. Each of the three clusters runs Flux's own source-controller and
// kustomize-controller against one Git repository (git http-backend on loopback). A human commits a
// new version into dev's folder; the fleetcache service promotes it dev → staging → prod by
// committing into staging's and then prod's folder, and real Flux applies each commit.
import assert from 'node:assert/strict';
import { after, afterEach, before, describe, it } from 'node:test';
import { FLEET_SERVICE_ARGS, readPipeline, type Fleet } from '../fleet.ts';
import type { FluxControllers } from '../flux/controllers.ts';
import { appliedConfigVersion, FLUX_REPOSITORY, releaseToDevInGit, setUpFluxFleet } from '../flux/fleet.ts';
import { git, GitServer } from '../git/server.ts';
import { eventually, useClusters, type TestCluster } from '../harness/index.ts';
import { startService, type ServiceProcess } from '../service.ts';

describe('scenario: promotion through Git, applied by real Flux', () => {
  const env = useClusters(3, { namePrefix: 'flux' });
  let fleet: Fleet;
  let server: GitServer;
  let service: ServiceProcess | undefined;
  let flux: FluxControllers[] = [];

  before(async () => {
    const [management, staging, prod] = env.clusters as [TestCluster, TestCluster, TestCluster];
    fleet = { management, staging, prod };
    server = await GitServer.start();
    flux = await setUpFluxFleet(fleet, server, '1.0.0');
    service = await startService('flux', management.adminKubeconfig, [...FLEET_SERVICE_ARGS, '--allow-private-git-hosts', '--allow-insecure-git-http']);
  }, { timeout: 600_000 });

  afterEach((t) => {
    if (!('passed' in t) || t.passed) return;
    for (const f of flux) process.stderr.write(`\n=== Flux in ${f.cluster} after failed test "${t.name}" ===\n${f.logs(40)}\n`);
    process.stderr.write(`\n=== fleetcache service ===\n${service?.logs() ?? ''}\n`);
  });

  after(async () => {
    await service?.stop();
    await Promise.all(flux.map((f) => f.stop()));
    await server.close();
  });

  it('promotes dev → staging → prod through commits that Flux applies in each cluster', async () => {
    await eventually('Flux applied 1.0.0 in every cluster', async () => {
      const versions = await Promise.all([fleet.management, fleet.staging, fleet.prod].map(appliedConfigVersion));
      return versions.every((v) => v === '1.0.0');
    }, 120_000);
    await eventually('every environment is ready at 1.0.0', async () => {
      const envs = (await readPipeline(fleet)).status?.environments ?? [];
      return envs.length === 3 && envs.every((e) => e.ready && e.revision === '1.0.0');
    }, 120_000);

    await releaseToDevInGit(server, '1.1.0');
    await eventually('Flux applied 1.1.0 in dev', async () => await appliedConfigVersion(fleet.management) === '1.1.0', 120_000);
    await eventually('Flux applied 1.1.0 in prod', async () => await appliedConfigVersion(fleet.prod) === '1.1.0', 180_000);
    assert.equal(await appliedConfigVersion(fleet.staging), '1.1.0');

    const log = (await git(server.bare(FLUX_REPOSITORY), 'log', '--format=%an|%s', 'main')).trim().split('\n');
    assert.deepEqual(log.slice(0, 3), [
      'fleetcache|promote delivery/podinfo to prod: 1.1.0',
      'fleetcache|promote delivery/podinfo to staging: 1.1.0',
      'seed|release podinfo 1.1.0 to dev',
    ], 'one commit per environment, in order, after the human one');
    for (const folder of ['staging', 'prod']) {
      assert.match(await server.show(FLUX_REPOSITORY, 'main', `clusters/${folder}/podinfo.yaml`), /^ {6}version: "1\.1\.0" # \{"\$promotion": "delivery:podinfo:/m);
    }
  });
});
