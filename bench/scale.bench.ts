// Scale benchmark (issue 12): `node bench/scale.bench.ts [--quick] [--semi=MiB] [--select=FRACTION] [--objects=lazy|compressed] [--compress-after=MS] [--shape=filler|realistic|random] [--v8=FLAG,…] [--arenas=N] [--env=NAME=VALUE …] [--trim] [--settle=MS] [CxO[@fdlimit] ...]`
// (issue 27: a table of where RSS goes — V8's committed and empty pages, outside the heap, glibc's brk heap —
// after sync, once settled, after a memory-reducing GC (V8 then returns the pages it pools: resident,
// outside heapTotal, so counted "outside heap" before it), and with `--trim` after malloc_trim(0))
// (`--select` asks for a label-selected set of each kind instead of one object, selecting that
// fraction of the objects in tenths: the caches then hold only those, issue 28)
// (`--shape`, issue 27: what the objects look like, bench/scale/shapes.ts: `filler` (default) a run
// of one letter, as every figure before it; `realistic` each kind as a real cluster holds it, every
// object different; `random` the filler as base64 of random bytes, incompressible. `--objects=
// compressed [--compress-after=MS]`: caches deflate objects unchanged that long, and the settled row
// waits for that to finish)
// (make bench runs the default set; `--semi` caps V8's young generation in the measured process,
// `--max-semi-space-size`, as the service's image does). For each configuration, C simulated clusters × 4 kinds × O objects of
// about 2 KB are served by a separate process (bench/scale/sim-host.ts), and a fresh fleetcache
// process (bench/scale/measure.ts), optionally under a descriptor limit, asks one owner per cluster
// for the four kinds at once. Printed: time to all synced, RSS, heap, descriptors, CPU; then every
// owner leaves and what stays after the caches are collected; then a least-squares fit of RSS and
// heap over clusters and objects (the per-cluster and per-object cost). Figures vary ±25 % on a
// shared machine: compare runs of one session, and read the fit, not single rows.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { envArguments } from './child.ts';
import { isShape, SHAPES } from './scale/shapes.ts';

interface Config { readonly clusters: number; readonly objects: number; readonly fdLimit: number | undefined }
interface Snapshot { readonly rss: number; readonly heap: number; readonly fds: number }
interface Space { readonly size: number; readonly used: number; readonly physical: number }
interface Detail {
  readonly rss: number; readonly heapTotal: number; readonly heapUsed: number; readonly external: number; readonly arrayBuffers: number;
  readonly spaces: Readonly<Record<string, Space>>; readonly RssAnon?: number; readonly RssFile?: number; readonly threads: number; readonly brk: number;
}
interface Result {
  readonly clusters: number; readonly caches: number; readonly synced: number; readonly buildErrors: number; readonly watchErrors: number;
  readonly objects: number; readonly jsonBytesPerObject: number; readonly jsonBytesByKind: Readonly<Record<string, number>>; readonly sampledObjects: number;
  readonly compressed?: number; readonly compressWaitMs?: number; readonly compressWaitTimedOut?: boolean; readonly syncedMs: number; readonly cpuMs: number; readonly reduceMs?: number; readonly base: Snapshot; readonly loaded: Snapshot;
  readonly peakFds: number; readonly peakRss: number; readonly cachesLeft: number; readonly after: Snapshot;
  readonly detail: { readonly base: Detail; readonly loaded: Detail; readonly settled: Detail; readonly reduced?: Detail; readonly trimmed?: Detail };
}

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const semi = args.find((a) => a.startsWith('--semi='))?.slice('--semi='.length);
const select = args.find((a) => a.startsWith('--select='))?.slice('--select='.length);
// Objects carry `app: app-<i mod 10>`: a fraction in tenths is an `in` over that many values.
const tenths = select === undefined ? undefined : Math.round(Number(select) * 10);
if (tenths !== undefined && !(tenths >= 1 && tenths <= 10)) throw new TypeError(`--select=${String(select)}: expected a fraction from 0.1 to 1`);
const selector = tenths === undefined ? undefined : `app in (${Array.from({ length: tenths }, (_, i) => `app-${i}`).join(',')})`;
// `--v8=FLAG,FLAG`: more V8 flags for the measured process; `--arenas=N`: MALLOC_ARENA_MAX for it
// (glibc's malloc arenas, one per thread that allocates: the libuv pool's TLS/zlib work). Issue 27.
const v8Extra = (args.find((a) => a.startsWith('--v8='))?.slice('--v8='.length) ?? '').split(',').filter((f) => f !== '');
const arenas = args.find((a) => a.startsWith('--arenas='))?.slice('--arenas='.length);
// `--trim`: after settling, glibc's malloc_trim(0) in the measured process through gdb (diagnostic).
const trim = args.includes('--trim');
// `--settle=MS`: how long the measured process idles before the settled row (default 2 000; V8's
// memory reducer starts 8 s after a major GC, and runs in Node only under --optimize-for-size).
const settle = args.find((a) => a.startsWith('--settle='))?.slice('--settle='.length);
// `--env=NAME=VALUE` (repeatable): more environment for the measured process (glibc's MALLOC_* tunables).
const extraEnv = envArguments(args);
/** `--objects=lazy`: caches keep objects as text; `--objects=compressed`: and deflate them once unchanged (issue 27). */
const objects = args.includes('--objects=compressed') ? 'compressed' : args.includes('--objects=lazy') ? 'lazy' : 'parsed';
/** `--compress-after=MS`: the informer's compressAfterMs (default the library's, 60 000). */
const compressAfter = args.find((a) => a.startsWith('--compress-after='))?.slice('--compress-after='.length);
if (compressAfter !== undefined && !(Number(compressAfter) >= 0)) throw new TypeError(`--compress-after=${compressAfter}: expected milliseconds`);
if (compressAfter !== undefined && objects !== 'compressed') throw new TypeError('--compress-after needs --objects=compressed');
/** `--shape=NAME`: what the simulated objects look like (bench/scale/shapes.ts). */
const shape = args.find((a) => a.startsWith('--shape='))?.slice('--shape='.length) ?? 'filler';
if (!isShape(shape)) throw new TypeError(`--shape=${shape}: expected one of ${SHAPES.join(', ')}`);
const parse = (spec: string): Config => {
  const match = /^(\d+)x(\d+)(?:@(\d+))?$/.exec(spec);
  if (match === null) throw new TypeError(`configuration ${JSON.stringify(spec)}: expected CLUSTERSxOBJECTS[@FDLIMIT]`);
  return { clusters: Number(match[1]), objects: Number(match[2]), fdLimit: match[3] === undefined ? undefined : Number(match[3]) };
};
const explicit = args.filter((a) => !a.startsWith('--')).map(parse);
const configs: readonly Config[] = explicit.length > 0 ? explicit : quick
  ? ['20x50', '50x50', '100x20@1024'].map(parse)
  : ['100x200', '500x200', '1000x200', '1000x50@1024'].map(parse);

