// Fleet benchmark (issue 26): `node --expose-gc bench/fleet.bench.ts [--clusters=500] [--rounds=10]`
// (make bench). A simulated management cluster holds a Pipeline dev → prod whose prod is a fleet of
// `--clusters` simulated clusters selected by label (kubeconfig Secrets), in three waves (count 20 %
// of the fleet, percent 40, the rest; soak 0), patch strategy; the real PipelineController,
// registry, SecretProvider and informers run against them over HTTPS, in this process.
//
// Each round promotes a new dev revision. This script plays Flux: once every cluster of a wave has
// received its PATCH, it marks all but one of them Ready at the revision, waits until the
// Pipeline's status counts them, then marks the last one Ready. Measured:
// (a) decision latency: from just before that last status write (the simulator's store write, which
//     reaches the controller's watch) to the first PATCH of the next wave arriving at a simulated
//     cluster (the sim's beforeServe hook). In the path: the watch event over HTTP, the informer,
//     the requeue, the reconcile (membership, waves, readiness of the whole fleet), the status
//     writes the controller makes before acting (the wave's Succeeded, the next wave's Pending) and
//     the first PATCH request. Not in it: nothing is mocked, but the simulators share this
//     process's event loop and CPU with the controller, so their work is counted too.
// (b) the Pipeline's status size (bytes of JSON) after the rollout, and the largest seen (sampled
//     every 20 ms, so a status held for less may be missed).
// (c) time from the Pipeline's creation to its status reading every member cluster (all caches
//     built and synced, one HelmRelease cache per cluster).
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { CompositeProvider, CoreV1SecretReader, LocalProvider, SecretProvider } from '../lib/cluster/index.ts';
import { PipelineController, type Pipeline } from '../lib/pipeline/index.ts';
import { registryWithKeeper } from '../lib/registry/testing.ts';
import { SimulatedCluster, startSimulatedClusters, type KindDefinition, type KubeObject } from '../fixtures/index.ts';
import { kubeConfigFrom, PIPELINE_KIND } from '../fixtures/support/index.ts';

const args = process.argv.slice(2);
const option = (name: string, fallback: string): string => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback;
const clusters = Number(option('clusters', '500'));
const rounds = Number(option('rounds', '10'));
if (!Number.isInteger(clusters) || clusters < 5 || clusters % 5 !== 0 || !Number.isInteger(rounds) || rounds < 1) {
  throw new TypeError('--clusters must be a multiple of 5 (at least 5), --rounds a positive integer');
}

const NS = 'team-a';
const HR: KindDefinition = { group: 'helm.toolkit.fluxcd.io', version: 'v2', kind: 'HelmRelease', plural: 'helmreleases', namespaced: true, status: true };
const API = 'helm.toolkit.fluxcd.io/v2';
const PIPELINE = { apiVersion: 'fleetcache.dev/v1alpha1', kind: 'Pipeline', namespace: NS, name: 'fleet' };
/** Wave sizes in member order: count 20 %, percent 40, the rest. */
const SIZES = [clusters / 5, (clusters * 2) / 5, (clusters * 2) / 5] as const;
const WAVES = [{ name: 'first', count: SIZES[0] }, { name: 'second', percent: 40 }, { name: 'rest', count: 1 }];

const sleep = (ms: number): Promise<void> => new Promise((resolve) => { setTimeout(resolve, ms); });
async function until<T>(what: string, probe: () => T | undefined, timeoutMs = 300_000): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(2);
  }
}

/** Marks the HelmRelease Ready at `version`, as Flux would once it applied that spec. */
function markReady(sim: SimulatedCluster, namespace: string, version: string): void {
  const hr = sim.store.get({ apiVersion: API, kind: 'HelmRelease', namespace, name: 'podinfo' });
  if (hr === undefined) throw new Error(`${sim.name}: no HelmRelease`);
  sim.store.updateStatus({ ...hr, status: { observedGeneration: hr.metadata?.generation, lastAppliedRevision: version, history: [{ chartVersion: version }], conditions: [{ type: 'Ready', status: 'True', reason: 'Succeeded', message: '', lastTransitionTime: new Date().toISOString() }] } });
}

function setVersion(sim: SimulatedCluster, namespace: string, version: string): void {
  const hr = sim.store.get({ apiVersion: API, kind: 'HelmRelease', namespace, name: 'podinfo' });
  if (hr === undefined) throw new Error(`${sim.name}: no HelmRelease`);
  sim.store.update({ ...hr, spec: { chart: { spec: { chart: 'podinfo', version } } } });
}

const release = (namespace: string, version: string): KubeObject => ({ apiVersion: API, kind: 'HelmRelease', metadata: { name: 'podinfo', namespace }, spec: { chart: { spec: { chart: 'podinfo', version } } } });

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;
}

