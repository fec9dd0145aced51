// Sharding benchmark (issue 25): `node bench/shard.bench.ts [--quick] [--clusters=C] [--objects=O]
// [--replicas=1,2,4] [--tenants=T] [--largest=M] [--management-qps=Q] [--settle-timeout=S]`. C simulated clusters × 4 kinds × O objects are
// served by the scale benchmark's sim host (bench/scale/sim-host.ts, its own process); the group's
// Leases live on one more simulated cluster, the management cluster, in this process. The clusters
// belong to T tenant namespaces of Zipf-like sizes (1..M clusters, bench/shard/tenants.ts), one
// pipeline per cluster. For each N, N replicas (bench/shard/replica.ts, a process each) shard the
// pipelines (key `namespace/cluster`): printed are keys, caches, RSS and heap per replica, the
// time until every key is owned and every cache synced; then one replica joins (keys moved vs the
// ideal 1/(N+1)) and one of the first N is SIGKILLed (time until its keys are owned again, and
// synced; keys moved vs its share). Last, N = max sharded by namespace, to compare the memory
// balance of the two units of work. Double ownership is counted over the whole run: each replica
// reports when it started and stopped acting for a key (whileOwned: its signal aborts when
// ownership ends), and two replicas' intervals for one key must never overlap (1 ms resolution;
// a SIGKILLed replica stops acting when it is killed). Timings: lease 10 s, renew deadline 7 s,
// retry 1 s; fence takes rate-limited at the defaults (free fences 20/s, burst 50; a dead replica's
// 100/s, burst 250), the group's connection at 130 requests/s and the peer Lease's renewals on one of
// their own, as the Manager connects them. Figures vary ±25 % on a shared machine: compare rows of
// one run.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as delay } from 'node:timers/promises';
import { SimulatedCluster } from '../fixtures/index.ts';
import { rendezvousOwner } from '../lib/manager/index.ts';
import type { ReplicaConfig, ReplicaEvent } from './shard/replica.ts';
import { tenantsOf, unitsOf, zipfSizes, type Unit } from './shard/tenants.ts';

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const option = (name: string, fallback: string): string => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback;
const clusters = Number(option('clusters', quick ? '100' : '1000'));
const objects = Number(option('objects', quick ? '50' : '200'));
const replicaCounts = option('replicas', '1,2,4').split(',').map(Number);
const tenantCount = Number(option('tenants', quick ? '20' : '50'));
const largest = Number(option('largest', quick ? '20' : '60'));
const timings = { leaseDurationMs: 10_000, renewDeadlineMs: 7_000, retryPeriodMs: 1_000 } as const;
const settleTimeoutMs = Number(option('settle-timeout', quick ? '120' : '300')) * 1000;
/**
 * The replicas' heartbeat connection to the management cluster (peer Lease renewals), requests per
 * second: the connection's default (20, the service's --kube-api-qps). Before fence releases went 8
 * at a time and renewals had a connection of their own, a replica handing ~500 fences over at once
 * lost the group at 20 (bench/shard/release-storm.ts).
 */
const managementQps = Number(option('management-qps', '20'));
const MiB = 2 ** 20;
const bench = new URL('./', import.meta.url).pathname;

interface Interval { readonly group: string; readonly key: string; readonly id: string; readonly start: number; end: number | undefined }
interface Stat { readonly t: number; readonly acting: number; readonly wanted: number; readonly synced: number; readonly failed: number; readonly caches: number; readonly orphaned: number }
interface Memory { readonly rss: number; readonly heap: number; readonly heapTotal: number; readonly external: number; readonly caches: number }

const intervals: Interval[] = [];

/** A replica process and what it reported. */
class Replica {
  readonly acting = new Map<string, Interval>();
  base: { rss: number; heap: number; heapTotal: number; external: number } | undefined;
  stat: Stat | undefined;
  lastEvent = 0;
  maxOrphaned = 0;
  maxBoundMs = 0;
  /** Times it lost the group (peer Lease not renewed within the renew deadline) and joined again. */
  losses = 0;
  alive = true;
  readonly #proc: ChildProcess;
  readonly exited: Promise<void>;
  #memory: ((m: Memory) => void) | undefined;

  readonly id: string;
  readonly group: string;