const here = new URL('./scale/', import.meta.url).pathname;
const MiB = 2 ** 20;

async function run(config: Config): Promise<Result> {
  const host = spawn(process.execPath, [join(here, 'sim-host.ts'), String(config.clusters), String(config.objects), shape], { stdio: ['pipe', 'pipe', 'inherit'] });
  try {
    const line = await new Promise<string>((resolve, reject) => {
      createInterface({ input: host.stdout }).once('line', resolve);
      host.once('exit', (code) => { reject(new Error(`sim host exited with ${code}`)); });
    });
    const dir = mkdtempSync(join(tmpdir(), 'fleetcache-scale-'));
    try {
      const file = join(dir, 'fleet.json');
      writeFileSync(file, line);
      const v8 = (semi === undefined ? '' : ` --max-semi-space-size=${Number(semi)}`) + v8Extra.map((f) => ` ${JSON.stringify(f)}`).join('');
      const node = `${JSON.stringify(process.execPath)} --expose-gc${v8} ${JSON.stringify(join(here, 'measure.ts'))} ${JSON.stringify(file)} 600000 ${objects} ${shape}`;
      const script = config.fdLimit === undefined ? `exec ${node}` : `ulimit -n ${config.fdLimit} && exec ${node}`;
      const measured = spawn('bash', ['-c', script], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, SCALE_SELECTOR: selector ?? '', ...(arenas === undefined ? {} : { MALLOC_ARENA_MAX: arenas }), ...(trim ? { SCALE_TRIM: '1' } : {}), ...(settle === undefined ? {} : { SCALE_SETTLE_MS: String(Number(settle)) }), ...(compressAfter === undefined ? {} : { SCALE_COMPRESS_AFTER_MS: String(Number(compressAfter)) }), ...extraEnv } });
      let out = '';
      measured.stdout.on('data', (chunk: Buffer) => { out += chunk.toString(); });
      const code = await new Promise<number | null>((resolve) => { measured.once('exit', resolve); });
      if (code !== 0) throw new Error(`measured process exited with ${code}`);
      return JSON.parse(out) as Result;
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  } finally {
    host.stdin.end();
    await new Promise((resolve) => { host.once('exit', resolve); setTimeout(resolve, 10_000).unref(); });
  }
}