const load = (): string => loadavg().map((l) => l.toFixed(1)).join(' ');
const loadBefore = load();
process.stderr.write(`# starting ${clusters} simulated clusters…\n`);
const mgmt = await SimulatedCluster.start({ name: 'mgmt', namespaces: [NS, 'dev'], kinds: [PIPELINE_KIND, HR] });
const fleet = await startSimulatedClusters(clusters, { namePrefix: 'member', namespaces: ['app'], kinds: [HR] });
const width = String(clusters).length;
// Secret names zero-padded, so that member (cluster-key) order is the fleet's index order.
const secretName = (i: number): string => `m-${String(i).padStart(width, '0')}`;
/** Per round, per cluster: when its PATCH arrived (NaN: not yet). */
let patchedAt = new Float64Array(clusters).fill(Number.NaN);
for (const [i, sim] of fleet.entries()) {
  sim.store.create(release('app', '1.0.0'));
  markReady(sim, 'app', '1.0.0');
  mgmt.store.create({ apiVersion: 'v1', kind: 'Secret', metadata: { name: secretName(i), namespace: NS, labels: { fleet: 'prod' } }, data: { value: Buffer.from(sim.kubeconfig).toString('base64') } });
  sim.faults.beforeServe((req) => {
    if (req.method === 'PATCH' && req.resource?.plural === 'helmreleases' && Number.isNaN(patchedAt[i] ?? 0)) patchedAt[i] = performance.now();
  });
}
mgmt.store.create(release('dev', '1.0.0'));
markReady(mgmt, 'dev', '1.0.0');

const kubeConfig = kubeConfigFrom(mgmt.kubeconfig);
const registry = registryWithKeeper({
  provider: new CompositeProvider({ byKind: { local: new LocalProvider({ kubeConfig }), secret: new SecretProvider({ secrets: new CoreV1SecretReader({ kubeConfig: kubeConfigFrom(mgmt.kubeconfig) }) }) } }),
  credentialCheckIntervalMs: 0,
});
// The loop guard's default (6 promotions of an environment within 10 minutes) would stop this
// benchmark's rapid rounds: raised here.
const controller = new PipelineController({ registry, workers: 2, allowCrossNamespaceTargets: true, promotionLoop: { maxPerEnvironment: 20 }, allowFleetSelectorsAsService: true });
const stop = new AbortController();
const running = controller.run(stop.signal);

const pipeline = (): Pipeline | undefined => mgmt.store.get(PIPELINE);
const prodStatus = (): NonNullable<NonNullable<Pipeline['status']>['environments']>[number] | undefined => pipeline()?.status?.environments?.find((e) => e.name === 'prod');
let largestStatus = 0;
const statusBytes = (): number => {
  const bytes = Buffer.byteLength(JSON.stringify(pipeline()?.status ?? {}));
  largestStatus = Math.max(largestStatus, bytes);
  return bytes;
};
const sampler = setInterval(statusBytes, 20);

