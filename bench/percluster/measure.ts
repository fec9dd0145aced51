// The measured side of the per-cluster benchmark: one Registry asks for 4 kinds on each of N
// simulated clusters, waits for every cache to sync, then reports process memory (RSS, JS heap,
// external, array buffers) after a full GC, and writes a heap snapshot when asked. With
// PERCLUSTER_DETAIL set it also prints V8's heap spaces and /proc/self/smaps_rollup on stderr.
// argv: fleet file (sim host's JSON line), number of clusters to use, [heap snapshot path].
import { readFileSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { getHeapSpaceStatistics, writeHeapSnapshot } from 'node:v8';
import { StaticProvider } from '../../lib/cluster/index.ts';
import { registryWithKeeper } from '../../lib/registry/testing.ts';
import { FLEET_KINDS } from '../fleet-kinds.ts';

interface Target { readonly name: string; readonly kubeconfig: string }
const KINDS = FLEET_KINDS;

const fleet = (JSON.parse(readFileSync(process.argv[2] ?? '', 'utf8')) as Target[]).slice(0, Number(process.argv[3] ?? Infinity));
const snapshot = process.argv[4];
const gc = async (): Promise<void> => {
  for (let i = 0; i < 3; i++) {
    (globalThis as { gc?: () => void }).gc?.();
    await delay(50);
  }
};
const memory = (): Record<string, number> => {
  const m = process.memoryUsage();
  return { rss: m.rss, heap: m.heapUsed, heapTotal: m.heapTotal, external: m.external, arrayBuffers: m.arrayBuffers };
};

await gc();
const base = memory();
const registry = registryWithKeeper({
  provider: new StaticProvider({ clusters: Object.fromEntries(fleet.map((c) => [c.name, c.kubeconfig])) }),
  credentialCheckIntervalMs: 0,
});
const readers = await Promise.all(fleet.flatMap((c) => KINDS.map((gvk) => registry.watchTargetAndGetReader(
  { kind: 'static', name: c.name }, { gvk, namespace: 'apps', name: 'obj-0' }, { namespace: 'owners', name: c.name }))));
while (readers.some((r) => !r.synced)) await delay(100);
await delay(1_000); // let watches open and settle
await gc();
const loaded = memory();
if (snapshot !== undefined) writeHeapSnapshot(snapshot);
if (process.env.PERCLUSTER_DETAIL !== undefined) {
  process.stderr.write(readFileSync('/proc/self/smaps_rollup', 'utf8'));
  for (const s of getHeapSpaceStatistics()) process.stderr.write(`${s.space_name} size ${(s.space_size / 1024).toFixed(0)} used ${(s.space_used_size / 1024).toFixed(0)} phys ${(s.physical_space_size / 1024).toFixed(0)}\n`);
}
process.stdout.write(`${JSON.stringify({ clusters: fleet.length, caches: readers.length, base, loaded })}\n`);
await registry.close();
process.exit(0);
