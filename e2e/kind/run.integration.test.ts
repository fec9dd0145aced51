// `make e2e-kind` runs e2e/kind/run.sh on real Docker and kind where they exist (not part of make
// test: a machine without Docker could only skip it). These tests drive run.sh for real with
// stand-in `docker`, `kind` (and for the deploy step `kubectl`) commands whose "kind clusters" are
// four long-lived local apiservers, shared by every scenario file exactly as kind's would be.
// What it proves: every scenario file (e2e/scenarios) passes when run as run.sh runs them, one
// after another in its order on the same clusters, each from a reset (without it `promotion`
// waited for 1.0.0 after `git-promotion` left 1.1.0); clusters that existed before the run are
// never deleted, KEEP_CLUSTERS=1 or not, and those it created are deleted unless KEEP_CLUSTERS=1;
// the deploy step builds, loads and applies config/default (for real, with the image it built) and
// runs the in-cluster scenario with the `--internal` kubeconfigs. (`kubectl kustomize
// config/default` itself is not run here: no kubectl is assumed; the deployed service runs locally
// with admin rights, not in a pod.)
//
// This is where `make test` runs the scenario files: the Makefile leaves e2e/scenarios out of its
// own list, so each runs once, the way `make e2e-kind` runs it. `node --test <scenario file>` still
// runs one on fresh apiservers of its own.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmod, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { freePort, useClusters } from '../harness/index.ts';

const root = new URL('../../', import.meta.url).pathname;
const script = new URL('./run.sh', import.meta.url).pathname;
const ROLES = ['mgmt', 'workload-1', 'workload-2', 'workload-3'] as const;

/** Runs run.sh with `env` added; its exit status and everything it printed. */
function runScript(env: Readonly<Record<string, string>>): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(script, [], { env: { ...process.env, FLEETCACHE_KUBECONFIGS: '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => { out += c.toString(); });
    child.stderr.on('data', (c: Buffer) => { out += c.toString(); });
    child.once('close', (exit) => { resolve({ code: exit, output: out }); });
  });
}

/**
 * Stand-in commands in a fresh directory: `kind` knows the clusters `existing` names (their
 * kubeconfigs, internal or not, are the apiservers' admin kubeconfigs by role), "creates" any
 * other by logging it; `docker` answers `info` and logs a build; `kubectl` logs the kustomization
 * it is given and installs the Pipeline CRD (what of config/default the service needs here), and
 * answers `rollout status` by starting the service locally with the Deployment's mode (--shard),
 * its pid kept for the test to stop.
 */
async function standIns(kubeconfigs: ReadonlyMap<string, string>, existing: readonly string[]): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'fleetcache-kind-shim-'));
  for (const [role, kubeconfig] of kubeconfigs) await writeFile(join(dir, `${role}.yaml`), kubeconfig);
  const probePort = await freePort();
  const commands: Record<string, string> = {
    docker: `#!/bin/sh
echo "docker $*" >> "${dir}/calls.log"
exit 0
`,
    kind: `#!/bin/sh
echo "kind $*" >> "${dir}/calls.log"
role() { echo "$1" | sed 's/^fleetcache-//'; }
case "$1 $2" in
  "get clusters") printf '${existing.join('\\n')}\\n' ;;
  "get kubeconfig") name="$4"; [ "$3" = --internal ] && name="$5"; cat "${dir}/$(role "$name").yaml" ;;
  "create cluster"|"delete cluster"|"load docker-image") ;;
  *) echo "unexpected kind call: $*" >&2; exit 2 ;;
esac
`,
    kubectl: `#!/bin/sh
echo "kubectl $*" >> "${dir}/calls.log"
case "$*" in
  *"rollout status"*)
    cd "${root}" && nohup "${process.execPath}" cmd/fleetcache.ts --kubeconfig="${dir}/mgmt.yaml" --shard --shard-by=pipeline --metrics-bind-address=0 --health-probe-bind-address=127.0.0.1:${probePort} --log-level=info >"${dir}/service.log" 2>&1 &
    echo $! > "${dir}/service.pid"
    for i in $(seq 1 600); do curl -sf http://127.0.0.1:${probePort}/readyz >/dev/null 2>&1 && exit 0; sleep 0.1; done
    exit 1 ;;
  *"apply -k "*)
    for a in "$@"; do last="$a"; done
    cat "$last/kustomization.yaml" >> "${dir}/calls.log"
    exec "${process.execPath}" "${dir}/apply.ts" ;;
  *) echo "unexpected kubectl call: $*" >&2; exit 2 ;;
esac
`,
    // What the service needs of config/default here: the Pipeline CRD (it runs with admin rights).
    'apply.ts': `import { externalCluster } from '${root}e2e/harness/index.ts';
import { pipelineCrd } from '${root}lib/pipeline/index.ts';
await externalCluster('mgmt', '${dir}/mgmt.yaml').installCRDs([pipelineCrd]);
`,
  };
  for (const [name, text] of Object.entries(commands)) {
    await writeFile(join(dir, name), text);
    await chmod(join(dir, name), 0o755);
  }
  return dir;
}