  constructor(id: string, group: string, file: string) {
    this.id = id;
    this.group = group;
    this.#proc = spawn(process.execPath, ['--expose-gc', join(bench, 'shard', 'replica.ts'), file, id], { stdio: ['pipe', 'pipe', 'inherit'] });
    this.exited = new Promise((resolve) => { this.#proc.once('exit', () => { this.#end(Date.now()); resolve(); }); });
    createInterface({ input: this.#proc.stdout ?? process.stdin }).on('line', (line) => { this.#on(JSON.parse(line) as ReplicaEvent); });
  }

  #on(e: ReplicaEvent): void {
    switch (e.ev) {
      case 'base': this.base = e; break;
      case 'acting': {
        const interval: Interval = { group: this.group, key: e.key, id: this.id, start: e.t, end: undefined };
        intervals.push(interval);
        this.acting.set(e.key, interval);
        this.lastEvent = e.t;
        break;
      }
      case 'stopped': {
        const interval = this.acting.get(e.key);
        if (interval !== undefined) interval.end = e.t;
        this.acting.delete(e.key);
        this.lastEvent = e.t;
        break;
      }
      case 'stat':
        this.stat = e;
        this.maxOrphaned = Math.max(this.maxOrphaned, e.orphaned);
        this.maxBoundMs = Math.max(this.maxBoundMs, e.boundMs);
        break;
      case 'mem': this.#memory?.(e); break;
      case 'lost': this.losses++; break;
      case 'done': break;
    }
  }

  /** A process that is gone acts for nothing from then on. */
  #end(t: number): void {
    if (!this.alive) return;
    this.alive = false;
    for (const interval of this.acting.values()) interval.end ??= t;
    this.acting.clear();
  }

  /** Acting for exactly what it reported, every cache of it synced, as of a stat newer than its last change. */
  settled(): boolean {
    const s = this.stat;
    return this.alive && s !== undefined && s.t > this.lastEvent && s.acting === this.acting.size && s.synced === s.wanted && s.failed === 0;
  }

  async memory(): Promise<Memory> {
    const answer = new Promise<Memory>((resolve) => { this.#memory = resolve; });
    this.#proc.stdin?.write('gc\n');
    return answer;
  }

  kill(): void {
    this.#proc.kill('SIGKILL');
    this.#end(Date.now());
  }

  async stop(): Promise<void> {
    if (!this.alive) return;
    this.#proc.stdin?.write('stop\n');
    const timeout = delay(20_000).then(() => 'timeout');
    if (await Promise.race([this.exited.then(() => 'exited'), timeout]) === 'timeout') this.kill();
  }
}

/** Who acts for each key now, per the replicas' reports: a key acted for twice maps to both. */
function actingOwners(replicas: readonly Replica[]): Map<string, string[]> {
  const owners = new Map<string, string[]>();
  for (const r of replicas) for (const key of r.acting.keys()) owners.set(key, [...(owners.get(key) ?? []), r.id]);
  return owners;
}

/** Every key acted for by exactly its rendezvous owner among the live replicas. */
function allOwned(units: readonly Unit[], live: readonly Replica[]): boolean {
  const peers = live.map((r) => ({ identity: r.id, weight: 1 }));
  const owners = actingOwners(live);
  return units.every((u) => {
    const o = owners.get(u.key);
    return o?.length === 1 && o[0] === rendezvousOwner(u.key, peers);
  });
}

interface Settled { readonly ownedMs: number | undefined; readonly syncedMs: number | undefined }

/** Waits until every key is owned as assigned (ownedMs) and every live replica's caches are synced (syncedMs), from `t0`. */
async function settle(units: readonly Unit[], live: readonly Replica[], t0: number): Promise<Settled> {
  let ownedMs: number | undefined;
  while (Date.now() - t0 < settleTimeoutMs) {
    const owned = allOwned(units, live);
    if (owned) ownedMs ??= Date.now() - t0;
    else ownedMs = undefined;
    if (owned && live.every((r) => r.settled())) return { ownedMs, syncedMs: Date.now() - t0 };
    if (live.some((r) => !r.alive)) {
      process.stderr.write('# a replica exited on its own\n');
      return { ownedMs: undefined, syncedMs: undefined };
    }
    await delay(50);
  }
  process.stderr.write(`# not settled within ${settleTimeoutMs / 1000} s (keys owned as assigned: ${allOwned(units, live)})\n`);
  for (const r of live) process.stderr.write(`#   ${r.id}: acting for ${r.acting.size}, last stat ${JSON.stringify(r.stat)}, last change ${r.lastEvent}\n`);
  return { ownedMs, syncedMs: undefined };
}

function snapshot(live: readonly Replica[]): Map<string, string> {
  const owners = new Map<string, string>();
  for (const r of live) for (const key of r.acting.keys()) owners.set(key, r.id);
  return owners;
}

interface RunResult {
  readonly by: 'namespace' | 'pipeline';
  readonly n: number;
  readonly keys: number;
  readonly first: Settled;
  readonly keysPer: readonly number[];
  readonly memory: readonly (Memory & { readonly baseRss: number; readonly baseHeap: number; readonly baseHeapTotal: number; readonly baseExternal: number })[];
  readonly join: { readonly moved: number; readonly movedElsewhere: number; readonly joinerKeys: number; readonly settled: Settled };
  readonly kill: { readonly share: number; readonly moved: number; readonly movedElsewhere: number; readonly settled: Settled };
  readonly maxOrphaned: number;
  readonly maxBoundMs: number;
  readonly losses: number;
}

async function run(dir: string, base: Omit<ReplicaConfig, 'group' | 'units'>, by: 'namespace' | 'pipeline', units: readonly Unit[], n: number): Promise<RunResult> {
  const group = `bench-${by}-${n}`;
  const file = join(dir, `${group}.json`);
  writeFileSync(file, JSON.stringify({ ...base, group, units } satisfies ReplicaConfig));
  process.stderr.write(`# ${by}: ${n} replica(s), ${units.length} keys…\n`);
  const all: Replica[] = [];
  const start = (i: number): Replica => {
    const r = new Replica(`${group}-r${i}`, group, file);
    all.push(r);
    return r;
  };
  try {
    const t0 = Date.now();
    const first = Array.from({ length: n }, (_, i) => start(i));
    const firstSettled = await settle(units, first, t0);
    const keysPer = first.map((r) => r.acting.size);
    const memory = [];
    for (const r of first) memory.push({ ...(await r.memory()), baseRss: r.base?.rss ?? 0, baseHeap: r.base?.heap ?? 0, baseHeapTotal: r.base?.heapTotal ?? 0, baseExternal: r.base?.external ?? 0 });

    process.stderr.write(`#   one replica joins…\n`);
    const before = snapshot(first);
    const t1 = Date.now();
    const joiner = start(n);
    const afterJoin = [...first, joiner];
    const joinSettled = await settle(units, afterJoin, t1);
    const joined = snapshot(afterJoin);
    const movedJoin = units.filter((u) => before.get(u.key) !== joined.get(u.key));

    process.stderr.write(`#   SIGKILL one replica…\n`);
    const victim = first[0];
    if (victim === undefined) throw new Error('no replica');
    const share = victim.acting.size;
    const t2 = Date.now();
    victim.kill();
    const survivors = afterJoin.filter((r) => r !== victim);
    const killSettled = await settle(units, survivors, t2);
    const after = snapshot(survivors);
    const movedKill = units.filter((u) => joined.get(u.key) !== after.get(u.key));
    return {
      by, n, keys: units.length, first: firstSettled, keysPer, memory,
      join: { moved: movedJoin.length, movedElsewhere: movedJoin.filter((u) => joined.get(u.key) !== joiner.id).length, joinerKeys: joiner.acting.size, settled: joinSettled },
      kill: { share, moved: movedKill.length, movedElsewhere: movedKill.filter((u) => joined.get(u.key) !== victim.id).length, settled: killSettled },
      maxOrphaned: Math.max(...all.map((r) => r.maxOrphaned)),
      maxBoundMs: Math.max(...all.map((r) => r.maxBoundMs)),
      losses: all.reduce((sum, r) => sum + r.losses, 0),
    };
  } finally {
    await Promise.all(all.map((r) => r.stop()));
  }
}

/** Keys acted for by two replicas at once: intervals of one key (in one group) from two replicas that overlap. */
function doubleOwnership(): { keys: number; worstMs: number } {
  const byKey = new Map<string, Interval[]>();
  for (const i of intervals) byKey.set(`${i.group}\0${i.key}`, [...(byKey.get(`${i.group}\0${i.key}`) ?? []), i]);
  let keys = 0;
  let worstMs = 0;
  for (const list of byKey.values()) {
    list.sort((a, b) => a.start - b.start);
    let overlapped = false;
    for (let i = 0; i < list.length; i++) {
      for (let j = 0; j < i; j++) {
        const a = list[j];
        const b = list[i];
        if (a === undefined || b === undefined || a.id === b.id) continue;
        const end = a.end ?? Infinity;
        if (b.start < end) {
          overlapped = true;
          worstMs = Math.max(worstMs, Math.min(end, b.end ?? Infinity) - b.start);
        }
      }
    }
    if (overlapped) keys++;
  }
  return { keys, worstMs };
}

const s = (ms: number | undefined): string => (ms === undefined ? 'timeout' : `${(ms / 1000).toFixed(1)} s`);
const mib = (bytes: number): string => (bytes / MiB).toFixed(0);
const maxOf = (xs: readonly number[]): number => Math.max(...xs);
const meanOf = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;

const host = spawn(process.execPath, [join(bench, 'scale', 'sim-host.ts'), String(clusters), String(objects)], { stdio: ['pipe', 'pipe', 'inherit'] });
const management = await SimulatedCluster.start({ name: 'management', namespaces: ['fleetcache'], kinds: [{ group: 'coordination.k8s.io', version: 'v1', kind: 'Lease', plural: 'leases', namespaced: true }] });
const dir = mkdtempSync(join(tmpdir(), 'fleetcache-shard-'));
const results: RunResult[] = [];
try {
  process.stderr.write(`# seeding ${clusters} simulated clusters × 4 kinds × ${objects} objects…\n`);
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: host.stdout }).once('line', resolve);
    host.once('exit', (code) => { reject(new Error(`sim host exited with ${code}`)); });
  });
  const fleet = JSON.parse(line) as { name: string; kubeconfig: string }[];
  const tenants = tenantsOf(fleet.map((c) => c.name), tenantCount, largest);
  const base = { fleet, management: management.kubeconfig, managementQps, namespace: 'fleetcache', ...timings };
  for (const n of replicaCounts) results.push(await run(dir, base, 'pipeline', unitsOf(tenants, 'pipeline'), n));
  results.push(await run(dir, base, 'namespace', unitsOf(tenants, 'namespace'), Math.max(...replicaCounts)));
} finally {
  rmSync(dir, { recursive: true, force: true });
  await management.close();
  host.stdin.end();
  await new Promise((resolve) => { host.once('exit', resolve); setTimeout(resolve, 10_000).unref(); });
}

