// `make demo`: fleetcache's main job on an embedded default. Starts three real Kubernetes control
// planes (management = dev, staging, prod), installs a Pipeline for the podinfo HelmRelease, runs the
// fleetcache service against the management cluster, and plays a release: dev gets 1.1.0, a Flux
// stand-in applies it, fleetcache sees it ready and promotes it to staging, then to prod.
// With --git, staging and prod are reconciled from a Git repository (a local git http-backend and
// a stand-in for Flux's kustomize-controller) and fleetcache promotes by committing to it.
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
import { startGitSync } from '../git/sync.ts';
import { appliedVersion, ENVIRONMENTS, FLEET_SERVICE_ARGS, PIPELINE_NAME, PIPELINE_NAMESPACE, readPipeline, releaseToDev, setUpFleet, startFlux, type Fleet, type PipelineStatusView } from '../fleet.ts';
import { freePort, resolveAssets, startCluster, type TestCluster } from '../harness/index.ts';
import { dashboardLine } from './dashboard.ts';
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

  step('Installing CRDs, podinfo 1.0.0 in every cluster, kubeconfig Secrets and the Pipeline');
  await narrator.wait('the CRDs, Secrets, HelmReleases and the Pipeline to be created', () => setUpFleet(fleet, '1.0.0'));
  say('management', 'Pipeline delivery/podinfo: dev (local) → staging (Secret) → prod (Secret), strategy patch /spec/chart/spec/version');
  let gitServer: GitServer | undefined;
  if (args.git) {
    step('Starting a Git server (git http-backend on loopback) that staging and prod are reconciled from');
    const auth = { username: 'fleetcache', password: 'demo-token' };
    gitServer = await GitServer.start({ auth });
    const server = gitServer;
    stoppers.push(() => server.close());
    const file = (env: string): string => `apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: podinfo\n  namespace: apps\nspec:\n  chart:\n    spec:\n      chart: podinfo\n      version: 1.0.0 # {"$promotion": "${PIPELINE_NAMESPACE}:${PIPELINE_NAME}:${env}"}\n`;
    await server.seed('acme/fleet', { 'clusters/staging/podinfo.yaml': file('staging'), 'clusters/prod/podinfo.yaml': file('prod') });
    const path = `/apis/fleetcache.dev/v1alpha1/namespaces/${PIPELINE_NAMESPACE}/pipelines/${PIPELINE_NAME}`;
    const current = (await management.request('GET', path)).body as { spec: Record<string, unknown> };
    await management.request('PUT', path, { ...current, spec: { ...current.spec, promotion: { strategy: 'git', git: { url: server.url('acme/fleet'), path: 'clusters', secretRef: { name: 'fleet-git' } } } } });
    await management.request('POST', `/api/v1/namespaces/${PIPELINE_NAMESPACE}/secrets`, { metadata: { name: 'fleet-git' }, stringData: auth });
    stoppers.push(startGitSync(server, 'acme/fleet', 'main', [
      { file: 'clusters/staging/podinfo.yaml', cluster: staging, namespace: 'apps', name: 'podinfo' },
      { file: 'clusters/prod/podinfo.yaml', cluster: prod, namespace: 'apps', name: 'podinfo' },
    ]));
    say('git', `${server.url('acme/fleet')}: clusters/{staging,prod}/podinfo.yaml at 1.0.0, marked # {"$promotion": "delivery:podinfo:<env>"}`);
    say('management', 'Pipeline delivery/podinfo now promotes with strategy git (commit + push to main)');
  }

  step('Starting a Flux stand-in in each cluster (applies the chart version a HelmRelease asks for)');
  stoppers.push(await narrator.wait('the Flux stand-ins to start watching', () => startFlux(clusters, {
    applyDelayMs: 1500,
    onReconciled: (e) => { say(e.cluster, `flux: HelmRelease ${e.namespace}/${e.name} applied ${color(33, e.revision)}, Ready`); },
  })));

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
        const entry = JSON.parse(line) as { msg?: string; level?: string; environment?: string; revision?: string };
        if (entry.msg !== undefined && /promot/i.test(entry.msg)) say('fleetcache', entry.msg + (entry.environment === undefined ? '' : ` (${entry.environment}${entry.revision === undefined ? '' : ` ← ${entry.revision}`})`));
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
  await releaseToDev(fleet, release);
  say('management', `HelmRelease apps/podinfo now asks for chart ${color(33, release)}`);

  const reached: Record<string, number> = {};
  let last = '';
  await waitFor(`${release} to reach ${ENVIRONMENTS.join(', ')}`, async (wait) => {
    const status = (await readPipeline(fleet)).status;
    const line = describe(status);
    if (line !== last) {
      last = line;
      say('pipeline', line);
    }
    wait.update(awaiting(status, release));
    for (const env of status?.environments ?? []) {
      if (env.ready && env.revision === release && reached[env.name] === undefined) reached[env.name] = Date.now() - releasedAt;
    }
    return reached.prod !== undefined && await appliedVersion(prod) === release;
  });

  step('Summary');
  console.log(`\n  ${'environment'.padEnd(12)} ${'cluster'.padEnd(12)} ${'revision'.padEnd(10)} ready after release`);
  for (const env of ENVIRONMENTS) {
    console.log(`  ${env.padEnd(12)} ${(envCluster[env] ?? '').padEnd(12)} ${release.padEnd(10)} ${((reached[env] ?? 0) / 1000).toFixed(1)} s`);
  }
  const promotions = (await readPipeline(fleet)).status?.promotions ?? [];
  console.log(`\n  promotions recorded: ${promotions.map((p) => `${p.revision} → ${p.environment} ${p.state}`).join(', ')}`);
  if (gitServer !== undefined) console.log(`\n  git log main:\n${(await git(gitServer.bare('acme/fleet'), 'log', '--format=    %h %an: %s', 'main')).trimEnd()}`);
  console.log(color(32, `\n✔ ${release} promoted dev → staging → prod across three real apiservers in ${((Date.now() - releasedAt) / 1000).toFixed(1)} s\n`));

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
function awaiting(status: PipelineStatusView | undefined, revision: string): string {
  const env = ENVIRONMENTS.find((name) => {
    const e = status?.environments?.find((x) => x.name === name);
    return !(e?.ready === true && e.revision === revision);
  });
  if (env === undefined) return `prod's Flux stand-in to report ${revision} applied`;
  const promotion = (status?.promotions ?? []).find((p) => p.environment === env && p.revision === revision);
  if (env === 'dev' || promotion?.state === 'Succeeded') return `${env} to apply ${revision} and report ready`;
  return `${revision} to be promoted to ${env}${promotion === undefined ? '' : ` (promotion ${promotion.state})`}`;
}

function describe(status: PipelineStatusView | undefined): string {
  const envs = (status?.environments ?? []).map((e) => `${e.name} ${e.revision ?? '?'}${e.ready ? ' ✓' : ' …'}`).join('  │  ');
  const pending = (status?.promotions ?? []).filter((p) => p.state !== 'Succeeded').map((p) => `${p.revision}→${p.environment} ${p.state}`);
  return pending.length === 0 ? envs : `${envs}  │  promoting: ${pending.join(', ')}`;
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
