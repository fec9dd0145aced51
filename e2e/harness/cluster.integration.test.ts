// The harness itself: pinned version, restart against the same etcd, teardown, figures.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { VersionApi } from '@kubernetes/client-node';
import { sweepStaleClusterDirs } from './cluster.ts';
import { startCluster } from './index.ts';
import { eventually } from '../../fixtures/support/index.ts';

function leftovers(name: string, base = '/dev/shm'): string[] {
  return readdirSync(base).filter((entry) => entry.startsWith(`fleetcache-${name}-`));
}

describe('harness: a local cluster', () => {
  it('serves the pinned version, survives an apiserver restart, and leaves nothing behind', async (t) => {
    const cluster = await startCluster({ name: 'harness' });
    t.after(() => cluster.stop());
    console.log(`# ${cluster.name}: etcd ready in ${cluster.timings.etcdMs} ms, apiserver ready in ${cluster.timings.apiserverMs} ms, RSS ${(cluster.rssBytes() / 2 ** 20).toFixed(0)} MiB`);

    const version = await cluster.kubeConfig().makeApiClient(VersionApi).getCode();
    assert.equal(version.gitVersion, 'v1.34.4', '/version reports the stamped release, not v0.0.0-master');

    assert.equal((await cluster.request('POST', '/api/v1/namespaces', { metadata: { name: 'kept' } })).statusCode, 201);
    await cluster.stopApiserver();
    await assert.rejects(cluster.request('GET', '/api/v1/namespaces/kept'), /ECONNREFUSED/);
    await cluster.startApiserver();
    assert.equal((await cluster.request('GET', '/api/v1/namespaces/kept')).statusCode, 200, 'data survives the restart');

    const pids = cluster.pids();
    assert.equal(pids.length, 2, 'etcd and kube-apiserver');
    await cluster.stop();
    await cluster.stop(); // idempotent
    await assert.rejects(cluster.request('GET', '/readyz'), /ECONNREFUSED/);
    for (const pid of pids) assert.throws(() => process.kill(pid, 0), { code: 'ESRCH' }, `process ${pid} is gone`);
    assert.deepEqual(leftovers('harness'), [], 'its files are removed');
  });

  it('fails with the process output when the apiserver cannot start', async () => {
    await assert.rejects(
      startCluster({ name: 'broken', apiserverFlags: ['--no-such-flag'], readyTimeoutMs: 30_000 }),
      (err: Error) => err.message.includes('kube-apiserver exited before') && err.message.includes('no-such-flag'),
    );
    assert.deepEqual(leftovers('broken'), [], 'its files are removed');
  });

  it('leaves no orphan process when the test process is killed outright', async (t) => {
    // A base directory of its own: a test run elsewhere on the machine sweeps /dev/shm too, and
    // would remove the orphan's files before this test looks for them.
    const base = mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'orphan-base-'));
    t.after(() => { rmSync(base, { recursive: true, force: true }); });
    const child = spawn(process.execPath, [new URL('./testdata/start-and-hang.ts', import.meta.url).pathname, base], { stdio: ['ignore', 'pipe', 'inherit'] });
    const pids = await new Promise<number[]>((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        if (out.includes('\n')) resolve(JSON.parse(out) as number[]);
      });
      child.once('exit', (code) => { reject(new Error(`start-and-hang exited early with ${code}`)); });
    });
    assert.equal(pids.length, 2);
    child.kill('SIGKILL'); // no 'exit' hook runs: only the parent-death signal can clean up
    const alive = (): number[] => pids.filter((pid) => { try { process.kill(pid, 0); return true; } catch { return false; } });
    await eventually('etcd and kube-apiserver are gone', () => alive().length === 0, { timeoutMs: 10_000, pollMs: 100 });
    assert.deepEqual(alive(), [], 'etcd and kube-apiserver died with their parent');
    assert.equal(leftovers('orphan-check', base).length, 1, 'only its files outlive it');
    const removed = await sweepStaleClusterDirs(base);
    assert.ok(removed.some((entry) => entry.startsWith('fleetcache-orphan-check-')), 'the next run sweeps them');
    assert.deepEqual(leftovers('orphan-check', base), []);
  });
});