const sizes = zipfSizes(clusters, tenantCount, largest);
console.log(`\n${clusters} simulated clusters × 4 kinds × ${objects} objects, ${tenantCount} tenant namespaces of ${sizes[sizes.length - 1]}–${sizes[0]} clusters (Zipf-like), one pipeline per cluster.`);
console.log(`Lease ${timings.leaseDurationMs / 1000} s, renew deadline ${timings.renewDeadlineMs / 1000} s, retry ${timings.retryPeriodMs / 1000} s; fence takes at the default rates (free 20/s, burst 50; a dead replica's 100/s, burst 250) on a connection at 130 requests/s; peer Lease renewals on a connection at ${managementQps} requests/s. "group lost": a replica's peer Lease not renewed within the renew deadline (it stops acting for every key, then joins again). RSS and heap after a GC, Δ over the replica's own start.`);
const one = results.find((r) => r.by === 'pipeline' && r.n === 1);
const maxRss = (r: RunResult): number => maxOf(r.memory.map((m) => m.rss - m.baseRss));
console.log('\n| shard by | replicas | keys per replica (ideal) | caches per replica | RSS Δ per replica, MiB | heap Δ per replica, MiB | max RSS Δ ÷ 1 replica\'s (goal ≤ 1.2/N) | all keys owned in | all synced in |');
console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- |');
for (const r of results) {
  const ratio = one === undefined ? '-' : `${(maxRss(r) / maxRss(one)).toFixed(2)} (≤ ${(1.2 / r.n).toFixed(2)})`;
  console.log(`| ${r.by} | ${r.n} | ${Math.min(...r.keysPer)}–${maxOf(r.keysPer)} (${(r.keys / r.n).toFixed(0)}) | ${r.memory.map((m) => m.caches).join(' / ')} | ${r.memory.map((m) => mib(m.rss - m.baseRss)).join(' / ')} (total RSS ${r.memory.map((m) => mib(m.rss)).join(' / ')}) | ${r.memory.map((m) => mib(m.heap - m.baseHeap)).join(' / ')} | ${ratio} | ${s(r.first.ownedMs)} | ${s(r.first.syncedMs)} |`);
}
console.log('\n| shard by | N | join N→N+1: keys moved (ideal K/(N+1)), moved not to the new replica, all owned / synced in | SIGKILL N+1→N: dead replica\'s keys, keys moved, moved from others, owned again in (goal ≤ lease + 5 s = 15 s), synced in | max orphaned (status) | bound (status) | group lost |');
console.log('| --- | --- | --- | --- | --- | --- | --- |');
for (const r of results) {
  console.log(`| ${r.by} | ${r.n} | ${r.join.moved} (${(r.keys / (r.n + 1)).toFixed(0)}), ${r.join.movedElsewhere}, ${s(r.join.settled.ownedMs)} / ${s(r.join.settled.syncedMs)} | ${r.kill.share}, ${r.kill.moved}, ${r.kill.movedElsewhere}, ${s(r.kill.settled.ownedMs)}, ${s(r.kill.settled.syncedMs)} | ${r.maxOrphaned} | ${s(r.maxBoundMs)} | ${r.losses} |`);
}
const n = Math.max(...replicaCounts);
console.log(`\nUnit of work at N = ${n} (memory balance: max ÷ mean over the replicas; 1.00 is perfect):`);
console.log('\n| shard by | keys | keys per replica | caches per replica | max ÷ mean caches | RSS Δ per replica, MiB | max ÷ mean RSS Δ | max RSS Δ, MiB |');
console.log('| --- | --- | --- | --- | --- | --- | --- | --- |');
for (const r of results.filter((x) => x.n === n)) {
  const caches = r.memory.map((m) => m.caches);
  const rss = r.memory.map((m) => m.rss - m.baseRss);
  console.log(`| ${r.by} | ${r.keys} | ${r.keysPer.join(' / ')} | ${caches.join(' / ')} | ${(maxOf(caches) / meanOf(caches)).toFixed(2)} | ${rss.map(mib).join(' / ')} | ${(maxOf(rss) / meanOf(rss)).toFixed(2)} | ${mib(maxOf(rss))} |`);
}
// Where a replica's memory goes: RSS Δ = a fixed part + a part per cache, fitted by least squares
// over every replica of the by-pipeline runs, and the same for the V8 heap (reserved) and the rest.
const points = results.filter((r) => r.by === 'pipeline').flatMap((r) => r.memory);
const fit = (value: (m: (typeof points)[number]) => number): { fixed: number; perCache: number } => {
  const xs = points.map((m) => m.caches);
  const ys = points.map(value);
  const mx = meanOf(xs);
  const my = meanOf(ys);
  const sxx = xs.reduce((sum, x) => sum + (x - mx) ** 2, 0);
  const perCache = sxx === 0 ? 0 : xs.reduce((sum, x, i) => sum + (x - mx) * ((ys[i] ?? 0) - my), 0) / sxx;
  return { fixed: my - perCache * mx, perCache };
};
if (points.length >= 2) {
  console.log('\nMemory per replica fitted as fixed + per cache over the by-pipeline replicas (Δ over each replica\'s start, after a GC):');
  console.log('\n| part | fixed, MiB | per cache, KiB |');
  console.log('| --- | --- | --- |');
  const parts: [string, (m: (typeof points)[number]) => number][] = [
    ['RSS', (m) => m.rss - m.baseRss],
    ['V8 heap used', (m) => m.heap - m.baseHeap],
    ['V8 heap reserved', (m) => m.heapTotal - m.baseHeapTotal],
    ['external (buffers)', (m) => m.external - m.baseExternal],
    ['RSS outside the V8 heap', (m) => (m.rss - m.baseRss) - (m.heapTotal - m.baseHeapTotal)],
  ];
  for (const [name, value] of parts) {
    const f = fit(value);
    console.log(`| ${name} | ${mib(f.fixed)} | ${(f.perCache / 1024).toFixed(1)} |`);
  }
}
const double = doubleOwnership();
console.log(`\nDouble ownership (a key acted for by two replicas at once, over every phase of every run): ${double.keys} key(s)${double.keys > 0 ? `, worst overlap ${double.worstMs} ms` : ''}; ${intervals.length} acting intervals checked.`);
process.exit(0);
