// `make demo`: fleetcache's main job on an embedded default. Starts three real Kubernetes control
// planes (management = dev, staging, prod), installs a Pipeline for the podinfo HelmRelease, runs the
// fleetcache service against the management cluster, and plays a release: dev gets 1.1.0, a Flux
// stand-in applies it, fleetcache sees it ready and promotes it to staging, then to prod.
// With --git, every cluster runs Flux's own source-controller and kustomize-controller against a
// Git repository (a local git http-backend) with one folder per environment: a parent Kustomization
// applies the folder, a child Kustomization's spec.postBuild.substitute.version carries the version.
// A human commits 1.1.0 into dev's folder; fleetcache promotes by committing into staging's, then
// prod's folder and asking Flux to reconcile; a promotion is Committed until Flux has applied it.
// Every long wait shows what it waits for and for how long (e2e/demo/narrator.ts). Once the service
// is up the demo prints its dashboard's address; with --keep-running it then stays up, silent, until
// Ctrl-C.
//
//   node e2e/demo/demo.ts [--keep-running] [--git] [--release 1.1.0] [--timeout-seconds 300]
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { git, GitServer } from '../git/server.ts';
import { resolveFluxAssets } from '../flux/assets.ts';
import type { FluxControllers } from '../flux/controllers.ts';
import { appliedConfigVersion, FLUX_REPOSITORY, KUSTOMIZATIONS, releaseToDevInGit, setUpFluxFleet, VERSION_PATH } from '../flux/fleet.ts';
import { appliedVersion, APP_NAMESPACE, ENVIRONMENTS, FLEET_SERVICE_ARGS, readPipeline, releaseToDev, setUpFleet, startFlux, type Fleet, type PipelineStatusView } from '../fleet.ts';
import { freePort, resolveAssets, startCluster, type TestCluster } from '../harness/index.ts';
import { dashboardLine } from './dashboard.ts';
import { fluxChanges, kustomizationView, type KustomizationView } from './flux-narration.ts';
import { Narrator, type Wait } from './narrator.ts';

const { values: args } = parseArgs({
  options: {
    'keep-running': { type: 'boolean', default: false },
    git: { type: 'boolean', default: false },
    release: { type: 'string', default: '1.1.0' },
    'timeout-seconds': { type: 'string', default: '300' },
  },
});
const release = args.release;
const timeoutMs = Number(args['timeout-seconds']) * 1000;
const color = process.stdout.isTTY ? (code: number, text: string) => `\u001b[${code}m${text}\u001b[0m` : (_: number, text: string) => text;
const t0 = Date.now();
const stamp = (): string => color(90, `[${((Date.now() - t0) / 1000).toFixed(1).padStart(5)}s]`);
const narrator = new Narrator();
// With --keep-running, once the summary and the addresses are out the demo says nothing more.
let quiet = false;
const say = (who: string, text: string): void => { if (!quiet) narrator.line(`${stamp()} ${color(36, who.padEnd(12))} ${text}`); };
const step = (text: string): void => { narrator.line(`\n${stamp()} ${color(1, `▶ ${text}`)}`); };

const clusters: TestCluster[] = [];
const stoppers: (() => Promise<void>)[] = [];
let service: ChildProcess | undefined;
const serviceLog: string[] = [];

async function cleanup(): Promise<void> {
  if (service?.exitCode === null) {
    service.kill('SIGTERM');
    await new Promise((resolve) => service?.once('exit', resolve));
  }
  for (const stop of stoppers.reverse()) await stop().catch(() => undefined);
  await Promise.all(clusters.map((c) => c.stop()));
}

