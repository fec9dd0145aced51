// The binary build's progress output (e2e/build-binaries.sh), without building Kubernetes: a copy of
// the script runs beside small go.mod files against a fake `go` that prints what go prints (`go mod
// download -x` fetch lines, `go build -v` import paths, a compiler error on request).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { access, chmod, copyFile, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { fakeGoScript } from './fake-go.test-util.ts';

const script = fileURLToPath(new URL('./build-binaries.sh', import.meta.url));

// Two modules as e2e/gomod has them. Of the zips their requirements need, golang.org/x/sys is shared,
// go-ansiterm is already in the module cache (under its escaped path, !azure), example.com/local is
// replaced by a directory and k8s.io/api by a pinned version: 5 to download.
const etcdGoMod = `module fleetcache.dev/e2e/etcd

go 1.26.0

require (
\tgo.etcd.io/etcd/server/v3 v3.6.16
\tgithub.com/BurntSushi/toml v1.4.0 // indirect
\tgolang.org/x/sys v0.30.0 // indirect
)
`;
const kubeGoMod = `module fleetcache.dev/e2e/kube-apiserver

go 1.24.0

require k8s.io/kubernetes v1.34.4

require (
\tgithub.com/Azure/go-ansiterm v0.0.0-20230124172434-306776ec8161 // indirect
\texample.com/local v0.0.0 // indirect
\tgolang.org/x/sys v0.30.0 // indirect
\tk8s.io/api v0.0.0 // indirect
)

replace (
\texample.com/local => ./local
\tk8s.io/api => k8s.io/api v0.34.4
)
`;
// What the fake `go mod download -x` fetches in each module (what real go would, given the cache).
const downloads: Record<string, string[]> = {
  etcd: ['go.etcd.io/etcd/server/v3 v3.6.16', 'github.com/!burnt!sushi/toml v1.4.0', 'golang.org/x/sys v0.30.0'],
  'kube-apiserver': ['k8s.io/kubernetes v1.34.4', 'k8s.io/api v0.34.4'],
};
// Packages `go build -v` compiles for each binary (the main package is printed too, but not counted).
const packages: Record<string, string[]> = {
  etcd: ['internal/goarch', 'vendor/golang.org/x/net/idna', 'github.com/BurntSushi/toml', 'go.etcd.io/etcd/server/v3/embed'],
  'kube-apiserver': ['runtime', 'net/http', 'k8s.io/api/core/v1', 'k8s.io/apimachinery/pkg/runtime', 'k8s.io/apiserver/pkg/server', 'k8s.io/kubernetes/pkg/controlplane', 'gopkg.in/yaml.v3'],
};

// Emulates the go subcommands the script runs. FAKE_GO_FAIL=download|etcd|kube-apiserver fails that step
// the way go does: its own lines on stderr, then a non-zero exit.
const fakeGo = fakeGoScript(`  "mod download")
    while read -r path version; do
      [[ -z "$path" ]] && continue
      url="https://proxy.golang.org/$path/@v/$version"
      echo "# get $url.mod" >&2; echo "# get $url.mod: 200 OK (0.010s)" >&2
      echo "# get $url.zip" >&2
      if [[ "\${FAKE_GO_FAIL:-}" == download ]]; then
        echo "# get $url.zip: 404 Not Found (0.010s)" >&2
        echo "go: $path@$version: reading $url.zip: 404 Not Found" >&2
        exit 1
      fi
      echo "# get $url.zip: 200 OK (0.020s)" >&2
    done <"$FAKE_GO_DIR/$name.downloads"
    ;;
  "list -deps")
    # go prints an empty line for each package the template leaves out (the cached std ones, main).
    echo; echo
    cat "$FAKE_GO_DIR/$name.packages"
    echo
    ;;
  "build -v")
    out=""; pkg=""
    while (($#)); do case "$1" in -o) out="$2"; shift 2 ;; *) pkg="$1"; shift ;; esac; done
    while read -r p; do echo "$p" >&2; done <"$FAKE_GO_DIR/$name.packages"
    if [[ "\${FAKE_GO_FAIL:-}" == "$name" ]]; then
      echo "# k8s.io/kubernetes/pkg/controlplane" >&2
      echo "pkg/controlplane/instance.go:42:2: undefined: legacyProvider" >&2
      exit 1
    fi
    echo "$pkg" >&2
    printf '#!/bin/sh\\n' >"$out"; chmod +x "$out"
    ;;
`);

