// Scenario: a pull-request promotion under real Flux. Every Flux reconcile, the periodic no-op one
// included, starts with Ready=Unknown/Progressing for a moment; with the Kustomizations on a short
// interval that happens every few seconds in every environment. A promotion whose pull request
// waits for its merge must ride through those flickers: one pull request, the same number all
// along, the record Pending (never superseded and restarted); once a person merges it, the
// promotion is Succeeded when Flux runs the revision.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { APP_NAMESPACE, PIPELINE_NAMESPACE, readPipeline, type Fleet } from '../fleet.ts';
import { appliedConfigVersion, FLUX_REPOSITORY, fluxPipelineObject, KUSTOMIZATIONS, releaseToDevInGit } from '../flux/fleet.ts';
import { useFluxFleet } from '../flux/scenario.ts';
import { ProviderStandIn } from '../git/providers.ts';
import { git } from '../git/server.ts';
import { eventually, type TestCluster } from '../harness/index.ts';
import { ensureNamespace, putSecret } from '../../fixtures/support/index.ts';

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
  let api: ProviderStandIn | undefined;
  const github = (): ProviderStandIn => {
    assert.ok(api !== undefined, 'the provider stand-in is started by prepare');
    return api;
  };
  const scenario = useFluxFleet('flux-pr', {
    fleet: {
      kustomizationInterval: INTERVAL,
      pipeline: (url) => {
        const object = fluxPipelineObject(url) as { spec: { promotion: { git: Record<string, unknown> } } & Record<string, unknown> };
        const gitSpec = { ...object.spec.promotion.git, secretRef: { name: 'fleet-git' }, pullRequest: { provider: 'github', apiUrl: github().apiUrl } };
        return { ...object, spec: { ...object.spec, promotion: { strategy: 'git', git: gitSpec } } };
      },
    },
    // The provider's API, and the Secret holding its token, before the Pipeline that names them.
    prepare: async ({ fleet, server }) => {
      api = await ProviderStandIn.start({
        kind: 'github',
        project: FLUX_REPOSITORY,
        token: TOKEN.password,
        branchExists: async (b) => (await git(server.bare(FLUX_REPOSITORY), 'for-each-ref', `refs/heads/${b}`)).trim() !== '',
      });
      await ensureNamespace(fleet.management, PIPELINE_NAMESPACE);
      await putSecret(fleet.management, PIPELINE_NAMESPACE, 'fleet-git', { stringData: TOKEN });
    },
  });
  after(async () => { await api?.close(); });

  it('a pull request waiting for its merge survives Flux\'s periodic reconciles, then completes once Flux runs the merge', async () => {
    const { fleet, server } = scenario;
    const api = github();
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
