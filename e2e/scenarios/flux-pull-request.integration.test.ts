// Scenario: a pull-request promotion under real Flux. Every Flux reconcile, the periodic no-op one
// included, starts with Ready=Unknown/Progressing for a moment; with the Kustomizations on a short
// interval that happens every few seconds in every environment. A promotion whose pull request
// waits for its merge must ride through those flickers: one pull request, the same number all
// along, the record Pending (never superseded and restarted); once a person merges it, the
// promotion is Succeeded when Flux runs the revision.
import assert from 'node:assert/strict';
import { after, afterEach, before, describe, it } from 'node:test';
import { APP_NAMESPACE, FLEET_SERVICE_ARGS, PIPELINE_NAMESPACE, readPipeline, type Fleet } from '../fleet.ts';
import type { FluxControllers } from '../flux/controllers.ts';
import { appliedConfigVersion, FLUX_REPOSITORY, fluxPipelineObject, KUSTOMIZATIONS, releaseToDevInGit, setUpFluxFleet } from '../flux/fleet.ts';
import { ProviderStandIn } from '../git/providers.ts';
import { git, GitServer } from '../git/server.ts';
import { eventually, useClusters, type TestCluster } from '../harness/index.ts';
import { startService, type ServiceProcess } from '../service.ts';

/** Every Kustomization reconciles (and so flickers Unknown/Progressing) this often. */
const INTERVAL = '5s';
const TOKEN = { username: 'fleet-bot', password: 'pr-token-not-for-status' };

interface PromotionView {
  readonly environment: string;
  readonly revision: string;
  readonly state: string;
  readonly attempts: number;
  readonly message?: string;
  readonly pullRequest?: { readonly number: number; readonly url: string };
}

async function records(fleet: Fleet): Promise<readonly PromotionView[]> {
  return (await readPipeline(fleet)).status?.promotions ?? [];
}

/** When the child Kustomization's Ready condition last changed: it moves on every reconcile (True → Unknown → True). */
async function readyTransition(cluster: TestCluster): Promise<string | undefined> {
  const res = await cluster.request('GET', `${KUSTOMIZATIONS}/namespaces/${APP_NAMESPACE}/kustomizations/podinfo`);
  return (res.body as { status?: { conditions?: { type: string; lastTransitionTime?: string }[] } }).status?.conditions?.find((c) => c.type === 'Ready')?.lastTransitionTime;
}