interface Run {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

let root: string;
let runs = 0;

before(async () => {
  root = await mkdtemp(join(tmpdir(), 'fleetcache-build-binaries-'));
});
after(async () => {
  await rm(root, { recursive: true, force: true });
});

/** A fresh checkout (script + go.mod files), fake go and empty caches; returns how to run the script in it. */
async function sandbox(): Promise<{ dir: string; assets: string; run: (env?: Record<string, string>, viaTerminal?: boolean) => Promise<Run>; goCalls: () => Promise<string[]> }> {
  const dir = join(root, `run-${++runs}`);
  const bin = join(dir, 'bin');
  const fake = join(dir, 'fake');
  const modcache = join(dir, 'modcache');
  await Promise.all([bin, fake, join(dir, 'e2e/gomod/etcd'), join(dir, 'e2e/gomod/kube-apiserver'), join(modcache, 'cache/download/github.com/!azure/go-ansiterm/@v')].map((d) => mkdir(d, { recursive: true })));
  await copyFile(script, join(dir, 'e2e/build-binaries.sh'));
  await chmod(join(dir, 'e2e/build-binaries.sh'), 0o755);
  await writeFile(join(dir, 'e2e/gomod/etcd/go.mod'), etcdGoMod);
  await writeFile(join(dir, 'e2e/gomod/kube-apiserver/go.mod'), kubeGoMod);
  await writeFile(join(modcache, 'cache/download/github.com/!azure/go-ansiterm/@v/v0.0.0-20230124172434-306776ec8161.zip'), '');
  for (const name of ['etcd', 'kube-apiserver']) {
    await writeFile(join(fake, `${name}.downloads`), `${downloads[name]!.join('\n')}\n`);
    await writeFile(join(fake, `${name}.packages`), `${packages[name]!.join('\n')}\n`);
  }
  await writeFile(join(bin, 'go'), fakeGo, { mode: 0o755 });
  const log = join(dir, 'go-calls.log');
  await writeFile(log, '');
  const baseEnv: Record<string, string> = {
    PATH: `${bin}:${process.env.PATH ?? ''}`,
    HOME: dir,
    XDG_CACHE_HOME: join(dir, 'xdg'),
    FAKE_GO_LOG: log,
    FAKE_GO_DIR: fake,
    FAKE_GO_MODCACHE: modcache,
    TERM: 'xterm',
  };
  const target = join(dir, 'e2e/build-binaries.sh');
  return {
    dir,
    assets: join(dir, 'xdg/fleetcache/assets/kube-apiserver-v1.34.4_etcd-v3.6.16'),
    goCalls: async () => (await readFile(log, 'utf8')).split('\n').filter((l) => l !== ''),
    run: async (env = {}, viaTerminal = false) => {
      const stdoutFile = join(dir, 'stdout.txt');
      // A terminal for stderr: util-linux script(1) runs the command on a pseudo-terminal; stdout
      // still goes to a file so that it can be checked on its own.
      const [file, args] = viaTerminal
        ? ['script', ['-q', '-e', '-c', `'${target}' >'${stdoutFile}'`, '/dev/null']]
        : [target, []];
      const result = await new Promise<Run>((resolve) => {
        execFile(file, args, { env: { ...baseEnv, ...env }, encoding: 'utf8' }, (error, stdout, stderr) => {
          resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : -1, stdout, stderr });
        });
      });
      if (!viaTerminal) return result;
      return { code: result.code, stdout: await readFile(stdoutFile, 'utf8'), stderr: result.stdout.replaceAll('\r\n', '\n') };
    },
  };
}