/** Least squares y ≈ a + b·x1 + c·x2 (normal equations, 3×3). Undefined when the points cannot separate the terms. */
function fit(points: readonly (readonly [number, number, number])[]): readonly [number, number, number] | undefined {
  if (points.length < 3) return undefined;
  const m = [[0, 0, 0], [0, 0, 0], [0, 0, 0]];
  const v = [0, 0, 0];
  for (const [x1, x2, y] of points) {
    const row = [1, x1, x2];
    for (let i = 0; i < 3; i++) {
      v[i] = (v[i] ?? 0) + (row[i] ?? 0) * y;
      for (let j = 0; j < 3; j++) (m[i] ?? [])[j] = ((m[i] ?? [])[j] ?? 0) + (row[i] ?? 0) * (row[j] ?? 0);
    }
  }
  const det = (a: number[][]): number => {
    const g = (i: number, j: number): number => a[i]?.[j] ?? 0;
    return g(0, 0) * (g(1, 1) * g(2, 2) - g(1, 2) * g(2, 1)) - g(0, 1) * (g(1, 0) * g(2, 2) - g(1, 2) * g(2, 0)) + g(0, 2) * (g(1, 0) * g(2, 1) - g(1, 1) * g(2, 0));
  };
  const d = det(m);
  if (Math.abs(d) < 1e-9) return undefined;
  const solve = (k: number): number => det(m.map((row, i) => row.map((cell, j) => (j === k ? v[i] ?? 0 : cell)))) / d;
  return [solve(0), solve(1), solve(2)];
}

const results: { config: Config; result: Result }[] = [];
for (const config of configs) {
  process.stderr.write(`# ${config.clusters} clusters × 4 kinds × ${config.objects} objects${config.fdLimit === undefined ? '' : `, descriptor limit ${config.fdLimit}`}…\n`);
  results.push({ config, result: await run(config) });
}

