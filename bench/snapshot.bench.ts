// Fleet-snapshot benchmark: `node bench/snapshot.bench.ts` (make bench). In-process simulated API
// servers, so it needs no cluster.
//
// A burst of 10,000 object updates per second for 3 s, spread over 20 simulated clusters (50
// ConfigMaps each), consumed four ways:
// - the accumulator (one query per cluster, minIntervalMs 100) with a fast consumer (does nothing)
//   and with a slow one (100 ms per snapshot);
// - the registry's requeue queue (one owner per object) with a fast worker and a 100 ms one.
// Reported: notifications per second during the burst (snapshots, or owner keys taken off the
// queue), and the newest-state lag: at each notification, how old the newest write it reflects
// is (p50/p99), and after the burst, how long until a notification reflects the last write.
import { performance } from 'node:perf_hooks';
import { startSimulatedClusters, type SimulatedCluster } from '../fixtures/index.ts';
import { StaticProvider, type ClusterRef } from '../lib/cluster/index.ts';
import type { Registry } from '../lib/registry/index.ts';
import { FleetAccumulator, registrySource, type SnapshotQuery } from '../lib/snapshot/index.ts';
import type { KubeObject } from '../lib/transport/index.ts';
import type { GroupVersionKind } from '../lib/util/index.ts';
import { registryWithKeeper } from '../lib/registry/testing.ts';

const CM: GroupVersionKind = { group: '', version: 'v1', kind: 'ConfigMap' };
const CLUSTERS = 20;
const OBJECTS = 50;
const RATE = 10_000;
const SECONDS = 3;
const TICK_MS = 10;

interface Result {
  readonly name: string;
  readonly notificationsPerSecond: number;
  readonly lagP50: number;
  readonly lagP99: number;
  readonly settleMs: number;
}

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Write times by sequence number; the sequence is carried in `data.seq`. */
class Burst {
  readonly writtenAt: number[] = [];
  seq = 0;
  endedAt = 0;

  readonly clusters: readonly SimulatedCluster[];

  constructor(clusters: readonly SimulatedCluster[]) {
    this.clusters = clusters;
  }

  async run(): Promise<void> {
    const perTick = (RATE * TICK_MS) / 1000;
    const ticks = (SECONDS * 1000) / TICK_MS;
    const started = performance.now();
    for (let tick = 0; tick < ticks; tick++) {
      for (let i = 0; i < perTick; i++) {
        const n = this.seq++;
        const cluster = this.clusters[n % CLUSTERS];
        if (cluster === undefined) continue;
        const name = `o${Math.floor(n / CLUSTERS) % OBJECTS}`;
        const current = cluster.store.get({ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'bench', name });
        this.writtenAt[n] = performance.now();
        cluster.store.update({ ...current, data: { seq: String(n) } });
      }
      const due = started + (tick + 1) * TICK_MS;
      await sleep(Math.max(0, due - performance.now()));
    }
    this.endedAt = performance.now();
  }
}

function seqOf(obj: KubeObject): number {
  return Number((obj.data as { seq?: string } | undefined)?.seq ?? -1);
}

async function world(): Promise<{ clusters: SimulatedCluster[]; registry: Registry; close: () => Promise<void> }> {
  const clusters = await startSimulatedClusters(CLUSTERS, { namePrefix: 'bench', namespaces: ['bench'] });
  for (const c of clusters) for (let i = 0; i < OBJECTS; i++) c.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `o${i}`, namespace: 'bench' }, data: { seq: '-1' } });
  const registry = registryWithKeeper({
    provider: new StaticProvider({ clusters: Object.fromEntries(clusters.map((c, i) => [`c${i}`, c.kubeconfig])) }),
    credentialCheckIntervalMs: 0,
  });
  return { clusters, registry, close: async () => { await registry.close(); await Promise.all(clusters.map((c) => c.close())); } };
}