/**
 * The spec reporter's `✖ failing tests:` sections of `output` (each runs from that line, after a
 * file's summary, to run.sh's next `e2e-kind:` line), repeated after it: a failed run prints tens
 * of KiB and a CI log keeps its tail, where the cause would otherwise not be.
 */
function failures(output: string): string {
  const sections: string[][] = [];
  let inSection = false;
  for (const line of output.split('\n')) {
    if (line.startsWith('✖ failing tests:')) { sections.push([]); inSection = true; }
    else if (line.startsWith('e2e-kind: ')) inSection = false;
    if (inSection) sections.at(-1)?.push(line);
  }
  return sections.length === 0 ? '(no failing tests reported: see the output above)' : `failing tests, again:\n${sections.map((s) => s.join('\n')).join('\n')}`;
}

async function stopService(dir: string): Promise<void> {
  const pid = Number(await readFile(join(dir, 'service.pid'), 'utf8').catch(() => ''));
  if (pid > 0) {
    try { process.kill(pid, 'SIGTERM'); } catch { /* already gone */ }
  }
}

describe('e2e-kind script', () => {
  const env = useClusters(4, { namePrefix: 'kind-standin' });
  const kubeconfigs = (): Map<string, string> => new Map(ROLES.map((role, i) => [role, env.clusters[i]?.adminKubeconfig ?? '']));

  it('runs every scenario file in run.sh\'s order on the same clusters, each from a reset, and deletes none of the clusters it reused', { timeout: 2_400_000 }, async (t) => {
    // run.sh's default: every e2e/scenarios/*.integration.test.ts, in byte order (LC_COLLATE=C).
    const scenarios = (await readdir(join(root, 'e2e/scenarios'))).filter((f) => f.endsWith('.integration.test.ts')).sort().map((f) => `e2e/scenarios/${f}`);
    assert.ok(scenarios.includes('e2e/scenarios/git-promotion.integration.test.ts') && scenarios.includes('e2e/scenarios/promotion.integration.test.ts'), 'the pair that shares state is among them');
    const dir = await standIns(kubeconfigs(), ROLES.map((r) => `fleetcache-${r}`));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const { code, output } = await runScript({ PATH: `${dir}:${process.env.PATH ?? ''}`, KIND_DEPLOY: '0' });
    const files = [...output.matchAll(/^e2e-kind: == (\S+)$/gm)].map((m) => m[1]);
    assert.deepEqual(files, scenarios, 'every scenario file, in order');
    assert.equal(code, 0, `${output}\n${failures(output)}`);
    assert.match(output, /e2e-kind: all passed/);
    assert.doesNotMatch(output, /ℹ fail [1-9]/);
    assert.doesNotMatch(output, /ℹ (skipped|todo|cancelled) [1-9]/, 'nothing skipped');
    assert.equal([...output.matchAll(/^e2e-kind: reset mgmt: /gm)].length, files.length, 'a reset before each file');
    const calls = await readFile(join(dir, 'calls.log'), 'utf8');
    for (const role of ROLES) assert.match(calls, new RegExp(`kind get kubeconfig --name fleetcache-${role}\\n`));
    assert.doesNotMatch(calls, /create cluster|delete cluster/, 'existing clusters are reused and never deleted');
    assert.doesNotMatch(calls, /docker build/, 'KIND_DEPLOY=0');
  });

  it('deletes only the clusters it created, and none with KEEP_CLUSTERS=1', async (t) => {
    // Only mgmt exists (say, the one `make kind-load` loads into); no scenario runs.
    for (const keep of ['0', '1']) {
      const dir = await standIns(kubeconfigs(), ['fleetcache-mgmt', 'someone-else']);
      t.after(() => rm(dir, { recursive: true, force: true }));
      const { code, output } = await runScript({ PATH: `${dir}:${process.env.PATH ?? ''}`, KIND_DEPLOY: '0', SCENARIOS: ' ', KEEP_CLUSTERS: keep });
      assert.equal(code, 0, `${output}\n${failures(output)}`);
      assert.match(output, /reusing fleetcache-mgmt \(it existed before this run: never deleted by it\)/);
      const calls = await readFile(join(dir, 'calls.log'), 'utf8');
      for (const role of ['workload-1', 'workload-2', 'workload-3']) assert.match(calls, new RegExp(`kind create cluster --name fleetcache-${role} `));
      assert.doesNotMatch(calls, /create cluster --name fleetcache-mgmt|delete cluster --name fleetcache-mgmt/);
      const deleted = [...calls.matchAll(/kind delete cluster --name (\S+)/g)].map((m) => m[1]);
      assert.deepEqual(deleted, keep === '1' ? [] : ['fleetcache-workload-1', 'fleetcache-workload-2', 'fleetcache-workload-3'], `KEEP_CLUSTERS=${keep}`);
    }
  });

  it('builds the image, loads it into the management cluster, applies config/default with it and runs a scenario against the deployed service', async (t) => {
    const dir = await standIns(kubeconfigs(), ROLES.map((r) => `fleetcache-${r}`));
    t.after(async () => {
      await stopService(dir);
      await rm(dir, { recursive: true, force: true });
    });
    const { code, output } = await runScript({ PATH: `${dir}:${process.env.PATH ?? ''}`, SCENARIOS: ' ', IMG: 'registry.local:5000/fleetcache:e2e-1' });
    const calls = await readFile(join(dir, 'calls.log'), 'utf8');
    assert.equal(code, 0, `${output}\n--- calls:\n${calls}\n--- service:\n${await readFile(join(dir, 'service.log'), 'utf8').catch(() => '')}`);
    assert.match(output, /scenario: the deployed service promotes across kind clusters/);
    assert.match(output, /ℹ pass 1\n/);
    const order = ['docker build -t registry.local:5000/fleetcache:e2e-1 .', 'kind load docker-image registry.local:5000/fleetcache:e2e-1 --name fleetcache-mgmt', ' apply -k ', 'rollout status deployment/fleetcache', 'kind get kubeconfig --internal --name fleetcache-workload-1', 'kind get kubeconfig --internal --name fleetcache-workload-2'];
    const at = order.map((c) => calls.indexOf(c));
    assert.ok(at.every((i) => i >= 0), `every step ran:\n${calls}`);
    assert.deepEqual(at, [...at].sort((a, b) => a - b), `in order:\n${calls}`);
    // What it applied: config/default, with the image just built.
    assert.match(calls, new RegExp(`resources:\\n  - ${root}config/default\\nimages:\\n  - name: fleetcache\\n    newName: registry\\.local:5000/fleetcache\\n    newTag: e2e-1\\n`));
  });
});
