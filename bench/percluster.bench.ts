// Per-cluster fixed cost (issue 12):
//   node bench/percluster.bench.ts [--objects=N] [--semi=MiB] [--snapshots=DIR] [--fleet=FILE] [--h1] [--own-contexts] [--env=NAME=VALUE …] [--layers [--node-settings] [--trim]] [N1 N2 N3 ...]
// (default 50 100 200). One sim host (its own process; or --fleet=FILE, the JSON line of one
// already running) serves max(N) clusters × 4 kinds × objects (default 0); for each N a fresh
// fleetcache process (bench/percluster/measure.ts) syncs 4 caches on N of them. Prints RSS, heap
// used and total, external and arrayBuffers growth per configuration and the least-squares slope
// of each over N: the fixed cost of one cluster. With --snapshots, each process writes a heap
// snapshot there (compare two with bench/percluster/heapdiff.ts). --semi caps V8's young
// generation (--max-semi-space-size) in the measured process: by default it grew to 128 MiB here
// under the allocation burst of a fleet syncing at once and stays committed, which a linear fit over
// 50..200 clusters reads as several hundred KiB "per cluster"; with it capped, the fit shows what
// each cluster really keeps.
// Issue 27: `--h1` connects without HTTP/2 (one TLS socket per watch and request in flight);
// `--own-contexts` gives each cluster's kubeconfig a byte-distinct CA (the same certificate after a
// line naming the cluster), hence a secure context each, as real clusters with their own CAs have
// (the sim's clusters share one CA, so by default they share one context); `--env=NAME=VALUE`
// (repeatable) sets the measured process's environment (glibc's MALLOC_* tunables). Printed beside
// the rest: glibc's brk heap and RSS after a memory-reducing GC (V8 then returns the 256 KiB pages
// it pools, resident but outside heap total). `--layers` measures Node's own cost instead, layer by
// layer over max(N) clusters without fleetcache (bench/percluster/layers.ts: TLS socket, HTTP/2
// session, the four LISTs, the four watches, all closed, memory-reducing GC; `--own-contexts` and
// `--node-settings` for node:http2's default session settings instead of the transport's, `--trim`
// to call glibc's malloc_trim(0) through gdb so that live native memory shows).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { envArguments } from './child.ts';

const args = process.argv.slice(2);
const objects = Number(args.find((a) => a.startsWith('--objects='))?.slice(10) ?? 0);
const snapshots = args.find((a) => a.startsWith('--snapshots='))?.slice(12);
const semi = args.find((a) => a.startsWith('--semi='))?.slice(7);
const given = args.find((a) => a.startsWith('--fleet='))?.slice(8);
const h1 = args.includes('--h1');
const ownContexts = args.includes('--own-contexts');
const layers = args.includes('--layers');
const nodeSettings = args.includes('--node-settings');
const extraEnv = envArguments(args);
const childEnv = { ...process.env, ...(args.includes('--trim') ? { LAYERS_TRIM: '1' } : {}), ...(h1 ? { PERCLUSTER_HTTP2: '0' } : {}), ...(ownContexts ? { PERCLUSTER_OWN_CONTEXTS: '1' } : {}), ...extraEnv };
const explicit = args.filter((a) => !a.startsWith('--')).map(Number);
// `make bench` passes nothing: three sizes, enough for the fit.
const sizes = explicit.length > 0 ? explicit : [50, 100, 200];
if ((layers ? sizes.length < 1 : sizes.length < 2) || sizes.some((n) => !Number.isInteger(n) || n < 1)) throw new TypeError(`percluster bench: give at least two cluster counts, got ${JSON.stringify(explicit)}`);
const here = new URL('./', import.meta.url).pathname;
const KiB = 1024;
type Mem = Record<'rss' | 'heap' | 'heapTotal' | 'external' | 'arrayBuffers' | 'brk' | 'reducedRss', number>;

