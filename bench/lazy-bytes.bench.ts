// Where a cached object's bytes go (issue 27): N ConfigMaps (default 100,000; env N) LISTed by one
// informer, objects parsed, lazy and compressed (every object packed) side by side, each in a fresh child process started with
// --expose-gc; prints the heap growth per object after GC against the objects' stripped JSON. The
// client serves prebuilt LIST pages from memory (no sockets, no watch traffic), so the figure is
// the cache alone: text or parsed object, slot, key, map and index entries.
// Run: node bench/lazy-bytes.bench.ts
import { spawn } from 'node:child_process';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseListLazily } from '../lib/transport/list-scan.ts';
import { parseListDroppingManagedFields } from '../lib/transport/strip.ts';
import type { KubeList, ResourceClient, WatchEvent } from '../lib/transport/index.ts';
import { LAST_APPLIED_ANNOTATION, ResourceInformer } from '../lib/informer/index.ts';
import { dictionaryFrom, pack } from '../lib/informer/pack.ts';

const N = Number(process.env.N ?? 100_000);
const PAGE = 500;

function configMap(i: number): object {
  const data: Record<string, string> = {};
  for (let k = 0; k < 6; k++) data[`key-${k}`] = `value ${i} ${k} `.repeat(12);
  return {
    metadata: {
      name: `settings-${String(i).padStart(6, '0')}`, namespace: `ns-${i % 50}`, uid: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
      resourceVersion: String(1000 + i), creationTimestamp: '2025-01-01T00:00:00Z', labels: { app: 'web', tier: 'frontend' },
      annotations: { [LAST_APPLIED_ANNOTATION]: 'x'.repeat(500), 'deployment.kubernetes.io/revision': '3' }, managedFields: [{ manager: 'kubectl' }],
    },
    data,
  };
}

async function measure(mode: 'lazy' | 'parsed' | 'compressed'): Promise<{ heapPerObject: number; textPerObject: number; packedPerObject?: number }> {
  const gc = (): void => { for (let i = 0; i < 3; i++) (globalThis as { gc?: () => void }).gc?.(); };
  const pages: Buffer[] = [];
  const count = Math.ceil(N / PAGE);
  for (let p = 0; p < count; p++) {
    const items = Array.from({ length: Math.min(PAGE, N - p * PAGE) }, (_, k) => configMap(p * PAGE + k));
    pages.push(Buffer.from(JSON.stringify({ kind: 'ConfigMapList', apiVersion: 'v1', metadata: { resourceVersion: '9', ...(p + 1 < count ? { continue: String(p + 1) } : {}) }, items })));
  }
  let text = 0;
  const texts: string[] = [];
  for (const page of pages) {
    for (const t of (parseListLazily(page) as KubeList).texts ?? []) {
      text += t?.text.length ?? 0;
      if (mode === 'compressed') texts.push(t?.text ?? '');
    }
  }
  // What the cache's packed objects hold: the same dictionary (its first objects), each text deflated against it.
  const dictionary = dictionaryFrom(texts, text);
  const packed = dictionary === undefined ? text : texts.reduce((sum, t) => sum + (pack(t, dictionary)?.length ?? t.length), 0);
  texts.length = 0;
  const never: AsyncIterable<readonly WatchEvent[]> = { [Symbol.asyncIterator]: () => ({ next: () => new Promise<IteratorResult<readonly WatchEvent[]>>(() => undefined) }) };
  const client: ResourceClient = {
    cluster: 'bench',
    info: { gvk: { group: '', version: 'v1', kind: 'ConfigMap' }, resource: 'configmaps', namespaced: true, verbs: ['list', 'watch'] },
    list: (o) => {
      const page = pages[Number(o.continue ?? 0)] ?? Buffer.from('{"metadata":{},"items":[]}');
      return Promise.resolve((o.objectText === true ? parseListLazily(page) : parseListDroppingManagedFields(page)) as KubeList);
    },
    watch: () => Promise.resolve(never),
  };
  gc();
  const before = process.memoryUsage().heapUsed;
  // No decoded objects kept: the figure is the cache's own.
  const informer = new ResourceInformer({ client, objects: mode, pageSize: PAGE, decodedCacheSize: 0, compressAfterMs: 100 });
  informer.addHeadHandler({ add: () => undefined });
  informer.start();
  await informer.waitForSync();
  pages.length = 0;
  if (mode === 'compressed') {
    while (informer.stats().compressed < informer.store.size) await new Promise((resolve) => setTimeout(resolve, 100));
  }
  gc();
  const heapPerObject = (process.memoryUsage().heapUsed - before) / informer.store.size;
  return { heapPerObject, textPerObject: text / N, ...(mode === 'compressed' ? { packedPerObject: packed / N } : {}) };
}

if (process.argv[2] === '--child') {
  const mode = process.argv[3];
  process.stdout.write(`${JSON.stringify(await measure(mode === 'lazy' || mode === 'compressed' ? mode : 'parsed'))}\n`);
  process.exit(0);
}
console.log(`${N.toLocaleString('en-US')} ConfigMaps, one informer, heap growth per cached object after GC\n`);
console.log('| objects | heap B/object | stripped JSON B/object | heap / JSON | besides the characters (packed: their packed bytes) |');
console.log('| --- | --- | --- | --- | --- |');
for (const mode of ['parsed', 'lazy', 'compressed'] as const) {
  const child = spawn(process.execPath, ['--expose-gc', fileURLToPath(import.meta.url), '--child', mode], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => { out += chunk.toString(); });
  await new Promise((resolve) => child.once('exit', resolve));
  const r = JSON.parse(out) as { heapPerObject: number; textPerObject: number; packedPerObject?: number };
  const held = r.packedPerObject ?? r.textPerObject;
  console.log(`| ${mode} | ${r.heapPerObject.toFixed(0)} | ${r.textPerObject.toFixed(0)} | ${(r.heapPerObject / r.textPerObject).toFixed(2)}× | ${(r.heapPerObject - held).toFixed(0)} B${r.packedPerObject === undefined ? '' : ` (besides ${r.packedPerObject.toFixed(0)} B packed)`} |`);
}
console.log(`\nload average (1, 5, 15 min): ${loadavg().map((l) => l.toFixed(1)).join(' ')}`);
