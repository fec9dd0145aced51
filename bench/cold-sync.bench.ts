// Cold-sync benchmark (issue 12): `node bench/cold-sync.bench.ts [--main DIR] [--rounds N] [--objects N] [--semi MiB]`.
// One simulated cluster in a separate process serves N ConfigMaps of about 1 KB (default 100 000,
// 200 pages of 500); a fresh process per run starts one informer and times it to synced, sampling
// its peak RSS. With `--main DIR` (a checkout of main, e.g. `git worktree add /tmp/cold-main main`)
// the same measurement runs against that checkout's lib/ too, alternating with this branch's in
// each round so both see the same machine, and a table of medians and ratios is printed. With
// `--semi MiB` every measured process runs with V8's young generation capped
// (`--max-semi-space-size`, as the service's image runs): by default V8 grows it with the
// allocation rate, so a sync that takes in the same objects faster also commits more young
// generation, which the peak RSS counts although no object is kept in it.
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

interface Run { readonly syncedMs: number; readonly peakRssGrowth: number; readonly cpuMs: number; readonly objects: number }

const args = process.argv.slice(2);
const option = (name: string): string | undefined => { const i = args.indexOf(name); return i === -1 ? undefined : args[i + 1]; };
const mainDir = option('--main');
const rounds = Number(option('--rounds') ?? 3);
const objects = Number(option('--objects') ?? 100_000);
const semi = option('--semi');
const here = new URL('./', import.meta.url).pathname;
const root = join(here, '..');
const MiB = 2 ** 20;

const variants: { readonly name: string; readonly measure: string }[] = [{ name: 'branch', measure: join(here, 'cold-sync', 'measure.ts') }];
if (mainDir !== undefined) {
  // main has no copy of the measuring script: it is placed at the same relative path there.
  mkdirSync(join(mainDir, 'bench', 'cold-sync'), { recursive: true });
  copyFileSync(join(here, 'cold-sync', 'measure.ts'), join(mainDir, 'bench', 'cold-sync', 'measure.ts'));
  if (!existsSync(join(mainDir, 'node_modules'))) symlinkSync(join(root, 'node_modules'), join(mainDir, 'node_modules'));
  variants.push({ name: 'main', measure: join(mainDir, 'bench', 'cold-sync', 'measure.ts') });
}

const host = spawn(process.execPath, [join(here, 'cold-sync', 'sim-host.ts'), String(objects)], { stdio: ['pipe', 'pipe', 'inherit'] });
const line = await new Promise<string>((resolve, reject) => {
  createInterface({ input: host.stdout }).once('line', resolve);
  host.once('exit', (code) => { reject(new Error(`sim host exited with ${code}`)); });
});
const dir = mkdtempSync(join(tmpdir(), 'fleetcache-cold-'));
const file = join(dir, 'cluster.json');
writeFileSync(file, line);

async function measure(script: string): Promise<Run> {
  const child = spawn(process.execPath, ['--expose-gc', ...(semi === undefined ? [] : [`--max-semi-space-size=${semi}`]), script, file], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => { out += chunk.toString(); });
  const code = await new Promise<number | null>((resolve) => { child.once('exit', resolve); });
  if (code !== 0) throw new Error(`${script} exited with ${code}`);
  return JSON.parse(out) as Run;
}

const runs = new Map<string, Run[]>(variants.map((v) => [v.name, []]));
try {
  for (let round = 0; round < rounds; round++) {
    // Alternate which variant goes first, so neither always meets a warmer (or busier) machine.
    const order = round % 2 === 0 ? variants : [...variants].reverse();
    for (const v of order) {
      const r = await measure(v.measure);
      if (r.objects !== objects) throw new Error(`${v.name}: synced ${r.objects} objects, expected ${objects}`);
      runs.get(v.name)?.push(r);
      process.stderr.write(`# round ${round + 1} ${v.name}: ${(r.syncedMs / 1000).toFixed(2)} s, peak RSS +${(r.peakRssGrowth / MiB).toFixed(0)} MiB, CPU ${(r.cpuMs / 1000).toFixed(2)} s\n`);
    }
  }
} finally {
  host.stdin.end();
  await new Promise((resolve) => { host.once('exit', resolve); setTimeout(resolve, 10_000).unref(); });
  rmSync(dir, { recursive: true, force: true });
}

const median = (values: number[]): number => { const s = [...values].sort((a, b) => a - b); return s[Math.floor(s.length / 2)] ?? NaN; };
const stat = (name: string, pick: (r: Run) => number): number => median((runs.get(name) ?? []).map(pick));
console.log(`\n| cold sync of ${objects.toLocaleString('en')} objects (median of ${rounds}; V8 semi-space ${semi === undefined ? 'default' : `≤ ${semi} MiB`}) | synced in | peak RSS growth | CPU |`);
console.log('| --- | --- | --- | --- |');
for (const v of variants) {
  console.log(`| ${v.name} | ${(stat(v.name, (r) => r.syncedMs) / 1000).toFixed(2)} s | ${(stat(v.name, (r) => r.peakRssGrowth) / MiB).toFixed(0)} MiB | ${(stat(v.name, (r) => r.cpuMs) / 1000).toFixed(2)} s |`);
}
if (mainDir !== undefined) {
  const ratio = (pick: (r: Run) => number): string => (stat('branch', pick) / stat('main', pick)).toFixed(2);
  console.log(`| branch ÷ main | ${ratio((r) => r.syncedMs)}× | ${ratio((r) => r.peakRssGrowth)}× | ${ratio((r) => r.cpuMs)}× |`);
}
