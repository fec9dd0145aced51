import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { ProviderStandIn } from '../../e2e/git/providers.ts';
import { CommitStatusReader } from './commit-status.ts';
import { GitOpsError } from './errors.ts';
import { githubCheckRuns, githubCombinedStatuses, gitlabStatuses, newestPerContext, type CommitStatus } from './statuses.ts';

const SHA = 'a'.repeat(40);
const TOKEN = 'ghp-or-glpat-not-for-logs';

function sorted(list: readonly CommitStatus[]): CommitStatus[] {
  return [...list].sort((a, b) => `${a.source}${a.context}`.localeCompare(`${b.source}${b.context}`));
}

describe('commit statuses: parsing the providers\' answers', () => {
  it('maps GitHub status states, error as a failure, an undocumented state as unknown (pending)', () => {
    const parsed = githubCombinedStatuses({ total_count: 5, statuses: [
      { context: 'ci/build', state: 'success' }, { context: 'ci/lint', state: 'error' }, { context: 'ci/e2e', state: 'pending' },
      { context: 'ci/odd', state: 'purple' }, { context: 42, state: 'success' },
    ] });
    assert.equal(parsed.entries, 5);
    assert.equal(parsed.total, 5);
    assert.deepEqual(parsed.statuses.map((s) => [s.context, s.outcome, s.state]), [
      ['ci/build', 'success', 'success'], ['ci/lint', 'failure', 'error'], ['ci/e2e', 'pending', 'pending'], ['ci/odd', 'pending', 'unknown'],
    ]);
  });

  it('maps check runs: running is pending; neutral and skipped pass; cancelled, timed_out and action_required fail', () => {
    const runs = githubCheckRuns({ total_count: 6, check_runs: [
      { id: 1, name: 'build', status: 'in_progress', conclusion: null },
      { id: 2, name: 'docs', status: 'completed', conclusion: 'neutral' },
      { id: 3, name: 'lint', status: 'completed', conclusion: 'skipped' },
      { id: 4, name: 'e2e', status: 'completed', conclusion: 'timed_out' },
      { id: 5, name: 'deploy', status: 'completed', conclusion: 'action_required' },
      { id: 6, name: 'sec', status: 'completed', conclusion: 'cancelled' },
    ] }).runs;
    assert.deepEqual(runs.map((r) => [r.context, r.outcome, r.state, r.source]), [
      ['build', 'pending', 'in_progress', 'check-run'], ['docs', 'success', 'neutral', 'check-run'], ['lint', 'success', 'skipped', 'check-run'],
      ['e2e', 'failure', 'timed_out', 'check-run'], ['deploy', 'failure', 'action_required', 'check-run'], ['sec', 'failure', 'cancelled', 'check-run'],
    ]);
  });

  it('maps GitLab statuses; a job allowed to fail passes; names longer than 255 are not statuses', () => {
    const parsed = gitlabStatuses([
      { id: 1, name: 'test', status: 'failed', allow_failure: true },
      { id: 2, name: 'build', status: 'running' },
      { id: 3, name: 'deploy', status: 'canceled' },
      { id: 4, name: 'x'.repeat(256), status: 'failed' },
      { id: 5, name: 'gate', status: 'manual', allow_failure: false },
    ]);
    assert.equal(parsed.entries, 5);
    assert.deepEqual(parsed.statuses.map((s) => [s.context, s.outcome, s.state]), [
      ['test', 'success', 'allowed_failure'], ['build', 'pending', 'running'], ['deploy', 'failure', 'canceled'], ['gate', 'pending', 'manual'],
    ]);
  });

  it('keeps the newest entry per context and source (a re-run replaces the first)', () => {
    const newest = newestPerContext([
      { context: 'e2e', outcome: 'failure', state: 'failure', source: 'check-run', id: 7 },
      { context: 'e2e', outcome: 'success', state: 'success', source: 'check-run', id: 9 },
      { context: 'e2e', outcome: 'pending', state: 'pending', source: 'status', id: 1 },
    ]);
    assert.deepEqual(sorted(newest), [
      { context: 'e2e', outcome: 'success', state: 'success', source: 'check-run' },
      { context: 'e2e', outcome: 'pending', state: 'pending', source: 'status' },
    ]);
  });
});

