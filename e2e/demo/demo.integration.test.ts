// `make demo DEMO_FLAGS=--keep-running` as a person runs it: on a terminal (util-linux script(1)
// provides the pseudo-terminal), through to Ctrl-C. Checks that every long wait is shown while it
// lasts, that the dashboard's address is printed when the service is up, and that a kept-running
// demo says nothing more — even while the pipeline promotes again — and stops cleanly on Ctrl-C.
// And `make demo DEMO_FLAGS=--git`, through to its end: real Flux (source- and kustomize-controller
// in each cluster) applies the commits fleetcache pushes, and the narration tells each step.
// And `make demo DEMO_FLAGS=--replicas=3`: three sharded replicas split 13 Pipelines, each promoted
// once, by the replica the narrated split gives it.
// And `make demo DEMO_FLAGS=--fleet`: prod a fleet of four real clusters, the canary promoted, ready
// and soaked before the rest, each wave told in order, every prod cluster at the release.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { stripVTControlCharacters } from 'node:util';
import { APP_NAME, PIPELINE_NAME, PIPELINE_NAMESPACE, type PipelineStatusView } from '../fleet.ts';
import { eventually, externalCluster } from '../harness/index.ts';

const demo = fileURLToPath(new URL('./demo.ts', import.meta.url));
const plain = (text: string): string => stripVTControlCharacters(text);