// --fleet=FILE: a sim host's JSON line already served elsewhere (repeat runs against one host).
const host = spawn(process.execPath, given === undefined ? [join(here, 'scale/sim-host.ts'), String(Math.max(...sizes) + (layers ? 1 : 0)), String(objects)] : ['-e', `console.log(require('node:fs').readFileSync(${JSON.stringify(given)}, 'utf8').trim()); process.stdin.resume()`], { stdio: ['pipe', 'pipe', 'inherit'] });
/** Runs a measured process (`argv` after node) to its end; the JSON it printed. */
async function measured(argv: readonly string[]): Promise<unknown> {
  const child = spawn(process.execPath, argv, { stdio: ['ignore', 'pipe', 'inherit'], env: childEnv });
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => { out += chunk.toString(); });
  const code = await new Promise<number | null>((resolve) => { child.once('exit', resolve); });
  if (code !== 0) throw new Error(`measured process exited with ${code}`);
  return JSON.parse(out);
}
const rows: { n: number; d: Mem }[] = [];
/** `--layers`: memory after each layer (bench/percluster/layers.ts), in order. */
let layered: { clusters: number; steps: [string, Record<string, number>][] } | undefined;
try {
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: host.stdout }).once('line', resolve);
    host.once('exit', (code) => { reject(new Error(`sim host exited with ${code}`)); });
  });
  const dir = mkdtempSync(join(tmpdir(), 'fleetcache-percluster-'));
  try {
    const file = join(dir, 'fleet.json');
    writeFileSync(file, line);
    if (layers) {
      const n = Math.max(...sizes);
      const argv = ['--expose-gc', ...(semi === undefined ? [] : [`--max-semi-space-size=${semi}`]), join(here, 'percluster/layers.ts'), file, String(n), ownContexts ? 'own' : 'shared', nodeSettings ? 'node' : 'ours'];
      const r = await measured(argv) as Record<string, unknown> & { clusters: number };
      layered = { clusters: r.clusters, steps: Object.entries(r).filter((e): e is [string, Record<string, number>] => typeof e[1] === 'object' && e[1] !== null) };
    }
    for (const n of layers ? [] : sizes) {
      const argv = ['--expose-gc', ...(semi === undefined ? [] : [`--max-semi-space-size=${semi}`]), join(here, 'percluster/measure.ts'), file, String(n), ...(snapshots === undefined ? [] : [join(snapshots, `n${n}.heapsnapshot`)])];
      const r = await measured(argv) as { base: Mem; loaded: Mem; reduced: Mem };
      const d = Object.fromEntries(Object.keys(r.base).map((k) => [k, r.loaded[k as keyof Mem] - r.base[k as keyof Mem]])) as Mem;
      d.reducedRss = r.reduced.rss - r.base.rss;
      rows.push({ n, d });
      process.stderr.write(`# ${n} clusters: ${JSON.stringify(Object.fromEntries(Object.entries(d).map(([k, v]) => [k, `${(v / KiB).toFixed(0)} KiB`])))}\n`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
} finally {
  host.stdin.end();
  await new Promise((resolve) => { host.once('exit', resolve); setTimeout(resolve, 10_000).unref(); });
}

const slope = (pick: (m: Mem) => number): number => {
  const xs = rows.map((r) => r.n);
  const ys = rows.map((r) => pick(r.d));
  const mx = xs.reduce((a, b) => a + b, 0) / xs.length;
  const my = ys.reduce((a, b) => a + b, 0) / ys.length;
  let num = 0;
  let den = 0;
  for (let i = 0; i < xs.length; i++) {
    num += ((xs[i] ?? 0) - mx) * ((ys[i] ?? 0) - my);
    den += ((xs[i] ?? 0) - mx) ** 2;
  }
  return num / den;
};
const settings = `V8 semi-space: ${semi === undefined ? 'default' : `≤ ${semi} MiB`}; ${h1 ? 'HTTP/1.1' : 'HTTP/2'}; secure contexts: ${ownContexts ? 'one per cluster' : 'shared (one CA)'}${Object.entries(extraEnv).map(([k, v]) => `; ${k}=${v}`).join('')}`;
if (layered !== undefined) {
  // Each layer's growth over the previous one, per cluster; outside = RSS − heap total.
  const n = layered.clusters;
  console.log(`\n${settings}; session settings: ${nodeSettings ? "node:http2's defaults" : "the transport's"}; ${n} clusters (and one warm-up, not counted), 4 kinds × ${objects} objects`);
  console.log('\n| layer (KiB per cluster, growth over the row above) | RSS | heap used | heap total | outside heap | external | glibc brk heap |');
  console.log('| --- | --- | --- | --- | --- | --- | --- |');
  const per = (x: number): string => (x / n / KiB).toFixed(1);
  let prev: Record<string, number> | undefined;
  for (const [name, m] of layered.steps) {
    if (prev !== undefined) console.log(`| ${name} | ${per((m.rss ?? 0) - (prev.rss ?? 0))} | ${per((m.heapUsed ?? 0) - (prev.heapUsed ?? 0))} | ${per((m.heapTotal ?? 0) - (prev.heapTotal ?? 0))} | ${per((m.rss ?? 0) - (m.heapTotal ?? 0) - ((prev.rss ?? 0) - (prev.heapTotal ?? 0)))} | ${per((m.external ?? 0) - (prev.external ?? 0))} | ${per((m.brk ?? 0) - (prev.brk ?? 0))} |`);
    prev = m;
  }
} else {
  console.log(`\n${settings}`);
  console.log(`\n| clusters (4 kinds × ${objects} objects) | RSS Δ | heap used Δ | heap total Δ | external Δ | arrayBuffers Δ | glibc brk Δ | RSS Δ after a memory-reducing GC |`);
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const { n, d } of rows) console.log(`| ${n} | ${(d.rss / KiB).toFixed(0)} KiB | ${(d.heap / KiB).toFixed(0)} KiB | ${(d.heapTotal / KiB).toFixed(0)} KiB | ${(d.external / KiB).toFixed(0)} KiB | ${(d.arrayBuffers / KiB).toFixed(0)} KiB | ${(d.brk / KiB).toFixed(0)} KiB | ${(d.reducedRss / KiB).toFixed(0)} KiB |`);
  console.log(`| **per cluster (fit)** | ${(slope((m) => m.rss) / KiB).toFixed(0)} KiB | ${(slope((m) => m.heap) / KiB).toFixed(0)} KiB | ${(slope((m) => m.heapTotal) / KiB).toFixed(0)} KiB | ${(slope((m) => m.external) / KiB).toFixed(0)} KiB | ${(slope((m) => m.arrayBuffers) / KiB).toFixed(0)} KiB | ${(slope((m) => m.brk) / KiB).toFixed(0)} KiB | ${(slope((m) => m.reducedRss) / KiB).toFixed(0)} KiB |`);
}
console.log(`\nload average (1, 5, 15 min) at the end: ${loadavg().map((l) => l.toFixed(1)).join(' ')}`);
