// `e2e/build-binaries.sh flux`, without building Flux: a copy of the script runs beside small go.mod
// files against a fake `go` (download, package list, build, and the module's directory in the
// module cache, where the CRDs are).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { chmod, copyFile, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { fakeGoScript } from '../fake-go.test-util.ts';

const script = fileURLToPath(new URL('../build-binaries.sh', import.meta.url));
const MODULES = { 'source-controller': 'v1.9.0', 'kustomize-controller': 'v1.9.6' } as const;

const fakeGo = fakeGoScript(`  "mod download")
    url="https://proxy.golang.org/github.com/fluxcd/$name/@v/v1.zip"
    echo "# get $url" >&2; echo "# get $url: 200 OK (0.010s)" >&2 ;;
  "list -deps") echo "github.com/fluxcd/pkg/runtime" ;;
  "list -m") echo "$FAKE_GO_MODCACHE/$name" ;;
  "build -v")
    out=""; pkg=""
    while (($#)); do case "$1" in -o) out="$2"; shift 2 ;; *) pkg="$1"; shift ;; esac; done
    echo "github.com/fluxcd/pkg/runtime" >&2; echo "$pkg" >&2
    printf '#!/bin/sh\\n' >"$out"; chmod +x "$out" ;;
`);

interface Run { readonly code: number; readonly stdout: string; readonly stderr: string }

let root: string;
before(async () => { root = await mkdtemp(join(tmpdir(), 'fleetcache-build-flux-')); });
after(async () => { await rm(root, { recursive: true, force: true }); });

async function sandbox(name: string): Promise<{ run: (env?: Record<string, string>) => Promise<Run>; assets: string; goCalls: () => Promise<string[]> }> {
  const dir = join(root, name);
  const modcache = join(dir, 'modcache');
  await mkdir(join(dir, 'bin'), { recursive: true });
  await mkdir(join(dir, 'e2e'), { recursive: true });
  await copyFile(script, join(dir, 'e2e/build-binaries.sh'));
  await chmod(join(dir, 'e2e/build-binaries.sh'), 0o755);
  for (const [module, version] of Object.entries(MODULES)) {
    await mkdir(join(dir, 'e2e/gomod', module), { recursive: true });
    await writeFile(join(dir, 'e2e/gomod', module, 'go.mod'), `module fleetcache.dev/e2e/${module}\n\ngo 1.26.0\n\nrequire github.com/fluxcd/${module} ${version}\n`);
    await mkdir(join(modcache, module, 'config/crd/bases'), { recursive: true });
    // The module cache's files are read-only: the copies must still be replaceable.
    await writeFile(join(modcache, module, 'config/crd/bases', `${module}.yaml`), `kind: CustomResourceDefinition # ${module}\n`, { mode: 0o444 });
  }
  await writeFile(join(dir, 'bin/go'), fakeGo, { mode: 0o755 });
  const log = join(dir, 'go-calls.log');
  await writeFile(log, '');
  const env = { PATH: `${join(dir, 'bin')}:${process.env.PATH ?? ''}`, HOME: dir, XDG_CACHE_HOME: join(dir, 'xdg'), FAKE_GO_LOG: log, FAKE_GO_MODCACHE: modcache, TERM: 'dumb' };
  return {
    assets: join(dir, 'xdg/fleetcache/assets/flux-source-controller-v1.9.0_kustomize-controller-v1.9.6'),
    goCalls: async () => (await readFile(log, 'utf8')).split('\n').filter((l) => l !== ''),
    run: (extra = {}) => new Promise((resolve) => {
      execFile(join(dir, 'e2e/build-binaries.sh'), ['flux'], { env: { ...env, ...extra }, encoding: 'utf8' }, (error, stdout, stderr) => {
        resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : -1, stdout, stderr });
      });
    }),
  };
}

describe('e2e/build-binaries.sh flux', () => {
  it('builds both controllers into a cache keyed by their versions, with progress, and copies their CRDs beside them', async () => {
    const box = await sandbox('build');
    const first = await box.run();
    assert.equal(first.code, 0, first.stderr);
    assert.equal(first.stdout, `${box.assets}\n`, 'stdout is the directory alone');
    assert.deepEqual((await readdir(box.assets)).sort(), ['crds', 'kustomize-controller', 'source-controller']);
    assert.deepEqual((await readdir(join(box.assets, 'crds'))).sort(), ['kustomize-controller.yaml', 'source-controller.yaml']);
    assert.match(first.stderr, /building source-controller and kustomize-controller from source/);
    assert.match(first.stderr, /\[2\/3\] building source-controller: 1\/1 packages/);
    assert.match(first.stderr, /\[3\/3\] building kustomize-controller: 1\/1 packages/);

    const calls = (await box.goCalls()).length;
    const again = await box.run();
    assert.deepEqual([again.code, again.stdout, again.stderr], [0, `${box.assets}\n`, ''], 'cached: nothing but the directory');
    assert.equal((await box.goCalls()).length, calls, 'go is not run again');
  });

  it('uses FLUX_ASSETS when it holds both binaries and crds/, and builds otherwise', async () => {
    const box = await sandbox('env');
    const mine = join(root, 'mine');
    await mkdir(join(mine, 'crds'), { recursive: true });
    for (const bin of ['source-controller', 'kustomize-controller']) await writeFile(join(mine, bin), '#!/bin/sh\n', { mode: 0o755 });
    assert.deepEqual(await box.run({ FLUX_ASSETS: mine }), { code: 0, stdout: `${mine}\n`, stderr: '' });
    assert.deepEqual(await box.goCalls(), []);
    await rm(join(mine, 'crds'), { recursive: true });
    const built = await box.run({ FLUX_ASSETS: mine });
    assert.equal(built.stdout, `${box.assets}\n`, 'without crds/ the directory is not complete: the pinned pair is built');
  });

  it('rejects an unknown target', async () => {
    const box = await sandbox('usage');
    const res = await new Promise<Run>((resolve) => {
      execFile(join(root, 'usage/e2e/build-binaries.sh'), ['helm'], { encoding: 'utf8' }, (error, stdout, stderr) => {
        resolve({ code: typeof error?.code === 'number' ? error.code : 0, stdout, stderr });
      });
    });
    assert.equal(res.code, 2);
    assert.match(res.stderr, /unknown target 'helm' \(usage: build-binaries\.sh \[apiserver\|flux\]\)/);
    assert.deepEqual(await box.goCalls(), []);
  });
});
