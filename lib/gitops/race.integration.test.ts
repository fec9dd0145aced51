// Two writers against one branch of a real `git http-backend`, at once, round after round: every
// form a lost race takes is retried, no promotion is lost, and exactly one writer says it created
// a commit both would have made. Then Flux's `$imagepolicy` setters, written and read back.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { loadAll } from 'js-yaml';
import { git, GitServer } from '../../e2e/git/server.ts';
import { GitPromoter, type GitPromotionRequest, type GitPromotionResult } from './promote.ts';

const AUTH = { username: 'fleet-bot', password: 'race-token' };
const ROUNDS = 20;
const release = (environment: string): string => `spec:\n  chart:\n    spec:\n      version: 1.0.0 # {"$promotion": "delivery:podinfo:${environment}"}\n`;

describe('two writers on one branch of git http-backend', () => {
  let server: GitServer;
  let scratch: string;
  /** Two replicas of the service: same author, so a commit both make in the same second has one SHA. */
  let writers: [GitPromoter, GitPromoter];
  const request = (repo: string, environment: string, revision: string, overrides: Partial<GitPromotionRequest> = {}): GitPromotionRequest => ({
    url: server.url(repo), branch: 'main', path: 'apps', marker: { namespace: 'delivery', pipeline: 'podinfo', environment }, revision, credentials: { kind: 'basic', ...AUTH }, ...overrides,
  });
  const isAncestor = async (repo: string, sha: string): Promise<boolean> => {
    try {
      await git(server.bare(repo), 'merge-base', '--is-ancestor', sha, 'main');
      return true;
    } catch {
      return false;
    }
  };
  const count = async (repo: string): Promise<number> => Number((await git(server.bare(repo), 'rev-list', '--count', 'main')).trim());

  before(async () => {
    server = await GitServer.start({ auth: AUTH });
    scratch = await mkdtemp(path.join(tmpdir(), 'fleetcache-race-'));
    const options = { allowHttp: true, allowPrivateNetworks: true, tmpDir: scratch, author: { name: 'fleetcache', email: 'bot@fleet.test' }, maxPushAttempts: 8 };
    writers = [new GitPromoter(options), new GitPromoter(options)];
  });
  after(async () => {
    await server.close();
    await rm(scratch, { recursive: true, force: true });
  });

  it(`promotes two environments at once, ${ROUNDS} rounds: no failure, every commit on the branch`, async (t) => {
    await server.seed('two-envs', { 'apps/staging/release.yaml': release('staging'), 'apps/prod/release.yaml': release('prod') });
    const start = await count('two-envs');
    let retried = 0;
    for (let round = 1; round <= ROUNDS; round++) {
      const revision = `1.${round}.0`;
      const results = await Promise.all([
        writers[0].promote(request('two-envs', 'staging', revision)),
        writers[1].promote(request('two-envs', 'prod', revision)),
      ]);
      for (const result of results) {
        assert.ok(result.kind === 'commit' && result.created, `round ${round}: ${JSON.stringify(result)}`);
        assert.ok(await isAncestor('two-envs', result.sha), `round ${round}: ${result.sha} is on main`);
        retried += result.attempts - 1;
      }
      assert.match(await server.show('two-envs', 'main', 'apps/staging/release.yaml'), new RegExp(`version: 1\\.${round}\\.0 #`));
      assert.match(await server.show('two-envs', 'main', 'apps/prod/release.yaml'), new RegExp(`version: 1\\.${round}\\.0 #`));
    }
    assert.equal(await count('two-envs'), start + 2 * ROUNDS, 'one commit per promotion, none lost');
    assert.ok(retried >= 1, `the writers raced (${retried} lost pushes retried)`);
    t.diagnostic(`${retried} lost pushes retried over ${ROUNDS} rounds`);
  });

  it(`promotes one environment from both writers at once, ${ROUNDS} rounds: exactly one says it created the commit`, async (t) => {
    await server.seed('one-env', { 'apps/staging/release.yaml': release('staging') });
    const start = await count('one-env');
    let sameCommit = 0;
    for (let round = 1; round <= ROUNDS; round++) {
      const revision = `2.${round}.0`;
      const results: GitPromotionResult[] = await Promise.all(writers.map((w) => w.promote(request('one-env', 'staging', revision))));
      const commits = results.map((r) => (r.kind === 'commit' ? r : assert.fail('a commit')));
      assert.equal(commits.filter((r) => r.created).length, 1, `round ${round}: ${JSON.stringify(results)}`);
      const created = commits.find((r) => r.created);
      const head = (await git(server.bare('one-env'), 'rev-parse', 'main')).trim();
      assert.equal(created?.sha, head);
      for (const r of commits) assert.ok(await isAncestor('one-env', r.sha), 'the no-op names a commit the branch has');
      // The other writer found its very commit already pushed (`=`: the same SHA, built in the same second).
      if (commits.some((r) => !r.created && r.attempts === 1)) sameCommit += 1;
      assert.match(await server.show('one-env', 'main', 'apps/staging/release.yaml'), new RegExp(`version: 2\\.${round}\\.0 #`));
    }
    assert.equal(await count('one-env'), start + ROUNDS, 'one commit per round, no duplicate');
    t.diagnostic(`${sameCommit} of ${ROUNDS} rounds: the other writer's push found its very commit (same SHA) already on the branch`);
  });

  it('sets Flux $imagepolicy setters (whole reference, :tag; :name kept) beside $promotion, and reads them back on a re-run', async () => {
    const deployment = [
      'apiVersion: apps/v1',
      'kind: Deployment',
      'metadata: { name: podinfo, namespace: apps }',
      'spec:',
      '  template:',
      '    spec:',
      '      containers:',
      '        - name: podinfo',
      '          image: ghcr.io/stefanprodan/podinfo:6.2.0 # {"$imagepolicy": "delivery:podinfo-prod"}',
      '---',
      'apiVersion: helm.toolkit.fluxcd.io/v2',
      'kind: HelmRelease',
      'metadata: { name: podinfo, namespace: apps }',
      'spec:',
      '  values:',
      '    image:',
      '      repository: ghcr.io/stefanprodan/podinfo # {"$imagepolicy": "delivery:podinfo-prod:name"}',
      '      tag: "6.2.0" # {"$imagepolicy": "delivery:podinfo-prod:tag"}',
      '    sidecar:',
      '      tag: 6.2.0 # {"$imagepolicy": "delivery:podinfo-staging:tag"}',
      '',
    ].join('\n');
    await server.seed('flux', { 'apps/prod/podinfo.yaml': deployment });
    const promote = (): Promise<GitPromotionResult> => writers[0].promote(request('flux', 'prod', '6.3.0', { imagePolicy: 'delivery:podinfo-prod' }));
    const first = await promote();
    assert.ok(first.kind === 'commit' && first.created);
    const text = await server.show('flux', 'main', 'apps/prod/podinfo.yaml');
    assert.equal(text, deployment.replace('podinfo:6.2.0 #', 'podinfo:6.3.0 #').replace('tag: "6.2.0" # {"$imagepolicy": "delivery:podinfo-prod:tag"}', 'tag: "6.3.0" # {"$imagepolicy": "delivery:podinfo-prod:tag"}'));
    const [apps, helm] = loadAll(text) as [{ spec: { template: { spec: { containers: { image: string }[] } } } }, { spec: { values: { image: { repository: string; tag: string }; sidecar: { tag: string } } } }];
    assert.equal(apps.spec.template.spec.containers[0]?.image, 'ghcr.io/stefanprodan/podinfo:6.3.0');
    assert.deepEqual(helm.spec.values.image, { repository: 'ghcr.io/stefanprodan/podinfo', tag: '6.3.0' });
    assert.equal(helm.spec.values.sidecar.tag, '6.2.0', 'another policy\'s setter is left alone');
    const again = await promote();
    assert.deepEqual(again, { kind: 'commit', sha: first.sha, created: false, attempts: 1 });
  });
});
