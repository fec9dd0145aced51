// Today's informer against an older checkout's, on the same stream in the same session (issue 27's
// goal is ingest ≥ 1.3× the informer of the day the issue was filed). The old tree is a second git
// worktree of this repository at the older commit, e.g.
//   git worktree add --detach ../ingest-old ea9b073^ && ln -s "$PWD/node_modules" ../ingest-old/
//   node bench/informer-baseline.bench.ts --old ../ingest-old [--h2]     (ROUNDS=8 by default)
// One loopback server (this tree's `bench/informer.bench.ts --serve`: 4,000 ConfigMaps LISTed, then
// 40,000 MODIFIED events over HTTP/1.1) feeds every run. Each run is a fresh child process that
// imports ResourceInformer and ClusterConnection from ONE tree and is measured by this file's code,
// so the harness is identical for both trees. In each round the variants run in a rotated order;
// `old again` is the old informer a second time, so its ratio to `old` shows the noise of a pair.
// `--h2`: the stream over TLS, HTTP/2 negotiated by both trees' connections (asserted), each
// trusting the server through its kubeconfig's certificate-authority-data, as with a real cluster.
import type { ChildProcess } from 'node:child_process';
import { loadavg } from 'node:os';
import { resolve as resolvePath } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { benchChild, firstLine } from './child.ts';

const NAMESPACE = 'bench';
const TOKEN = 'bench-token';
const FIRST_RV = 1_000;
const EVENTS = 40_000;
const ROUNDS = Number(process.env.ROUNDS ?? 8);

/** What a child needs of a tree's modules (the old tree's exports are a subset of today's). */
interface TreeModules {
  readonly ClusterConnection: new (options: { name: string; kubeConfig: unknown; listLimiter: unknown }) => {
    readonly protocol: 'h2' | 'http/1.1' | undefined;
    resourceClient(resource: { gvk: { group: string; version: string; kind: string }; resource: string; namespaced: boolean; verbs: string[] }): unknown;
    close(): Promise<void>;
  };
  readonly createListLimiter: () => unknown;
  readonly ResourceInformer: new (options: { client: unknown; namespace: string; objects?: 'lazy' }) => BenchInformer;
  readonly kubeConfigFor: (server: string, options: { token: string; name: string }) => unknown;
  readonly kubeConfigFrom: (text: string) => unknown;
  readonly kubeconfigYaml: (parts: { name: string; server: string; caPem: string | undefined; token: string }) => string;
}

interface Handler<T> { update(old: T, obj: T): void }
interface BenchInformer {
  addHandler(handler: Handler<{ metadata?: { resourceVersion?: string } }>): unknown;
  addHeadHandler?(handler: Handler<{ metadata: { resourceVersion?: string } }>): unknown;
  on(event: 'error', listener: (err: Error) => void): unknown;
  start(): void;
  stop(): Promise<void>;
  readonly store: { readonly size: number };
}

type VariantId = 'old' | 'old-again' | 'parsed' | 'lazy';
const VARIANTS: readonly { readonly id: VariantId; readonly label: string; readonly tree: 'old' | 'new' }[] = [
  { id: 'old', label: 'old tree, default informer (the baseline)', tree: 'old' },
  { id: 'parsed', label: 'today, objects parsed (default)', tree: 'new' },
  { id: 'lazy', label: "today, objects: 'lazy', head handler", tree: 'new' },
  { id: 'old-again', label: 'old tree again (noise of a pair)', tree: 'old' },
];

interface Result {
  readonly id: VariantId;
  readonly cpuMs: number;
  readonly watchCpuMs: number;
  readonly events: number;
  readonly cached: number;
}

async function load(root: string): Promise<TreeModules> {
  const at = (path: string): string => pathToFileURL(resolvePath(root, path)).href;
  const transport = (await import(at('lib/transport/index.ts'))) as Pick<TreeModules, 'ClusterConnection' | 'createListLimiter'>;
  const informer = (await import(at('lib/informer/index.ts'))) as Pick<TreeModules, 'ResourceInformer'>;
  const support = (await import(at('fixtures/support/index.ts'))) as Pick<TreeModules, 'kubeConfigFor' | 'kubeConfigFrom' | 'kubeconfigYaml'>;
  return { ...transport, ...informer, ...support };
}

