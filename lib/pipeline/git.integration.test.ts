// The Pipeline controller promoting through Git on a real apiserver: dev and staging are two
// namespaces of one cluster; staging's HelmRelease is applied from a Git repository (git
// http-backend on loopback) by a stand-in for Flux's kustomize-controller, and marked Ready by the
// Flux stand-in. A promotion is a commit (or a pull request) in that repository.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { helmReleaseCrd, kustomizationCrd, openCrd } from '../../fixtures/crds/index.ts';
import { eventually, useClusters, type TestCluster } from '../../e2e/harness/index.ts';
import { startFlux } from '../../e2e/fleet.ts';
import { ProviderStandIn } from '../../e2e/git/providers.ts';
import { git, GitServer } from '../../e2e/git/server.ts';
import { startGitSync } from '../../e2e/git/sync.ts';
import { CompositeProvider, LocalProvider } from '../cluster/index.ts';
import { PipelineController, pipelineCrd, type Pipeline, type PipelineControllerOptions, type PromotionRecord } from './index.ts';
import type { Registry } from '../registry/index.ts';
import { registryWithKeeper } from '../registry/testing.ts';
import { ensureNamespace, must } from '../../fixtures/support/index.ts';

const NS = 'team-git';
const HR = '/apis/helm.toolkit.fluxcd.io/v2';
const PIPELINES = `/apis/fleetcache.dev/v1alpha1/namespaces/${NS}/pipelines`;
const AUTH = { username: 'fleet-bot', password: 'git-token-not-for-status' };

function releaseFile(name: string, env: string, version: string): string {
  return `apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: ${name}\nspec:\n  chart:\n    spec:\n      chart: ${name}\n      version: ${version} # {"$promotion": "${NS}:${name}:${env}"}\n`;
}

/**
 * A HelmRelease of staging marked only with Flux's `$imagepolicy` setters: the chart version and
 * the image of the ImagePolicy `img-stable` (its tag, and the whole reference), and the tag of two
 * other policies, `img-staging` (the name the convention would pick) and `img-stable-canary`
 * (whose name starts with the named one).
 */
function imageFile(version: string, other = '1.0.0'): string {
  return [
    'apiVersion: helm.toolkit.fluxcd.io/v2',
    'kind: HelmRelease',
    'metadata:',
    '  name: img',
    'spec:',
    '  chart:',
    '    spec:',
    '      chart: img',
    `      version: ${version} # {"$imagepolicy": "${NS}:img-stable:tag"}`,
    '  values:',
    `    image: ghcr.io/org/img:${version} # {"$imagepolicy": "${NS}:img-stable"}`,
    '    sidecar:',
    `      tag: ${other} # {"$imagepolicy": "${NS}:img-staging:tag"}`,
    '    canary:',
    `      tag: ${other} # {"$imagepolicy": "${NS}:img-stable-canary:tag"}`,
    '',
  ].join('\n');
}

