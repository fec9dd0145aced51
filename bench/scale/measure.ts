// The measured side of the scale benchmark: one Registry, one owner per cluster asking for the
// four kinds at once; reports time to all synced, RSS, heap, descriptors and CPU, then lets every
// owner go and reports what is left once the caches are collected. argv: a file holding the
// sim host's JSON line, the deadline to sync in ms, the object mode (parsed, lazy, compressed) and
// the objects' shape (bench/scale/shapes.ts). Prints one JSON line on stdout.
import { readdirSync, readFileSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { getHeapSpaceStatistics } from 'node:v8';
import { StaticProvider } from '../../lib/cluster/index.ts';
import { registryWithKeeper } from '../../lib/registry/testing.ts';
import { FLEET_KINDS } from '../fleet-kinds.ts';
import { brkHeapBytes, mallocTrim, memoryReducingGc } from '../process-memory.ts';

interface Target { readonly name: string; readonly kubeconfig: string }
const KINDS = FLEET_KINDS;

const fleet = JSON.parse(readFileSync(process.argv[2] ?? '', 'utf8')) as Target[];
const deadlineMs = Number(process.argv[3] ?? 600_000);
// Set by scale.bench.ts's --select: a label-selected set of each kind, whose cache holds only it.
const selector = process.env.SCALE_SELECTOR ?? '';
/** `lazy`: every cache keeps its objects as text; `compressed`: and deflates them once unchanged a while (issue 27); default parsed. */
const objectMode = process.argv[4] === 'lazy' || process.argv[4] === 'compressed' ? process.argv[4] : 'parsed';
/** The simulated objects' shape: filler objects of a kind are alike, the other shapes' all differ. */
const shape = process.argv[5] ?? 'filler';
/** Set by scale.bench.ts's --compress-after: how long an object stays unchanged before it is compressed. */
const compressAfterMs = process.env.SCALE_COMPRESS_AFTER_MS === undefined || process.env.SCALE_COMPRESS_AFTER_MS === '' ? undefined : Number(process.env.SCALE_COMPRESS_AFTER_MS);
const fds = (): number => readdirSync('/proc/self/fd').length;
/** Objects held compressed now, over every cache. */
const compressedNow = (): number => registry.caches().reduce((sum, c) => sum + (c.compressed ?? 0), 0);
const gc = (): void => { (globalThis as { gc?: () => void }).gc?.(); };
/** Fields of a /proc/self file of `Key: N kB` lines, in bytes. */
const procKb = (file: string, keys: readonly string[]): Record<string, number> => {
  const out: Record<string, number> = {};
  let text = '';
  try { text = readFileSync(file, 'utf8'); } catch { return out; }
  for (const key of keys) {
    const match = new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(text);
    if (match !== null) out[key] = Number(match[1]) * 1024;
  }
  return out;
};
/**
 * Where RSS goes (issue 27): Node's own accounting, V8's spaces (committed vs used: what is
 * reserved but empty), the kernel's view (anonymous vs file-backed) and the threads.
 */
const breakdown = (): Record<string, unknown> => {
  const m = process.memoryUsage();
  const spaces = Object.fromEntries(getHeapSpaceStatistics().map((s) => [s.space_name, { size: s.space_size, used: s.space_used_size, physical: s.physical_space_size }]));
  const status = procKb('/proc/self/status', ['VmRSS', 'RssAnon', 'RssFile', 'RssShmem']);
  const threads = /^Threads:\s+(\d+)/m.exec((() => { try { return readFileSync('/proc/self/status', 'utf8'); } catch { return ''; } })());
  return {
    // The main malloc arena's brk heap (glibc): what freed Buffers and native allocations leave resident.
    brk: brkHeapBytes(), rss: m.rss, heapTotal: m.heapTotal, heapUsed: m.heapUsed, external: m.external, arrayBuffers: m.arrayBuffers,
    spaces, ...status, threads: threads === null ? 0 : Number(threads[1]),
  };
};

gc();
const base = { rss: process.memoryUsage().rss, heap: process.memoryUsage().heapUsed, fds: fds() };
const baseBreakdown = breakdown();
const cpu0 = process.cpuUsage();
const started = performance.now();
const registry = registryWithKeeper({
  provider: new StaticProvider({ clusters: Object.fromEntries(fleet.map((c) => [c.name, c.kubeconfig])) }),
  credentialCheckIntervalMs: 0,
  gcInitialDelayMs: 200,
  gcMaxDelayMs: 1_000,
  gcGraceMs: 0,
  informer: { objects: objectMode, ...(compressAfterMs === undefined ? {} : { compressAfterMs }) },
});
const owners = fleet.map((c) => ({ namespace: 'owners', name: c.name }));
const readers = await Promise.all(fleet.flatMap((c, i) => KINDS.map(async (gvk) => {
  try {
    const target = selector === '' ? { gvk, namespace: 'apps', name: 'obj-0' } : { gvk, namespace: 'apps', labelSelector: selector };
    return await registry.watchTargetAndGetReader({ kind: 'static', name: c.name }, target, owners[i] ?? { namespace: 'owners', name: c.name });
  } catch (err) {
    return err instanceof Error ? err : new Error(String(err));
  }
})));
const failures = readers.filter((r): r is Error => r instanceof Error);
const buildErrors = failures.length;
// What failed, once per distinct message (a fleet that fails fails the same way many times).
const why = new Map<string, number>();
for (const err of failures) {
  const message = err.message.replace(/\d+/g, 'N');
  why.set(message, (why.get(message) ?? 0) + 1);
}
for (const [message, count] of why) process.stderr.write(`# ${count} builds failed: ${message}\n`);
let synced = 0;
let peakFds = fds();
let peakRss = process.memoryUsage().rss;
while (performance.now() - started < deadlineMs) {
  synced = readers.filter((r) => !(r instanceof Error) && r.synced).length;
  peakFds = Math.max(peakFds, fds());
  peakRss = Math.max(peakRss, process.memoryUsage().rss);
  if (synced + buildErrors === readers.length) break;
  await delay(100);
}
const syncedMs = performance.now() - started;
const cpu = process.cpuUsage(cpu0);
gc();
const loaded = { rss: process.memoryUsage().rss, heap: process.memoryUsage().heapUsed, fds: fds() };
const baseDetail = baseBreakdown;
const loadedDetail = breakdown();
// With compressed objects, the caches pack objects unchanged for compressAfterMs (default 60 s)
// in the background: the settled row waits until that is over, i.e. until the count of objects
// held compressed has grown and then stopped growing for 2 s once every object has been unchanged
// that long, or all are compressed, or none 15 s after that (objects that do not pack are left as
// text); bounded: that delay plus 120 s, reported.
let compressWait: { readonly ms: number; readonly timedOut: boolean } | undefined;
if (objectMode === 'compressed') {
  const waitStarted = performance.now();
  const eligibleMs = compressAfterMs ?? 60_000;
  const total = registry.caches().reduce((sum, c) => sum + c.objects, 0);
  let last = compressedNow();
  let grewAt = waitStarted;
  let timedOut = false;
  for (;;) {
    await delay(250);
    const now = performance.now();
    const count = compressedNow();
    if (count > last) {
      last = count;
      grewAt = now;
    }
    if (count >= total) break;
    // Not before some were compressed: a background pass may start a while after objects are eligible.
    if (count > 0 && now - waitStarted >= eligibleMs && now - grewAt >= 2_000) break;
    // None at all well after they are eligible: caches whose objects do not pack keep no dictionary.
    if (count === 0 && now - waitStarted >= eligibleMs + 15_000) break;
    if (now - waitStarted >= eligibleMs + 120_000) {
      timedOut = true;
      break;
    }
  }
  compressWait = { ms: performance.now() - waitStarted, timedOut };
  process.stderr.write(`# compressed objects: ${last} of ${total} after waiting ${(compressWait.ms / 1000).toFixed(1)} s${timedOut ? ' (gave up)' : ''}\n`);
}
// A settled process: more full collections after sync (V8 compacts old space on memory-reducing
// GCs), then a pause so that freed pages are handed back (SCALE_SETTLE_MS, default 2 000; V8's
// memory reducer waits 8 s); what stays is what a long-running service holds.
for (let i = 0; i < 3; i++) gc();
await delay(Number(process.env.SCALE_SETTLE_MS ?? 2_000));
gc();
const settledDetail = breakdown();
const compressed = compressedNow();
// V8's memory-reducing collection (what its memory reducer runs once allocation quiets down): it
// also hands back the 256 KiB pages V8 keeps pooled after the sync burst, resident but outside
// heapTotal, which the rows above count as "outside heap" (issue 27).
const reduceStarted = performance.now();
memoryReducingGc();
const reduceMs = performance.now() - reduceStarted;
await delay(500);
const reducedDetail = breakdown();
// Diagnostic (`--trim`, needs gdb and ptrace): glibc's malloc_trim(0) called in this process hands
// back every free page of every arena; the RSS it frees is memory malloc kept after the sync burst.
let trimmedDetail: Record<string, unknown> | undefined;
if (process.env.SCALE_TRIM === '1') {
  try {
    mallocTrim();
    trimmedDetail = breakdown();
  } catch (err) {
    process.stderr.write(`# malloc_trim via gdb failed: ${String(err)}\n`);
  }
}
const objects = registry.caches().reduce((sum, c) => sum + c.objects, 0);
const watchErrors = registry.caches().reduce((sum, c) => sum + c.watchErrors, 0);
// The objects' JSON as a reader gets them (the default transform applied), the mean over objects:
// what the heap per object is compared with. Filler objects of a kind differ by a digit or two, so
// one per cache (as before shapes, the same figure); the other shapes' objects all differ, so every
// object of the caches of the first SAMPLED_CLUSTERS clusters.
const SAMPLED_CLUSTERS = 8;
const byKind = new Map<string, { objects: number; bytes: number }>();
for (const [i, r] of readers.entries()) {
  if (r instanceof Error) continue;
  if (shape !== 'filler' && i >= SAMPLED_CLUSTERS * KINDS.length) break;
  const objs = shape === 'filler' ? [r.get('apps', 'obj-0')] : r.list();
  const sum = byKind.get(r.gvk.kind) ?? { objects: 0, bytes: 0 };
  for (const obj of objs) {
    if (obj === undefined) continue;
    sum.objects++;
    sum.bytes += JSON.stringify(obj).length;
  }
  byKind.set(r.gvk.kind, sum);
}
const sampled = [...byKind.values()].reduce((s, k) => ({ objects: s.objects + k.objects, bytes: s.bytes + k.bytes }), { objects: 0, bytes: 0 });
const jsonBytesPerObject = sampled.objects === 0 ? 0 : sampled.bytes / sampled.objects;
const jsonBytesByKind = Object.fromEntries([...byKind].map(([kind, k]) => [kind, k.objects === 0 ? 0 : k.bytes / k.objects]));

for (const owner of owners) registry.forgetOwner(owner);
const collectStarted = performance.now();
while (registry.caches().length > 0 && performance.now() - collectStarted < 120_000) await delay(100);
const cachesLeft = registry.caches().length;
await registry.close();
await delay(500); // sockets closed by the agents' destroy() leave the fd table on the next turns
gc();
const after = { rss: process.memoryUsage().rss, heap: process.memoryUsage().heapUsed, fds: fds() };

process.stdout.write(`${JSON.stringify({
  clusters: fleet.length, caches: readers.length, synced, buildErrors, watchErrors, objects, jsonBytesPerObject, jsonBytesByKind, sampledObjects: sampled.objects, objectMode, shape,
  ...(compressWait === undefined ? {} : { compressed, compressWaitMs: compressWait.ms, compressWaitTimedOut: compressWait.timedOut }), syncedMs,
  cpuMs: (cpu.user + cpu.system) / 1000, reduceMs, base, loaded, peakFds, peakRss, cachesLeft, after,
  detail: { base: baseDetail, loaded: loadedDetail, settled: settledDetail, reduced: reducedDetail, ...(trimmedDetail === undefined ? {} : { trimmed: trimmedDetail }) },
})}\n`);
process.exit(0);
