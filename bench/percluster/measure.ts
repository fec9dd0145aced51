// The measured side of the per-cluster benchmark: one Registry asks for 4 kinds on each of N
// simulated clusters, waits for every cache to sync, then reports process memory (RSS, JS heap,
// external, array buffers, glibc's brk heap) after a full GC, then RSS after a memory-reducing one
// (V8 hands back the pages it pools), and writes a heap snapshot when asked. With PERCLUSTER_DETAIL
// set it also prints V8's heap spaces and /proc/self/smaps_rollup on stderr. PERCLUSTER_HTTP2=0:
// connections without HTTP/2 (`connection.http2: false`); PERCLUSTER_OWN_CONTEXTS=1: each
// kubeconfig's CA made byte-distinct (a comment line before the same certificate), so that each
// cluster gets a secure context of its own, as clusters with their own CAs do (issue 27).
// argv: fleet file (sim host's JSON line), number of clusters to use, [heap snapshot path].
import { readFileSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { getHeapSpaceStatistics, writeHeapSnapshot } from 'node:v8';
import { StaticProvider } from '../../lib/cluster/index.ts';
import { registryWithKeeper } from '../../lib/registry/testing.ts';
import { FLEET_KINDS } from '../fleet-kinds.ts';
import { brkHeapBytes, fullGcs, memoryReducingGc } from '../process-memory.ts';

interface Target { readonly name: string; readonly kubeconfig: string }
const KINDS = FLEET_KINDS;

const ownContexts = process.env.PERCLUSTER_OWN_CONTEXTS === '1';
/** The kubeconfig with its CA PEM preceded by a line naming the cluster (PEM readers skip text before BEGIN). */
const distinctCa = (c: Target): Target => ({
  name: c.name,
  kubeconfig: c.kubeconfig.replace(/^(\s*certificate-authority-data: )(\S+)$/m, (_, key: string, data: string) => `${key}${Buffer.from(`${c.name}\n${Buffer.from(data, 'base64').toString()}`).toString('base64')}`),
});
const fleet = (JSON.parse(readFileSync(process.argv[2] ?? '', 'utf8')) as Target[]).slice(0, Number(process.argv[3] ?? Infinity)).map((c) => (ownContexts ? distinctCa(c) : c));
const snapshot = process.argv[4];
const memory = (): Record<string, number> => {
  const m = process.memoryUsage();
  return { rss: m.rss, heap: m.heapUsed, heapTotal: m.heapTotal, external: m.external, arrayBuffers: m.arrayBuffers, brk: brkHeapBytes() };
};
/** V8's memory-reducing collection (as its memory reducer runs): pooled pages go back too. */
const reduce = async (): Promise<void> => {
  memoryReducingGc();
  await delay(200);
};

await fullGcs();
const base = memory();
const registry = registryWithKeeper({
  provider: new StaticProvider({ clusters: Object.fromEntries(fleet.map((c) => [c.name, c.kubeconfig])) }),
  credentialCheckIntervalMs: 0,
  ...(process.env.PERCLUSTER_HTTP2 === '0' ? { connection: { http2: false } } : {}),
});
const readers = await Promise.all(fleet.flatMap((c) => KINDS.map((gvk) => registry.watchTargetAndGetReader(
  { kind: 'static', name: c.name }, { gvk, namespace: 'apps', name: 'obj-0' }, { namespace: 'owners', name: c.name }))));
while (readers.some((r) => !r.synced)) await delay(100);
await delay(1_000); // let watches open and settle
await fullGcs();
const loaded = memory();
await reduce();
const reduced = memory();
if (snapshot !== undefined) writeHeapSnapshot(snapshot);
if (process.env.PERCLUSTER_DETAIL !== undefined) {
  process.stderr.write(readFileSync('/proc/self/smaps_rollup', 'utf8'));
  for (const s of getHeapSpaceStatistics()) process.stderr.write(`${s.space_name} size ${(s.space_size / 1024).toFixed(0)} used ${(s.space_used_size / 1024).toFixed(0)} phys ${(s.physical_space_size / 1024).toFixed(0)}\n`);
}
process.stdout.write(`${JSON.stringify({ clusters: fleet.length, caches: readers.length, base, loaded, reduced })}\n`);
await registry.close();
process.exit(0);