const progressLines = (stderr: string, phase: string): string[] => stderr.split('\n').filter((l) => l.includes(`] ${phase}: `) && !l.endsWith('counting packages'));

describe('e2e/build-binaries.sh progress', () => {
  it('reports each phase with counts on stderr and prints only the directory on stdout', async () => {
    const box = await sandbox();
    const { code, stdout, stderr } = await box.run({ FLEETCACHE_PROGRESS_INTERVAL: '0' });
    assert.equal(code, 0, stderr);
    assert.equal(stdout, `${box.assets}\n`);
    assert.deepEqual((await readdir(box.assets)).sort(), ['etcd', 'kube-apiserver']);

    // 5 zips: the shared one once, the cached one (escaped path) and the local replacement not at all.
    const download = progressLines(stderr, 'downloading Go modules');
    assert.match(download[0] ?? '', /^build-binaries: \[1\/3\] downloading Go modules: 0\/5 modules, 5 to go, \d+s \(\d+s in all\)$/);
    assert.ok(download.some((l) => l.includes(': 3/5 modules, 2 to go,')), stderr);
    assert.match(download.at(-1) ?? '', /: 5\/5 modules, 0 to go,/);

    const etcd = progressLines(stderr, 'building etcd');
    assert.match(etcd[0] ?? '', /^build-binaries: \[2\/3\] building etcd: 0\/4 packages, 4 to go, \d+s \(\d+s in all\)$/);
    for (const done of [1, 2, 3]) assert.ok(etcd.some((l) => l.includes(`: ${done}/4 packages, ${4 - done} to go,`)), stderr);
    assert.match(etcd.at(-1) ?? '', /: 4\/4 packages, linking,/);
    assert.match(stderr, /^build-binaries: built etcd in \d+s$/m);

    const kube = progressLines(stderr, 'building kube-apiserver');
    assert.match(kube[0] ?? '', /^build-binaries: \[3\/3\] building kube-apiserver: 0\/7 packages, 7 to go,/);
    assert.match(kube.at(-1) ?? '', /: 7\/7 packages, linking,/);
    assert.match(stderr, /^build-binaries: built kube-apiserver in \d+s$/m);
    // Nothing of go's own progress chatter leaks through.
    assert.doesNotMatch(stderr, /# get |^internal\/goarch$|^k8s\.io\/kubernetes\/cmd\/kube-apiserver$/m);
  });

  it('writes at most one line per interval when stderr is not a terminal', async () => {
    const box = await sandbox();
    const { code, stderr } = await box.run({ FLEETCACHE_PROGRESS_INTERVAL: '3600' });
    assert.equal(code, 0, stderr);
    // The interval never elapses here: a line when each phase starts and one when it ends, nothing between.
    assert.deepEqual(progressLines(stderr, 'downloading Go modules').map((l) => l.replace(/, \d+s \(\d+s in all\)$/, '')), [
      'build-binaries: [1/3] downloading Go modules: 0/5 modules, 5 to go',
      'build-binaries: [1/3] downloading Go modules: 5/5 modules, 0 to go',
    ]);
    assert.deepEqual(progressLines(stderr, 'building etcd').map((l) => l.replace(/, \d+s \(\d+s in all\)$/, '')), [
      'build-binaries: [2/3] building etcd: 0/4 packages, 4 to go',
      'build-binaries: [2/3] building etcd: 4/4 packages, linking',
    ]);
    assert.equal(progressLines(stderr, 'building kube-apiserver').length, 2, stderr);
  });

  it('keeps one line updated in place on a terminal', async () => {
    const box = await sandbox();
    const { code, stdout, stderr } = await box.run({ FLEETCACHE_PROGRESS_INTERVAL: '3600' }, true);
    assert.equal(code, 0, stderr);
    assert.equal(stdout, `${box.assets}\n`);
    // Every change redraws the line (carriage return, erase line); a newline only ends a phase.
    const redraws = stderr.split('\r\u001b[K').slice(1);
    for (const done of [1, 2, 3, 4]) assert.ok(redraws.some((r) => r.startsWith(`build-binaries: [2/3] building etcd: ${done}/4 packages`)), JSON.stringify(stderr));
    assert.ok(redraws.some((r) => r.startsWith('build-binaries: [1/3] downloading Go modules: 3/5 modules')), JSON.stringify(stderr));
    const lines = stderr.split('\n').filter((l) => l !== '');
    assert.ok(lines.length <= 8, `expected a handful of lines, got ${lines.length}: ${JSON.stringify(stderr)}`);
  });

  it('prints nothing but the directory when both binaries are cached', async () => {
    const box = await sandbox();
    assert.equal((await box.run()).code, 0);
    const callsAfterBuild = (await box.goCalls()).length;
    const { code, stdout, stderr } = await box.run();
    assert.equal(code, 0);
    assert.equal(stdout, `${box.assets}\n`);
    assert.equal(stderr, '');
    assert.equal((await box.goCalls()).length, callsAfterBuild, 'go is not run at all');
  });

  it("passes a compiler error through, fails, and leaves no binary behind", async () => {
    const box = await sandbox();
    const { code, stdout, stderr } = await box.run({ FAKE_GO_FAIL: 'kube-apiserver', FLEETCACHE_PROGRESS_INTERVAL: '3600' });
    assert.notEqual(code, 0);
    assert.equal(stdout, '');
    assert.match(stderr, /^# k8s\.io\/kubernetes\/pkg\/controlplane\npkg\/controlplane\/instance\.go:42:2: undefined: legacyProvider$/m);
    assert.match(stderr, /^build-binaries: building kube-apiserver failed \(go's output above\)$/m);
    assert.deepEqual((await readdir(box.assets)).filter((f) => !f.startsWith('.')), ['etcd']);
  });

  it('passes a download error through and fails before building', async () => {
    const box = await sandbox();
    const { code, stdout, stderr } = await box.run({ FAKE_GO_FAIL: 'download' });
    assert.notEqual(code, 0);
    assert.equal(stdout, '');
    assert.match(stderr, /^go: go\.etcd\.io\/etcd\/server\/v3@v3\.6\.16: reading .*404 Not Found$/m);
    assert.match(stderr, /^build-binaries: downloading Go modules failed \(go's output above\)$/m);
    assert.ok(!(await box.goCalls()).some((c) => c.startsWith('build ')), 'nothing is built');
  });

  it('says how to proceed when go is not installed', async () => {
    const box = await sandbox();
    // PATH without the fake and without any real go, but with bash, awk and coreutils.
    const dirs = await Promise.all((process.env.PATH ?? '').split(':').filter((d) => d !== '').map(async (d) => (await access(join(d, 'go')).then(() => true, () => false)) ? undefined : d));
    const { code, stdout, stderr } = await box.run({ PATH: dirs.filter((d) => d !== undefined).join(':') });
    assert.equal(code, 1);
    assert.equal(stdout, '');
    assert.match(stderr, /^build-binaries: go is not on PATH: install Go \(https:\/\/go\.dev\/dl\/\), or set KUBEBUILDER_ASSETS to a directory holding kube-apiserver and etcd$/m);
    assert.equal((await box.goCalls()).length, 0);
  });

  it('rejects a progress interval that is not a number of seconds', async () => {
    const box = await sandbox();
    const { code, stdout, stderr } = await box.run({ FLEETCACHE_PROGRESS_INTERVAL: '5s' });
    assert.equal(code, 2);
    assert.equal(stdout, '');
    assert.match(stderr, /FLEETCACHE_PROGRESS_INTERVAL must be a whole number of seconds, got '5s'/);
  });
});
