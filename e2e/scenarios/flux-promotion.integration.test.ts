// Scenario: GitOps with real Flux. Each of the three clusters runs Flux's own source-controller and
// kustomize-controller against one Git repository (git http-backend on loopback). A human commits a
// new version into dev's folder; the fleetcache service promotes it dev → staging → prod by
// committing into staging's and then prod's folder, and real Flux applies each commit.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { everyEnvironmentReady, type Fleet } from '../fleet.ts';
import { appliedConfigVersion, FLUX_REPOSITORY, releaseToDevInGit } from '../flux/fleet.ts';
import { git, type GitServer } from '../git/server.ts';
import { eventually } from '../harness/index.ts';
import { useFluxFleet } from '../flux/scenario.ts';

describe('scenario: promotion through Git, applied by real Flux', () => {
  const scenario = useFluxFleet('flux', { waitReady: false });
  let fleet: Fleet;
  let server: GitServer;
  before(() => { ({ fleet, server } = scenario); });

  it('promotes dev → staging → prod through commits that Flux applies in each cluster', async () => {
    await eventually('Flux applied 1.0.0 in every cluster', async () => {
      const versions = await Promise.all([fleet.management, fleet.staging, fleet.prod].map(appliedConfigVersion));
      return versions.every((v) => v === '1.0.0');
    }, 120_000);
    await everyEnvironmentReady(fleet, '1.0.0', 120_000);

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
