// Registry benchmark: `node bench/registry.bench.ts` (make bench). Runs against an in-process
// simulated API server, so it needs no cluster.
//
// 1. Hot path: watchTargetAndGetReader for a key whose cache exists, in calls per second, beside a
//    plain async-mutex-guarded Map doing the same key computation and lookup. Ratios, not absolute
//    times, are what to compare: the machines are shared.
// 2. Event → owner requeued: objects updated at a steady rate; the time from the write to the owner
//    key coming off the requeue queue, p50 and p99.
import { Mutex } from 'async-mutex';
import { performance } from 'node:perf_hooks';
import { SimulatedCluster } from '../fixtures/index.ts';
import { clusterKey, StaticProvider, type ClusterRef } from '../lib/cluster/index.ts';
import { ownerKey, type OwnerKey, type Registry } from '../lib/registry/index.ts';
import type { GroupVersionKind } from '../lib/util/index.ts';
import { registryWithKeeper } from '../lib/registry/testing.ts';

const configMaps: GroupVersionKind = { group: '', version: 'v1', kind: 'ConfigMap' };
const ref: ClusterRef = { kind: 'static', name: 'sim' };

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

async function hotPath(registry: Registry, calls: number): Promise<number> {
  const started = performance.now();
  for (let i = 0; i < calls; i++) {
    await registry.watchTargetAndGetReader(ref, { gvk: configMaps, namespace: 'bench', name: `cm-${i % 100}` }, { namespace: 'bench', name: `owner-${i % 100}` });
  }
  return calls / ((performance.now() - started) / 1000);
}

async function mutexMap(calls: number): Promise<number> {
  const mutex = new Mutex();
  const map = new Map<string, object>();
  const reader = {};
  map.set(`${clusterKey(ref, 'bench')}\u001f${configMaps.group}\u001f${configMaps.version}\u001f${configMaps.kind}`, reader);
  const started = performance.now();
  for (let i = 0; i < calls; i++) {
    const key = `${clusterKey(ref, 'bench')}\u001f${configMaps.group}\u001f${configMaps.version}\u001f${configMaps.kind}`;
    await mutex.runExclusive(() => map.get(key));
  }
  return calls / ((performance.now() - started) / 1000);
}

async function requeueLatency(sim: SimulatedCluster, registry: Registry, ratePerSecond: number, seconds: number): Promise<number[]> {
  const objects = 50;
  for (let i = 0; i < objects; i++) {
    sim.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `lat-${i}`, namespace: 'bench' }, data: { n: '0' } });
    await registry.watchTargetAndGetReader(ref, { gvk: configMaps, namespace: 'bench', name: `lat-${i}` }, { namespace: 'bench', name: `lat-owner-${i}` });
  }
  const reader = await registry.watchTargetAndGetReader(ref, { gvk: configMaps, namespace: 'bench', name: 'lat-0' }, { namespace: 'bench', name: 'lat-owner-0' });
  await reader.waitForSync();
  // Let the initial adds drain.
  await new Promise((resolve) => setTimeout(resolve, 300));
  while (registry.queue.len > 0) {
    const next = await registry.queue.get();
    if (next !== undefined) registry.queue.done(next.item);
  }

  const writtenAt = new Map<OwnerKey, number>();
  const latencies: number[] = [];
  const stop = new AbortController();
  const consumer = (async () => {
    for (;;) {
      let next: { readonly item: OwnerKey } | undefined;
      try {
        next = await registry.queue.get(stop.signal);
      } catch {
        return;
      }
      if (next === undefined) return;
      const at = writtenAt.get(next.item);
      if (at !== undefined) {
        latencies.push(performance.now() - at);
        writtenAt.delete(next.item);
      }
      registry.queue.done(next.item);
    }
  })();

  const total = ratePerSecond * seconds;
  const interval = 1000 / ratePerSecond;
  const begin = performance.now();
  for (let i = 0; i < total; i++) {
    const due = begin + i * interval;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    const n = i % objects;
    const current = sim.store.get({ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'bench', name: `lat-${n}` });
    if (current === undefined) throw new Error('object vanished');
    writtenAt.set(ownerKey({ namespace: 'bench', name: `lat-owner-${n}` }), performance.now());
    sim.store.update({ ...current, data: { n: String(i) } });
  }
  await new Promise((resolve) => setTimeout(resolve, 500));
  stop.abort();
  await consumer;
  return latencies;
}

const sim = await SimulatedCluster.start({ name: 'bench', namespaces: ['bench'] });
const registry = registryWithKeeper({ provider: new StaticProvider({ clusters: { sim: sim.kubeconfig } }), credentialCheckIntervalMs: 0 });
try {
  const warm = await registry.watchTargetAndGetReader(ref, { gvk: configMaps, namespace: 'bench', name: 'cm-0' }, { namespace: 'bench', name: 'owner-0' });
  await warm.waitForSync();

  const calls = 200_000;
  const ours: number[] = [];
  const theirs: number[] = [];
  for (let round = 0; round < 5; round++) {
    ours.push(await hotPath(registry, calls));
    theirs.push(await mutexMap(calls));
  }
  const hot = median(ours);
  const base = median(theirs);

  const latencies = await requeueLatency(sim, registry, 200, 5);

  console.log('\n| hot path (existing key), 5 rounds of 200k calls | calls/s (median) | vs mutex-guarded Map |');
  console.log('| --- | --- | --- |');
  console.log(`| registry.watchTargetAndGetReader | ${hot.toFixed(0)} | ${(hot / base).toFixed(2)}× |`);
  console.log(`| async-mutex runExclusive + Map.get | ${base.toFixed(0)} | 1.00× |`);
  console.log('\n| event → owner requeued, 200 updates/s for 5 s | p50 | p99 | samples |');
  console.log('| --- | --- | --- | --- |');
  console.log(`| write in the simulated apiserver → key off the queue | ${percentile(latencies, 50).toFixed(2)} ms | ${percentile(latencies, 99).toFixed(2)} ms | ${latencies.length} |`);
} finally {
  await registry.close();
  await sim.close();
}