async function snapshots(name: string, workMs: number): Promise<Result> {
  const { clusters, registry, close } = await world();
  const queries: Record<string, SnapshotQuery> = {};
  for (let i = 0; i < CLUSTERS; i++) queries[`c${i}`] = { cluster: { kind: 'static', name: `c${i}` } satisfies ClusterRef, gvk: CM, namespace: 'bench' };
  const acc = new FleetAccumulator({ source: registrySource(registry), queries, minIntervalMs: 100 });
  const burst = new Burst(clusters);
  const lags: number[] = [];
  let during = 0;
  let settledAt = 0;
  const controller = new AbortController();
  const phase = { running: false };
  const consumer = (async () => {
    for await (const snap of acc.snapshots(controller.signal)) {
      const now = performance.now();
      let newest = -1;
      for (const objs of Object.values(snap.objects)) for (const o of objs) newest = Math.max(newest, seqOf(o));
      if (phase.running && newest >= 0) {
        during++;
        lags.push(now - (burst.writtenAt[newest] ?? now));
      }
      if (burst.endedAt > 0 && newest === burst.seq - 1 && settledAt === 0) {
        settledAt = now;
        controller.abort();
      }
      if (workMs > 0) await sleep(workMs);
    }
  })();
  while (!acc.status().bootstrapped) await sleep(20);
  phase.running = true;
  await burst.run();
  phase.running = false;
  const deadline = performance.now() + 30_000;
  while (settledAt === 0 && performance.now() < deadline) await sleep(10);
  controller.abort();
  await consumer;
  await acc.close();
  await close();
  return { name, notificationsPerSecond: during / SECONDS, lagP50: percentile(lags, 50), lagP99: percentile(lags, 99), settleMs: settledAt - burst.endedAt };
}

async function queue(name: string, workMs: number): Promise<Result> {
  const { clusters, registry, close } = await world();
  for (let c = 0; c < CLUSTERS; c++) {
    for (let i = 0; i < OBJECTS; i++) {
      await registry.watchTargetAndGetReader({ kind: 'static', name: `c${c}` }, { gvk: CM, namespace: 'bench', name: `o${i}` }, { namespace: 'bench', name: `c${c}-o${i}` });
    }
  }
  const readers = await Promise.all(clusters.map((_, c) => registry.watchTargetAndGetReader({ kind: 'static', name: `c${c}` }, { gvk: CM, namespace: 'bench', name: 'o0' }, { namespace: 'bench', name: `c${c}-o0` })));
  await Promise.all(readers.map((r) => r.waitForSync()));
  await sleep(300);
  while (registry.queue.len > 0) {
    const next = await registry.queue.get();
    if (next === undefined) break;
    registry.queue.done(next.item);
    registry.queue.forget(next.item);
  }
  const burst = new Burst(clusters);
  const lags: number[] = [];
  let during = 0;
  const phase = { running: true, stopped: false };
  let settledAt = 0;
  const lastSeq = (): number => burst.seq - 1;
  const worker = (async () => {
    while (!phase.stopped) {
      const next = await registry.queue.get();
      if (next === undefined) return;
      const now = performance.now();
      const [owner] = next.item.split('/').slice(1);
      const [c, o] = (owner ?? '').split('-');
      const reader = readers[Number((c ?? 'c0').slice(1))];
      const obj = reader?.get('bench', o ?? '');
      const seq = obj === undefined ? -1 : seqOf(obj);
      if (phase.running && seq >= 0) {
        during++;
        lags.push(now - (burst.writtenAt[seq] ?? now));
      }
      if (burst.endedAt > 0 && seq === lastSeq() && settledAt === 0) settledAt = now;
      if (workMs > 0) await sleep(workMs);
      registry.queue.done(next.item);
      registry.queue.forget(next.item);
    }
  })();
  await burst.run();
  phase.running = false;
  const deadline = performance.now() + 30_000;
  while (settledAt === 0 && performance.now() < deadline) await sleep(10);
  phase.stopped = true;
  registry.queue.shutDown();
  await worker;
  await close();
  return { name, notificationsPerSecond: during / SECONDS, lagP50: percentile(lags, 50), lagP99: percentile(lags, 99), settleMs: settledAt === 0 ? Number.NaN : settledAt - burst.endedAt };
}

const results: Result[] = [];
results.push(await snapshots('accumulator, fast consumer', 0));
results.push(await snapshots('accumulator, slow consumer (100 ms)', 100));
results.push(await queue('registry queue, fast worker', 0));
results.push(await queue('registry queue, slow worker (100 ms)', 100));
const f = (n: number): string => (Number.isNaN(n) ? 'n/a' : n.toFixed(1));
console.log(`burst: ${RATE} updates/s for ${SECONDS} s over ${CLUSTERS} simulated clusters × ${OBJECTS} objects`);
console.log('| consumer | notifications/s | newest-state lag p50 (ms) | p99 (ms) | last write → notified (ms) |');
console.log('| --- | --- | --- | --- | --- |');
for (const r of results) console.log(`| ${r.name} | ${f(r.notificationsPerSecond)} | ${f(r.lagP50)} | ${f(r.lagP99)} | ${f(r.settleMs)} |`);
