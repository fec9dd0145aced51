import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ProviderStandIn } from '../../e2e/git/providers.ts';
import { git, GitServer } from '../../e2e/git/server.ts';
import { GitOpsError } from './errors.ts';
import { GitPromoter, pullRequestBranch, type GitPromotionRequest } from './promote.ts';

const RELEASE = 'apps/prod/release.yaml';
const SEED = { [RELEASE]: 'spec:\n  chart:\n    spec:\n      version: 1.0.0 # {"$promotion": "delivery:podinfo:prod"}\n' };
const TOKEN = 'glpat-or-ghp-token-value';
const marker = { namespace: 'delivery', pipeline: 'podinfo', environment: 'prod' };

for (const kind of ['github', 'gitlab'] as const) {
  describe(`pull requests through the ${kind} API`, () => {
    let server: GitServer;
    let api: ProviderStandIn;
    /** Runs once inside the next create call: another writer opening the same request first. */
    let race: ((branch: string) => void) | undefined;
    const promoter = new GitPromoter({ allowHttp: true, allowPrivateNetworks: true });
    const project = kind === 'github' ? 'fleet-org/fleet' : 'platform/delivery/fleet';
    const request = (revision: string): GitPromotionRequest => ({
      url: `http://127.0.0.1:${server.port}/${project}.git`,
      branch: 'main',
      marker,
      revision,
      credentials: { kind: 'basic', username: 'bot', password: TOKEN },
      pullRequest: { provider: kind, apiUrl: api.apiUrl },
    });
    const bare = (): string => server.bare(project);

    before(async () => {
      server = await GitServer.start({ auth: { username: 'bot', password: TOKEN } });
      await server.seed(project, SEED);
      api = await ProviderStandIn.start({
        kind,
        project,
        token: TOKEN,
        branchExists: async (branch) => {
          race?.(branch);
          race = undefined;
          return (await git(bare(), 'for-each-ref', `refs/heads/${branch}`)).trim() !== '';
        },
      });
    });
    after(async () => {
      await api.close();
      await server.close();
    });

    it('pushes a branch of its own and opens a request with the fields the API documents', async () => {
      const mainBefore = (await git(bare(), 'rev-parse', 'main')).trim();
      const result = await promoter.promote(request('2.0.0'));
      assert.ok(result.kind === 'pull-request');
      assert.equal(result.created, true);
      assert.equal(result.branch, pullRequestBranch(marker, '2.0.0'));
      assert.equal(result.branch, 'fleetcache/delivery/podinfo/prod/2.0.0');
      assert.equal(result.pullRequest.number, 1);
      assert.equal(result.pullRequest.state, 'open');
      assert.match(result.pullRequest.url, kind === 'github' ? /\/pull\/1$/ : /\/-\/merge_requests\/1$/);
      assert.equal((await git(bare(), 'rev-parse', 'main')).trim(), mainBefore, 'the base branch is not pushed to');
      assert.equal(result.sha, (await git(bare(), 'rev-parse', `refs/heads/${result.branch}`)).trim());
      assert.match(await server.show(project, result.branch, RELEASE), /version: 2\.0\.0 #/);

      const create = api.requests.find((r) => r.method === 'POST');
      assert.ok(create !== undefined);
      const body = create.body as Record<string, unknown>;
      if (kind === 'github') {
        assert.equal(create.path, `/api/v3/repos/${project}/pulls`);
        assert.equal(create.headers.authorization, `Bearer ${TOKEN}`);
        assert.equal(create.headers.accept, 'application/vnd.github+json');
        assert.equal(create.headers['x-github-api-version'], '2022-11-28');
        assert.deepEqual(Object.keys(body).sort(), ['base', 'body', 'head', 'maintainer_can_modify', 'title']);
        assert.equal(body.head, result.branch);
        assert.equal(body.base, 'main');
      } else {
        assert.equal(create.path, `/api/v4/projects/${encodeURIComponent(project)}/merge_requests`);
        assert.equal(create.headers['private-token'], TOKEN);
        assert.deepEqual(Object.keys(body).sort(), ['description', 'remove_source_branch', 'source_branch', 'target_branch', 'title']);
        assert.equal(body.source_branch, result.branch);
        assert.equal(body.target_branch, 'main');
      }
      assert.match(String(body.title), /podinfo.*prod.*2\.0\.0/);
      const list = api.requests.find((r) => r.method === 'GET');
      assert.ok(list !== undefined);
      assert.equal(list.query.state, 'all');
      assert.equal(kind === 'github' ? list.query.head : list.query.source_branch, kind === 'github' ? `fleet-org:${result.branch}` : result.branch);
    });

    it('finds the open request on a re-run instead of opening a second, without cloning or pushing', async () => {
      const gitRequests = server.requests.length;
      const result = await promoter.promote(request('2.0.0'));
      assert.ok(result.kind === 'pull-request');
      assert.equal(result.created, false);
      assert.equal(result.pullRequest.number, 1);
      assert.equal(api.pulls.length, 1);
      assert.equal(server.requests.length, gitRequests, 'no git traffic');
    });

    it('reports the merge once a person merged it', async () => {
      api.setState(1, 'merged');
      const result = await promoter.promote(request('2.0.0'));
      assert.ok(result.kind === 'pull-request');
      assert.equal(result.pullRequest.state, 'merged');
    });

    it('opens no request when the base branch already has the revision', async () => {
      await server.commit(project, { [RELEASE]: SEED[RELEASE].replace('1.0.0', '3.0.0') }, 'by hand');
      const result = await promoter.promote(request('3.0.0'));
      assert.ok(result.kind === 'commit' && !result.created);
      assert.equal(api.pulls.length, 1);
    });

    it('finds a request opened concurrently (the API refuses a duplicate) instead of failing or opening a second', async () => {
      race = (branch) => { api.pulls.push({ number: api.pulls.length + 1, head: branch, base: 'main', title: 'by another replica', state: 'open' }); };
      const result = await promoter.promote(request('3.1.0'));
      assert.ok(result.kind === 'pull-request');
      assert.equal(result.pullRequest.number, api.pulls.length);
      assert.equal(api.pulls.filter((p) => p.head === result.branch).length, 1);
    });

    it('reports the provider\'s refusal by status code without quoting its answer', async () => {
      const wrong = { ...request('4.0.0'), credentials: { kind: 'basic' as const, username: 'bot', password: 'not-the-token' } };
      await assert.rejects(promoter.promote(wrong), (err: unknown) => {
        assert.ok(err instanceof GitOpsError);
        assert.equal(err.reason, 'ProviderError');
        assert.equal(err.statusCode, 401);
        assert.doesNotMatch(err.message, /Bad credentials|Unauthorized|not-the-token/);
        return true;
      });
    });

    it('bounds a provider call by a deadline: an answer that drips forever is a Timeout', async () => {
      const { createServer } = await import('node:http');
      // A byte every 100 ms: never idle long enough for a socket timeout; only a deadline ends it.
      const drips = new Set<NodeJS.Timeout>();
      const slow = createServer((_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write('[');
        const drip = setInterval(() => { res.write(' '); }, 100);
        drips.add(drip);
        res.on('close', () => { clearInterval(drip); });
      });
      await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve));
      try {
        const port = (slow.address() as { port: number }).port;
        const impatient = new GitPromoter({ allowHttp: true, allowPrivateNetworks: true, providerTimeoutMs: 500 });
        await assert.rejects(impatient.promote({ ...request('6.0.0'), pullRequest: { provider: kind, apiUrl: `http://127.0.0.1:${port}/api` } }), (err: unknown) => err instanceof GitOpsError && err.reason === 'Timeout');
        // The promotion's own deadline bounds provider calls too.
        const due = new GitPromoter({ allowHttp: true, allowPrivateNetworks: true, promotionTimeoutMs: 500 });
        await assert.rejects(due.promote({ ...request('6.0.0'), pullRequest: { provider: kind, apiUrl: `http://127.0.0.1:${port}/api` } }), (err: unknown) => err instanceof GitOpsError && err.reason === 'DeadlineExceeded' && err.message.includes('500 ms (promotionTimeoutMs)'));
      } finally {
        for (const drip of drips) clearInterval(drip);
        slow.closeAllConnections();
        await new Promise<void>((resolve) => slow.close(() => { resolve(); }));
      }
    });

    it('keeps two tenants\' pipelines apart in one repository (team-a/b-shop, team-a-b/shop), and a restart adopts only its own request', async () => {
      const tenants = [{ namespace: 'team-a', pipeline: 'b-shop', environment: 'prod' }, { namespace: 'team-a-b', pipeline: 'shop', environment: 'prod' }];
      await server.commit(project, Object.fromEntries(tenants.map((t) => [`tenants/${t.namespace}.yaml`, `version: 1.0.0 # {"$promotion": "${t.namespace}:${t.pipeline}:${t.environment}"}\n`])), 'two tenants');
      const promote = (p: GitPromoter, t: (typeof tenants)[number]): ReturnType<GitPromoter['promote']> => p.promote({ ...request('7.0.0'), marker: t, path: 'tenants' });
      const first = await promote(promoter, tenants[0] ?? marker);
      const second = await promote(promoter, tenants[1] ?? marker);
      assert.ok(first.kind === 'pull-request' && second.kind === 'pull-request');
      assert.equal(first.created, true);
      assert.equal(second.created, true, 'the second tenant opens its own request, never adopts the first one\'s');
      assert.notEqual(first.branch, second.branch);
      assert.notEqual(first.pullRequest.number, second.pullRequest.number);
      assert.match(await server.show(project, first.branch, 'tenants/team-a.yaml'), /version: 7\.0\.0 #/);
      assert.match(await server.show(project, second.branch, 'tenants/team-a-b.yaml'), /version: 7\.0\.0 #/);
      // A restarted service (a new promoter) computes the same branch and finds its own request.
      const restarted = new GitPromoter({ allowHttp: true, allowPrivateNetworks: true });
      for (const [t, opened] of [[tenants[0], first], [tenants[1], second]] as const) {
        const again = await promote(restarted, t ?? marker);
        assert.ok(again.kind === 'pull-request');
        assert.deepEqual([again.created, again.branch, again.pullRequest.number], [false, opened.branch, opened.pullRequest.number]);
      }
    });

    it('keeps the provider API under the URL rules (no loopback without the allow option)', async () => {
      const strict = new GitPromoter({ allowHttp: true, lookup: () => Promise.resolve(['93.184.216.34']) });
      const count = api.requests.length;
      await assert.rejects(strict.promote({ ...request('5.0.0'), url: `http://git.example/${project}.git` }), (err: unknown) => err instanceof GitOpsError && err.reason === 'AddressRefused');
      assert.equal(api.requests.length, count);
    });
  });
}

describe('pullRequestBranch', () => {
  it('is injective in namespace, pipeline, environment and revision, and always a valid branch name', async () => {
    const tuples: [string, string, string, string][] = [
      ['team-a', 'b-shop', 'prod', '1.0'], ['team-a-b', 'shop', 'prod', '1.0'], ['team-a', 'b', 'shop-prod', '1.0'],
      ['a', 'b', 'c', '1.0+build'], ['a', 'b', 'c', '1.0-build'], ['a', 'b', 'c', '1.0_build'], ['a', 'b', 'c', '1.0_2Bbuild'],
      ['a', 'b', 'c', 'main@sha1:abc'], ['a', 'b', 'c', 'main/sha1-abc'], ['a', 'b', 'c', 'v1..2'], ['a', 'b', 'c', 'v1.lock'], ['a', 'b', 'c', '.hidden'],
      ['a', 'x.lock', 'c', '1'], ['a', 'b', 'c', 'x'.repeat(255)], ['a', 'b', 'c', `${'x'.repeat(254)}y`],
    ];
    const names = tuples.map(([namespace, pipeline, environment, revision]) => pullRequestBranch({ namespace, pipeline, environment }, revision));
    assert.equal(new Set(names).size, names.length, names.join('\n'));
    for (const name of names) {
      await git('/', 'check-ref-format', `refs/heads/${name}`);
      assert.ok(name.split('/').every((c) => c.length <= 216), name);
    }
  });
});