describe('make demo --keep-running on a terminal', () => {
  it('shows each wait, prints the dashboard address, then stays up silently until Ctrl-C', async () => {
    // script(1) runs the command through $SHELL -c; `exec` puts the demo itself in the shell's place.
    // Without it a dash that does not exec (SHELL unset or /bin/sh, as on CI) takes the Ctrl-C's
    // SIGINT, dies of it and script reports 130 while the demo is still cleaning up.
    const child = spawn('script', ['-q', '-e', '-c', `exec '${process.execPath}' '${demo}' --keep-running --timeout-seconds 300`, '/dev/null'], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...process.env, TERM: 'xterm', SHELL: '/bin/sh' }, // the same shell whatever runs the tests
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => { output += chunk.toString('utf8').replaceAll('\r\n', '\n'); });
    child.stderr.on('data', (chunk: Buffer) => { output += chunk.toString('utf8'); });
    const exited = new Promise<number | null>((resolve) => { child.once('exit', (code) => { resolve(code); }); });
    // After a failure: Ctrl-C, so that the demo stops its clusters and removes its files; kill if it hangs.
    after(async () => {
      if (child.exitCode !== null) return;
      child.stdin.write('\u0003');
      const killer = setTimeout(() => { child.kill('SIGKILL'); }, 60_000);
      await exited;
      clearTimeout(killer);
    });

    const banner = await eventually('the demo is up and says so', () => {
      if (child.exitCode !== null) throw new Error(`the demo exited early (${child.exitCode}):\n${output}`);
      const text = plain(output);
      const at = text.indexOf('Still running (Ctrl-C to stop):');
      return at >= 0 && /management kubeconfig: \S+\n/.test(text.slice(at)) ? text.slice(at) : undefined;
    }, 480_000);

    // Each wait draws its line the moment it starts, so every one shows up whatever the timing.
    for (const what of [
      'management: etcd, then kube-apiserver, to start and report ready (',
      'staging: etcd, then kube-apiserver, to start and report ready (',
      'prod: etcd, then kube-apiserver, to start and report ready (',
      'the CRDs, Secrets, HelmReleases and the Pipeline to be created (',
      'the Flux stand-ins to start watching (',
      'Flux to apply 1.0.0 in every cluster (',
      'the fleetcache service to be ready (',
      'the caches to sync and dev, staging, prod to be ready at 1.0.0 (',
      '1.1.0 to reach dev, staging, prod (',
    ]) assert.ok(output.includes(`\r\u001b[K`) && plain(output).includes(`waiting for ${what}`), `no wait shown for "${what}" in:\n${output}`);
    assert.match(plain(output), /✔ 1\.1\.0 promoted dev → staging → prod/);
    // The history holds the release only: no "promotion" of the 1.0.0 every cluster already ran.
    assert.match(plain(output), /promotions recorded: 1\.1\.0 → staging Succeeded, 1\.1\.0 → prod Succeeded\n/);

    // The dashboard line tells the truth about the running service.
    const metricsPort = Number(/\/metrics +http:\/\/127\.0\.0\.1:(\d+)\/metrics/.exec(banner)?.[1]);
    const url = `http://127.0.0.1:${metricsPort}/dashboard/`;
    const res = await fetch(url);
    await res.body?.cancel();
    if (res.status === 200) {
      assert.ok(banner.includes(`  dashboard          ${url}  (open it in a browser; no token needed`), banner);
    } else {
      assert.ok(banner.includes(`  dashboard          not served by this build of the service (GET ${url} answered ${res.status})`), banner);
    }
    // Every address the banner gives answers on the port it names (/debug/caches is on the metrics server).
    const probePort = /\/healthz \/readyz +http:\/\/127\.0\.0\.1:(\d+)\n/.exec(banner)?.[1];
    const caches = /\/debug\/caches +(http:\/\/\S+)\n/.exec(banner)?.[1];
    for (const address of [`http://127.0.0.1:${probePort ?? '?'}/readyz`, `http://127.0.0.1:${metricsPort}/metrics`, caches ?? '(no /debug/caches line)']) {
      const answer = await fetch(address);
      await answer.body?.cancel();
      assert.equal(answer.status, 200, `${address} from the banner:\n${banner}`);
    }
    const fromReady = plain(output).split('\n').find((l) => l.includes('fleetcache   dashboard: '));
    assert.ok(fromReady?.includes(url), `the dashboard is announced when the service is up:\n${output}`);

    // Promote again (1.2.0) while it is kept running: the service works, the demo stays silent.
    const kubeconfig = /management kubeconfig: (\S+)/.exec(banner)?.[1] ?? '';
    const management = externalCluster('management', kubeconfig);
    const lengthAtBanner = output.length;
    const path = `/apis/helm.toolkit.fluxcd.io/v2/namespaces/apps/helmreleases/${APP_NAME}`;
    const current = (await management.request('GET', path)).body as { spec: { chart: { spec: Record<string, unknown> } } };
    const put = await management.request('PUT', path, { ...current, spec: { ...current.spec, chart: { ...current.spec.chart, spec: { ...current.spec.chart.spec, version: '1.2.0' } } } });
    assert.equal(put.statusCode, 200);
    await eventually('1.2.0 is promoted to prod', async () => {
      const pipeline = (await management.request('GET', `/apis/fleetcache.dev/v1alpha1/namespaces/${PIPELINE_NAMESPACE}/pipelines/${PIPELINE_NAME}`)).body as { status?: PipelineStatusView };
      return pipeline.status?.promotions?.some((p) => p.environment === 'prod' && p.revision === '1.2.0' && p.state === 'Succeeded');
    }, 120_000);
    assert.equal(output.slice(lengthAtBanner), '', 'nothing printed after the banner');

    // Ctrl-C, typed on the terminal: everything stops and the demo exits 0.
    child.stdin.write('\u0003');
    assert.equal(await exited, 0, output);
    assert.doesNotMatch(output, /demo failed/);
    assert.equal(existsSync(kubeconfig), false, 'the demo removed its work directory');
    await assert.rejects(management.request('GET', '/readyz'), 'the management apiserver is stopped');
  });
});

