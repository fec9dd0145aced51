// `make e2e-kind` cannot run here (no Docker engine), so this drives e2e/kind/run.sh for real with
// stand-in `docker` and `kind` commands whose "kind clusters" are local apiservers. What it proves:
// the script finds the clusters, exports their kubeconfigs, runs the scenarios through the
// external-cluster path of the harness, and deletes the clusters afterwards.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { useClusters } from '../harness/index.ts';

const script = new URL('./run.sh', import.meta.url).pathname;

describe('e2e-kind script', () => {
  const env = useClusters(2, { namePrefix: 'kind-standin' });

  it('runs the scenarios on the clusters kind reports and deletes them afterwards', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'fleetcache-kind-shim-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const [mgmt, workload] = env.clusters;
    await writeFile(join(dir, 'mgmt.yaml'), mgmt.adminKubeconfig);
    await writeFile(join(dir, 'workload.yaml'), workload.adminKubeconfig);
    await writeFile(join(dir, 'docker'), '#!/bin/sh\nexit 0\n');
    await writeFile(join(dir, 'kind'), `#!/bin/sh
echo "$*" >> "${dir}/kind.log"
case "$1 $2" in
  "get clusters") printf 'fleetcache-mgmt\\nfleetcache-workload-1\\nfleetcache-workload-2\\n' ;;
  "get kubeconfig") if [ "$4" = fleetcache-mgmt ]; then cat "${dir}/mgmt.yaml"; else cat "${dir}/workload.yaml"; fi ;;
  "delete cluster") ;;
  *) echo "unexpected kind call: $*" >&2; exit 2 ;;
esac
`);
    await chmod(join(dir, 'docker'), 0o755);
    await chmod(join(dir, 'kind'), 0o755);

    const { code, output } = await new Promise<{ code: number | null; output: string }>((resolve) => {
      // Two distinct clusters stand in for three here, so only the two-cluster scenario runs; the
      // three-cluster ones run on local apiservers in make test.
      const env = { ...process.env, PATH: `${dir}:${process.env.PATH ?? ''}`, FLEETCACHE_KUBECONFIGS: '', SCENARIOS: 'e2e/scenarios/independent-clusters.integration.test.ts' };
      const child = spawn(script, [], { env, stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      child.stdout.on('data', (c: Buffer) => { out += c.toString(); });
      child.stderr.on('data', (c: Buffer) => { out += c.toString(); });
      child.once('close', (exit) => { resolve({ code: exit, output: out }); });
    });
    assert.equal(code, 0, output);
    assert.match(output, /scenario: independent clusters/);
    assert.match(output, /ℹ fail 0/);
    assert.doesNotMatch(output, /ℹ pass 0\b/);
    const calls = await readFile(join(dir, 'kind.log'), 'utf8');
    for (const role of ['mgmt', 'workload-1', 'workload-2']) {
      assert.match(calls, new RegExp(`get kubeconfig --name fleetcache-${role}\\n`));
      assert.match(calls, new RegExp(`delete cluster --name fleetcache-${role}\\n`));
    }
    assert.doesNotMatch(calls, /create cluster/, 'existing clusters are reused');
  });

  it('refuses clearly when there is no Docker engine', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'fleetcache-kind-shim-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    await writeFile(join(dir, 'docker'), '#!/bin/sh\nexit 1\n');
    await chmod(join(dir, 'docker'), 0o755);
    const { code, output } = await new Promise<{ code: number | null; output: string }>((resolve) => {
      const child = spawn(script, [], { env: { ...process.env, PATH: `${dir}:${process.env.PATH ?? ''}` }, stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      child.stderr.on('data', (c: Buffer) => { out += c.toString(); });
      child.once('close', (exit) => { resolve({ code: exit, output: out }); });
    });
    assert.equal(code, 1);
    assert.match(output, /no Docker engine/);
  });
});