async function main(): Promise<void> {
  step('Starting three real Kubernetes control planes (etcd + kube-apiserver each, no Docker)');
  // Built from source on the very first run (minutes; the build reports its progress on stderr).
  say('assets', `kube-apiserver and etcd in ${resolveAssets().dir}`);
  for (const name of ['management', 'staging', 'prod']) {
    const cluster = await narrator.wait(`${name}: etcd, then kube-apiserver, to start and report ready`, () => startCluster({ name }));
    clusters.push(cluster);
    say(name, `ready at ${cluster.server} (apiserver up in ${(cluster.timings.apiserverMs / 1000).toFixed(1)} s)`);
  }
  const [management, staging, prod] = clusters as [TestCluster, TestCluster, TestCluster];
  const fleet: Fleet = { management, staging, prod };
  const envCluster: Record<string, string> = { dev: 'management', staging: 'staging', prod: 'prod' };

  let gitServer: GitServer | undefined;
  let fluxWatch: FluxWatch | undefined;
  if (args.git) {
    // Built from source on the very first run (minutes; progress on stderr), before any spinner.
    say('assets', `Flux source-controller and kustomize-controller in ${resolveFluxAssets().dir}`);
    step('Starting a Git server (git http-backend on loopback) with a folder per environment');
    gitServer = await GitServer.start();
    const server = gitServer;
    stoppers.push(() => server.close());
    step("Starting Flux's source-controller and kustomize-controller in each cluster, then the Pipeline");
    let flux: FluxControllers[] = [];
    stoppers.push(async () => { await Promise.all(flux.map((f) => f.stop())); });
    flux = await narrator.wait("Flux's controllers to start in management, staging and prod, and the Pipeline to be created", () => setUpFluxFleet(fleet, server, '1.0.0'));
    say('git', `${server.url(FLUX_REPOSITORY)}: clusters/{dev,staging,prod}/podinfo.yaml, child Kustomization apps/podinfo at 1.0.0, marked # {"$promotion": "delivery:podinfo:<env>"}`);
    say('flux', 'in each cluster: GitRepository flux-system/fleet (polled every 5 s), parent Kustomization flux-system/fleet applying ./clusters/<env>');
    say('management', `Pipeline delivery/podinfo: Kustomization apps/podinfo in dev (local) → staging (Secret) → prod (Secret), revisionPath ${VERSION_PATH}, strategy git (commit + push to main)`);
    const watch = watchFlux(clusters);
    fluxWatch = watch;
    stoppers.push(() => watch.stop());
    // Flux applies the seed in each cluster in its own time: a service started before prod ran it
    // would see staging at 1.0.0 and prod not yet, and promote 1.0.0 to prod (a commit with nothing
    // to change). The demo starts from a settled fleet.
    await waitFor('Flux to apply 1.0.0 in management, staging and prod', async (wait) => {
      const versions = await Promise.all(clusters.map((c) => appliedConfigVersion(c).catch(() => undefined)));
      const pending = clusters.filter((_, i) => versions[i] !== '1.0.0').map((c) => c.name);
      if (pending.length > 0) wait.update(`Flux to apply 1.0.0 in ${pending.join(', ')}`);
      return pending.length === 0;
    });
  } else {
    step('Installing CRDs, podinfo 1.0.0 in every cluster, kubeconfig Secrets and the Pipeline');
    await narrator.wait('the CRDs, Secrets, HelmReleases and the Pipeline to be created', () => setUpFleet(fleet, '1.0.0'));
    say('management', 'Pipeline delivery/podinfo: dev (local) → staging (Secret) → prod (Secret), strategy patch /spec/chart/spec/version');
    step('Starting a Flux stand-in in each cluster (applies the chart version a HelmRelease asks for)');
    stoppers.push(await narrator.wait('the Flux stand-ins to start watching', () => startFlux(clusters, {
      applyDelayMs: 1500,
      onReconciled: (e) => { say(e.cluster, `flux: HelmRelease ${e.namespace}/${e.name} applied ${color(33, e.revision)}, Ready`); },
    })));
  }

  step('Starting the fleetcache service against the management cluster');
  const work = await mkdtemp(join(tmpdir(), 'fleetcache-demo-'));
  stoppers.push(() => rm(work, { recursive: true, force: true }));
  const kubeconfigPath = join(work, 'management.kubeconfig');
  await writeFile(kubeconfigPath, management.adminKubeconfig, { mode: 0o600 });
  const [healthPort, metricsPort] = [await freePort(), await freePort()];
  service = spawn(process.execPath, [
    new URL('../../cmd/fleetcache.ts', import.meta.url).pathname,
    `--kubeconfig=${kubeconfigPath}`,
    `--health-probe-bind-address=127.0.0.1:${healthPort}`,
    `--metrics-bind-address=127.0.0.1:${metricsPort}`,
    '--metrics-secure=false', // a local demo: plain metrics, so that curl needs no token
    '--log-level=info',
    ...(args.git ? ['--allow-private-git-hosts', '--allow-insecure-git-http'] : []),
    ...FLEET_SERVICE_ARGS,
  ], { stdio: ['ignore', 'inherit', 'pipe'] });
  let partial = '';
  service.stderr?.on('data', (chunk: Buffer) => {
    const lines = (partial + chunk.toString()).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) {
      serviceLog.push(line);
      if (serviceLog.length > 200) serviceLog.shift();
      try {
        const entry = JSON.parse(line) as { msg?: string; level?: string; environment?: string; revision?: string; commit?: string };
        if (entry.msg !== undefined && entry.commit !== undefined && entry.msg.startsWith('committed')) say('fleetcache', `pushed commit ${entry.commit.slice(0, 7)} to main (${entry.environment ?? '?'} ← ${entry.revision ?? '?'}): promotion Committed, ${entry.msg.replace(/^committed; /, '')}`);
        else if (entry.msg === 'promoted' && entry.commit !== undefined) say('fleetcache', `${entry.environment ?? '?'} runs ${entry.revision ?? '?'} (commit ${entry.commit.slice(0, 7)} applied): promotion Succeeded`);
        else if (entry.msg !== undefined && /promot/i.test(entry.msg)) say('fleetcache', entry.msg + (entry.environment === undefined ? '' : ` (${entry.environment}${entry.revision === undefined ? '' : ` ← ${entry.revision}`})`));
        else if (entry.level === 'error') say('fleetcache', color(31, entry.msg ?? line));
      } catch { /* not JSON: keep it for the failure report only */ }
    }
  });
  await waitFor('the fleetcache service to be ready', () => fetch(`http://127.0.0.1:${healthPort}/readyz`).then((r) => r.ok, () => false));
  say('fleetcache', `ready: http://127.0.0.1:${healthPort}/readyz, metrics http://127.0.0.1:${metricsPort}/metrics`);
  const dashboard = await dashboardLine(metricsPort, (url) => color(4, url));
  say('fleetcache', `dashboard: ${dashboard}`);

  step('Waiting for the pipeline to see every environment ready at 1.0.0');
  await waitFor(`the caches to sync and ${ENVIRONMENTS.join(', ')} to be ready at 1.0.0`, async (wait) => {
    const status = (await readPipeline(fleet)).status;
    const pending = ENVIRONMENTS.filter((env) => !(status?.environments?.find((e) => e.name === env)?.revision === '1.0.0' && status.environments.find((e) => e.name === env)?.ready === true));
    if (pending.length > 0) wait.update(`the caches to sync and ${pending.join(', ')} to be ready at 1.0.0`);
    return pending.length === 0;
  });
  say('fleetcache', 'dev, staging and prod all ready at 1.0.0');

  step(`Releasing podinfo ${release} to dev`);
  const releasedAt = Date.now();
  if (gitServer === undefined) {
    await releaseToDev(fleet, release);
    say('management', `HelmRelease apps/podinfo now asks for chart ${color(33, release)}`);
  } else {
    const commit = await releaseToDevInGit(gitServer, release);
    say('git', `a human pushed ${commit.slice(0, 7)} to main: clusters/dev/podinfo.yaml asks for ${color(33, release)}`);
  }
  const appliedInProd = gitServer === undefined ? appliedVersion : appliedConfigVersion;

  const reached: Record<string, number> = {};
  let last = '';
  await waitFor(`${release} to reach ${ENVIRONMENTS.join(', ')}`, async (wait) => {
    const status = (await readPipeline(fleet)).status;
    const line = describe(status);
    if (line !== last) {
      last = line;
      say('pipeline', line);
    }
    wait.update(awaiting(status, release, gitServer !== undefined));
    for (const env of status?.environments ?? []) {
      if (env.ready && env.revision === release && reached[env.name] === undefined) reached[env.name] = Date.now() - releasedAt;
    }
    return reached.prod !== undefined && await appliedInProd(prod) === release;
  });

  await fluxWatch?.flush(); // tell prod's apply before the summary
  step('Summary');
  console.log(`\n  ${'environment'.padEnd(12)} ${'cluster'.padEnd(12)} ${'revision'.padEnd(10)} ready after release`);
  for (const env of ENVIRONMENTS) {
    console.log(`  ${env.padEnd(12)} ${(envCluster[env] ?? '').padEnd(12)} ${release.padEnd(10)} ${((reached[env] ?? 0) / 1000).toFixed(1)} s`);
  }
  const promotions = (await readPipeline(fleet)).status?.promotions ?? [];
  console.log(`\n  promotions recorded: ${promotions.map((p) => `${p.revision} → ${p.environment} ${p.state}`).join(', ')}`);
  if (gitServer !== undefined) console.log(`\n  git log main:\n${(await git(gitServer.bare(FLUX_REPOSITORY), 'log', '--format=    %h %an: %s', 'main')).trimEnd()}`);
  console.log(color(32, `\n✔ ${release} promoted dev → staging → prod across three real apiservers${gitServer === undefined ? '' : ' by real Flux'} in ${((Date.now() - releasedAt) / 1000).toFixed(1)} s\n`));

  if (args['keep-running']) {
    quiet = true;
    narrator.line(`Still running (Ctrl-C to stop):
  dashboard          ${dashboard}
  /healthz /readyz   http://127.0.0.1:${healthPort}
  /metrics           http://127.0.0.1:${metricsPort}/metrics
  /debug/caches      http://127.0.0.1:${healthPort}/debug/caches  (or on the metrics port, see README)
  management kubeconfig: ${kubeconfigPath}`);
    await new Promise<void>((resolve) => { process.once('SIGINT', () => { resolve(); }); process.once('SIGTERM', () => { resolve(); }); });
  }
}