describe('scenario: a pull-request promotion under real Flux', () => {
  const env = useClusters(3, { namePrefix: 'flux-pr' });
  let fleet: Fleet;
  let server: GitServer;
  let api: ProviderStandIn;
  let service: ServiceProcess | undefined;
  let flux: FluxControllers[] = [];

  before(async () => {
    const [management, staging, prod] = env.clusters as [TestCluster, TestCluster, TestCluster];
    fleet = { management, staging, prod };
    server = await GitServer.start();
    api = await ProviderStandIn.start({
      kind: 'github',
      project: FLUX_REPOSITORY,
      token: TOKEN.password,
      branchExists: async (b) => (await git(server.bare(FLUX_REPOSITORY), 'for-each-ref', `refs/heads/${b}`)).trim() !== '',
    });
    // The Secret holding the provider token, before the Pipeline that names it.
    for (const [path, body] of [
      ['/api/v1/namespaces', { metadata: { name: PIPELINE_NAMESPACE } }],
      [`/api/v1/namespaces/${PIPELINE_NAMESPACE}/secrets`, { metadata: { name: 'fleet-git' }, stringData: TOKEN }],
    ] as const) {
      const res = await management.request('POST', path, body);
      assert.ok(res.statusCode === 201, `POST ${path} → ${res.statusCode}`);
    }
    const pipeline = (url: string): object => {
      const object = fluxPipelineObject(url) as { spec: { promotion: { git: Record<string, unknown> } } & Record<string, unknown> };
      const gitSpec = { ...object.spec.promotion.git, secretRef: { name: 'fleet-git' }, pullRequest: { provider: 'github', apiUrl: api.apiUrl } };
      return { ...object, spec: { ...object.spec, promotion: { strategy: 'git', git: gitSpec } } };
    };
    flux = await setUpFluxFleet(fleet, server, '1.0.0', { kustomizationInterval: INTERVAL, pipeline });
    service = await startService('flux-pr', management.adminKubeconfig, [...FLEET_SERVICE_ARGS, '--allow-private-git-hosts', '--allow-insecure-git-http']);
    await eventually('every environment is ready at 1.0.0', async () => {
      const envs = (await readPipeline(fleet)).status?.environments ?? [];
      return envs.length === 3 && envs.every((e) => e.ready && e.revision === '1.0.0');
    }, 180_000);
  }, { timeout: 600_000 });

  afterEach((t) => {
    if (!('passed' in t) || t.passed) return;
    for (const f of flux) process.stderr.write(`\n=== Flux in ${f.cluster} after failed test "${t.name}" ===\n${f.logs(40)}\n`);
    process.stderr.write(`\n=== fleetcache service ===\n${service?.logs() ?? ''}\n`);
  });

  after(async () => {
    await service?.stop();
    await Promise.all(flux.map((f) => f.stop()));
    await api.close();
    await server.close();
  });

  it('a pull request waiting for its merge survives Flux\'s periodic reconciles, then completes once Flux runs the merge', async () => {
    await releaseToDevInGit(server, '1.1.0', INTERVAL);
    const opened = await eventually('a pull request for staging is opened and recorded', async () => {
      const r = (await records(fleet)).find((x) => x.environment === 'staging' && x.revision === '1.1.0');
      return r?.state === 'Pending' && r.pullRequest !== undefined && r;
    }, 120_000);
    assert.equal(opened.pullRequest?.number, 1);

    // Wait, on Flux's own evidence, until dev's and staging's children reconciled at least twice
    // more each (every reconcile moves Ready through Unknown/Progressing and back), checking on
    // every look that the promotion is still the same one.
    const seen = new Map<string, Set<string>>([['dev', new Set()], ['staging', new Set()]]);
    const check = async (): Promise<void> => {
      const staging = (await records(fleet)).filter((x) => x.environment === 'staging');
      assert.deepEqual(staging.map((x) => [x.revision, x.state, x.attempts, x.pullRequest?.number]), [['1.1.0', 'Pending', 1, 1]], 'one promotion, never superseded nor restarted');
      assert.equal(api.pulls.length, 1, 'one pull request only');
    };
    await eventually('dev\'s and staging\'s children reconciled twice more while the pull request waits', async () => {
      await check();
      for (const [name, cluster] of [['dev', fleet.management], ['staging', fleet.staging]] as const) {
        const at = await readyTransition(cluster);
        if (at !== undefined) seen.get(name)?.add(at);
      }
      // Three distinct transition times: the one seen first and two reconciles after it.
      return [...seen.values()].every((s) => s.size >= 3);
    }, 60_000);
    await check();
    assert.equal(await appliedConfigVersion(fleet.staging), '1.0.0', 'nothing runs before the merge');

    // A person merges it.
    const head = api.pulls[0]?.head ?? '';
    await git(server.bare(FLUX_REPOSITORY), 'update-ref', 'refs/heads/main', `refs/heads/${head}`);
    api.setState(1, 'merged');
    const done = await eventually('the staging promotion is Succeeded', async () => {
      const r = (await records(fleet)).find((x) => x.environment === 'staging' && x.revision === '1.1.0');
      return r?.state === 'Succeeded' && r;
    }, 90_000);
    assert.match(done.message ?? '', /pull request #1 merged/);
    assert.equal(await appliedConfigVersion(fleet.staging), '1.1.0', 'Succeeded once Flux runs the revision');
    const staging = (await records(fleet)).filter((x) => x.environment === 'staging');
    assert.equal(staging.length, 1, 'still one staging promotion');
    assert.ok(!(await readPipeline(fleet)).status?.promotions?.some((r) => r.message?.startsWith('superseded') === true));
  });
});