for (const kind of ['github', 'gitlab'] as const) {
  describe(`commit statuses through the ${kind} API`, () => {
    let api: ProviderStandIn;
    const project = kind === 'github' ? 'fleet-org/fleet' : 'platform/delivery/fleet';
    const reader = new CommitStatusReader({ allowHttp: true, allowPrivateNetworks: true });
    const url = `https://git.example/${project}.git`;

    before(async () => {
      api = await ProviderStandIn.start({ kind, project, token: TOKEN });
    });
    after(async () => {
      await api.close();
    });

    it('reads the newest status per context with the token the API takes; check runs too on GitHub', async () => {
      const sha = 'b'.repeat(40);
      api.reportStatus(sha, { context: 'ci/build', state: kind === 'github' ? 'pending' : 'running', description: 'x'.repeat(10_000) });
      api.reportStatus(sha, { context: 'ci/build', state: 'success' });
      api.reportStatus(sha, { context: 'ci/lint', state: kind === 'github' ? 'failure' : 'failed' });
      if (kind === 'github') api.reportStatus(sha, { context: 'e2e', kind: 'check-run', state: 'completed', conclusion: 'success' });
      const statuses = await reader.read({ url, provider: kind, apiUrl: api.apiUrl, token: TOKEN, commit: sha });
      const expected: CommitStatus[] = [
        { context: 'ci/build', outcome: 'success', state: 'success', source: 'status' },
        { context: 'ci/lint', outcome: 'failure', state: kind === 'github' ? 'failure' : 'failed', source: 'status' },
        ...(kind === 'github' ? [{ context: 'e2e', outcome: 'success', state: 'success', source: 'check-run' } as const] : []),
      ];
      assert.deepEqual(sorted(statuses), sorted(expected));
      const seen = api.requests.filter((r) => r.path.includes(sha));
      assert.deepEqual(seen.map((r) => r.path).sort(), kind === 'github'
        ? [`/api/v3/repos/${project}/commits/${sha}/check-runs`, `/api/v3/repos/${project}/commits/${sha}/status`]
        : [`/api/v4/projects/${encodeURIComponent(project)}/repository/commits/${sha}/statuses`]);
      for (const r of seen) {
        assert.equal(r.method, 'GET');
        assert.equal(kind === 'github' ? r.headers.authorization : r.headers['private-token'], kind === 'github' ? `Bearer ${TOKEN}` : TOKEN);
        assert.equal(r.query.per_page, '100');
      }
    });

    it('pages through a long listing, and refuses one longer than its page bound rather than answer part of it', async () => {
      const sha = 'c'.repeat(40);
      for (let i = 0; i < 150; i++) api.reportStatus(sha, { context: `job-${i}`, state: 'success' });
      const all = await reader.read({ url, provider: kind, apiUrl: api.apiUrl, token: TOKEN, commit: sha });
      assert.equal(all.length, 150);
      assert.deepEqual(api.requests.filter((r) => r.path.includes(sha) && !r.path.endsWith('check-runs')).map((r) => r.query.page), ['1', '2']);
      const bounded = new CommitStatusReader({ allowHttp: true, allowPrivateNetworks: true, maxStatusPages: 1 });
      await assert.rejects(bounded.read({ url, provider: kind, apiUrl: api.apiUrl, token: TOKEN, commit: sha }), (err: unknown) => {
        assert.ok(err instanceof GitOpsError);
        assert.equal(err.reason, 'ProviderError');
        assert.match(err.message, /more than 100 entries .*\(1 pages\)/);
        return true;
      });
    });

    it('says what failed without quoting the provider or the token: HTTP status, a bad commit', async () => {
      await assert.rejects(reader.read({ url, provider: kind, apiUrl: api.apiUrl, token: 'wrong', commit: SHA }), (err: unknown) => {
        assert.ok(err instanceof GitOpsError);
        assert.equal(err.statusCode, 401);
        assert.doesNotMatch(err.message, /Bad credentials|Unauthorized|wrong/);
        return true;
      });
      await assert.rejects(reader.read({ url, provider: kind, apiUrl: api.apiUrl, token: TOKEN, commit: 'main; rm -rf' }), (err: unknown) => err instanceof GitOpsError && err.reason === 'InvalidInput');
    });
  });
}

describe('commit statuses: bounded reads', () => {
  let server: http.Server;
  let mode: 'stall' | 'huge' | 'redirect' = 'stall';
  before(async () => {
    server = http.createServer((req, res) => {
      if (mode === 'huge') res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ statuses: [{ context: 'x', state: 'success', description: 'y'.repeat(300_000) }] }));
      else if (mode === 'redirect') res.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data' }).end();
      // stall: never answers
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => { resolve(); }));
  });
  const apiUrl = (): string => `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v3`;
  const request = (): Parameters<CommitStatusReader['read']>[0] => ({ url: 'https://github.com/o/r.git', provider: 'github', apiUrl: apiUrl(), token: TOKEN, commit: SHA });

  it('stops a provider that does not answer at providerTimeoutMs', async () => {
    mode = 'stall';
    const reader = new CommitStatusReader({ allowHttp: true, allowPrivateNetworks: true, providerTimeoutMs: 200 });
    await assert.rejects(reader.read(request()), (err: unknown) => err instanceof GitOpsError && err.reason === 'Timeout' && err.message.includes('within 200 ms'));
  });

  it('refuses an answer larger than maxResponseBytes', async () => {
    mode = 'huge';
    const reader = new CommitStatusReader({ allowHttp: true, allowPrivateNetworks: true, maxResponseBytes: 100_000 });
    await assert.rejects(reader.read(request()), (err: unknown) => err instanceof GitOpsError && err.reason === 'ProviderError' && err.message.includes('more than 100000 bytes'));
  });

  it('follows no redirect', async () => {
    mode = 'redirect';
    const reader = new CommitStatusReader({ allowHttp: true, allowPrivateNetworks: true });
    await assert.rejects(reader.read(request()), (err: unknown) => err instanceof GitOpsError && err.statusCode === 302);
  });

  it('refuses a private API address unless allowed, and plain http unless allowed', async () => {
    await assert.rejects(new CommitStatusReader({ allowHttp: true }).read(request()), (err: unknown) => err instanceof GitOpsError && err.reason === 'AddressRefused');
    await assert.rejects(new CommitStatusReader({ allowPrivateNetworks: true }).read(request()), (err: unknown) => err instanceof GitOpsError && err.reason === 'UrlRefused');
  });
});
