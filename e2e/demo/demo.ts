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
// With --replicas=N (N > 1) it runs N service processes with --shard and 12 more Pipelines (three
// team namespaces), narrates which replica owns which Pipelines (from each one's /debug/shards) and
// who promotes what, and checks that every promotion was carried out once (e2e/demo/replicas.ts).
// With --fleet, prod is a fleet of four more real clusters (kubeconfig Secrets labelled `fleet: prod`)
// promoted in two waves, a canary soaked 5 s then the rest; the narration tells each wave starting,
// ready and soaking from the Pipeline's status (e2e/demo/fleet-env.ts, e2e/demo/waves.ts).
//
//   node e2e/demo/demo.ts [--keep-running] [--git | --replicas 1 | --fleet] [--release 1.1.0] [--timeout-seconds 300]
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
import { appliedVersion, APP_NAME, APP_NAMESPACE, ENVIRONMENTS, FLEET_SERVICE_ARGS, PIPELINE_NAME, PIPELINE_NAMESPACE, readPipeline, releaseToDev, setUpFleet, startFlux, type Fleet, type PipelineStatusView } from '../fleet.ts';
import { freePort, resolveAssets, startCluster, type TestCluster } from '../harness/index.ts';
import { dashboardLine } from './dashboard.ts';
import { fluxChanges, kustomizationView, type KustomizationView } from './flux-narration.ts';
import { Narrator, type Wait } from './narrator.ts';
import { CANARY_SOAK_SECONDS, FLEET_ACCOUNT, FLEET_CLUSTERS, FLEET_SIZE, setUpFleetEnvironment } from './fleet-env.ts';
import { waveAwaited, waveChanges, waveSummary } from './waves.ts';
import { describeSplit, parseReplicas, readPipelines, readShards, releaseTeamsToDev, REPLICA_ARGS, setUpTeams, TEAM_PIPELINES, type PipelineItem } from './replicas.ts';

