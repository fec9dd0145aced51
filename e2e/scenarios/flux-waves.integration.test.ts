// Scenario: a fleet environment promoted in waves through Git, applied by Flux's real controllers.
// Four clusters: the management cluster (dev, and the Pipeline) and prod-1…3, the prod fleet by
// the label of their kubeconfig Secrets. Every cluster runs source-controller + kustomize-controller
// reading one repository (git http-backend on loopback) with a folder per cluster, its version line
// marked for its wave: prod-1 `delivery:podinfo:prod/canary`, prod-2 and prod-3 `…:prod/rest`.
// The canary wave (prod-1, soaked 5 s) must be applied by Flux in prod-1 alone and be Ready by
// Flux's own status before the rest's commit is pushed; each wave is one commit; after a wave's
// commit only its clusters are asked to reconcile now.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { APP_NAMESPACE, FLEET_SERVICE_ARGS, PIPELINE_NAME, PIPELINE_NAMESPACE } from '../fleet.ts';
import type { FluxControllers } from '../flux/controllers.ts';
import { appliedConfigVersion, FLUX_NAMESPACE, FLUX_REPOSITORY, GIT_REPOSITORIES, KUSTOMIZATIONS, releaseToDevInGit } from '../flux/fleet.ts';
import { setUpFluxWaves, wavePipelineObject, type WaveMember } from '../flux/waves.ts';
import { fluxSuiteHooks } from '../flux/scenario.ts';
import { git, GitServer } from '../git/server.ts';
import { eventually, useClusters, type TestCluster } from '../harness/index.ts';
import { startService, type ServiceProcess } from '../service.ts';
import { must } from '../../fixtures/support/index.ts';

const SOAK_SECONDS = 5;
const WAVES = [
  { name: 'canary', selector: { matchLabels: { wave: 'canary' } }, soakSeconds: SOAK_SECONDS },
  { name: 'rest', count: 2 }, // the last wave takes the rest
];
const REQUESTED_AT = 'reconcile.fluxcd.io/requestedAt';

interface Kustomization {
  readonly metadata: { readonly generation: number; readonly annotations?: Readonly<Record<string, string>> };
  readonly spec: { readonly postBuild?: { readonly substitute?: { readonly version?: string } } };
  readonly status?: { readonly observedGeneration?: number; readonly lastAppliedRevision?: string; readonly conditions?: readonly { readonly type: string; readonly status: string }[] };
}

interface PipelineView {
  readonly status?: {
    readonly conditions?: readonly { readonly type: string; readonly status: string }[];
    readonly environments?: readonly { readonly name: string; readonly ready: boolean; readonly revision?: string }[];
    readonly promotions?: readonly { readonly environment: string; readonly wave?: string; readonly revision: string; readonly state: string; readonly commit?: string; readonly readyAt?: string; readonly message?: string }[];
  };
}

async function readPipeline(management: TestCluster): Promise<PipelineView> {
  return await must(management, 'GET', `/apis/fleetcache.dev/v1alpha1/namespaces/${PIPELINE_NAMESPACE}/pipelines/${PIPELINE_NAME}`) as PipelineView;
}

async function child(cluster: TestCluster): Promise<Kustomization> {
  return await must(cluster, 'GET', `${KUSTOMIZATIONS}/namespaces/${APP_NAMESPACE}/kustomizations/podinfo`) as Kustomization;
}

async function source(cluster: TestCluster): Promise<{ readonly metadata: { readonly annotations?: Readonly<Record<string, string>> }; readonly status?: { readonly artifact?: { readonly revision?: string } } }> {
  return await must(cluster, 'GET', `${GIT_REPOSITORIES}/namespaces/${FLUX_NAMESPACE}/gitrepositories/fleet`) as { metadata: { annotations?: Record<string, string> }; status?: { artifact?: { revision?: string } } };
}

/** Flux's own word: the child reconciled its current generation, Ready=True, at `version`. */
function readyAtVersion(k: Kustomization, version: string): boolean {
  return k.spec.postBuild?.substitute?.version === version && k.status?.observedGeneration === k.metadata.generation &&
    k.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;
}

/** `sha|committer time (s)|subject` of the commits after `since`, newest first. */
async function commitsSince(server: GitServer, since: string): Promise<{ sha: string; at: number; subject: string }[]> {
  const out = (await git(server.bare(FLUX_REPOSITORY), 'log', '--format=%H|%ct|%an|%s', `${since}..main`)).trim();
  return out === '' ? [] : out.split('\n').map((line) => {
    const [sha = '', at = '0', author = '', ...subject] = line.split('|');
    return { sha, at: Number(at), subject: `${author}|${subject.join('|')}` };
  });
}

/** Every cluster's Flux fetched HEAD and applied it with both Kustomizations: nothing left to react to. */
async function settledAtHead(clusters: readonly TestCluster[], server: GitServer): Promise<boolean> {
  const head = `main@sha1:${(await git(server.bare(FLUX_REPOSITORY), 'rev-parse', 'main')).trim()}`;
  for (const cluster of clusters) {
    if ((await source(cluster)).status?.artifact?.revision !== head) return false;
    for (const [ns, name] of [[FLUX_NAMESPACE, 'fleet'], [APP_NAMESPACE, 'podinfo']] as const) {
      const k = await must(cluster, 'GET', `${KUSTOMIZATIONS}/namespaces/${ns}/kustomizations/${name}`) as Kustomization;
      if (k.status?.observedGeneration !== k.metadata.generation || k.status.lastAppliedRevision !== head) return false;
    }
  }
  return true;
}

