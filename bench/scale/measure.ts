// The measured side of the scale benchmark: one Registry, one owner per cluster asking for the
// four kinds at once; reports time to all synced, RSS, heap, descriptors and CPU, then lets every
// owner go and reports what is left once the caches are collected. argv: a file holding the
// sim host's JSON line. Prints one JSON line on stdout.
import { readdirSync, readFileSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { StaticProvider } from '../../lib/cluster/index.ts';
import { registryWithKeeper } from '../../lib/registry/testing.ts';
import { FLEET_KINDS } from '../fleet-kinds.ts';

interface Target { readonly name: string; readonly kubeconfig: string }
const KINDS = FLEET_KINDS;

const fleet = JSON.parse(readFileSync(process.argv[2] ?? '', 'utf8')) as Target[];
const deadlineMs = Number(process.argv[3] ?? 600_000);
// Set by scale.bench.ts's --select: a label-selected set of each kind, whose cache holds only it.
const selector = process.env.SCALE_SELECTOR ?? '';
/** `lazy`: every cache keeps its objects as text (issue 27); default parsed. */
const objectMode = process.argv[4] === 'lazy' ? 'lazy' : 'parsed';
const fds = (): number => readdirSync('/proc/self/fd').length;
const gc = (): void => { (globalThis as { gc?: () => void }).gc?.(); };

gc();
const base = { rss: process.memoryUsage().rss, heap: process.memoryUsage().heapUsed, fds: fds() };
const cpu0 = process.cpuUsage();
const started = performance.now();
const registry = registryWithKeeper({
  provider: new StaticProvider({ clusters: Object.fromEntries(fleet.map((c) => [c.name, c.kubeconfig])) }),
  credentialCheckIntervalMs: 0,
  gcInitialDelayMs: 200,
  gcMaxDelayMs: 1_000,
  gcGraceMs: 0,
  informer: { objects: objectMode },
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
const objects = registry.caches().reduce((sum, c) => sum + c.objects, 0);
const watchErrors = registry.caches().reduce((sum, c) => sum + c.watchErrors, 0);
// The objects' JSON as a reader gets them (the default transform applied), from one object per
// cache (a kind's objects differ by a digit or two): what the heap per object is compared with.
let sampled = 0;
let sampledBytes = 0;
for (const r of readers) {
  if (r instanceof Error) continue;
  const obj = r.get('apps', 'obj-0');
  if (obj === undefined) continue;
  sampled++;
  sampledBytes += JSON.stringify(obj).length;
}
const jsonBytesPerObject = sampled === 0 ? 0 : sampledBytes / sampled;

for (const owner of owners) registry.forgetOwner(owner);
const collectStarted = performance.now();
while (registry.caches().length > 0 && performance.now() - collectStarted < 120_000) await delay(100);
const cachesLeft = registry.caches().length;
await registry.close();
await delay(500); // sockets closed by the agents' destroy() leave the fd table on the next turns
gc();
const after = { rss: process.memoryUsage().rss, heap: process.memoryUsage().heapUsed, fds: fds() };

process.stdout.write(`${JSON.stringify({
  clusters: fleet.length, caches: readers.length, synced, buildErrors, watchErrors, objects, jsonBytesPerObject, objectMode, syncedMs,
  cpuMs: (cpu.user + cpu.system) / 1000, base, loaded, peakFds, peakRss, cachesLeft, after,
})}\n`);
process.exit(0);