/** One run in this (child) process: the informer from `root`, LIST + WATCH to the last event. */
async function runVariant(id: VariantId, root: string, server: string, ca: string | undefined): Promise<Result> {
  const tree = await load(root);
  const lastRv = String(FIRST_RV + EVENTS);
  const kubeConfig = ca === undefined ? tree.kubeConfigFor(server, { token: TOKEN, name: 'bench' }) : tree.kubeConfigFrom(tree.kubeconfigYaml({ name: 'bench', server, caPem: ca, token: TOKEN }));
  const connection = new tree.ClusterConnection({ name: 'bench', kubeConfig, listLimiter: tree.createListLimiter() });
  const client = connection.resourceClient({ gvk: { group: '', version: 'v1', kind: 'ConfigMap' }, resource: 'configmaps', namespaced: true, verbs: ['list', 'watch'] });
  const informer = new tree.ResourceInformer({ client, namespace: NAMESPACE, ...(id === 'lazy' ? { objects: 'lazy' as const } : {}) });
  let events = 0;
  let firstEventCpu: NodeJS.CpuUsage | undefined;
  const cpu0 = process.cpuUsage();
  await new Promise<void>((resolve, reject) => {
    const seen = (rv: string | undefined): void => {
      events++;
      firstEventCpu ??= process.cpuUsage();
      if (rv === lastRv) resolve();
    };
    if (id === 'lazy') {
      if (informer.addHeadHandler === undefined) throw new Error('this tree has no addHeadHandler');
      informer.addHeadHandler({ update: (_old, head) => { seen(head.metadata.resourceVersion); } });
    } else {
      informer.addHandler({ update: (_old, obj) => { seen(obj.metadata?.resourceVersion); } });
    }
    informer.on('error', reject);
    informer.start();
  });
  const cpu = process.cpuUsage(cpu0);
  const watchCpu = process.cpuUsage(firstEventCpu);
  const expected = ca === undefined ? 'http/1.1' : 'h2';
  if (connection.protocol !== expected) throw new Error(`${id}: the connection negotiated ${String(connection.protocol)}, not ${expected}`);
  const cached = informer.store.size;
  await informer.stop();
  await connection.close();
  return { id, cpuMs: (cpu.user + cpu.system) / 1000, watchCpuMs: (watchCpu.user + watchCpu.system) / 1000, events, cached };
}

function child(args: readonly string[], input: 'pipe' | 'ignore', file = fileURLToPath(import.meta.url)): ChildProcess {
  return benchChild(file, args, input);
}