describe('scenario: a fleet promoted in waves through Git, applied by real Flux', () => {
  const env = useClusters(4, { namePrefix: 'flux-waves' });
  let management: TestCluster;
  let members: WaveMember[];
  let server: GitServer | undefined;
  let service: ServiceProcess | undefined;
  let flux: FluxControllers[] = [];

  before(async () => {
    const [mgmt, ...prod] = env.clusters;
    management = mgmt;
    members = prod.map((cluster, i) => ({ cluster, name: `prod-${i + 1}`, wave: i === 0 ? 'canary' : 'rest' }));
    server = await GitServer.start();
    flux = await setUpFluxWaves(management, members, server, '1.0.0', wavePipelineObject(server.url(FLUX_REPOSITORY), WAVES), {
      labels: (m) => (m.wave === 'canary' ? { wave: 'canary' } : {}),
    });
    // The fleet is chosen by a Secret label and the service runs with admin credentials, so it opts in to
    // selectors as itself (e2e/tenancy/fleet-selector.integration.test.ts covers the ServiceAccount path).
    service = await startService('flux-waves', management.adminKubeconfig, [...FLEET_SERVICE_ARGS, '--allow-fleet-selectors-as-service', '--allow-private-git-hosts', '--allow-insecure-git-http']);
  }, { timeout: 600_000 });

  fluxSuiteHooks(() => ({ flux, service, server }));

  it('the canary wave is applied by Flux in the canary alone, the rest committed only once it is Ready and soaked; one commit per wave', async () => {
    const repo = server ?? assert.fail('the Git server is started by before');
    const [canary, ...rest] = members as [WaveMember, ...WaveMember[]];
    const all = [management, ...members.map((m) => m.cluster)];
    await eventually('Flux applied 1.0.0 in every cluster', async () => (await Promise.all(all.map(appliedConfigVersion))).every((v) => v === '1.0.0'), 180_000);
    // A rollout of 1.0.0 begun while prod was still coming up (its commits change nothing) asks a
    // wave's clusters to reconcile after writing the wave Committed, and the wave turns Succeeded
    // only in a later reconcile: so no prod record still Pending or Committed means no such ask is
    // still to come (with every target ready at 1.0.0 no further wave starts).
    await eventually('the Pipeline sees dev and the prod fleet ready at 1.0.0, no rollout of it under way', async () => {
      const status = (await readPipeline(management)).status;
      const envs = status?.environments ?? [];
      const underWay = (status?.promotions ?? []).some((r) => r.environment === 'prod' && (r.state === 'Pending' || r.state === 'Committed'));
      return envs.length === 2 && envs.every((e) => e.ready && e.revision === '1.0.0') && !underWay;
    }, 120_000);
    const seed = (await git(repo.bare(FLUX_REPOSITORY), 'rev-parse', 'main')).trim();
    // What each cluster was last asked before the release (that rollout of 1.0.0, if any, is over):
    // a wave's commit changes only its own clusters' files, so only they are asked again.
    const asked = async (m: WaveMember): Promise<string> => [(await child(m.cluster)).metadata.annotations?.[REQUESTED_AT], (await source(m.cluster)).metadata.annotations?.[REQUESTED_AT]].join();
    const askedBefore = new Map(await Promise.all(members.map(async (m) => [m.name, await asked(m)] as const)));

    await releaseToDevInGit(repo, '1.1.0');
    // Watch until the rest's commit appears: every look reads the clusters first, then Git, so
    // whatever a look saw of the clusters happened before the commit it did not see.
    let canaryCommit: { sha: string; at: number } | undefined;
    let canaryOnlySeen = false;
    let canaryReadySeen = false;
    // The start of the last look that saw the canary not (yet) Ready at 1.1.0: Flux made it Ready after that.
    let canaryNotReadyAt: number | undefined;
    let canaryAsked = false;
    const restCommit = await eventually('the rest wave\'s commit is pushed', async () => {
      const lookedAt = Date.now();
      const [canaryChild, canarySource, canaryVersion, ...others] = await Promise.all([
        child(canary.cluster), source(canary.cluster), appliedConfigVersion(canary.cluster),
        ...rest.map(async (m) => ({ name: m.name, child: await child(m.cluster), asked: await asked(m), version: await appliedConfigVersion(m.cluster) })),
      ]);
      const commits = await commitsSince(repo, seed);
      const restDone = commits.find((c) => c.subject === 'fleetcache|promote delivery/podinfo to prod/rest: 1.1.0');
      if (restDone !== undefined) return restDone;
      canaryCommit ??= commits.find((c) => c.subject === 'fleetcache|promote delivery/podinfo to prod/canary: 1.1.0');
      for (const o of others) {
        // Before the rest's commit the rest runs 1.0.0, and nobody asked its Flux to hurry.
        assert.equal(o.version, '1.0.0', `${o.name} runs 1.0.0 before its wave`);
        assert.equal(o.child.spec.postBuild?.substitute?.version, '1.0.0', `${o.name}'s Kustomization is at 1.0.0 before its wave`);
        assert.equal(o.asked, askedBefore.get(o.name), `${o.name}'s Kustomization and GitRepository are not asked to reconcile after the canary's commit`);
      }
      if (!canaryReadySeen && !readyAtVersion(canaryChild, '1.1.0')) canaryNotReadyAt = lookedAt;
      if (canaryCommit !== undefined) {
        if (canaryVersion === '1.1.0') canaryOnlySeen = true;
        const now = [canaryChild.metadata.annotations?.[REQUESTED_AT], canarySource.metadata.annotations?.[REQUESTED_AT]];
        const before = askedBefore.get(canary.name)?.split(',');
        if (now.every((at, i) => at !== undefined && at !== before?.[i])) canaryAsked = true;
        if (readyAtVersion(canaryChild, '1.1.0')) canaryReadySeen = true;
      } else {
        assert.equal(canaryVersion, '1.0.0', 'prod-1 runs 1.0.0 before the canary wave\'s commit');
      }
      return undefined;
    }, { timeoutMs: 240_000, pollMs: 250 });

    assert.ok(canaryCommit !== undefined, 'the canary wave was committed before the rest');
    assert.ok(canaryOnlySeen, 'Flux applied 1.1.0 in the canary while the rest ran 1.0.0');
    assert.ok(canaryAsked, 'the canary\'s Kustomization and GitRepository were asked to reconcile now');
    assert.ok(canaryReadySeen, 'the canary was seen Ready at 1.1.0 (Flux\'s status) before the rest\'s commit');

    const done = await eventually('both waves Succeeded and Flux applied 1.1.0 in every prod cluster', async () => {
      const records = ((await readPipeline(management)).status?.promotions ?? []).filter((r) => r.environment === 'prod' && r.revision === '1.1.0');
      const versions = await Promise.all(members.map((m) => appliedConfigVersion(m.cluster)));
      return records.length === 2 && records.every((r) => r.state === 'Succeeded') && versions.every((v) => v === '1.1.0') && records;
    }, 180_000);
    const canaryRecord = done.find((r) => r.wave === 'canary');
    assert.equal(canaryRecord?.commit, canaryCommit.sha);
    assert.equal(done.find((r) => r.wave === 'rest')?.commit, restCommit.sha);
    // The soak counts from Flux's own readiness: the controller's readyAt is no earlier than a look
    // that still saw the canary not Ready (both truncated to the second, as readyAt is), and the
    // rest's commit (whole seconds too) is at or past readyAt + soak. Sound however slow the looks
    // are, unlike comparing when this test happened to see each.
    const readyAt = Date.parse(canaryRecord.readyAt ?? '');
    assert.ok(canaryNotReadyAt !== undefined, 'a look saw the canary not yet Ready at 1.1.0');
    assert.ok(readyAt >= Math.floor(canaryNotReadyAt / 1_000) * 1_000, `canary ready at ${canaryRecord.readyAt ?? '?'}, yet seen not Ready at ${new Date(canaryNotReadyAt).toISOString()}`);
    assert.ok(restCommit.at >= readyAt / 1_000 + SOAK_SECONDS, `rest committed at ${restCommit.at}, canary ready at ${canaryRecord.readyAt ?? '?'}: not soaked ${SOAK_SECONDS} s`);

    // Nothing more to commit once Flux applied everything: one commit per wave, on its own clusters' files.
    await eventually('Flux settled at HEAD in every cluster', () => settledAtHead(all, repo), 120_000);
    assert.deepEqual((await commitsSince(repo, seed)).map((c) => c.subject), [
      'fleetcache|promote delivery/podinfo to prod/rest: 1.1.0',
      'fleetcache|promote delivery/podinfo to prod/canary: 1.1.0',
      'seed|release podinfo 1.1.0 to dev',
    ]);
    for (const m of members) {
      const touched = (await git(repo.bare(FLUX_REPOSITORY), 'log', '--format=%H', `${seed}..main`, '--', `clusters/${m.name}`)).trim().split('\n');
      assert.deepEqual(touched, [m.wave === 'canary' ? canaryCommit.sha : restCommit.sha], `${m.name}'s folder changed once, by its wave's commit`);
      assert.match(await repo.show(FLUX_REPOSITORY, 'main', `clusters/${m.name}/podinfo.yaml`), new RegExp(`^ {6}version: "1\\.1\\.0" # \\{"\\$promotion": "delivery:podinfo:prod/${m.wave}"\\}$`, 'm'));
    }
    const pipeline = await readPipeline(management);
    assert.equal(pipeline.status?.conditions?.find((c) => c.type === 'Ready')?.status, 'True');
    assert.deepEqual(pipeline.status.environments?.map((e) => [e.name, e.ready, e.revision]), [['dev', true, '1.1.0'], ['prod', true, '1.1.0']]);
  });
});