const latencies: number[] = [];
const lastWaveSettled: number[] = [];
const toSucceeded: number[] = [];
const toPending: number[] = [];
/** First to last PATCH of a wave after the first (the wave's fan-out). */
const patchSpread: number[] = [];
let buildMs = Number.NaN;
try {
  const created = performance.now();
  mgmt.store.create({ apiVersion: PIPELINE.apiVersion, kind: 'Pipeline', metadata: { name: PIPELINE.name, namespace: NS }, spec: {
    appRef: { apiVersion: API, kind: 'HelmRelease', name: 'podinfo' },
    environments: [{ name: 'dev', targets: [{ namespace: 'dev' }] }, { name: 'prod', fleet: { namespace: 'app', clusterSelector: { matchLabels: { fleet: 'prod' } }, waves: WAVES } }],
    promotion: { strategy: 'patch', patch: { path: '/spec/chart/spec/version' } },
  } });
  await until('every member read and ready at 1.0.0', () => {
    const f = prodStatus()?.fleet;
    return f?.readable === clusters && f.readyTargets === clusters ? true : undefined;
  });
  buildMs = performance.now() - created;
  process.stderr.write(`# ${clusters} caches built and read in ${(buildMs / 1000).toFixed(1)} s; load ${load()}\n`);

  for (let round = 1; round <= rounds; round++) {
    const version = `1.0.${round}`;
    patchedAt = new Float64Array(clusters).fill(Number.NaN);
    setVersion(mgmt, 'dev', version);
    markReady(mgmt, 'dev', version);
    let from = 0;
    for (const [w, size] of SIZES.entries()) {
      const members = fleet.slice(from, from + size);
      const indices = Array.from({ length: size }, (_, k) => from + k);
      await until(`round ${round} wave ${w}: every PATCH`, () => (indices.every((i) => !Number.isNaN(patchedAt[i] ?? Number.NaN)) ? true : undefined));
      const times = indices.map((i) => patchedAt[i] ?? Number.NaN);
      if (w > 0) patchSpread.push(Math.max(...times) - Math.min(...times));
      for (const sim of members.slice(0, -1)) markReady(sim, 'app', version);
      await until(`round ${round} wave ${w}: ${size - 1} counted ready`, () => {
        const wave = prodStatus()?.waves?.[w];
        return wave?.revision === version && wave.readyTargets === size - 1 ? true : undefined;
      });
      await sleep(200); // let the reconciles of those writes finish, so the last one is measured alone
      const last = members.at(-1);
      if (last === undefined) throw new Error('empty wave');
      const readyAt = performance.now();
      markReady(last, 'app', version);
      from += size;
      if (w < SIZES.length - 1) {
        const next = Array.from({ length: SIZES[w + 1] ?? 0 }, (_, k) => from + k);
        // The records are read from the simulator's store in the same polling loop (every 2 ms or
        // so): when each was seen, not when it was written, so the split is approximate.
        let succeededSeen = Number.NaN;
        let pendingSeen = Number.NaN;
        const first = await until(`round ${round}: first PATCH of wave ${w + 1}`, () => {
          const records = pipeline()?.status?.promotions ?? [];
          const now = performance.now();
          if (Number.isNaN(succeededSeen) && records.some((r) => r.environment === 'prod' && r.revision === version && r.wave === WAVES[w]?.name && r.state === 'Succeeded')) succeededSeen = now;
          if (Number.isNaN(pendingSeen) && records.some((r) => r.environment === 'prod' && r.revision === version && r.wave === WAVES[w + 1]?.name)) pendingSeen = now;
          const seen = next.map((i) => patchedAt[i] ?? Number.NaN).filter((t) => !Number.isNaN(t));
          return seen.length > 0 ? Math.min(...seen) : undefined;
        });
        latencies.push(first - readyAt);
        toSucceeded.push(succeededSeen - readyAt);
        toPending.push(pendingSeen - readyAt);
      } else {
        await until(`round ${round}: the last wave Succeeded`, () => (pipeline()?.status?.promotions?.some((r) => r.environment === 'prod' && r.revision === version && r.wave === 'rest' && r.state === 'Succeeded') === true ? true : undefined));
        lastWaveSettled.push(performance.now() - readyAt);
      }
    }
    process.stderr.write(`# round ${round} done; load ${load()}\n`);
  }
} finally {
  clearInterval(sampler);
  stop.abort();
  await running;
  await registry.close();
  await Promise.all([mgmt.close(), ...fleet.map((sim) => sim.close())]);
}

const sorted = [...latencies].sort((a, b) => a - b);
const settled = [...lastWaveSettled].sort((a, b) => a - b);
const ms = (v: number): string => (v >= 100 ? v.toFixed(0) : v.toFixed(1));
console.log(`\n${clusters} simulated clusters, waves ${SIZES.join(' / ')}, soak 0, ${rounds} rounds; load average before ${loadBefore}, after ${load()}`);
console.log('\n| measure | value |');
console.log('| --- | --- |');
console.log(`| decision latency, last target ready → first PATCH of the next wave (${sorted.length} samples) | p50 ${ms(percentile(sorted, 50))} ms, p99 ${ms(percentile(sorted, 99))} ms, max ${ms(sorted.at(-1) ?? Number.NaN)} ms |`);
const split = (values: readonly number[]): string => { const v = values.filter((x) => !Number.isNaN(x)).sort((a, b) => a - b); return `p50 ${ms(percentile(v, 50))} ms, max ${ms(v.at(-1) ?? Number.NaN)} ms${v.length < values.length ? ` (${values.length - v.length} not seen)` : ''}`; };
console.log(`| … of which: the wave's Succeeded record seen in status | ${split(toSucceeded)} |`);
console.log(`| … of which: the next wave's Pending record seen in status | ${split(toPending)} |`);
console.log(`| first → last PATCH of that wave (${SIZES.slice(1).join(' / ')} clusters, each a GET then a JSON patch) | ${split(patchSpread)} |`);
console.log(`| last wave: last target ready → its Succeeded record in status (${settled.length} samples) | p50 ${ms(percentile(settled, 50))} ms, max ${ms(settled.at(-1) ?? Number.NaN)} ms |`);
console.log(`| Pipeline status after the rollout / largest seen | ${statusBytes()} B / ${largestStatus} B |`);
console.log(`| Pipeline created → all ${clusters} caches built and read in status | ${(buildMs / 1000).toFixed(1)} s |`);
