import assert from 'node:assert/strict';
import { chmod, mkdir, mkdtemp, readdir, readFile, readlink, rm, stat, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { git, GitServer } from '../../e2e/git/server.ts';
import { GitOpsError } from './errors.ts';
import { GitPromoter, type GitPromotionRequest } from './promote.ts';
import { runGit, treeSize } from './run.ts';
import { realClock } from '../util/index.ts';

const RELEASE = 'apps/staging/release.yaml';
const SEED = {
  [RELEASE]: 'apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nspec:\n  chart:\n    spec:\n      version: 1.0.0 # {"$promotion": "delivery:podinfo:staging"}\n',
  'apps/prod/release.yaml': 'spec:\n  chart:\n    spec:\n      version: 1.0.0 # {"$promotion": "delivery:podinfo:prod"}\n',
  'README.md': 'fleet\n',
};
const AUTH = { username: 'fleet-bot', password: 's3cr3t-t0ken-value' };
const marker = { namespace: 'delivery', pipeline: 'podinfo', environment: 'staging' };

function reason(expected: string) {
  return (err: unknown): boolean => {
    assert.ok(err instanceof GitOpsError, `expected a GitOpsError, got ${String(err)}`);
    assert.equal(err.reason, expected, err.message);
    return true;
  };
}

/** Samples, until stopped, the bytes under `dir` and the resident memory of each process working there. */
function sample(dir: string): { peakDisk: number; peakRss: number; stop(): Promise<void> } {
  const stopped = new AbortController();
  const result = { peakDisk: 0, peakRss: 0, stop: async (): Promise<void> => { stopped.abort(); await loop; } };
  const loop = (async () => {
    while (!stopped.signal.aborted) {
      result.peakDisk = Math.max(result.peakDisk, await treeSize(dir));
      for (const pid of (await readdir('/proc')).filter((p) => /^\d+$/.test(p))) {
        if (!(await readlink(`/proc/${pid}/cwd`).catch(() => '')).startsWith(dir)) continue;
        const rss = /VmRSS:\s+(\d+) kB/.exec(await readFile(`/proc/${pid}/status`, 'utf8').catch(() => ''))?.[1];
        result.peakRss = Math.max(result.peakRss, Number(rss ?? 0) * 1_024);
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();
  return result;
}

interface GitRequest { readonly method: string; readonly url: string }
/** Our ref advertisement: a push landing before it makes ours `[rejected]` (non-fast-forward). */
const beforeAdvertisement = ({ url }: GitRequest): boolean => url.includes('service=git-receive-pack');
/** Our pack's POST: a push landing between the advertisement and it is `[remote rejected] failed to update ref`. */
const beforeUpdate = ({ method, url }: GitRequest): boolean => method === 'POST' && url.endsWith('/git-receive-pack');

describe('GitPromoter against git http-backend', () => {
  let server: GitServer;
  let scratch: string;
  let promoter: GitPromoter;
  const request = (overrides: Partial<GitPromotionRequest> = {}): GitPromotionRequest => ({
    url: server.url('fleet'), branch: 'main', path: 'apps', marker, revision: '1.1.0', credentials: { kind: 'basic', ...AUTH }, ...overrides,
  });
  let seeded: Promise<void> | undefined;
  /** The repository of the issue: a 400 MiB file of zeros, a 2 MiB pack (made once). */
  const zeros = (): Promise<void> => (seeded ??= (async () => {
    await server.seed('zeros', SEED);
    await server.commitZeros('zeros', 'data/zeros.bin', 400 * 1_048_576, 'a large file');
  })());
  const commits = async (): Promise<number> => Number((await git(server.bare('fleet'), 'rev-list', '--count', 'main')).trim());
  /**
   * Runs `body` while another writer acts once, `race`, just before the first request `at` matches;
   * asserts that it did, and puts the server's options back.
   */
  const racedOnce = async (at: (request: GitRequest) => boolean, race: () => Promise<unknown>, body: () => Promise<void>): Promise<void> => {
    let raced = false;
    server.options = {
      auth: AUTH,
      beforeRequest: async (req) => {
        if (raced || !at(req)) return;
        raced = true;
        await race();
      },
    };
    try {
      await body();
      assert.ok(raced, 'the concurrent push happened');
    } finally {
      server.options = { auth: AUTH };
    }
  };

  before(async () => {
    server = await GitServer.start({ auth: AUTH });
    await server.seed('fleet', SEED);
    scratch = await mkdtemp(path.join(tmpdir(), 'fleetcache-promoter-'));
    promoter = new GitPromoter({ allowHttp: true, allowPrivateNetworks: true, tmpDir: scratch, author: { name: 'Fleet Bot', email: 'bot@fleet.test' } });
  });
  after(async () => {
    await server.close();
    await rm(scratch, { recursive: true, force: true });
  });

  it('sets the marked line, commits with pipeline, environment and revision, and pushes to the branch', async () => {
    const result = await promoter.promote(request());
    assert.ok(result.kind === 'commit' && result.created);
    assert.equal(result.sha, (await git(server.bare('fleet'), 'rev-parse', 'main')).trim());
    assert.match(await server.show('fleet', 'main', RELEASE), /^ {6}version: 1\.1\.0 # \{"\$promotion": "delivery:podinfo:staging"\}$/m);
    assert.equal(await server.show('fleet', 'main', 'apps/prod/release.yaml'), SEED['apps/prod/release.yaml'], 'another environment\'s marker is left alone');
    const log = await git(server.bare('fleet'), 'log', '-1', '--format=%an <%ae>%n%B', 'main');
    assert.match(log, /^Fleet Bot <bot@fleet\.test>/);
    assert.match(log, /delivery\/podinfo/);
    assert.match(log, /Environment: staging/);
    assert.match(log, /Revision: 1\.1\.0/);
    assert.deepEqual(await readdir(scratch), [], 'the private directory is removed');
  });

  it('is idempotent: a re-run finds the revision in place and makes no second commit', async () => {
    const count = await commits();
    const head = (await git(server.bare('fleet'), 'rev-parse', 'main')).trim();
    const result = await promoter.promote(request());
    assert.deepEqual(result, { kind: 'commit', sha: head, created: false, attempts: 1 });
    assert.equal(await commits(), count);
  });

  // The two moments another writer's push can land: before our ref advertisement (our push is then
  // `[rejected]` non-fast-forward), or between the advertisement and the update (`[remote rejected]
  // failed to update ref`, the ordinary race of two writers pushing at once).
  const races = [
    { name: 'a push that lost to a concurrent one ([rejected])', revision: '1.2.0', at: beforeAdvertisement },
    { name: 'a push the server refused because the branch moved after its advertisement ([remote rejected] failed to update ref)', revision: '1.2.1', at: beforeUpdate },
  ];
  for (const race of races) {
    it(`retries ${race.name}: fetches, re-applies and pushes on top`, async () => {
      const edit = `fleet, edited meanwhile before ${race.revision}\n`;
      const count = await commits();
      await racedOnce(race.at, () => server.commit('fleet', { 'README.md': edit }, 'someone else'), async () => {
        const result = await promoter.promote(request({ revision: race.revision }));
        assert.ok(result.kind === 'commit' && result.created);
        assert.equal(result.attempts, 2);
        assert.equal(await commits(), count + 2, 'the other commit and ours, ours on top');
        assert.equal(await server.show('fleet', 'main', 'README.md'), edit);
        assert.match(await server.show('fleet', 'main', RELEASE), new RegExp(`version: ${race.revision.replaceAll('.', '\\.')} #`));
        assert.equal((await git(server.bare('fleet'), 'log', '-1', '--format=%an', 'main')).trim(), 'Fleet Bot');
      });
    });
  }

  it('fails with a conflict naming file, line and environment when the marked line was pinned by hand during the promotion, and pushes nothing over it', async () => {
    const pinned = SEED[RELEASE].replace('version: 1.0.0', 'version: 1.0.7-hotfix');
    await racedOnce(beforeUpdate, () => server.commit('fleet', { [RELEASE]: `# pinned during an incident\n${pinned}` }, 'pin by hand'), async () => {
      await assert.rejects(promoter.promote(request({ revision: '1.4.0' })), (err: unknown) => {
        assert.ok(err instanceof GitOpsError && err.reason === 'MarkerConflict', String(err));
        assert.match(err.message, /apps\/staging\/release\.yaml:7: the line marked for delivery:podinfo:staging was changed by someone else/);
        assert.doesNotMatch(err.message, /hotfix/);
        return true;
      });
      assert.match(await server.show('fleet', 'main', RELEASE), /version: 1\.0\.7-hotfix #/, 'the pinned value stays');
      assert.equal((await git(server.bare('fleet'), 'log', '-1', '--format=%s', 'main')).trim(), 'pin by hand', 'nothing pushed on top');
    });
  });

  it('re-applies over a marked line another environment\'s writer changed meanwhile (no conflict: not ours)', async () => {
    await racedOnce(beforeUpdate, () => server.commit('fleet', { 'apps/prod/release.yaml': SEED['apps/prod/release.yaml'].replace('1.0.0', '0.9.9') }, 'prod moved'), async () => {
      const result = await promoter.promote(request({ revision: '1.5.0' }));
      assert.ok(result.kind === 'commit' && result.created && result.attempts === 2);
      assert.match(await server.show('fleet', 'main', RELEASE), /version: 1\.5\.0 #/);
      assert.match(await server.show('fleet', 'main', 'apps/prod/release.yaml'), /version: 0\.9\.9 #/);
    });
  });

  it('says it did not create the commit when another writer pushed the very same commit first (same SHA: same parent, tree, message, author, second)', async () => {
    let raced = false;
    server.options = {
      auth: AUTH,
      // Before our push is answered, the identical commit lands from elsewhere: what a second
      // replica promoting the same revision in the same second pushes.
      beforeRequest: async ({ url }) => {
        if (raced || !url.includes('service=git-receive-pack')) return;
        raced = true;
        const [workspace] = (await readdir(scratch)).filter((d) => d.startsWith('fleetcache-git-'));
        assert.ok(workspace !== undefined);
        await git(path.join(scratch, workspace, 'repo'), 'push', '--quiet', server.bare('fleet'), 'HEAD:refs/heads/main');
      },
    };
    try {
      const count = await commits();
      const result = await promoter.promote(request({ revision: '1.2.2' }));
      assert.ok(raced, 'the identical commit was pushed first');
      assert.deepEqual(result, { kind: 'commit', sha: (await git(server.bare('fleet'), 'rev-parse', 'main')).trim(), created: false, attempts: 1 });
      assert.equal(await commits(), count + 1, 'one commit on the branch, made once');
    } finally {
      server.options = { auth: AUTH };
    }
  });

  it('gives up after the bounded number of pushes when the branch keeps moving', async () => {
    let n = 0;
    server.options = {
      auth: AUTH,
      beforeRequest: async ({ url }) => {
        if (url.includes('service=git-receive-pack')) await server.commit('fleet', { 'README.md': `moved ${++n}\n` }, 'busy');
      },
    };
    try {
      const bounded = new GitPromoter({ allowHttp: true, allowPrivateNetworks: true, maxPushAttempts: 2 });
      await assert.rejects(bounded.promote(request({ revision: '1.3.0' })), reason('PushConflict'));
      assert.equal(n, 2);
    } finally {
      server.options = { auth: AUTH };
    }
  });

  it('sends the token as a header, never in the URL, and never repeats it in an error', async () => {
    const before = server.requests.length;
    await promoter.promote(request({ revision: '1.4.0' }));
    const seen = server.requests.slice(before);
    assert.ok(seen.length > 0 && seen.every((r) => r.authorization === `Basic ${Buffer.from(`${AUTH.username}:${AUTH.password}`).toString('base64')}`));
    assert.ok(seen.every((r) => !r.url.includes(AUTH.password)));
    await assert.rejects(promoter.promote(request({ credentials: { kind: 'basic', username: 'fleet-bot', password: 'wrong-token-value' } })), (err: unknown) => {
      assert.ok(err instanceof GitOpsError);
      assert.equal(err.reason, 'CloneFailed');
      assert.equal(err.exitCode, 128);
      assert.ok(!err.message.includes('wrong-token-value') && !JSON.stringify(err).includes('wrong-token-value'));
      return true;
    });
    assert.deepEqual(await readdir(scratch), [], 'removed after a failure too');
  });

  it('pins git to the address it checked (a name only the injected resolver knows)', async () => {
    const pinned = new GitPromoter({ allowHttp: true, allowPrivateNetworks: true, lookup: (host) => Promise.resolve(host === 'git.fleet.invalid' ? ['127.0.0.1'] : []) });
    const result = await pinned.promote(request({ url: server.url('fleet', 'git.fleet.invalid'), revision: '1.5.0' }));
    assert.ok(result.kind === 'commit' && result.created);
  });

  it('does not follow a redirect to a host the address check never saw: the target is never contacted', async () => {
    // The checked URL is a loopback server answering every request (info/refs included, the one git
    // would follow by default) with a redirect to the real repository under another name and port.
    const redirects: string[] = [];
    const redirector = http.createServer((req, res) => {
      redirects.push(req.url ?? '');
      res.writeHead(301, { location: `http://localhost:${server.port}${req.url ?? '/'}` }).end();
    });
    await new Promise<void>((resolve) => redirector.listen(0, '127.0.0.1', resolve));
    try {
      const before = server.requests.length;
      const count = await commits();
      const { port } = redirector.address() as AddressInfo;
      await assert.rejects(promoter.promote(request({ url: `http://127.0.0.1:${port}/fleet.git`, revision: '1.4.1' })), reason('CloneFailed'));
      assert.ok(redirects.some((url) => url.includes('/info/refs')), `git asked the redirecting server for its refs: ${redirects.join(', ')}`);
      assert.equal(server.requests.length, before, 'the redirect target was never contacted');
      assert.equal(await commits(), count, 'nothing pushed');
    } finally {
      redirector.closeAllConnections();
      await new Promise<void>((resolve) => { redirector.close(() => { resolve(); }); });
    }
  });

  it('reports a missing marker and pushes nothing', async () => {
    const count = await commits();
    await assert.rejects(promoter.promote(request({ marker: { ...marker, environment: 'qa' } })), reason('MarkerNotFound'));
    assert.equal(await commits(), count);
  });

  it('refuses a repository larger than the bound', async () => {
    const tiny = new GitPromoter({ allowHttp: true, allowPrivateNetworks: true, maxRepositoryBytes: 2_000 });
    await assert.rejects(tiny.promote(request({ revision: '1.6.0' })), reason('RepositoryTooLarge'));
  });

  it('kills git and its helpers when a command outlives its timeout', async () => {
    let release = (): void => undefined;
    const stalled = new Promise<void>((resolve) => { release = resolve; });
    server.options = { auth: AUTH, beforeRequest: () => stalled };
    try {
      const impatient = new GitPromoter({ allowHttp: true, allowPrivateNetworks: true, tmpDir: scratch, timeoutMs: 1_500 });
      await assert.rejects(impatient.promote(request({ revision: '1.7.0' })), reason('Timeout'));
      assert.deepEqual(await readdir(scratch), []);
      // No process is left working in the removed directory (git-remote-http ran there).
      const pids = (await readdir('/proc')).filter((p) => /^\d+$/.test(p));
      const cwds = await Promise.all(pids.map((p) => readlink(`/proc/${p}/cwd`).catch(() => '')));
      assert.deepEqual(cwds.filter((c) => c.startsWith(scratch)), []);
    } finally {
      release();
      server.options = { auth: AUTH };
    }
  });

  it('runs ssh with strict host key checking against the pinned address, the key in a private file', async () => {
    const spy = path.join(scratch, '..', `ssh-spy-${process.pid}`);
    await writeFile(spy, [
      '#!/bin/sh',
      `out=${spy}.out`,
      'printf "%s\\n" "$@" > "$out.args"',
      'for a in "$@"; do case "$a" in UserKnownHostsFile=*) cp "${a#UserKnownHostsFile=}" "$out.known";; esac; done',
      'prev=""; for a in "$@"; do if [ "$prev" = "-i" ]; then stat -c %a "$a" > "$out.mode"; fi; prev="$a"; done',
      'exit 255',
      '',
    ].join('\n'));
    await chmod(spy, 0o755);
    const ssh = new GitPromoter({ sshPath: spy, tmpDir: scratch, lookup: () => Promise.resolve(['93.184.216.34']) });
    const identity = '-----BEGIN OPENSSH PRIVATE KEY-----\nnot-a-real-key\n-----END OPENSSH PRIVATE KEY-----';
    const knownHosts = 'git.example ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample\n';
    try {
      await assert.rejects(ssh.promote(request({ url: 'ssh://git@git.example/org/fleet.git', credentials: { kind: 'ssh', identity, knownHosts } })), (err: unknown) => {
        assert.ok(err instanceof GitOpsError);
        assert.equal(err.reason, 'CloneFailed');
        assert.ok(!err.message.includes('not-a-real-key'));
        return true;
      });
      const args = (await readFile(`${spy}.out.args`, 'utf8')).split('\n');
      for (const expected of ['StrictHostKeyChecking=yes', 'IdentitiesOnly=yes', 'BatchMode=yes', 'HostKeyAlias=git.example', 'GlobalKnownHostsFile=/dev/null', 'ProxyCommand=none']) assert.ok(args.includes(expected), `${expected} in ${args.join(' ')}`);
      assert.ok(args.includes('git@93.184.216.34'), `connects to the pinned address: ${args.join(' ')}`);
      assert.equal(await readFile(`${spy}.out.known`, 'utf8'), knownHosts);
      assert.equal((await readFile(`${spy}.out.mode`, 'utf8')).trim(), '600');
      await assert.rejects(ssh.promote(request({ url: 'ssh://git@git.example/org/fleet.git' })), reason('UrlRefused'), 'an ssh URL without an SSH key');
    } finally {
      for (const suffix of ['', '.out.args', '.out.known', '.out.mode']) await rm(`${spy}${suffix}`, { force: true });
    }
  });

  it('refuses 400 MiB of zeros (a 2 MiB pack) from the tree\'s object headers, before anything is checked out', async (t) => {
    await zeros();
    const dir = await mkdtemp(path.join(tmpdir(), 'fleetcache-zeros-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const bounded = new GitPromoter({ allowHttp: true, allowPrivateNetworks: true, tmpDir: dir });
    const sampler = sample(dir);
    try {
      await assert.rejects(bounded.promote(request({ url: server.url('zeros'), revision: '1.8.0' })), (err: unknown) => {
        assert.ok(err instanceof GitOpsError && err.reason === 'RepositoryTooLarge', String(err));
        assert.match(err.message, /more than 134217728 bytes \(maxRepositoryBytes\)/);
        return true;
      });
    } finally {
      await sampler.stop();
    }
    const { peakDisk, peakRss } = sampler;
    t.diagnostic(`peak disk ${peakDisk} bytes, peak resident memory of one git process ${peakRss} bytes`);
    assert.ok(peakDisk < 16 * 1_048_576, `the clone wrote ${peakDisk} bytes`);
    assert.ok(peakRss < 64 * 1_048_576, `a git process held ${peakRss} bytes`);
    assert.deepEqual(await readdir(dir), []);
  });

  it('checks out only the YAML files under the path, not the rest of the tree nor YAML past maxFileBytes', async (t) => {
    await server.seed('sparse', SEED);
    await server.commitZeros('sparse', 'data/zeros.bin', 8 * 1_048_576, 'a large file outside the path');
    await server.commitZeros('sparse', 'apps/staging/huge.yaml', 2 * 1_048_576, 'a YAML file past maxFileBytes');
    const dir = await mkdtemp(path.join(tmpdir(), 'fleetcache-sparse-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const sampler = sample(dir);
    try {
      const result = await new GitPromoter({ allowHttp: true, allowPrivateNetworks: true, tmpDir: dir }).promote(request({ url: server.url('sparse'), revision: '2.1.0' }));
      assert.ok(result.kind === 'commit' && result.created);
    } finally {
      await sampler.stop();
    }
    assert.match(await server.show('sparse', 'main', RELEASE), /version: 2\.1\.0 #/);
    assert.equal((await git(server.bare('sparse'), 'cat-file', '-s', 'main:data/zeros.bin')).trim(), String(8 * 1_048_576), 'the commit keeps the files it did not check out');
    assert.ok(sampler.peakDisk < 1_048_576, `${sampler.peakDisk} bytes under the directory`);
  });

  it('runs git under hard limits: an allocation past the memory limit, a file past the size limit, each a typed error naming it', async () => {
    await zeros();
    const bare = server.bare('zeros');
    const base = { gitPath: '/usr/bin/git', cwd: bare, env: { PATH: '/usr/bin:/bin', GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' }, failure: 'CloneFailed' as const, timeoutMs: 60_000, maxOutputBytes: 1_048_576, clock: realClock };
    const limited = (maxMemoryBytes: number, maxFileBytes: number) => ({ prlimitPath: '/usr/bin/prlimit', maxMemoryBytes, maxFileBytes });
    // grep reads the whole 400 MiB blob into memory.
    await assert.rejects(runGit({ ...base, step: 'grep', args: ['grep', '-c', 'x', 'main', '--', 'data/zeros.bin'], hardLimits: limited(128 * 1_048_576, 1_048_576) }), (err: unknown) => {
      assert.ok(err instanceof GitOpsError && err.reason === 'RepositoryTooLarge', String(err));
      assert.match(err.message, /limit of 134217728 bytes \(maxGitMemoryBytes\)/);
      return true;
    });
    const out = await mkdtemp(path.join(tmpdir(), 'fleetcache-fsize-'));
    try {
      await assert.rejects(runGit({ ...base, step: 'archive', args: ['-c', 'core.bigFileThreshold=1m', 'archive', '--format=tar', '-o', path.join(out, 'a.tar'), 'main'], hardLimits: limited(256 * 1_048_576, 1_048_576) }), (err: unknown) => {
        assert.ok(err instanceof GitOpsError && err.reason === 'RepositoryTooLarge', String(err));
        assert.match(err.message, /larger than 1048576 bytes \(maxRepositoryBytes\)/);
        return true;
      });
      assert.ok((await stat(path.join(out, 'a.tar'))).size <= 1_048_576);
    } finally {
      await rm(out, { recursive: true, force: true });
    }
  });

  it('refuses a path through a symbolic link in the repository that leads out of the clone, and leaves the outside file untouched', async (t) => {
    const outside = await mkdtemp(path.join(tmpdir(), 'fleetcache-outside-'));
    t.after(() => rm(outside, { recursive: true, force: true }));
    const victim = path.join(outside, 'prod', 'release.yaml');
    await mkdir(path.dirname(victim), { recursive: true });
    const text = 'version: 1.0.0 # {"$promotion": "delivery:podinfo:staging"}\n';
    await writeFile(victim, text);
    await server.seed('links', SEED);
    await server.commitSymlink('links', 'apps/env', outside, 'a link out');
    const count = Number((await git(server.bare('links'), 'rev-list', '--count', 'main')).trim());
    for (const through of ['apps/env/prod', 'apps/env']) {
      await assert.rejects(promoter.promote(request({ url: server.url('links'), path: through, revision: '6.6.6' })), (err: unknown) => {
        assert.ok(err instanceof GitOpsError && err.reason === 'PathRefused', String(err));
        assert.match(err.message, /symbolic link/);
        assert.ok(!err.message.includes(outside), 'the link\'s target (repository content) is not echoed');
        return true;
      }, through);
    }
    assert.equal(await readFile(victim, 'utf8'), text);
    assert.equal(Number((await git(server.bare('links'), 'rev-list', '--count', 'main')).trim()), count, 'nothing pushed');
  });

  it('ends a promotion at its one deadline, however many git commands a slow server and lost pushes would take', async () => {
    await server.seed('slow', SEED);
    let started = 0;
    let n = 0;
    server.options = {
      auth: AUTH,
      beforeRequest: async ({ url }) => {
        started += 1;
        await new Promise((resolve) => setTimeout(resolve, 1_000));
        if (url.includes('service=git-receive-pack')) await server.commit('slow', { 'README.md': `moved ${++n}\n` }, 'busy'); // every push loses
      },
    };
    try {
      const bounded = new GitPromoter({ allowHttp: true, allowPrivateNetworks: true, tmpDir: scratch, promotionTimeoutMs: 3_000 });
      const begun = Date.now();
      await assert.rejects(bounded.promote(request({ url: server.url('slow'), revision: '1.9.0' })), (err: unknown) => {
        assert.ok(err instanceof GitOpsError && err.reason === 'DeadlineExceeded', String(err));
        assert.match(err.message, /deadline of 3000 ms \(promotionTimeoutMs\)/);
        return true;
      });
      // Without the deadline: a clone and five rounds of push and fetch, over 20 requests of a second each.
      assert.ok(started <= 8, `${started} requests started`);
      assert.ok(Date.now() - begun < 15_000, `took ${Date.now() - begun} ms`);
      assert.deepEqual(await readdir(scratch), []);
      const pids = (await readdir('/proc')).filter((p) => /^\d+$/.test(p));
      const cwds = await Promise.all(pids.map((p) => readlink(`/proc/${p}/cwd`).catch(() => '')));
      assert.deepEqual(cwds.filter((c) => c.startsWith(scratch)), [], 'every git of the promotion was killed');
    } finally {
      server.options = { auth: AUTH };
    }
  });

  it('refuses hostile URLs before running git', async () => {
    const strict = new GitPromoter({ allowHttp: true, lookup: (host) => Promise.resolve(host === 'rebind.example' ? ['93.184.216.34', '127.0.0.1'] : ['10.0.0.8']) });
    const before = server.requests.length;
    const marker0 = path.join(scratch, 'pwned');
    const cases: [string, string, GitPromoter][] = [
      [server.url('fleet'), 'AddressRefused', strict],                                   // loopback without the allow option
      [`http://[::ffff:127.0.0.1]:${server.port}/fleet.git`, 'AddressRefused', strict],  // loopback, IPv4-mapped
      ['http://169.254.169.254/latest.git', 'AddressRefused', strict],                  // cloud metadata
      ['http://internal.example/repo.git', 'AddressRefused', strict],                   // a name resolving to a private address
      ['http://rebind.example/repo.git', 'AddressRefused', strict],                     // one bad address among good ones
      [`file://${server.bare('fleet')}`, 'UrlRefused', promoter],
      [`ext::sh -c touch% ${marker0}`, 'UrlRefused', promoter],
      [`ext::/bin/touch ${marker0}`, 'UrlRefused', promoter],
      [`http://fleet-bot:token@127.0.0.1:${server.port}/fleet.git`, 'UrlRefused', promoter],
      [`--upload-pack=touch ${marker0}`, 'UrlRefused', promoter],
      ['-uhttp://x/y', 'UrlRefused', promoter],
      [`git@127.0.0.1:fleet.git`, 'UrlRefused', promoter],
      [`https://127.0.0.1:${server.port}/fleet.git?x=1`, 'UrlRefused', promoter],
      ['ftp://example.com/repo.git', 'UrlRefused', promoter],
      ['https://example.com/', 'UrlRefused', promoter],
    ];
    for (const [url, expected, p] of cases) {
      await assert.rejects(p.promote(request({ url })), reason(expected), url);
    }
    const https = new GitPromoter({ allowPrivateNetworks: true });
    await assert.rejects(https.promote(request()), reason('UrlRefused'), 'http without the allow option');
    await assert.rejects(promoter.promote(request({ branch: '--upload-pack=x' })), reason('InvalidInput'));
    await assert.rejects(promoter.promote(request({ path: '../..' })), reason('InvalidInput'));
    await assert.rejects(promoter.promote(request({ revision: '1.0\nx' })), reason('InvalidInput'));
    assert.equal(server.requests.length, before, 'git never reached the server');
    await assert.rejects(stat(marker0), 'nothing was executed');
  });
});