async function release(cluster: TestCluster, namespace: string, name: string, version: string): Promise<void> {
  await ensureNamespace(cluster, namespace);
  await must(cluster, 'POST', `${HR}/namespaces/${namespace}/helmreleases`, { apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease', metadata: { name, namespace }, spec: { chart: { spec: { chart: name, version } } } });
}

async function setVersion(cluster: TestCluster, namespace: string, name: string, version: string): Promise<void> {
  for (;;) {
    const hr = (await must(cluster, 'GET', `${HR}/namespaces/${namespace}/helmreleases/${name}`)) as { spec: { chart: { spec: { version: string } } } };
    hr.spec.chart.spec.version = version;
    const res = await cluster.request('PUT', `${HR}/namespaces/${namespace}/helmreleases/${name}`, hr);
    if (res.statusCode === 200) return;
    assert.equal(res.statusCode, 409);
  }
}

async function pipelineOf(cluster: TestCluster, name: string): Promise<Pipeline> {
  return (await must(cluster, 'GET', `${PIPELINES}/${name}`)) as Pipeline;
}

/** What the service's approval endpoint writes once the approver's right is checked: an approval in status. */
async function approve(cluster: TestCluster, name: string, environment: string, revision: string): Promise<void> {
  for (;;) {
    const p = await pipelineOf(cluster, name);
    const approvals = [...(p.status?.approvals ?? []), { environment, revision, approver: { username: 'alice' }, approvedAt: new Date().toISOString().replace(/\.\d+Z$/, 'Z') }];
    const res = await cluster.request('PUT', `${PIPELINES}/${name}/status`, { ...p, status: { ...p.status, approvals } });
    if (res.statusCode === 200) return;
    assert.equal(res.statusCode, 409, JSON.stringify(res.body));
  }
}

async function eventsOf(cluster: TestCluster, name: string): Promise<{ reason: string; message: string }[]> {
  const body = (await must(cluster, 'GET', `/api/v1/namespaces/${NS}/events?fieldSelector=involvedObject.name%3D${name}`)) as { items: { reason: string; message: string }[] };
  return body.items;
}

const KS = '/apis/kustomize.toolkit.fluxcd.io/v1';
const GITREPOS = '/apis/source.toolkit.fluxcd.io/v1';
const gitRepositoryCrd = openCrd({ group: 'source.toolkit.fluxcd.io', version: 'v1', kind: 'GitRepository', plural: 'gitrepositories' });
const REQUESTED_AT = 'reconcile.fluxcd.io/requestedAt';

/** The child Kustomization of one environment, as the parent applies it from Git: the version marked. */
function childFile(name: string, env: string, version: string): string {
  return `apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: ${name}\nspec:\n  sourceRef:\n    kind: GitRepository\n    name: fleet\n  path: ./apps/${name}/base\n  postBuild:\n    substitute:\n      version: "${version}" # {"$promotion": "${NS}:${name}:${env}"}\n`;
}

interface Kustomization { metadata: { generation: number; annotations?: Record<string, string> }; spec: { postBuild: { substitute: { version: string } } }; status?: unknown }

/** Plays kustomize-controller: the child at `version` (applied by its parent), reconciled and Ready. */
async function applyChild(cluster: TestCluster, namespace: string, name: string, version: string): Promise<void> {
  const path = `${KS}/namespaces/${namespace}/kustomizations/${name}`;
  for (const sub of ['', '/status']) {
    for (;;) {
      const ks = (await must(cluster, 'GET', path)) as Kustomization;
      if (sub === '') ks.spec.postBuild.substitute.version = version;
      else ks.status = { observedGeneration: ks.metadata.generation, lastAppliedRevision: `main@sha1:${'0'.repeat(40)}`, conditions: [{ type: 'Ready', status: 'True', reason: 'ReconciliationSucceeded', message: 'applied', lastTransitionTime: '2026-01-01T00:00:00Z' }] };
      const res = await cluster.request('PUT', `${path}${sub}`, ks);
      if (res.statusCode === 200) break;
      assert.equal(res.statusCode, 409, JSON.stringify(res.body));
    }
  }
}

function pipeline(name: string, git: Record<string, unknown>, approval = false): object {
  return {
    apiVersion: 'fleetcache.dev/v1alpha1',
    kind: 'Pipeline',
    metadata: { name, namespace: NS },
    spec: {
      appRef: { apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease', name },
      environments: [
        { name: 'dev', targets: [{ namespace: `${name}-dev` }] },
        { name: 'staging', targets: [{ namespace: `${name}-staging` }], ...(approval ? { requireApproval: true } : {}) },
      ],
      promotion: { strategy: 'git', git },
    },
  };
}

describe('PipelineController: the git strategy on a real apiserver', () => {
  const env = useClusters(1, { namePrefix: 'gitops' });
  let mgmt: TestCluster;
  let server: GitServer;
  let api: ProviderStandIn;
  const stops: (() => Promise<void>)[] = [];

  before(async () => {
    [mgmt] = env.clusters as [TestCluster];
    await mgmt.installCRDs([pipelineCrd, helmReleaseCrd, kustomizationCrd, gitRepositoryCrd]);
    await must(mgmt, 'POST', '/api/v1/namespaces', { metadata: { name: NS } });
    await must(mgmt, 'POST', `/api/v1/namespaces/${NS}/secrets`, { metadata: { name: 'fleet-git' }, stringData: AUTH });
    server = await GitServer.start({ auth: AUTH });
    await server.seed('org/fleet', { 'apps/shop/staging.yaml': releaseFile('shop', 'staging', '1.0.0'), 'apps/cart/staging.yaml': releaseFile('cart', 'staging', '1.0.0'), 'apps/web/staging.yaml': childFile('web', 'staging', '1.0.0'), 'apps/gate/staging.yaml': releaseFile('gate', 'staging', '1.0.0'), 'apps/gate/prod.yaml': releaseFile('gate', 'prod', '1.0.0'), 'apps/img/staging.yaml': imageFile('1.0.0') });
    api = await ProviderStandIn.start({ kind: 'github', project: 'org/fleet', token: AUTH.password, branchExists: async (b) => (await git(server.bare('org/fleet'), 'for-each-ref', `refs/heads/${b}`)).trim() !== '' });
    stops.push(await startFlux([mgmt]));
    stops.push(startGitSync(server, 'org/fleet', 'main', [
      { file: 'apps/shop/staging.yaml', cluster: mgmt, namespace: 'shop-staging', name: 'shop' },
      { file: 'apps/cart/staging.yaml', cluster: mgmt, namespace: 'cart-staging', name: 'cart' },
      { file: 'apps/gate/staging.yaml', cluster: mgmt, namespace: 'gate-staging', name: 'gate' },
      { file: 'apps/gate/prod.yaml', cluster: mgmt, namespace: 'gate-prod', name: 'gate' },
      { file: 'apps/img/staging.yaml', cluster: mgmt, namespace: 'img-staging', name: 'img' },
    ]));
  });

  after(async () => {
    for (const stop of stops.reverse()) await stop();
    await api.close();
    await server.close();
  });

  /** Runs a controller on a registry of its own; `stop` ends both, `registry` is read for the queue's stats. */
  function startController(extra: Partial<PipelineControllerOptions> = {}): { readonly stop: () => Promise<void>; readonly registry: Registry } {
    const kubeConfig = mgmt.kubeConfig();
    const registry = registryWithKeeper({ provider: new CompositeProvider({ byKind: { local: new LocalProvider({ kubeConfig }) } }) });
    // team-git's Pipelines reach targets in other namespaces of mgmt: the opt-out from confinement.
    const controller = new PipelineController({ registry, allowCrossNamespaceTargets: true, git: { allowHttp: true, allowPrivateNetworks: true }, gitPollIntervalMs: 300, ...extra });
    const stopper = new AbortController();
    const done = controller.run(stopper.signal);
    const stop = async (): Promise<void> => {
      stopper.abort();
      await done;
      await registry.close();
    };
    return { stop, registry };
  }

  it('promotes by pushing a commit; status and the Event name the commit; Flux applies it from Git', async () => {
    await release(mgmt, 'shop-dev', 'shop', '1.0.0');
    await release(mgmt, 'shop-staging', 'shop', '1.0.0');
    const { stop } = startController();
    try {
      await must(mgmt, 'POST', PIPELINES, pipeline('shop', { url: server.url('org/fleet'), branch: 'main', path: 'apps/shop', secretRef: { name: 'fleet-git' } }));
      await eventually('both environments ready at 1.0.0', async () => (await pipelineOf(mgmt, 'shop')).status?.environments?.every((e) => e.ready && e.revision === '1.0.0') === true, 60_000);
      await setVersion(mgmt, 'shop-dev', 'shop', '1.1.0');
      const done = await eventually('staging runs 1.1.0, applied from Git', async () => {
        const p = await pipelineOf(mgmt, 'shop');
        return p.status?.environments?.[1]?.revision === '1.1.0' && p.status.environments[1].ready && p;
      }, 60_000);
      const head = (await git(server.bare('org/fleet'), 'rev-parse', 'main')).trim();
      const records = done.status?.promotions ?? [];
      assert.equal(records.length, 1);
      const record = records[0];
      assert.ok(record !== undefined);
      assert.equal(record.state, 'Succeeded');
      assert.equal(record.strategy, 'git');
      assert.equal(record.commit, head);
      assert.match(record.message ?? '', new RegExp(`committed ${head} to main`));
      assert.match(await server.show('org/fleet', 'main', 'apps/shop/staging.yaml'), /version: 1\.1\.0 # /);
      assert.equal(await server.show('org/fleet', 'main', 'apps/cart/staging.yaml'), releaseFile('cart', 'staging', '1.0.0'), 'another pipeline\'s file is untouched');
      const events = await eventually('the Promoted event', async () => {
        const e = (await eventsOf(mgmt, 'shop')).filter((x) => x.reason === 'Promoted');
        return e.length > 0 && e;
      }, 10_000);
      assert.match(events[0]?.message ?? '', new RegExp(head));
      assert.ok(!JSON.stringify(done.status).includes(AUTH.password) && !JSON.stringify(events).includes(AUTH.password));
      assert.equal(Number((await git(server.bare('org/fleet'), 'rev-list', '--count', 'main')).trim()), 2, 'one commit: seed + promotion');
    } finally {
      await mgmt.request('DELETE', `${PIPELINES}/shop`);
      await stop();
    }
  });

  it('writes the setters of the ImagePolicy the environment names (imagePolicy), and no other policy\'s, in one commit', async () => {
    await release(mgmt, 'img-dev', 'img', '1.0.0');
    await release(mgmt, 'img-staging', 'img', '1.0.0');
    const { stop } = startController();
    try {
      const spec = pipeline('img', { url: server.url('org/fleet'), path: 'apps/img', secretRef: { name: 'fleet-git' } }) as { spec: { environments: Record<string, unknown>[] } };
      const staging = spec.spec.environments[1];
      assert.ok(staging !== undefined);
      staging.imagePolicy = 'img-stable';
      await must(mgmt, 'POST', PIPELINES, spec);
      await eventually('both environments ready at 1.0.0', async () => (await pipelineOf(mgmt, 'img')).status?.environments?.every((e) => e.ready && e.revision === '1.0.0') === true, 60_000);
      const seeded = (await git(server.bare('org/fleet'), 'rev-parse', 'main')).trim();
      await setVersion(mgmt, 'img-dev', 'img', '1.1.0');
      const done = await eventually('staging runs 1.1.0, applied from the tag setter in Git', async () => {
        const p = await pipelineOf(mgmt, 'img');
        return p.status?.environments?.[1]?.revision === '1.1.0' && p.status.environments[1].ready && p.status.promotions?.[0]?.state === 'Succeeded' && p;
      }, 60_000);
      const head = (await git(server.bare('org/fleet'), 'rev-parse', 'main')).trim();
      assert.equal(done.status?.promotions?.[0]?.commit, head);
      assert.equal(await server.show('org/fleet', 'main', 'apps/img/staging.yaml'), imageFile('1.1.0'), 'img-stable\'s tag and whole image carry 1.1.0; img-staging\'s and img-stable-canary\'s lines are as they were');
      assert.equal((await git(server.bare('org/fleet'), 'rev-list', '--count', `${seeded}..main`)).trim(), '1', 'one commit');
      assert.equal((await git(server.bare('org/fleet'), 'diff', '--name-only', seeded, 'main')).trim(), 'apps/img/staging.yaml');
    } finally {
      await mgmt.request('DELETE', `${PIPELINES}/img`);
      await stop();
    }
  });

  it('records each refusal of hostile repository content in status as a typed error naming the limit, never the content or the token', async () => {
    await server.seed('org/big', { 'apps/big/staging.yaml': releaseFile('big', 'staging', '1.0.0') });
    await server.commitZeros('org/big', 'data/zeros.bin', 4 * 1_048_576, 'a large file');
    await server.seed('org/links', { 'apps/lnk/staging.yaml': releaseFile('lnk', 'staging', '1.0.0') });
    await server.commitSymlink('org/links', 'apps/out', '/etc', 'a link out of the clone');
    for (const name of ['big', 'lnk']) {
      await release(mgmt, `${name}-dev`, name, '1.0.0');
      await release(mgmt, `${name}-staging`, name, '1.0.0');
    }
    const { stop } = startController({ git: { allowHttp: true, allowPrivateNetworks: true, maxRepositoryBytes: 2 * 1_048_576 } });
    try {
      await must(mgmt, 'POST', PIPELINES, pipeline('big', { url: server.url('org/big'), path: 'apps/big', secretRef: { name: 'fleet-git' } }));
      await must(mgmt, 'POST', PIPELINES, pipeline('lnk', { url: server.url('org/links'), path: 'apps/out/ssl', secretRef: { name: 'fleet-git' } }));
      for (const name of ['big', 'lnk']) {
        await eventually(`${name}: both environments ready at 1.0.0`, async () => (await pipelineOf(mgmt, name)).status?.environments?.every((e) => e.ready && e.revision === '1.0.0') === true, 60_000);
        await setVersion(mgmt, `${name}-dev`, name, '1.1.0');
      }
      const expected = {
        big: /^git: RepositoryTooLarge: the branch's files add up to more than 2097152 bytes \(maxRepositoryBytes\)$/,
        lnk: /^git: PathRefused: the path "apps\/out\/ssl" goes through a symbolic link in the repository \("apps\/out"\); links are never followed$/,
      };
      for (const [name, message] of Object.entries(expected)) {
        const failed = await eventually(`${name}: the promotion failed`, async () => {
          const p = await pipelineOf(mgmt, name);
          const r = p.status?.promotions?.[0];
          return r?.state === 'Failed' && { p, r };
        }, 60_000);
        assert.match(failed.r.message ?? '', message);
        const text = JSON.stringify(failed.p.status);
        assert.ok(!text.includes(AUTH.password) && !text.includes('/etc'), text);
      }
      assert.equal(await server.show('org/links', 'main', 'apps/lnk/staging.yaml'), releaseFile('lnk', 'staging', '1.0.0'));
    } finally {
      for (const name of ['big', 'lnk']) await mgmt.request('DELETE', `${PIPELINES}/${name}`);
      await stop();
    }
  });

  it('with Flux Kustomizations: Committed until staging runs the revision, then Succeeded; Flux asked to reconcile now', async () => {
    for (const env of ['dev', 'staging']) {
      const namespace = `web-${env}`;
      await must(mgmt, 'POST', '/api/v1/namespaces', { metadata: { name: namespace } });
      await must(mgmt, 'POST', `${KS}/namespaces/${namespace}/kustomizations`, { apiVersion: 'kustomize.toolkit.fluxcd.io/v1', kind: 'Kustomization', metadata: { name: 'web', namespace }, spec: { sourceRef: { kind: 'GitRepository', name: 'fleet' }, path: './apps/web/base', postBuild: { substitute: { version: '1.0.0' } } } });
      await must(mgmt, 'POST', `${GITREPOS}/namespaces/${namespace}/gitrepositories`, { apiVersion: 'source.toolkit.fluxcd.io/v1', kind: 'GitRepository', metadata: { name: 'fleet', namespace }, spec: { url: server.url('org/fleet'), ref: { branch: 'main' } } });
      await applyChild(mgmt, namespace, 'web', '1.0.0');
    }
    const { stop } = startController();
    try {
      await must(mgmt, 'POST', PIPELINES, {
        apiVersion: 'fleetcache.dev/v1alpha1',
        kind: 'Pipeline',
        metadata: { name: 'web', namespace: NS },
        spec: {
          appRef: { apiVersion: 'kustomize.toolkit.fluxcd.io/v1', kind: 'Kustomization', name: 'web' },
          environments: [{ name: 'dev', targets: [{ namespace: 'web-dev' }] }, { name: 'staging', targets: [{ namespace: 'web-staging' }] }],
          promotion: { strategy: 'git', git: { url: server.url('org/fleet'), path: 'apps/web', secretRef: { name: 'fleet-git' } } },
          revisionPath: '/spec/postBuild/substitute/version',
        },
      });
      await eventually('both environments ready at 1.0.0', async () => (await pipelineOf(mgmt, 'web')).status?.environments?.every((e) => e.ready && e.revision === '1.0.0') === true, 60_000);
      await applyChild(mgmt, 'web-dev', 'web', '1.1.0');

      const committed = await eventually('Committed, waiting for staging to run it', async () => {
        const p = await pipelineOf(mgmt, 'web');
        return p.status?.promotions?.[0]?.state === 'Committed' && p;
      }, 60_000);
      const head = (await git(server.bare('org/fleet'), 'rev-parse', 'main')).trim();
      const status = committed.status;
      assert.ok(status !== undefined);
      assert.equal(status.promotions?.[0]?.commit, head);
      assert.equal(status.conditions?.find((c) => c.type === 'Promoting')?.reason, 'WaitingForApply');
      assert.deepEqual(status.committed?.map((c) => [c.environment, c.revision, c.commit]), [['staging', '1.1.0', head]], 'what was committed is recorded');
      assert.match(await server.show('org/fleet', 'main', 'apps/web/staging.yaml'), /version: "1\.1\.0" # /);
      // Flux is asked to fetch and apply now: the staging Kustomization and its GitRepository.
      for (const path of [`${KS}/namespaces/web-staging/kustomizations/web`, `${GITREPOS}/namespaces/web-staging/gitrepositories/fleet`]) {
        const annotated = await eventually(`${path} annotated`, async () => {
          const at = ((await must(mgmt, 'GET', path)) as Kustomization).metadata.annotations?.[REQUESTED_AT];
          return at !== undefined && at;
        }, 10_000);
        assert.ok(!Number.isNaN(Date.parse(annotated)), `an RFC 3339 time: ${annotated}`);
      }
      assert.equal(((await must(mgmt, 'GET', `${KS}/namespaces/web-dev/kustomizations/web`)) as Kustomization).metadata.annotations?.[REQUESTED_AT], undefined, 'only the promoted environment');
      await eventually('the Committed event', async () => (await eventsOf(mgmt, 'web')).some((e) => e.reason === 'Committed' && e.message.includes(head)), 10_000);
      assert.ok(!(await eventsOf(mgmt, 'web')).some((e) => e.reason === 'Promoted'), 'not promoted before staging runs it');

      await applyChild(mgmt, 'web-staging', 'web', '1.1.0'); // the parent applies the commit, the child reconciles
      const done = await eventually('Succeeded once staging runs 1.1.0', async () => {
        const p = await pipelineOf(mgmt, 'web');
        return p.status?.promotions?.[0]?.state === 'Succeeded' && p;
      }, 60_000);
      assert.match(done.status?.promotions?.[0]?.message ?? '', new RegExp(`committed ${head} to main; staging runs 1\\.1\\.0`));
      await eventually('the Promoted event', async () => (await eventsOf(mgmt, 'web')).some((e) => e.reason === 'Promoted' && e.message.includes(head)), 10_000);
      assert.equal((await git(server.bare('org/fleet'), 'log', '--format=%H', 'main', '--', 'apps/web/staging.yaml')).trim().split('\n').length, 2, 'one commit: seed + promotion');
    } finally {
      await mgmt.request('DELETE', `${PIPELINES}/web`);
      await stop();
    }
  });

  it('waits for approval, then opens a pull request and counts the promotion done only once it is merged', async () => {
    await release(mgmt, 'cart-dev', 'cart', '1.0.0');
    await release(mgmt, 'cart-staging', 'cart', '1.0.0');
    const { stop, registry } = startController();
    try {
      await must(mgmt, 'POST', PIPELINES, pipeline('cart', { url: server.url('org/fleet'), path: 'apps/cart', secretRef: { name: 'fleet-git' }, pullRequest: { provider: 'github', apiUrl: api.apiUrl } }, true));
      await eventually('both environments ready at 1.0.0', async () => (await pipelineOf(mgmt, 'cart')).status?.environments?.every((e) => e.ready && e.revision === '1.0.0') === true, 60_000);
      await setVersion(mgmt, 'cart-dev', 'cart', '2.0.0');
      const waiting = await eventually('the promotion awaits approval', async () => {
        const p = await pipelineOf(mgmt, 'cart');
        return p.status?.promotions?.[0]?.state === 'AwaitingApproval' && p;
      }, 60_000);
      assert.equal(waiting.status?.conditions?.find((c) => c.type === 'Promoting')?.reason, 'AwaitingApproval');
      assert.equal(api.pulls.length, 0, 'nothing opened before the approval');

      // An approval of another revision does not open the gate: once the controller has taken the
      // change of status off its queue and reconciled it, still nothing is opened.
      const addsBefore = registry.queue.stats().adds;
      await approve(mgmt, 'cart', 'staging', '1.9.9');
      await eventually('the approval is reconciled', () => {
        const queue = registry.queue.stats();
        return queue.adds > addsBefore && queue.depth === 0 && queue.processing === 0;
      }, 30_000);
      assert.equal(api.pulls.length, 0);
      await approve(mgmt, 'cart', 'staging', '2.0.0');

      const opened = await eventually('a pull request is opened and recorded', async () => {
        const p = await pipelineOf(mgmt, 'cart');
        const r = p.status?.promotions?.[0];
        return r?.state === 'Pending' && r.pullRequest !== undefined && r;
      }, 60_000);
      assert.deepEqual(opened.pullRequest, { number: 1, url: 'https://github.example/org/fleet/pull/1' });
      assert.equal(opened.approved, true);
      assert.equal(opened.approvedBy?.username, 'alice');
      await eventually('the PullRequestOpened event', async () => (await eventsOf(mgmt, 'cart')).some((e) => e.reason === 'PullRequestOpened' && e.message.includes('pull/1')), 10_000);
      const before = await pipelineOf(mgmt, 'cart');
      const polls = api.requests.length;
      // Two more polls: the second comes once the reconcile of the first (and any write of it) is over.
      await eventually('the request is polled twice more', () => api.requests.length >= polls + 2, 10_000);
      assert.equal(api.pulls.length, 1, 'polling finds the request, never opens a second');
      const after = await pipelineOf(mgmt, 'cart');
      assert.equal(after.status?.promotions?.[0]?.state, 'Pending', 'not done before the merge');
      assert.equal(after.status.promotions[0].attempts, 1);
      assert.equal(after.metadata?.resourceVersion, before.metadata?.resourceVersion, 'polling an open request does not rewrite status');

      // A person merges it.
      await git(server.bare('org/fleet'), 'update-ref', 'refs/heads/main', `refs/heads/${api.pulls[0]?.head ?? ''}`);
      api.setState(1, 'merged');
      const done = await eventually('the merge completes the promotion and Flux applies it', async () => {
        const p = await pipelineOf(mgmt, 'cart');
        return p.status?.promotions?.[0]?.state === 'Succeeded' && p.status.environments?.[1]?.revision === '2.0.0' && p;
      }, 60_000);
      assert.match(done.status?.promotions?.[0]?.message ?? '', /pull request #1 merged/);
    } finally {
      await mgmt.request('DELETE', `${PIPELINES}/cart`);
      await stop();
    }
  });

  it('with a commit-status gate: Committed until the commit\'s statuses pass, only then Succeeded and prod promoted; a failing status fails it, naming the context', async () => {
    for (const env of ['dev', 'staging', 'prod']) await release(mgmt, `gate-${env}`, 'gate', '1.0.0');
    const { stop } = startController({ commitStatusPollIntervalMs: 300 });
    const record = async (environment: string, revision: string): Promise<PromotionRecord | undefined> => (await pipelineOf(mgmt, 'gate')).status?.promotions?.findLast((r) => r.environment === environment && r.revision === revision);
    try {
      await must(mgmt, 'POST', PIPELINES, {
        apiVersion: 'fleetcache.dev/v1alpha1',
        kind: 'Pipeline',
        metadata: { name: 'gate', namespace: NS },
        spec: {
          appRef: { apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease', name: 'gate' },
          environments: [
            { name: 'dev', targets: [{ namespace: 'gate-dev' }] },
            { name: 'staging', targets: [{ namespace: 'gate-staging' }], commitStatuses: { contexts: ['ci/build', 'e2e'], timeout: '10m', provider: 'github', apiUrl: api.apiUrl } },
            { name: 'prod', targets: [{ namespace: 'gate-prod' }] },
          ],
          promotion: { strategy: 'git', git: { url: server.url('org/fleet'), path: 'apps/gate', secretRef: { name: 'fleet-git' } } },
        },
      });
      await eventually('every environment ready at 1.0.0', async () => (await pipelineOf(mgmt, 'gate')).status?.environments?.every((e) => e.ready && e.revision === '1.0.0') === true, 60_000);

      // 2.0.0: committed for staging and applied there; its statuses are pending, so it waits.
      await setVersion(mgmt, 'gate-dev', 'gate', '2.0.0');
      const pending = await eventually('staging runs 2.0.0, the promotion waits for ci/build and e2e', async () => {
        const p = await pipelineOf(mgmt, 'gate');
        const r = p.status?.promotions?.find((x) => x.environment === 'staging' && x.revision === '2.0.0');
        return p.status?.environments?.[1]?.revision === '2.0.0' && r?.state === 'Committed' && r.commitStatuses?.message.includes('"e2e" not reported') === true && r;
      }, 60_000);
      const commit = pending.commit ?? '';
      assert.equal(commit, (await git(server.bare('org/fleet'), 'rev-parse', 'main')).trim());
      assert.equal(pending.commitStatuses?.state, 'Pending');
      api.reportStatus(commit, { context: 'ci/build', state: 'pending', description: 'building\u001b[2J' });
      api.reportStatus(commit, { context: 'e2e', kind: 'check-run', state: 'in_progress' });
      await eventually('the pending statuses are read', async () => (await record('staging', '2.0.0'))?.commitStatuses?.message === 'waiting for commit statuses: "ci/build" pending, "e2e" in_progress (0 of 2 passed)', 30_000);
      const reads = api.requests.filter((r) => r.path.includes(commit)).length;
      await eventually('read again on the poll interval', () => api.requests.filter((r) => r.path.includes(commit)).length >= reads + 4, 10_000);
      assert.equal((await record('staging', '2.0.0'))?.state, 'Committed', 'not done while statuses are pending');
      assert.equal(await record('prod', '2.0.0'), undefined, 'prod does not take 2.0.0 before staging passed its checks');
      for (const r of api.requests.filter((x) => x.path.includes(commit))) assert.equal(r.headers.authorization, `Bearer ${AUTH.password}`);

      api.reportStatus(commit, { context: 'ci/build', state: 'success' });
      api.reportStatus(commit, { context: 'e2e', kind: 'check-run', state: 'completed', conclusion: 'success' });
      const passed = await eventually('staging Succeeded once its statuses pass', async () => {
        const r = await record('staging', '2.0.0');
        return r?.state === 'Succeeded' && r;
      }, 30_000);
      assert.match(passed.message ?? '', /staging runs 2\.0\.0; commit statuses passed: "ci\/build", "e2e"$/);
      assert.equal(passed.commitStatuses?.state, 'Passed');
      await eventually('then prod is promoted and runs 2.0.0', async () => (await record('prod', '2.0.0'))?.state === 'Succeeded', 60_000);
      assert.match(await server.show('org/fleet', 'main', 'apps/gate/prod.yaml'), /version: 2\.0\.0 #/);

      // 3.0.0: e2e fails on its commit: Failed, naming e2e; prod stays at 2.0.0.
      await setVersion(mgmt, 'gate-dev', 'gate', '3.0.0');
      const next = await eventually('3.0.0 committed for staging', async () => {
        const r = await record('staging', '3.0.0');
        return r?.state === 'Committed' && r.commit !== undefined && r;
      }, 60_000);
      api.reportStatus(next.commit ?? '', { context: 'ci/build', state: 'success' });
      api.reportStatus(next.commit ?? '', { context: 'e2e', kind: 'check-run', state: 'completed', conclusion: 'failure' });
      const failed = await eventually('staging Failed on the e2e failure', async () => {
        const r = await record('staging', '3.0.0');
        return r?.state === 'Failed' && r;
      }, 30_000);
      assert.equal(failed.message, `commit ${(next.commit ?? '').slice(0, 12)} was pushed, but commit status "e2e" is failure`);
      assert.deepEqual(failed.commitStatuses, { state: 'Failed', message: 'commit status "e2e" is failure' });
      await eventually('the CommitStatusFailed event', async () => (await eventsOf(mgmt, 'gate')).some((e) => e.reason === 'CommitStatusFailed' && e.message.includes('"e2e" is failure')), 10_000);
      await eventually('staging runs 3.0.0 (Git has it)', async () => (await pipelineOf(mgmt, 'gate')).status?.environments?.[1]?.revision === '3.0.0', 60_000);
      await new Promise((resolve) => setTimeout(resolve, 2_000)); // reconciles of staging at 3.0.0 (ready), each a chance to promote
      assert.equal(await record('prod', '3.0.0'), undefined, 'a revision that failed its checks goes no further');
      assert.match(await server.show('org/fleet', 'main', 'apps/gate/prod.yaml'), /version: 2\.0\.0 #/);
      const status = JSON.stringify((await pipelineOf(mgmt, 'gate')).status);
      assert.ok(!status.includes(AUTH.password), 'the token is never in status');
      assert.ok(!status.includes('\u001b'), 'a CI description is never echoed');
    } finally {
      await mgmt.request('DELETE', `${PIPELINES}/gate`);
      await stop();
    }
  });
});