/** Runs the demo to its end (SIGTERM at the test's end if it is still running); its output, plain. */
async function runDemo(args: readonly string[]): Promise<string> {
  const child = spawn(process.execPath, [demo, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => { output += chunk.toString('utf8'); });
  child.stderr.on('data', (chunk: Buffer) => { output += chunk.toString('utf8'); });
  const exited = new Promise<number | null>((resolve) => { child.once('exit', (code) => { resolve(code); }); });
  after(async () => {
    if (child.exitCode !== null) return;
    child.kill('SIGTERM');
    await exited;
  });
  assert.equal(await exited, 0, output);
  return plain(output);
}

describe('make demo --git, through real Flux', () => {
  it('promotes dev → staging → prod by commits that Flux applies, and tells each step', async () => {
    const text = await runDemo(['--git', '--timeout-seconds', '300']);
    assert.match(text, /Flux source-controller and kustomize-controller in \S+/);
    assert.match(text, /git +a human pushed [0-9a-f]{7} to main: clusters\/dev\/podinfo\.yaml asks for 1\.1\.0/);
    // From the service's log, in the order it acts: each promotion is Committed, then Succeeded once Flux runs it.
    const at = (pattern: RegExp): number => {
      const found = pattern.exec(text);
      assert.ok(found !== null, `no line matching ${String(pattern)} in:\n${text}`);
      return found.index;
    };
    const steps = [
      at(/fleetcache +pushed commit [0-9a-f]{7} to main \(staging ← 1\.1\.0\): promotion Committed/),
      at(/fleetcache +staging runs 1\.1\.0 \(commit [0-9a-f]{7} applied\): promotion Succeeded/),
      at(/fleetcache +pushed commit [0-9a-f]{7} to main \(prod ← 1\.1\.0\): promotion Committed/),
      at(/fleetcache +prod runs 1\.1\.0 \(commit [0-9a-f]{7} applied\): promotion Succeeded/),
    ];
    assert.deepEqual(steps, [...steps].sort((a, b) => a - b), `promotions told out of order:\n${text}`);
    // From Flux's objects in each cluster: the reconcile request, the new folder applied, what runs.
    for (const cluster of ['staging', 'prod']) {
      at(new RegExp(`${cluster} +fleetcache asked Flux to reconcile Kustomization apps/podinfo now`));
      at(new RegExp(`${cluster} +flux: the parent Kustomization applied the new commit's folder: Kustomization apps/podinfo now asks for 1\\.1\\.0`));
      at(new RegExp(`${cluster} +flux: kustomize-controller applied main@sha1:[0-9a-f]{7}: ConfigMap apps/podinfo now at 1\\.1\\.0`));
    }
    assert.match(text, /promotions recorded: 1\.1\.0 → staging Succeeded, 1\.1\.0 → prod Succeeded/);
    assert.match(text, /fleetcache: promote delivery\/podinfo to prod: 1\.1\.0\n +[0-9a-f]{7} fleetcache: promote delivery\/podinfo to staging: 1\.1\.0\n +[0-9a-f]{7} seed: release podinfo 1\.1\.0 to dev/);
    assert.match(text, /✔ 1\.1\.0 promoted dev → staging → prod across three real apiservers by real Flux/);
  });
});

describe('make demo --replicas=3, sharded', () => {
  it('splits the 13 Pipelines over three replicas, tells who owns and who promotes which, and promotes each once', async () => {
    const text = await runDemo(['--replicas=3', '--timeout-seconds', '300']);
    // The split, as each replica's /debug/shards reports it: every Pipeline on exactly one replica.
    const owned = [1, 2, 3].map((n) => {
      const line = new RegExp(`shards +replica-${n} \\(\\S+\\): (\\d+) Pipelines?(?:: (.*))?\\n`).exec(text);
      assert.ok(line !== null, `no split line for replica-${n} in:\n${text}`);
      return line[2] === undefined ? [] : line[2].split(', ');
    });
    const all = owned.flat().sort();
    assert.equal(all.length, 13, text);
    assert.equal(new Set(all).size, 13, 'no Pipeline on two replicas');
    assert.ok(all.includes('delivery/podinfo') && all.includes('team-c/cron'));
    // Each promotion told by the replica that owns the Pipeline.
    for (const [i, pipelines] of owned.entries()) {
      for (const p of pipelines) {
        for (const env of ['staging', 'prod']) assert.match(text, new RegExp(`replica-${i + 1} +promoted ${p} \\(${env} ← 1\\.1\\.0\\)`), `${p} → ${env}`);
      }
    }
    assert.match(text, /26 of 26 promotions of 1\.1\.0 logged \(13 Pipelines × staging, prod\), each by one replica, none twice/);
    assert.match(text, /✔ 1\.1\.0 promoted dev → staging → prod in 13 Pipelines by 3 replicas across three real apiservers/);
  });
});

describe('make demo --fleet, prod a fleet in waves', () => {
  it('refuses --fleet with --git or --replicas, in one line', async () => {
    for (const other of [['--git'], ['--replicas=2']]) {
      const child = spawn(process.execPath, [demo, '--fleet', ...other], { stdio: ['ignore', 'pipe', 'pipe'] });
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString('utf8'); });
      const code = await new Promise<number | null>((resolve) => { child.once('exit', (c) => { resolve(c); }); });
      assert.equal(code, 2, stderr);
      assert.match(stderr, /^demo: --fleet .* does not combine with --git or --replicas\n$/);
    }
  });

  it('promotes prod-1 (the canary), soaks it, then prod-2..prod-4, and tells each wave', async () => {
    const text = await runDemo(['--fleet', '--timeout-seconds', '300']);
    const at = (pattern: RegExp): number => {
      const found = pattern.exec(text);
      assert.ok(found !== null, `no line matching ${String(pattern)} in:\n${text}`);
      return found.index;
    };
    assert.match(text, /kubeconfig Secrets delivery\/\{prod-1,prod-2,prod-3,prod-4\} labelled fleet=prod \(prod-1 also wave=canary\)/);
    // From the service's log and the Pipeline's status, in the order it acts: the canary, its soak, the rest.
    const steps = [
      at(/fleetcache +promotion recorded \(prod\/canary ← 1\.1\.0\)/),
      at(/prod +wave canary starts: 1\.1\.0 patched into its 1 cluster/),
      at(/prod +wave canary ready at 1\.1\.0 \(1 of 1 cluster ready\); soaking 5 s before wave rest starts/),
      at(/fleetcache +promotion recorded \(prod\/rest ← 1\.1\.0\)/),
      at(/prod +wave rest starts: 1\.1\.0 patched into its 3 clusters/),
      at(/prod +wave rest ready at 1\.1\.0 \(3 of 3 clusters ready\)\n/),
    ];
    assert.deepEqual(steps, [...steps].sort((a, b) => a - b), `waves told out of order:\n${text}`);
    // The summary, from status: the rest started after the canary was ready and soaked; every prod cluster runs 1.1.0.
    const rest = /wave rest +prod-2, prod-3, prod-4 +started [\d.]+ s, ready [\d.]+ s, ([\d.]+) s after the previous wave was ready \(Succeeded\)/.exec(text);
    assert.ok(rest !== null, text);
    assert.ok(Number(rest[1]) >= 5, `the rest started ${rest[1]} s after the canary was ready, before its 5 s soak:\n${text}`);
    assert.match(text, /wave canary +prod-1 +started [\d.]+ s, ready [\d.]+ s \(Succeeded\)/);
    assert.match(text, /running in prod: prod-1 1\.1\.0, prod-2 1\.1\.0, prod-3 1\.1\.0, prod-4 1\.1\.0/);
    assert.match(text, /promotions recorded: .*1\.1\.0 → prod\/canary Succeeded/);
    assert.match(text, /✔ 1\.1\.0 promoted dev → staging → prod, a fleet of 4 clusters wave by wave \(canary, soaked 5 s, then the rest\), across 6 real apiservers/);
  });
});