// What the release waits for now: the first environment not yet ready at it, and its promotion's state.
function awaiting(status: PipelineStatusView | undefined, revision: string, realFlux: boolean): string {
  const env = ENVIRONMENTS.find((name) => {
    const e = status?.environments?.find((x) => x.name === name);
    return !(e?.ready === true && e.revision === revision);
  });
  if (env === undefined) return realFlux ? `Flux in prod to apply ${revision} (ConfigMap apps/podinfo)` : `prod's Flux stand-in to report ${revision} applied`;
  const promotion = (status?.promotions ?? []).find((p) => p.environment === env && p.revision === revision);
  if (env === 'dev' || promotion?.state === 'Succeeded') return `${env} to apply ${revision} and report ready`;
  if (promotion?.state === 'Committed') return `Flux in ${env} to fetch and apply the commit of ${revision} (promotion Committed)`;
  return `${revision} to be promoted to ${env}${promotion === undefined ? '' : ` (promotion ${promotion.state})`}`;
}

function describe(status: PipelineStatusView | undefined): string {
  const envs = (status?.environments ?? []).map((e) => `${e.name} ${e.revision ?? '?'}${e.ready ? ' ✓' : ' …'}`).join('  │  ');
  const pending = (status?.promotions ?? []).filter((p) => p.state !== 'Succeeded').map((p) => `${p.revision}→${p.environment} ${p.state}`);
  return pending.length === 0 ? envs : `${envs}  │  promoting: ${pending.join(', ')}`;
}