async function main(oldRoot: string, h2: boolean): Promise<void> {
  const newRoot = fileURLToPath(new URL('..', import.meta.url));
  const server = child(['--serve', ...(h2 ? ['--h2'] : [])], 'pipe', fileURLToPath(new URL('informer.bench.ts', import.meta.url)));
  const info = JSON.parse(await firstLine(server)) as { url: string; watchBytes: number; listBytes: number; ca?: string };
  const loads: number[] = [loadavg()[0] ?? Number.NaN];
  process.stdout.write(`informer then and now: old tree ${oldRoot}; ${String(EVENTS)} MODIFIED events (${(info.watchBytes / 1e6).toFixed(1)} MB) after a LIST of ${(info.listBytes / 1e6).toFixed(1)} MB over loopback ${h2 ? 'TLS, HTTP/2' : 'HTTP/1.1'}; ${String(ROUNDS)} rounds, order rotated each round\n\n`);
  const runs: (Result & { readonly round: number })[] = [];
  try {
    for (let round = 0; round < ROUNDS; round++) {
      for (let k = 0; k < VARIANTS.length; k++) {
        const variant = VARIANTS[(k + round) % VARIANTS.length];
        if (variant === undefined) continue;
        const proc = child(['--variant', variant.id, '--tree', variant.tree === 'old' ? oldRoot : newRoot, '--server', info.url, ...(info.ca === undefined ? [] : ['--ca', info.ca])], 'ignore');
        const result = JSON.parse(await firstLine(proc)) as Result;
        if (result.events !== EVENTS || result.cached !== 4_000) throw new Error(`${variant.id}: ${String(result.events)} events, ${String(result.cached)} cached`);
        runs.push({ ...result, round });
        await new Promise((resolve) => proc.once('exit', resolve));
      }
      loads.push(loadavg()[0] ?? Number.NaN);
    }
  } finally {
    server.stdin?.end();
  }
  const sorted = (values: readonly number[]): number[] => [...values].sort((a, b) => a - b);
  const median = (values: readonly number[]): number => sorted(values)[Math.floor(values.length / 2)] ?? Number.NaN;
  const perCore = (r: Result): number => (r.events / r.cpuMs) * 1000;
  const watchPerCore = (r: Result): number => (r.events / r.watchCpuMs) * 1000;
  const ratios = (id: VariantId, rate: (r: Result) => number): number[] => Array.from({ length: ROUNDS }, (_, round) => {
    const mine = runs.find((r) => r.id === id && r.round === round);
    const old = runs.find((r) => r.id === 'old' && r.round === round);
    return mine === undefined || old === undefined ? Number.NaN : rate(mine) / rate(old);
  });
  const spread = (values: readonly number[]): string => {
    const s = sorted(values);
    return `${median(s).toFixed(2)}× (${(s[0] ?? Number.NaN).toFixed(2)}–${(s.at(-1) ?? Number.NaN).toFixed(2)})`;
  };
  const rows = VARIANTS.map(({ id, label }) => {
    const mine = runs.filter((r) => r.id === id);
    return [
      label,
      Math.round(median(mine.map(perCore))).toLocaleString('en-US'),
      id === 'old' ? '1' : spread(ratios(id, perCore)),
      Math.round(median(mine.map(watchPerCore))).toLocaleString('en-US'),
      id === 'old' ? '1' : spread(ratios(id, watchPerCore)),
      ((median(mine.map((r) => r.watchCpuMs)) * 1000) / EVENTS).toFixed(1),
    ];
  });
  const header = ['informer', 'events/s per core', 'vs old: median (range)', 'watch only /s/core', 'vs old, watch only', 'µs CPU/event (watch)'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join('  ');
  process.stdout.write(`${line(header)}\n${line(widths.map((w) => '-'.repeat(w)))}\n${rows.map(line).join('\n')}\n`);
  process.stdout.write(`\nevents/s per core = events / (user + system CPU of the informer's process, LIST included); watch only = from the first watch event\nto the last; ratios are taken within each round (the runs next to each other), then median and range over ${String(ROUNDS)} rounds.\nLoad average (1 min) at the start and after each round: ${loads.map((l) => l.toFixed(1)).join(' ')}; (1, 5, 15 min) at the end: ${loadavg().map((l) => l.toFixed(1)).join(' ')}.\n`);
}

const args = process.argv.slice(2);
const flag = (name: string): string | undefined => { const at = args.indexOf(name); return at === -1 ? undefined : args[at + 1]; };
const variantId = flag('--variant');
if (variantId !== undefined) {
  const ca = flag('--ca');
  const result = await runVariant(variantId as VariantId, flag('--tree') ?? '.', flag('--server') ?? '', ca === undefined ? undefined : Buffer.from(ca, 'base64').toString('utf8'));
  process.stdout.write(`${JSON.stringify(result)}\n`);
  process.exit(0);
} else {
  const oldRoot = flag('--old');
  if (oldRoot === undefined) throw new Error('usage: node bench/informer-baseline.bench.ts --old PATH-TO-OLD-WORKTREE');
  await main(resolvePath(oldRoot), args.includes('--h2'));
}
