// Per-cluster fixed cost (issue 12):
//   node bench/percluster.bench.ts [--objects=N] [--semi=MiB] [--snapshots=DIR] [--fleet=FILE] [N1 N2 N3 ...]
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
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const args = process.argv.slice(2);
const objects = Number(args.find((a) => a.startsWith('--objects='))?.slice(10) ?? 0);
const snapshots = args.find((a) => a.startsWith('--snapshots='))?.slice(12);
const semi = args.find((a) => a.startsWith('--semi='))?.slice(7);
const given = args.find((a) => a.startsWith('--fleet='))?.slice(8);
const explicit = args.filter((a) => !a.startsWith('--')).map(Number);
// `make bench` passes nothing: three sizes, enough for the fit.
const sizes = explicit.length > 0 ? explicit : [50, 100, 200];
if (sizes.length < 2 || sizes.some((n) => !Number.isInteger(n) || n < 1)) throw new TypeError(`percluster bench: give at least two cluster counts, got ${JSON.stringify(explicit)}`);
const here = new URL('./', import.meta.url).pathname;
const KiB = 1024;
type Mem = Record<'rss' | 'heap' | 'heapTotal' | 'external' | 'arrayBuffers', number>;

// --fleet=FILE: a sim host's JSON line already served elsewhere (repeat runs against one host).
const host = spawn(process.execPath, given === undefined ? [join(here, 'scale/sim-host.ts'), String(Math.max(...sizes)), String(objects)] : ['-e', `console.log(require('node:fs').readFileSync(${JSON.stringify(given)}, 'utf8').trim()); process.stdin.resume()`], { stdio: ['pipe', 'pipe', 'inherit'] });
const rows: { n: number; d: Mem }[] = [];
try {
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: host.stdout }).once('line', resolve);
    host.once('exit', (code) => { reject(new Error(`sim host exited with ${code}`)); });
  });
  const dir = mkdtempSync(join(tmpdir(), 'fleetcache-percluster-'));
  try {
    const file = join(dir, 'fleet.json');
    writeFileSync(file, line);
    for (const n of sizes) {
      const argv = ['--expose-gc', ...(semi === undefined ? [] : [`--max-semi-space-size=${semi}`]), join(here, 'percluster/measure.ts'), file, String(n), ...(snapshots === undefined ? [] : [join(snapshots, `n${n}.heapsnapshot`)])];
      const child = spawn(process.execPath, argv, { stdio: ['ignore', 'pipe', 'inherit'] });
      let out = '';
      child.stdout.on('data', (chunk: Buffer) => { out += chunk.toString(); });
      const code = await new Promise<number | null>((resolve) => { child.once('exit', resolve); });
      if (code !== 0) throw new Error(`measured process exited with ${code}`);
      const r = JSON.parse(out) as { base: Mem; loaded: Mem };
      const d = Object.fromEntries(Object.keys(r.base).map((k) => [k, r.loaded[k as keyof Mem] - r.base[k as keyof Mem]])) as Mem;
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
console.log(`\n| clusters (4 kinds × ${objects} objects) | RSS Δ | heap used Δ | heap total Δ | external Δ | arrayBuffers Δ |`);
console.log('| --- | --- | --- | --- | --- | --- |');
for (const { n, d } of rows) console.log(`| ${n} | ${(d.rss / KiB).toFixed(0)} KiB | ${(d.heap / KiB).toFixed(0)} KiB | ${(d.heapTotal / KiB).toFixed(0)} KiB | ${(d.external / KiB).toFixed(0)} KiB | ${(d.arrayBuffers / KiB).toFixed(0)} KiB |`);
console.log(`| **per cluster (fit)** | ${(slope((m) => m.rss) / KiB).toFixed(0)} KiB | ${(slope((m) => m.heap) / KiB).toFixed(0)} KiB | ${(slope((m) => m.heapTotal) / KiB).toFixed(0)} KiB | ${(slope((m) => m.external) / KiB).toFixed(0)} KiB | ${(slope((m) => m.arrayBuffers) / KiB).toFixed(0)} KiB |`);