console.log(`\nV8 semi-space: ${semi === undefined ? 'default' : `≤ ${semi} MiB`}${v8Extra.length > 0 ? ` ${v8Extra.join(' ')}` : ''}; MALLOC_ARENA_MAX: ${arenas ?? 'unset'}${Object.entries(extraEnv).map(([k, v]) => `; ${k}=${v}`).join('')}; objects: ${objects}${compressAfter === undefined ? '' : ` (compress after ${compressAfter} ms)`}; shape: ${shape}; targets: ${selector === undefined ? 'one object of each kind (whole-kind caches)' : `the set ${selector} of each kind (${(tenths ?? 0) * 10} % of the objects)`}`);
console.log('\n| clusters × objects/kind | fd limit | caches synced | synced in | RSS | heap | peak fds | CPU | after all owners left: caches, heap Δ, fds Δ |');
console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- |');
for (const { config, result: r } of results) {
  console.log(`| ${config.clusters} × ${config.objects} | ${config.fdLimit ?? '-'} | ${r.synced}/${r.caches}${r.buildErrors > 0 ? ` (${r.buildErrors} failed)` : ''} | ${(r.syncedMs / 1000).toFixed(1)} s | ${((r.loaded.rss - r.base.rss) / MiB).toFixed(0)} MiB (peak ${(r.peakRss / MiB).toFixed(0)}) | ${((r.loaded.heap - r.base.heap) / MiB).toFixed(0)} MiB | ${r.peakFds} | ${(r.cpuMs / 1000).toFixed(1)} s | ${r.cachesLeft}, ${((r.after.heap - r.base.heap) / MiB).toFixed(1)} MiB, ${r.after.fds - r.base.fds} |`);
}
// Issue 27: the heap and RSS per cached object against the objects' own JSON (as readers get them).
// With compressed objects, "compressed" is how many were held compressed at the settled row, and
// how long the wait for the background compression took.
// (heap and RSS after sync; "settled" as in the table below: with compressed objects, once compressed).
console.log('\n| clusters × objects/kind | objects | compressed (wait) | JSON B/object (by kind) | heap B/object | heap / JSON | RSS B/object | RSS / JSON | settled: heap used / JSON, RSS / JSON |');
console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- |');
for (const { config, result: r } of results) {
  const heap = (r.loaded.heap - r.base.heap) / r.objects;
  const rss = (r.loaded.rss - r.base.rss) / r.objects;
  const json = r.jsonBytesPerObject;
  const compressed = r.compressed === undefined ? '-' : `${r.compressed} (${((r.compressWaitMs ?? 0) / 1000).toFixed(1)} s${r.compressWaitTimedOut === true ? ', gave up' : ''})`;
  const kinds = Object.entries(r.jsonBytesByKind).map(([kind, bytes]) => `${kind} ${bytes.toFixed(0)}`).join(', ');
  const settled = r.detail.settled;
  const settledRatios = `${((settled.heapUsed - r.detail.base.heapUsed) / r.objects / json).toFixed(2)}×, ${((settled.rss - r.detail.base.rss) / r.objects / json).toFixed(2)}×`;
  console.log(`| ${config.clusters} × ${config.objects} | ${r.objects} | ${compressed} | ${json.toFixed(0)} (${kinds}; mean of ${r.sampledObjects}) | ${heap.toFixed(0)} | ${(heap / json).toFixed(2)}× | ${rss.toFixed(0)} | ${(rss / json).toFixed(2)}× | ${settledRatios} |`);
}
// Issue 27: where RSS goes, growth from the start to after sync (after one full GC / settled: three
// more and 2 s idle), bytes per cached object. heap committed = heapTotal (V8 pages held); its empty
// part is used − committed; outside = RSS − heap committed (malloc, TLS, nghttp2, code, stacks).
console.log('\n| clusters × objects/kind | when | RSS | heap committed (resident) | heap used | heap empty (old / new / other) | outside heap | of which external (arrayBuffers) | anon / file RSS | malloc brk heap | threads |');
console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
for (const { config, result: r } of results) {
  const b = r.detail.base;
  for (const [when, d] of [['synced', r.detail.loaded], ['settled', r.detail.settled], [`memory-reducing GC (${(r.reduceMs ?? 0).toFixed(0)} ms)`, r.detail.reduced], ['malloc_trim(0)', r.detail.trimmed]] as const) {
    if (d === undefined) continue;
    const per = (x: number): string => (x / r.objects).toFixed(0);
    const empty = (d2: Detail, pick: (name: string) => boolean): number => Object.entries(d2.spaces).filter(([n]) => pick(n)).reduce((s2, [, sp]) => s2 + sp.size - sp.used, 0);
    const old = empty(d, (n) => n === 'old_space') - empty(b, (n) => n === 'old_space');
    const young = empty(d, (n) => n === 'new_space') - empty(b, (n) => n === 'new_space');
    const other = empty(d, (n) => n !== 'old_space' && n !== 'new_space') - empty(b, (n) => n !== 'old_space' && n !== 'new_space');
    const outside = (d.rss - d.heapTotal) - (b.rss - b.heapTotal);
    const physical = (d2: Detail): number => Object.values(d2.spaces).reduce((s2, sp) => s2 + sp.physical, 0);
    console.log(`| ${config.clusters} × ${config.objects} | ${when} | ${per(d.rss - b.rss)} | ${per(d.heapTotal - b.heapTotal)} (${per(physical(d) - physical(b))}) | ${per(d.heapUsed - b.heapUsed)} | ${per(old + young + other)} (${per(old)} / ${per(young)} / ${per(other)}) | ${per(outside)} | ${per(d.external - b.external)} (${per(d.arrayBuffers - b.arrayBuffers)}) | ${per((d.RssAnon ?? 0) - (b.RssAnon ?? 0))} / ${per((d.RssFile ?? 0) - (b.RssFile ?? 0))} | ${per(d.brk - b.brk)} | ${d.threads} |`);
  }
}
console.log('(B per cached object, growth from the start; heap empty = committed − used per V8 space)');
console.log(`\nload average (1, 5, 15 min) at the end: ${loadavg().map((l) => l.toFixed(1)).join(' ')}`);
const points = (pick: (r: Result) => number): (readonly [number, number, number])[] => results.map(({ result: r }) => [r.clusters, r.objects, pick(r)] as const);
const rssFit = fit(points((r) => r.loaded.rss - r.base.rss));
const heapFit = fit(points((r) => r.loaded.heap - r.base.heap));
const cpuFit = fit(points((r) => r.cpuMs));
if (rssFit === undefined || heapFit === undefined || cpuFit === undefined) {
  console.log('\n(fit needs at least three configurations that vary clusters and objects independently)');
} else {
  console.log('\n| fitted cost | per cluster | per object |');
  console.log('| --- | --- | --- |');
  console.log(`| RSS | ${(rssFit[1] / 1024).toFixed(0)} KiB | ${rssFit[2].toFixed(0)} B |`);
  console.log(`| heap | ${(heapFit[1] / 1024).toFixed(0)} KiB | ${heapFit[2].toFixed(0)} B |`);
  console.log(`| CPU to sync | ${cpuFit[1].toFixed(1)} ms | ${(cpuFit[2] * 1000).toFixed(1)} µs |`);
}