const { values: args } = parseArgs({
  options: {
    'keep-running': { type: 'boolean', default: false },
    git: { type: 'boolean', default: false },
    fleet: { type: 'boolean', default: false },
    release: { type: 'string', default: '1.1.0' },
    replicas: { type: 'string', default: '1' },
    'timeout-seconds': { type: 'string', default: '300' },
  },
});
const release = args.release;
const timeoutMs = Number(args['timeout-seconds']) * 1000;
/** How many service processes: with more than one, they run sharded, over more Pipelines. */
const replicaCount = ((): number => {
  try {
    const n = parseReplicas(args.replicas);
    if (n > 1 && args.git) throw new TypeError('--replicas above 1 plays the patch strategy\'s fleet; it does not combine with --git');
    if (args.fleet && (args.git || n > 1)) throw new TypeError('--fleet plays prod as a fleet of clusters with the patch strategy and one service; it does not combine with --git or --replicas');
    return n;
  } catch (err) {
    console.error(`demo: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(2);
  }
})();
const sharded = replicaCount > 1;
/** With --fleet: prod is FLEET_SIZE clusters, promoted in waves. */
const inWaves = args.fleet;
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
/** The service's processes: one, or one per replica. */
const services: ChildProcess[] = [];
const serviceLog: string[] = [];
/** With --replicas: the promotions each replica logged, as `namespace/name environment revision`. */
const promotedBy = new Map<string, string[]>();
/** With --replicas: the replicas' logs are told until the summary (not their shutdown). */
let narrating = true;

/** True once `service` has exited, by itself or of a signal (a replica killed meanwhile: exitCode stays null). */
function exited(service: ChildProcess): boolean {
  return service.exitCode !== null || service.signalCode !== null;
}

async function cleanup(): Promise<void> {
  await Promise.all(services.map(async (service) => {
    if (exited(service)) return;
    const gone = new Promise((resolve) => service.once('exit', resolve));
    service.kill('SIGTERM');
    await gone;
  }));
  for (const stop of stoppers.reverse()) await stop().catch(() => undefined);
  await Promise.all(clusters.map((c) => c.stop()));
}

async function main(): Promise<void> {
  step(inWaves
    ? `Starting ${FLEET_SIZE + 2} real Kubernetes control planes (etcd + kube-apiserver each, no Docker): management, staging and a prod fleet of ${FLEET_SIZE}`
    : 'Starting three real Kubernetes control planes (etcd + kube-apiserver each, no Docker)');
  // Built from source on the very first run (minutes; the build reports its progress on stderr).
  say('assets', `kube-apiserver and etcd in ${resolveAssets().dir}`);
  for (const name of inWaves ? ['management', 'staging', ...FLEET_CLUSTERS] : ['management', 'staging', 'prod']) {
    const cluster = await narrator.wait(`${name}: etcd, then kube-apiserver, to start and report ready`, () => startCluster({ name }));
    clusters.push(cluster);
    say(name, `ready at ${cluster.server} (apiserver up in ${(cluster.timings.apiserverMs / 1000).toFixed(1)} s)`);
  }
  const [management, staging, prod] = clusters as [TestCluster, TestCluster, TestCluster];
  /** prod's clusters: one, or the fleet's (--fleet; `prod` is then its first, the canary). */
  const prodClusters = clusters.slice(2);
  const fleet: Fleet = { management, staging, prod };
  const envCluster: Record<string, string> = { dev: 'management', staging: 'staging', prod: inWaves ? `${FLEET_CLUSTERS[0] ?? ''}..${FLEET_CLUSTERS.at(-1) ?? ''}` : 'prod' };

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
    if (inWaves) {
      await narrator.wait('the CRDs, Secrets, HelmReleases and the Pipeline to be created', () => setUpFleetEnvironment(management, staging, prodClusters, '1.0.0'));
      say('management', `kubeconfig Secrets delivery/{${FLEET_CLUSTERS.join(',')}} labelled fleet=prod (${FLEET_CLUSTERS[0] ?? ''} also wave=canary)`);
      say('management', `the Pipeline acts as ServiceAccount delivery/${FLEET_ACCOUNT}, whose Role (config/samples/fleet-tenant-role.yaml) lets it list and watch the Secrets of delivery only`);
      say('management', `Pipeline delivery/podinfo: dev (local) → staging (Secret) → prod (the fleet fleet=prod, readiness All, waves: canary by label, soak ${CANARY_SOAK_SECONDS} s, then the rest), strategy patch /spec/chart/spec/version`);
    } else {
      await narrator.wait('the CRDs, Secrets, HelmReleases and the Pipeline to be created', () => setUpFleet(fleet, '1.0.0'));
      say('management', 'Pipeline delivery/podinfo: dev (local) → staging (Secret) → prod (Secret), strategy patch /spec/chart/spec/version');
    }
    if (sharded) {
      await narrator.wait(`the teams' ${TEAM_PIPELINES.length} Pipelines, their HelmReleases and Secrets to be created`, () => setUpTeams(fleet, '1.0.0'));
      say('management', `${TEAM_PIPELINES.length} more Pipelines, so that the work splits: ${[...new Set(TEAM_PIPELINES.map((p) => p.namespace))].join(', ')} × ${[...new Set(TEAM_PIPELINES.map((p) => p.name))].join(', ')}, each promoting its own HelmRelease apps/<team>-<app> the same way`);
    }
    step('Starting a Flux stand-in in each cluster (applies the chart version a HelmRelease asks for)');
    stoppers.push(await narrator.wait('the Flux stand-ins to start watching', () => startFlux(clusters, {
      applyDelayMs: 1500,
      // With the teams' apps too, only podinfo's applies are told (39 more lines would drown the story).
      onReconciled: (e) => { if (!sharded || e.name === APP_NAME) say(e.cluster, `flux: HelmRelease ${e.namespace}/${e.name} applied ${color(33, e.revision)}, Ready`); },
    })));
    // As with --git: a service started before staging's stand-in applied 1.0.0 would see dev ready
    // at 1.0.0 and staging not yet, and record a "promotion" of 1.0.0 to staging that changes
    // nothing. The demo starts from a settled fleet.
    await waitFor('Flux to apply 1.0.0 in every cluster', async (wait) => {
      const pending = (await Promise.all(clusters.map(async (c) => ((await unappliedReleases(c)) > 0 ? [c.name] : [])))).flat();
      if (pending.length > 0) wait.update(`Flux to apply 1.0.0 in ${pending.join(', ')}`);
      return pending.length === 0;
    });
  }

  step(sharded
    ? `Starting ${replicaCount} fleetcache replicas against the management cluster (--shard: they split the Pipelines through Leases)`
    : 'Starting the fleetcache service against the management cluster');
  const work = await mkdtemp(join(tmpdir(), 'fleetcache-demo-'));
  stoppers.push(() => rm(work, { recursive: true, force: true }));
  const kubeconfigPath = join(work, 'management.kubeconfig');
  await writeFile(kubeconfigPath, management.adminKubeconfig, { mode: 0o600 });
  const replicas: Replica[] = [];
  for (let i = 0; i < replicaCount; i++) {
    replicas.push(startReplica(sharded ? `replica-${i + 1}` : 'fleetcache', kubeconfigPath, await freePort(), await freePort()));
  }
  const allReady = sharded ? `the ${replicaCount} replicas to be ready` : 'the fleetcache service to be ready';
  await waitFor(allReady, async (wait) => {
    const ready = await Promise.all(replicas.map((r) => fetch(`http://127.0.0.1:${r.healthPort}/readyz`).then((res) => res.ok, () => false)));
    if (sharded) wait.update(`${allReady} (${ready.filter(Boolean).length} ready so far)`);
    return ready.every(Boolean);
  });
  const dashboards: string[] = [];
  for (const r of replicas) {
    say(r.label, `ready: http://127.0.0.1:${r.healthPort}/readyz, metrics http://127.0.0.1:${r.metricsPort}/metrics`);
    dashboards.push(await dashboardLine(r.metricsPort, (url) => color(4, url)));
    say(r.label, `dashboard: ${dashboards.at(-1) ?? ''}`);
  }
  const [first] = replicas as [Replica, ...Replica[]];
  const { healthPort, metricsPort } = first;
  const dashboard = dashboards[0] ?? '';

  if (sharded) {
    step(`Waiting for the ${replicaCount} replicas to split the ${TEAM_PIPELINES.length + 1} Pipelines between them`);
    const keys = [`${PIPELINE_NAMESPACE}/${PIPELINE_NAME}`, ...TEAM_PIPELINES.map((p) => `${p.namespace}/${p.name}`)];
    let lines: readonly string[] = [];
    await waitFor('every Pipeline to be owned by exactly one replica', async (wait) => {
      const shards = await Promise.all(replicas.map((r) => readShards(r.metricsPort))).catch(() => undefined);
      if (shards === undefined) return false;
      const split = describeSplit(replicas.map((r) => r.label), shards, keys);
      lines = split.lines;
      if (!split.settled) wait.update(`every Pipeline to be owned by exactly one replica: ${split.waitingFor}`);
      return split.settled;
    });
    say('shards', `each replica's /debug/shards (peer Leases live: ${replicaCount}; one fence Lease per Pipeline):`);
    for (const line of lines) say('shards', `  ${line}`);
  }

  step(sharded ? 'Waiting for every pipeline to see every environment ready at 1.0.0' : 'Waiting for the pipeline to see every environment ready at 1.0.0');
  await waitFor(`the caches to sync and ${ENVIRONMENTS.join(', ')} to be ready at 1.0.0`, async (wait) => {
    const status = (await readPipeline(fleet)).status;
    const pending = ENVIRONMENTS.filter((env) => !(status?.environments?.find((e) => e.name === env)?.revision === '1.0.0' && status.environments.find((e) => e.name === env)?.ready === true));
    if (pending.length > 0) wait.update(`the caches to sync and ${pending.join(', ')} to be ready at 1.0.0`);
    if (!sharded || pending.length > 0) return pending.length === 0;
    const behind = notAt(await readPipelines(management), '1.0.0', ENVIRONMENTS);
    if (behind.length > 0) wait.update(`the caches to sync and ${behind.length} more Pipeline(s) to be ready at 1.0.0 (${behind.slice(0, 3).join(', ')}${behind.length > 3 ? ', …' : ''})`);
    return behind.length === 0;
  });
  say(sharded ? 'pipelines' : 'fleetcache', sharded ? `dev, staging and prod all ready at 1.0.0 in all ${TEAM_PIPELINES.length + 1} Pipelines` : 'dev, staging and prod all ready at 1.0.0');

  step(`Releasing podinfo ${release} to dev`);
  const releasedAt = Date.now();
  if (gitServer === undefined) {
    await releaseToDev(fleet, release);
    say('management', `HelmRelease apps/podinfo now asks for chart ${color(33, release)}`);
    if (sharded) {
      await releaseTeamsToDev(fleet, release);
      say('management', `and the teams' ${TEAM_PIPELINES.length} HelmReleases apps/<team>-<app> too`);
    }
  } else {
    const commit = await releaseToDevInGit(gitServer, release);
    say('git', `a human pushed ${commit.slice(0, 7)} to main: clusters/dev/podinfo.yaml asks for ${color(33, release)}`);
  }
  const appliedInProd = gitServer === undefined ? appliedVersion : appliedConfigVersion;

  const reached: Record<string, number> = {};
  const wavesTold = new Map<string, 'started' | 'ready' | 'failed'>();
  let last = '';
  await waitFor(`${release} to reach ${ENVIRONMENTS.join(', ')}`, async (wait) => {
    const status = (await readPipeline(fleet)).status;
    const line = describe(status);
    if (line !== last) {
      last = line;
      say('pipeline', line);
    }
    if (inWaves) for (const line of waveChanges(wavesTold, status, 'prod', release)) say('prod', line);
    wait.update(awaiting(status, release, gitServer !== undefined));
    for (const env of status?.environments ?? []) {
      if (env.ready && env.revision === release && reached[env.name] === undefined) reached[env.name] = Date.now() - releasedAt;
    }
    if (reached.prod === undefined) return false;
    const applied = await Promise.all(prodClusters.map((c) => appliedInProd(c)));
    if (applied.some((v) => v !== release)) return false;
    if (!sharded) return true;
    const behind = notAt(await readPipelines(management), release, ['prod']);
    wait.update(`${release} to reach prod in ${behind.length} more Pipeline(s) (${behind.slice(0, 3).join(', ')}${behind.length > 3 ? ', …' : ''})`);
    return behind.length === 0;
  });

  await fluxWatch?.flush(); // tell prod's apply before the summary
  narrating = false;
  step('Summary');
  const clusterWidth = Math.max(12, ...Object.values(envCluster).map((c) => c.length + 1));
  console.log(`\n  ${'environment'.padEnd(12)} ${'cluster'.padEnd(clusterWidth)} ${'revision'.padEnd(10)} ready after release`);
  for (const env of ENVIRONMENTS) {
    console.log(`  ${env.padEnd(12)} ${(envCluster[env] ?? '').padEnd(clusterWidth)} ${release.padEnd(10)} ${((reached[env] ?? 0) / 1000).toFixed(1)} s`);
  }
  const promotions = (await readPipeline(fleet)).status?.promotions ?? [];
  console.log(`\n  promotions recorded: ${promotions.map((p) => `${p.revision} → ${p.environment}${waveOf(p)} ${p.state}`).join(', ')}`);
  if (inWaves) {
    const members = (wave: string): readonly string[] => (wave === 'canary' ? FLEET_CLUSTERS.slice(0, 1) : FLEET_CLUSTERS.slice(1));
    console.log(`\n  prod, wave by wave (from the release; readiness All):`);
    for (const line of waveSummary((await readPipeline(fleet)).status, 'prod', release, releasedAt, members)) console.log(`    ${line}`);
    const versions = await Promise.all(prodClusters.map(async (c) => `${c.name} ${await appliedVersion(c) ?? '?'}`));
    console.log(`  running in prod: ${versions.join(', ')}`);
  }
  if (sharded) summarizeReplicas(replicas, await Promise.all(replicas.map((r) => readShards(r.metricsPort))), release);
  if (gitServer !== undefined) console.log(`\n  git log main:\n${(await git(gitServer.bare(FLUX_REPOSITORY), 'log', '--format=    %h %an: %s', 'main')).trimEnd()}`);
  console.log(color(32, inWaves
    ? `\n✔ ${release} promoted dev → staging → prod, a fleet of ${FLEET_SIZE} clusters wave by wave (canary, soaked ${CANARY_SOAK_SECONDS} s, then the rest), across ${FLEET_SIZE + 2} real apiservers in ${((Date.now() - releasedAt) / 1000).toFixed(1)} s\n`
    : sharded
    ? `\n✔ ${release} promoted dev → staging → prod in ${TEAM_PIPELINES.length + 1} Pipelines by ${replicaCount} replicas across three real apiservers in ${((Date.now() - releasedAt) / 1000).toFixed(1)} s\n`
    : `\n✔ ${release} promoted dev → staging → prod across three real apiservers${gitServer === undefined ? '' : ' by real Flux'} in ${((Date.now() - releasedAt) / 1000).toFixed(1)} s\n`));

  if (args['keep-running']) {
    quiet = true;
    narrator.line(sharded
      ? `Still running (Ctrl-C to stop):
${replicas.map((r, i) => `  ${r.label.padEnd(18)} dashboard ${dashboards[i] ?? ''}
  ${''.padEnd(18)} /readyz http://127.0.0.1:${r.healthPort}/readyz, /metrics and /debug/shards on http://127.0.0.1:${r.metricsPort}`).join('\n')}
  management kubeconfig: ${kubeconfigPath}`
      : `Still running (Ctrl-C to stop):
  dashboard          ${dashboard}
  /healthz /readyz   http://127.0.0.1:${healthPort}
  /metrics           http://127.0.0.1:${metricsPort}/metrics
  /debug/caches      http://127.0.0.1:${metricsPort}/debug/caches
  management kubeconfig: ${kubeconfigPath}`);
    await new Promise<void>((resolve) => { process.once('SIGINT', () => { resolve(); }); process.once('SIGTERM', () => { resolve(); }); });
  }
}

/** How many HelmReleases in the app namespace do not run the chart version they ask for yet (a read error counts as one). */
async function unappliedReleases(cluster: TestCluster): Promise<number> {
  const res = await cluster.request('GET', `/apis/helm.toolkit.fluxcd.io/v2/namespaces/${APP_NAMESPACE}/helmreleases`).catch(() => undefined);
  if (res?.statusCode !== 200) return 1;
  const items = (res.body as { items?: { spec?: { chart?: { spec?: { version?: string } } }; status?: { history?: { chartVersion?: string }[] } }[] }).items ?? [];
  return items.filter((r) => r.status?.history?.[0]?.chartVersion !== r.spec?.chart?.spec?.version).length;
}

/** One fleetcache process of the demo. */
interface Replica {
  /** How the narration names it: `fleetcache`, or `replica-<n>` with --replicas. */
  readonly label: string;
  readonly healthPort: number;
  readonly metricsPort: number;
}

/** Spawns one service process (with --replicas: sharded) and narrates its log. */
function startReplica(label: string, kubeconfigPath: string, healthPort: number, metricsPort: number): Replica {
  const service = spawn(process.execPath, [
    new URL('../../cmd/fleetcache.ts', import.meta.url).pathname,
    `--kubeconfig=${kubeconfigPath}`,
    `--health-probe-bind-address=127.0.0.1:${healthPort}`,
    `--metrics-bind-address=127.0.0.1:${metricsPort}`,
    '--metrics-secure=false', // a local demo: plain metrics, so that curl needs no token
    '--log-level=info',
    ...(args.git ? ['--allow-private-git-hosts', '--allow-insecure-git-http'] : []),
    ...FLEET_SERVICE_ARGS,
    ...(sharded ? REPLICA_ARGS : []),
  ], { stdio: ['ignore', 'inherit', 'pipe'] });
  services.push(service);
  let partial = '';
  service.stderr.on('data', (chunk: Buffer) => {
    const lines = (partial + chunk.toString()).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) {
      serviceLog.push(sharded ? `${label}: ${line}` : line);
      if (serviceLog.length > 200) serviceLog.shift();
      try {
        const entry = JSON.parse(line) as { msg?: string; level?: string; environment?: string; wave?: string; revision?: string; commit?: string; pipeline?: string };
        if (sharded) narrateReplica(label, entry);
        else if (entry.msg !== undefined && entry.commit !== undefined && entry.msg.startsWith('committed')) say('fleetcache', `pushed commit ${entry.commit.slice(0, 7)} to main (${entry.environment ?? '?'} ← ${entry.revision ?? '?'}): promotion Committed, ${entry.msg.replace(/^committed; /, '')}`);
        else if (entry.msg === 'promoted' && entry.commit !== undefined) say('fleetcache', `${entry.environment ?? '?'} runs ${entry.revision ?? '?'} (commit ${entry.commit.slice(0, 7)} applied): promotion Succeeded`);
        else if (entry.msg !== undefined && /promot/i.test(entry.msg)) say('fleetcache', entry.msg + (entry.environment === undefined ? '' : ` (${entry.environment}${entry.wave === undefined ? '' : `/${entry.wave}`}${entry.revision === undefined ? '' : ` ← ${entry.revision}`})`));
        else if (entry.level === 'error') say('fleetcache', color(31, entry.msg ?? line));
      } catch { /* not JSON: keep it for the failure report only */ }
    }
  });
  return { label, healthPort, metricsPort };
}

/** A sharded replica's log line, told when it says who promotes what or which shards moved. */
function narrateReplica(label: string, entry: { msg?: string; level?: string; environment?: string; revision?: string; pipeline?: string }): void {
  if (!narrating) return;
  const msg = entry.msg ?? '';
  const where = `${entry.pipeline ?? '?'}${entry.environment === undefined ? '' : ` (${entry.environment}${entry.revision === undefined ? '' : ` ← ${entry.revision}`})`}`;
  if (msg === 'promoted') {
    promotedBy.set(label, [...(promotedBy.get(label) ?? []), `${entry.pipeline ?? '?'} ${entry.environment ?? '?'} ${entry.revision ?? '?'}`]);
    say(label, `promoted ${where}`);
  } else if (/^(gained|lost) \d+ shard key/.test(msg) || msg === 'joined the shard group' || msg === 'left the shard group') {
    say(label, msg);
  } else if (entry.level === 'error') {
    say(label, color(31, `${msg}${entry.pipeline === undefined ? '' : ` (${entry.pipeline})`}`));
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
  if (inWaves && env === 'prod') return waveAwaited(status, 'prod', revision) ?? `${revision} to be promoted to prod's first wave`;
  if (env === 'dev' || promotion?.state === 'Succeeded') return `${env} to apply ${revision} and report ready`;
  if (promotion?.state === 'Committed') return `Flux in ${env} to fetch and apply the commit of ${revision} (promotion Committed)`;
  return `${revision} to be promoted to ${env}${promotion === undefined ? '' : ` (promotion ${promotion.state})`}`;
}

/** `namespace/name` of the Pipelines whose `environments` are not all ready at `revision`. */
function notAt(pipelines: readonly PipelineItem[], revision: string, environments: readonly string[]): string[] {
  return pipelines
    .filter((p) => !environments.every((env) => p.status?.environments?.some((e) => e.name === env && e.ready && e.revision === revision) === true))
    .map((p) => `${p.metadata.namespace}/${p.metadata.name}`)
    .sort();
}

/** With --replicas: who owns what now and who promoted what, and whether any promotion was carried out twice. */
function summarizeReplicas(replicas: readonly Replica[], shards: readonly { readonly owned: readonly string[] }[], revision: string): void {
  console.log(`\n  ${'replica'.padEnd(12)} ${'Pipelines'.padEnd(10)} promotions carried out`);
  replicas.forEach((r, i) => {
    console.log(`  ${r.label.padEnd(12)} ${String(shards[i]?.owned.length ?? 0).padEnd(10)} ${(promotedBy.get(r.label) ?? []).length}`);
  });
  const counts = new Map<string, number>();
  for (const done of promotedBy.values()) for (const p of done) counts.set(p, (counts.get(p) ?? 0) + 1);
  const twice = [...counts].filter(([, n]) => n > 1).map(([p]) => p);
  const expected = (TEAM_PIPELINES.length + 1) * (ENVIRONMENTS.length - 1);
  const ofRelease = [...counts.keys()].filter((p) => p.endsWith(` ${revision}`)).length;
  console.log(twice.length === 0
    ? `\n  ${ofRelease} of ${expected} promotions of ${revision} logged (${TEAM_PIPELINES.length + 1} Pipelines × staging, prod), each by one replica, none twice`
    : color(31, `\n  carried out twice: ${twice.join(', ')}`));
  if (twice.length > 0) throw new Error(`promotions carried out twice: ${twice.join(', ')}`);
}

/** `/<wave>` of a fleet's promotion record, or nothing. */
function waveOf(record: object): string {
  const wave = (record as { wave?: unknown }).wave;
  return typeof wave === 'string' ? `/${wave}` : '';
}

function describe(status: PipelineStatusView | undefined): string {
  const envs = (status?.environments ?? []).map((e) => `${e.name} ${e.revision ?? '?'}${e.ready ? ' ✓' : ' …'}`).join('  │  ');
  const pending = (status?.promotions ?? []).filter((p) => p.state !== 'Succeeded').map((p) => `${p.revision}→${p.environment}${waveOf(p)} ${p.state}`);
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
      const dead = services.find(exited);
      if (dead !== undefined) throw new Error(`the service${sharded ? ` (replica-${services.indexOf(dead) + 1})` : ''} exited with ${dead.exitCode === null ? `signal ${dead.signalCode ?? '?'}` : `code ${dead.exitCode}`} while waiting for ${now}`);
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