/** Narration of real Flux in each cluster, from polling its child Kustomization (flux-narration.ts). */
interface FluxWatch {
  /** Polls once more now, after any poll in progress: what happened so far is told when it resolves. */
  flush(): Promise<void>;
  stop(): Promise<void>;
}

function watchFlux(clusters: readonly TestCluster[]): FluxWatch {
  const controller = new AbortController();
  const seen = new Map<string, KustomizationView>();
  const poll = async (): Promise<void> => {
    for (const cluster of clusters) {
      const res = await cluster.request('GET', `${KUSTOMIZATIONS}/namespaces/${APP_NAMESPACE}/kustomizations/podinfo`).catch(() => undefined);
      if (res?.statusCode !== 200) continue;
      // The ConfigMap after the Kustomization: what runs is at least as new as the status read.
      const view = kustomizationView(res.body, await appliedConfigVersion(cluster).catch(() => undefined));
      for (const line of fluxChanges(seen.get(cluster.name), view)) say(cluster.name, line);
      seen.set(cluster.name, view);
    }
  };
  // Polls one at a time, so that each compares with the view the previous one left.
  let last = Promise.resolve();
  const next = (): Promise<void> => (last = last.then(poll).catch(() => undefined));
  const loop = (async () => {
    while (!controller.signal.aborted) {
      await next();
      await delay(200, undefined, { signal: controller.signal }).catch(() => undefined);
    }
  })();
  return { flush: next, stop: async () => { controller.abort(); await loop; } };
}

async function waitFor(what: string, check: (wait: Wait) => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  await narrator.wait(what, async (wait) => {
    let now = what;
    const tracked: Wait = { update: (next) => { now = next; wait.update(next); } };
    while (!(await check(tracked))) {
      if (service?.exitCode !== null && service?.exitCode !== undefined) throw new Error(`the service exited with code ${service.exitCode} while waiting for ${now}`);
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${now}`);
      await delay(250);
    }
  });
}

let failed = false;
try {
  await main();
} catch (err) {
  failed = true;
  console.error(color(31, `\n✖ demo failed: ${err instanceof Error ? err.message : String(err)}`));
  console.error(`\nlast lines of the service's log:\n${serviceLog.slice(-30).join('\n')}`);
} finally {
  await cleanup();
}
process.exitCode = failed ? 1 : 0;
