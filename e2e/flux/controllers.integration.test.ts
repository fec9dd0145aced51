// The Flux process harness itself: a pair per cluster, ready when it returns, its output kept, and
// nothing left running or on disk once stopped.
import assert from 'node:assert/strict';
import { readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { describe, it } from 'node:test';
import { useClusters } from '../harness/index.ts';
import { startFluxControllers } from './controllers.ts';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('startFluxControllers', () => {
  const env = useClusters(1, { namePrefix: 'flux-harness' });

  it('runs source- and kustomize-controller against the cluster with Flux\'s CRDs, and stop() leaves nothing behind', async () => {
    const [cluster] = env.clusters;
    const flux = await startFluxControllers(cluster);
    try {
      const pids = flux.pids();
      assert.equal(pids.length, 2);
      assert.ok(flux.rssBytes() > 0);
      for (const plural of ['gitrepositories.source.toolkit.fluxcd.io', 'kustomizations.kustomize.toolkit.fluxcd.io', 'ocirepositories.source.toolkit.fluxcd.io']) {
        assert.equal((await cluster.request('GET', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${plural}`)).statusCode, 200, plural);
      }
      assert.match(flux.logs(), /--- flux-harness-1\/source-controller ---[\s\S]*"starting manager"[\s\S]*--- flux-harness-1\/kustomize-controller ---[\s\S]*"starting manager"/);
      await flux.stop();
      assert.deepEqual(flux.pids(), []);
      assert.deepEqual(pids.filter(alive), [], 'both processes exited');
      assert.deepEqual((await readdir(tmpdir())).filter((d) => d.startsWith(`fleetcache-flux-${cluster.name}-`)), [], 'their directory is removed');
    } finally {
      await flux.stop();
    }
  });
});
