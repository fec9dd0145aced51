// fleetcache's informer against @kubernetes/client-node's makeInformer, fed the same LIST + WATCH
// stream (ConfigMaps of a few KB, with managedFields and a last-applied annotation as `kubectl apply`
// leaves them) by a loopback HTTP server in its own process. Each informer runs in a fresh child
// process (started with --expose-gc), so JIT warm-up and heap of one cannot favour the other.
// Prints CPU-time throughput (events per second per core, from process.cpuUsage) and heap retained
// per cached object after GC (streams stopped, the cache still referenced), with ratios to client-node. Run: node bench/informer.bench.ts
// (the children get --expose-gc themselves; `node --expose-gc bench/informer.bench.ts` works too;
// ROUNDS=5 for more runs per variant). Two fleetcache variants strip managedFields: the default
// transform (dropped while decoding, never built) and an equivalent custom transform (built by the
// parser, then deleted), which shows what the decode-time pre-pass is worth. Three floors without
// any informer show what receiving the stream, receiving plus parsing every line, and the least
// work of an informer that keeps what it is sent, cost alone. `--strip` compares the paths of the
// managedFields pre-pass instead (per-event µs and ingest; see stripComparison). To profile one
// variant: `node --expose-gc bench/informer.bench.ts --serve` (prints its URL; stays up while its
// stdin is open), then `node --expose-gc --cpu-prof bench/informer.bench.ts --variant fleetcache
// --server URL`, which prints that run's result as JSON (sysMs: the kernel's share; watchCpuMs:
// CPU from the first watch event to the last, the LIST excluded).
// `--h2` serves the same stream over TLS the way a cluster does (HTTP/2 offered by ALPN, HTTP/1.1
// accepted, a self-signed certificate the clients trust through their kubeconfig's
// certificate-authority-data): fleetcache's informers connect as to a real cluster and negotiate
// HTTP/2 (asserted), client-node (which has no HTTP/2) stays on HTTP/1.1 over TLS as the anchor,
// and the same informers are also run with `http2: false` and both receive floors beside them. To
// profile a variant there: `--serve --h2` prints the URL and the certificate (`ca`, base64 PEM),
// then `--variant fleetcache --server URL --ca BASE64`.
import type { ChildProcess } from 'node:child_process';
import { createServer, get as httpGet } from 'node:http';
import { connect as h2Connect, createSecureServer } from 'node:http2';
import { get as httpsGet } from 'node:https';
import type { AddressInfo } from 'node:net';
import { PerformanceObserver } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { CoreV1Api, makeInformer, type KubeConfig } from '@kubernetes/client-node';
import { ClusterConnection, createListLimiter, type KubeList, type KubeObject, type WatchEvent } from '../lib/transport/index.ts';
import { loadavg } from 'node:os';
import { parseEventDroppingManagedFields, parseListDroppingManagedFields, scanEventLazily } from '../lib/transport/strip.ts';
import { usePlacing, useSimd } from '../lib/transport/skip.ts';
import { identityTransform, ResourceInformer, stripManagedFields } from '../lib/informer/index.ts';
import type { Readable } from 'node:stream';
import { kubeConfigFor, kubeConfigFrom, kubeconfigYaml } from '../fixtures/support/index.ts';
import { SIM_CERT_PEM, simKeyPem } from '../fixtures/sim/cert.ts';
import { benchChild, firstLine } from './child.ts';

/** Objects in the collection (what the cache retains). */
const OBJECTS = 4_000;
/** MODIFIED events streamed after the LIST, round robin over the objects. */
const EVENTS = 40_000;
const NAMESPACE = 'bench';
const TOKEN = 'bench-token';
const FIRST_RV = 1_000;
/** Runs per variant (env ROUNDS, default 3); medians are reported. */
const ROUNDS = Number(process.env.ROUNDS ?? 3);

type Variant = 'fleetcache' | 'fleetcache-parsed' | 'fleetcache-full' | 'fleetcache-late' | 'fleetcache-whole' | 'client-node' | 'floor-receive' | 'floor-parse' | 'floor-keep' | 'floor-text'
  | 'fleetcache-h1' | 'fleetcache-parsed-h1' | 'floor-receive-h2';
const ALL_VARIANTS: readonly { readonly id: Variant; readonly label: string }[] = [
  { id: 'client-node', label: 'client-node makeInformer' },
  // Issue 27: objects kept as text (`objects: 'lazy'`). `fleetcache-parsed` is the default (objects
  // parsed and frozen at ingest, the design before it), the baseline of the lazy path's ratios.
  { id: 'fleetcache-parsed', label: 'fleetcache, objects parsed (default)' },
  { id: 'fleetcache', label: 'fleetcache, lazy objects, head handler' },
  { id: 'fleetcache-full', label: 'fleetcache, lazy objects, whole-object handler' },
  { id: 'fleetcache-late', label: 'fleetcache (same, stripped after parse)' },
  { id: 'fleetcache-whole', label: 'fleetcache (identity transform)' },
  // Lower bounds, no informer: what receiving the bytes costs; receiving plus JSON.parse of every
  // line and of the LIST (what an informer that parses all it receives cannot avoid); and the
  // least an informer with fleetcache's default transform does: the same pre-pass and JSON.parse,
  // objects kept in a Map by namespace/name (no freezing, indexes, handlers or bookkeeping).
  { id: 'floor-receive', label: 'floor: receive LIST + WATCH, split lines' },
  { id: 'floor-parse', label: 'floor: the same + JSON.parse, nothing kept' },
  { id: 'floor-keep', label: 'floor: pre-pass + JSON.parse, kept in a Map' },
  // The least a lazy informer does: the lazy scan of each line, its text kept in a Map.
  { id: 'floor-text', label: 'floor: lazy scan, text kept in a Map' },
];
/**
 * With `--h2` (TLS, the production path): fleetcache's informers on HTTP/2 and on HTTP/1.1 over
 * TLS, client-node on HTTP/1.1 over TLS, and the receive floor on each protocol.
 */
const H2_VARIANTS: readonly { readonly id: Variant; readonly label: string }[] = [
  { id: 'client-node', label: 'client-node makeInformer (HTTP/1.1 TLS)' },
  { id: 'fleetcache-parsed', label: 'fleetcache, objects parsed (default), h2' },
  { id: 'fleetcache', label: 'fleetcache, lazy objects, head handler, h2' },
  { id: 'fleetcache-parsed-h1', label: 'fleetcache, objects parsed, HTTP/1.1 TLS' },
  { id: 'fleetcache-h1', label: 'fleetcache, lazy objects, head handler, HTTP/1.1 TLS' },
  { id: 'floor-receive-h2', label: 'floor: receive LIST + WATCH, split lines, h2' },
  { id: 'floor-receive', label: 'floor: receive LIST + WATCH, split lines, HTTP/1.1 TLS' },
];
const H2 = process.argv.includes('--h2');
const PER_EVENT = process.argv.includes('--per-event');
/** Env ONLY=id,id runs those variants alone (client-node is always run: the ratios need it). */
const ONLY = process.env.ONLY?.split(',') ?? [];
const VARIANTS = (H2 ? H2_VARIANTS : ALL_VARIANTS).filter((v) => ONLY.length === 0 || v.id === 'client-node' || ONLY.includes(v.id));
/** Objects read per reconcile in the reader-heavy case. */
const READS = 1_000;
/** Reconciles timed in the reader-heavy case. */
const RECONCILES = 20;

interface Result {
  readonly variant: Variant;
  readonly cpuMs: number;
  /** The system (kernel) part of cpuMs: mostly receiving the bytes from the socket. */
  readonly sysMs: number;
  /** CPU time from the first watch event delivered to the last (the LIST excluded), for a per-event cost. */
  readonly watchCpuMs: number;
  /** Time spent in garbage collection pauses during the run (part of cpuMs). */
  readonly gcMs: number;
  readonly wallMs: number;
  readonly events: number;
  readonly cached: number;
  /** -1 for the floors that keep nothing. */
  readonly retainedBytes: number;
  /** The informer's own estimate (`stats().retainedBytes`) per object; -1 where there is none. */
  readonly estimatedBytes: number;
  /** Microseconds of one reconcile that reads {@link READS} objects by key; -1 where there is no store. */
  readonly reconcileUs: number;
}

/** A ConfigMap as the API server would send it after `kubectl apply` and a few controller writes. */
function configMap(i: number, rv: number): object {
  const name = `settings-${String(i).padStart(5, '0')}`;
  const data: Record<string, string> = {};
  for (let k = 0; k < 6; k++) data[`key-${k}`] = `value ${i} ${k} `.repeat(12);
  const applied = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: NAMESPACE, labels: { app: 'web', tier: 'frontend' } }, data };
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name,
      namespace: NAMESPACE,
      uid: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
      resourceVersion: String(rv),
      creationTimestamp: '2025-01-01T00:00:00Z',
      labels: { app: 'web', tier: 'frontend', 'app.kubernetes.io/managed-by': 'kubectl' },
      annotations: {
        'kubectl.kubernetes.io/last-applied-configuration': JSON.stringify(applied),
        'deployment.kubernetes.io/revision': String(rv % 7),
      },
      managedFields: [
        { manager: 'kubectl-client-side-apply', operation: 'Update', apiVersion: 'v1', time: '2025-01-01T00:00:00Z', fieldsType: 'FieldsV1',
          fieldsV1: { 'f:data': Object.fromEntries(Object.keys(data).map((k) => [`f:${k}`, {}])), 'f:metadata': { 'f:annotations': { '.': {}, 'f:kubectl.kubernetes.io/last-applied-configuration': {} }, 'f:labels': { '.': {}, 'f:app': {}, 'f:tier': {} } } } },
        { manager: 'controller', operation: 'Update', apiVersion: 'v1', time: '2025-01-02T00:00:00Z', fieldsType: 'FieldsV1',
          fieldsV1: { 'f:metadata': { 'f:annotations': { 'f:deployment.kubernetes.io/revision': {} } } } },
      ],
    },
    data,
  };
}

/** What the server writes to, from node:http's and node:http2's compatible responses alike. */
interface Reply {
  writeHead(status: number, headers: Record<string, string | number>): unknown;
  write(chunk: Buffer): boolean;
  once(event: 'drain', listener: () => void): unknown;
  end(body: Buffer): unknown;
}

/** The server: one LIST of every object, then a WATCH that streams every event and stays open. */
async function serve(tls: boolean): Promise<void> {
  const list = Buffer.from(JSON.stringify({
    apiVersion: 'v1', kind: 'ConfigMapList', metadata: { resourceVersion: String(FIRST_RV) },
    items: Array.from({ length: OBJECTS }, (_, i) => configMap(i, i + 1)),
  }));
  const lines: string[] = [];
  for (let e = 0; e < EVENTS; e++) lines.push(JSON.stringify({ type: 'MODIFIED', object: configMap(e % OBJECTS, FIRST_RV + 1 + e) }));
  const watch = Buffer.from(lines.join('\n') + '\n');
  // --per-event: one write per event, as the API server flushes after each (an h2 DATA frame or an
  // HTTP/1.1 chunk each); by default 64 KiB writes, many events to a chunk.
  const ends: number[] = [];
  if (PER_EVENT) for (let at = watch.indexOf(0x0a); at !== -1; at = watch.indexOf(0x0a, at + 1)) ends.push(at + 1);
  const writeSize = (at: number, event: number): number => (PER_EVENT ? (ends[event] ?? watch.length) - at : 65_536);
  const handle = (req: { readonly url?: string | undefined }, res: Reply): void => {
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.searchParams.get('watch') === 'true') {
      res.writeHead(200, { 'content-type': 'application/json' });
      let at = 0;
      let event = 0;
      // Chunks as a real server writes them; respect backpressure so the client's pace is measured.
      const pump = (): void => {
        while (at < watch.length) {
          const chunk = watch.subarray(at, at + writeSize(at, event++));
          at += chunk.length;
          if (!res.write(chunk)) { res.once('drain', pump); return; }
        }
      };
      pump();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': list.length });
    res.end(list);
  };
  // Over TLS: HTTP/2 when the client offers it, HTTP/1.1 otherwise, as a kube-apiserver does.
  const server = tls ? createSecureServer({ cert: SIM_CERT_PEM, key: simKeyPem(), allowHTTP1: true }, handle) : createServer(handle);
  await new Promise<void>((resolve) => { server.listen(0, '127.0.0.1', resolve); });
  const url = `${tls ? 'https' : 'http'}://127.0.0.1:${(server.address() as AddressInfo).port}`;
  process.stdout.write(`${JSON.stringify({ url, watchBytes: watch.length, listBytes: list.length, ...(tls ? { ca: Buffer.from(SIM_CERT_PEM).toString('base64') } : {}) })}\n`);
  process.stdin.resume();
  process.stdin.on('end', () => { process.exit(0); });
}

function gc(): void {
  const collect = (globalThis as { gc?: () => void }).gc;
  if (collect === undefined) throw new Error('run the variant with --expose-gc');
  for (let i = 0; i < 3; i++) collect();
}

/** An informer under test: started, it calls `onUpdate` for every update it delivers. */
interface Subject {
  start(onUpdate: (resourceVersion: string | undefined) => void, onError: (err: Error) => void): void;
  stop(): Promise<void>;
  cached(): number;
  /** The informer's own retained-bytes estimate, where it has one. */
  estimated?: () => number;
  /** One reader-heavy reconcile (READS objects read); absent for the floors. */
  reconcile?: () => number;
}

/**
 * A bare HTTP client reading the LIST, then the WATCH line by line: only split (`receive`),
 * JSON.parse'd (`parse`), or decoded as fleetcache's default transform has it and kept (`keep`).
 */
function floor(server: string, mode: 'receive' | 'parse' | 'keep' | 'text', ca?: string, h2 = false): Subject {
  const opened = new Set<{ destroy(): unknown }>();
  const kept = new Map<string, KubeObject | string>();
  const keep = (obj: KubeObject): void => { kept.set(`${obj.metadata?.namespace ?? ''}/${obj.metadata?.name ?? ''}`, obj); };
  // One HTTP/2 session (the client's window as fleetcache's session sets it), or a request each.
  const session = h2 ? h2Connect(server, { ca, settings: { initialWindowSize: 4 * 1024 * 1024 } }) : undefined;
  if (session !== undefined) {
    session.once('connect', () => { session.setLocalWindowSize(16 * 1024 * 1024); });
    opened.add(session);
  }
  const get = (path: string, onResponse: (res: Readable) => void, onError: (err: Error) => void): void => {
    if (session !== undefined) {
      session.once('error', onError);
      const stream = session.request({ ':path': path, authorization: `Bearer ${TOKEN}` });
      stream.on('error', onError);
      stream.once('response', () => { onResponse(stream); });
      return;
    }
    const headers = { authorization: `Bearer ${TOKEN}` };
    const req = ca === undefined ? httpGet(`${server}${path}`, { headers }, onResponse) : httpsGet(`${server}${path}`, { headers, ca }, onResponse);
    req.on('error', onError);
    opened.add(req);
  };
  return {
    start: (onUpdate, onError) => {
      get(`/api/v1/namespaces/${NAMESPACE}/configmaps`, (list) => {
        const chunks: Buffer[] = [];
        list.on('data', (chunk: Buffer) => chunks.push(chunk));
        list.on('end', () => {
          const body = Buffer.concat(chunks);
          let rv = String(FIRST_RV);
          if (mode !== 'receive') {
            const parsed = (mode === 'keep' || mode === 'text' ? parseListDroppingManagedFields(body) : JSON.parse(body.toString('utf8'))) as KubeList;
            if (mode === 'keep') for (const item of parsed.items) keep(item);
            if (mode === 'text') for (const item of parsed.items) kept.set(`${item.metadata?.namespace ?? ''}/${item.metadata?.name ?? ''}`, JSON.stringify(stripManagedFields(item)));
            rv = parsed.metadata.resourceVersion ?? rv;
          }
          get(`/api/v1/namespaces/${NAMESPACE}/configmaps?watch=true&resourceVersion=${rv}`, (watch) => {
            let pending: Buffer | undefined;
            let lines = 0;
            const line = (buf: Buffer, start: number, end: number): void => {
              lines++;
              if (mode === 'receive') {
                onUpdate(lines === EVENTS ? String(FIRST_RV + EVENTS) : undefined);
                return;
              }
              if (mode === 'text') {
                const scanned = scanEventLazily(buf, start, end);
                if (scanned === undefined) throw new Error('the lazy scan declined a bench line');
                const meta = JSON.parse(scanned.text.slice(scanned.metadataStart, scanned.metadataEnd)) as { namespace: string; name: string; resourceVersion: string };
                kept.set(`${meta.namespace}/${meta.name}`, scanned.text);
                onUpdate(meta.resourceVersion);
                return;
              }
              const { object } = (mode === 'keep' ? parseEventDroppingManagedFields(buf, start, end) : JSON.parse(buf.toString('utf8', start, end))) as WatchEvent;
              if (mode === 'keep') keep(object);
              onUpdate(object.metadata?.resourceVersion);
            };
            watch.on('data', (chunk: Buffer) => {
              let start = 0;
              let nl = chunk.indexOf(0x0a);
              if (nl !== -1 && pending !== undefined) {
                const joined = Buffer.concat([pending, chunk.subarray(0, nl)]);
                pending = undefined;
                line(joined, 0, joined.length);
                start = nl + 1;
                nl = chunk.indexOf(0x0a, start);
              }
              while (nl !== -1) {
                line(chunk, start, nl);
                start = nl + 1;
                nl = chunk.indexOf(0x0a, start);
              }
              if (start < chunk.length) pending = pending === undefined ? chunk.subarray(start) : Buffer.concat([pending, chunk.subarray(start)]);
            });
          }, onError);
        });
      }, onError);
    },
    stop: () => {
      for (const open of opened) open.destroy();
      return Promise.resolve();
    },
    cached: () => kept.size,
  };
}

function subject(variant: Variant, kc: KubeConfig, server: string, ca: string | undefined): Subject {
  if (variant === 'floor-receive-h2') return floor(server, 'receive', ca, true);
  if (variant === 'floor-receive') return floor(server, 'receive', ca);
  if (variant === 'floor-parse') return floor(server, 'parse');
  if (variant === 'floor-keep') return floor(server, 'keep');
  if (variant === 'floor-text') return floor(server, 'text');
  if (variant === 'client-node') {
    const api = kc.makeApiClient(CoreV1Api);
    const informer = makeInformer(kc, `/api/v1/namespaces/${NAMESPACE}/configmaps`, () => api.listNamespacedConfigMap({ namespace: NAMESPACE }));
    return {
      start: (onUpdate, onError) => {
        informer.on('update', (obj) => { onUpdate(obj.metadata?.resourceVersion); });
        informer.on('error', (err) => { onError(err instanceof Error ? err : new Error(String(err))); });
        informer.start().catch(onError);
      },
      stop: () => informer.stop(),
      cached: () => informer.list().length,
      reconcile: () => { const all = informer.list(); let n = 0; for (let i = 0; i < READS; i++) if (all[i] !== undefined) n++; return n; },
    };
  }
  // The `-h1` variants: the same informer with HTTP/2 not offered (HTTP/1.1 over TLS).
  const h1 = variant === 'fleetcache-h1' || variant === 'fleetcache-parsed-h1';
  const connection = new ClusterConnection({ name: 'bench', kubeConfig: kc, listLimiter: createListLimiter(), ...(h1 ? { http2: false } : {}) });
  // The bench server serves no discovery: give the informer the resolved resource.
  const client = connection.resourceClient({ gvk: { group: '', version: 'v1', kind: 'ConfigMap' }, resource: 'configmaps', namespaced: true, verbs: ['list', 'watch'] });
  // A transform other than the default itself (even one doing the same) gets whole objects: this
  // variant shows what dropping managedFields while decoding is worth.
  const transform = variant === 'fleetcache-whole' ? identityTransform : variant === 'fleetcache-late' ? (obj: KubeObject) => stripManagedFields(obj) : undefined;
  const lazyHead = variant === 'fleetcache' || variant === 'fleetcache-h1';
  const informer = new ResourceInformer({ client, namespace: NAMESPACE, ...(transform === undefined ? {} : { transform }), ...(lazyHead || variant === 'fleetcache-full' ? { objects: 'lazy' as const } : {}) });
  const keys: string[] = [];
  // Over TLS, the protocol the connection settled on must be the one the variant names.
  const expected = ca === undefined || h1 ? 'http/1.1' : 'h2';
  let checked = false;
  const check = (): void => {
    if (checked) return;
    checked = true;
    if (connection.protocol !== expected) throw new Error(`${variant}: the connection negotiated ${String(connection.protocol)}, not ${expected}`);
  };
  return {
    start: (onUpdate, onError) => {
      const seen = (rv: string | undefined): void => {
        check();
        onUpdate(rv);
      };
      // The lazy default with a head handler is what the registry's wake-ups do.
      if (lazyHead) informer.addHeadHandler({ update: (_old, head) => { seen(head.metadata.resourceVersion); } });
      else informer.addHandler({ update: (_old, obj) => { seen(obj.metadata?.resourceVersion); } });
      informer.on('error', onError);
      informer.start();
    },
    stop: async () => { await informer.stop(); await connection.close(); },
    cached: () => informer.store.size,
    estimated: () => informer.stats().retainedBytes,
    // A controller's reconcile that reads READS objects by key (the same ones each time, as a
    // controller listing its namespace would): with lazy objects, beyond the decoded cache's size
    // each read is a parse.
    reconcile: () => {
      if (keys.length === 0) keys.push(...informer.store.keys().sort().slice(0, READS));
      let n = 0;
      for (const key of keys) if (informer.store.get(key) !== undefined) n++;
      return n;
    },
  };
}

/** One variant, in this (child) process: time the stream, then weigh the cache. */
async function runVariant(variant: Variant, server: string, ca: string | undefined): Promise<Result> {
  const lastRv = String(FIRST_RV + EVENTS);
  // Over TLS, a kubeconfig as a real cluster's: verified against its certificate-authority-data.
  const kc = ca === undefined ? kubeConfigFor(server, { token: TOKEN, name: 'bench' }) : kubeConfigFrom(kubeconfigYaml({ name: 'bench', server, caPem: ca, token: TOKEN }));
  gc();
  const heapBefore = process.memoryUsage().heapUsed;
  let gcMs = 0;
  const gcObserver = new PerformanceObserver((list) => { for (const e of list.getEntries()) gcMs += e.duration; });
  gcObserver.observe({ entryTypes: ['gc'] });
  const cpu0 = process.cpuUsage();
  const wall0 = performance.now();
  const informer = subject(variant, kc, server, ca);
  let events = 0;
  let firstEventCpu: NodeJS.CpuUsage | undefined;
  await new Promise<void>((resolve, reject) => {
    informer.start((rv) => {
      events++;
      firstEventCpu ??= process.cpuUsage();
      if (rv === lastRv) resolve();
    }, reject);
  });
  const cpu = process.cpuUsage(cpu0);
  const watchCpu = process.cpuUsage(firstEventCpu);
  const wallMs = performance.now() - wall0;
  gcObserver.disconnect();
  // Streams, sockets and their buffers go first; the informer (and its cache) stays referenced.
  await informer.stop();
  gc();
  const heapAfter = process.memoryUsage().heapUsed;
  const cached = informer.cached();
  const estimatedBytes = informer.estimated === undefined || cached === 0 ? -1 : informer.estimated() / cached;
  let reconcileUs = -1;
  if (informer.reconcile !== undefined) {
    informer.reconcile();
    const t0 = performance.now();
    for (let r = 0; r < RECONCILES; r++) informer.reconcile();
    reconcileUs = ((performance.now() - t0) * 1000) / RECONCILES;
  }
  return { variant, cpuMs: (cpu.user + cpu.system) / 1000, sysMs: cpu.system / 1000, watchCpuMs: (watchCpu.user + watchCpu.system) / 1000, gcMs, wallMs, events, cached, retainedBytes: cached === 0 ? -1 : (heapAfter - heapBefore) / cached, estimatedBytes, reconcileUs };
}

function child(args: readonly string[], input: 'pipe' | 'ignore'): ChildProcess {
  return benchChild(fileURLToPath(import.meta.url), args, input);
}

async function main(): Promise<void> {
  const server = child(['--serve', ...(H2 ? ['--h2'] : []), ...(PER_EVENT ? ['--per-event'] : [])], 'pipe');
  const info = JSON.parse(await firstLine(server)) as { url: string; watchBytes: number; listBytes: number; ca?: string };
  const over = `${H2 ? 'loopback TLS (HTTP/2 offered by ALPN, HTTP/1.1 accepted)' : 'loopback HTTP'}${PER_EVENT ? ', one write per event' : ', 64 KiB writes'}`;
  process.stdout.write(`informer benchmark: ${OBJECTS} objects (${Math.round(info.listBytes / OBJECTS)} B each as JSON), ${EVENTS} MODIFIED events (${(info.watchBytes / 1e6).toFixed(1)} MB) over ${over}\n\n`);
  // Each variant runs ROUNDS times, interleaved, in fresh processes; the table shows medians (the
  // machine may be shared, and client-node's retained size is bimodal from run to run).
  const runs: (Result & { readonly round: number })[] = [];
  try {
    for (let round = 0; round < ROUNDS; round++) {
      for (const { id } of VARIANTS) {
        const proc = child(['--variant', id, '--server', info.url, ...(info.ca === undefined ? [] : ['--ca', info.ca])], 'ignore');
        runs.push({ ...(JSON.parse(await firstLine(proc)) as Result), round });
        await new Promise((resolve) => proc.once('exit', resolve));
      }
    }
  } finally {
    server.stdin?.end();
  }
  const median = (values: readonly number[]): number => {
    const sorted = [...values].sort((a, b) => a - b);
    return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
  };
  const results: Result[] = VARIANTS.map(({ id }) => {
    const mine = runs.filter((r) => r.variant === id);
    return {
      variant: id,
      cpuMs: median(mine.map((r) => r.cpuMs)),
      sysMs: median(mine.map((r) => r.sysMs)),
      watchCpuMs: median(mine.map((r) => r.watchCpuMs)),
      gcMs: median(mine.map((r) => r.gcMs)),
      wallMs: median(mine.map((r) => r.wallMs)),
      events: median(mine.map((r) => r.events)),
      cached: median(mine.map((r) => r.cached)),
      retainedBytes: median(mine.map((r) => r.retainedBytes)),
      estimatedBytes: median(mine.map((r) => r.estimatedBytes)),
      reconcileUs: median(mine.map((r) => r.reconcileUs)),
    };
  });
  const hasParsed = results.some((r) => r.variant === 'fleetcache-parsed');
  // What each object weighs as the stripped JSON the lazy store keeps (the goal's yardstick).
  let stripped = 0;
  for (let i = 0; i < OBJECTS; i++) stripped += JSON.stringify(stripManagedFields(configMap(i, FIRST_RV + EVENTS) as KubeObject)).length;
  const strippedBytes = stripped / OBJECTS;
  const base = results.find((r) => r.variant === 'client-node');
  if (base === undefined) throw new Error('no client-node result');
  const perCore = (r: Result): number => (r.events / r.cpuMs) * 1000;
  // The throughput ratio is taken within each round (runs next to each other share the machine's
  // load of the moment), then the median over rounds: steadier than a ratio of medians here.
  const ratio = (id: Variant, to: Variant = 'client-node'): number => median(Array.from({ length: ROUNDS }, (_, round) => {
    const mine = runs.find((r) => r.variant === id && r.round === round);
    const theirs = runs.find((r) => r.variant === to && r.round === round);
    return mine === undefined || theirs === undefined ? Number.NaN : perCore(mine) / perCore(theirs);
  }));
  // With --h2: each informer and the floor over HTTP/2 against itself over HTTP/1.1 TLS, and the CPU
  // per watch event with its kernel share (the LIST excluded: sysMs is over the whole run, so the
  // kernel share is the run's).
  const overH1: Partial<Record<Variant, Variant>> = { 'fleetcache-parsed': 'fleetcache-parsed-h1', fleetcache: 'fleetcache-h1', 'floor-receive-h2': 'floor-receive' };
  const h2Cells = (r: Result): string[] => {
    if (!H2) return [];
    const h1 = overH1[r.variant];
    return [h1 === undefined || !VARIANTS.some((v) => v.id === h1) ? '-' : `${ratio(r.variant, h1).toFixed(2)}×`, `${((r.watchCpuMs * 1000) / EVENTS).toFixed(1)} (${Math.round((100 * r.sysMs) / r.cpuMs)} %)`];
  };
  const rows = results.map((r) => {
    const label = VARIANTS.find((v) => v.id === r.variant)?.label ?? r.variant;
    return [
      label,
      ...h2Cells(r),
      Math.round(perCore(r)).toLocaleString('en-US'),
      `${ratio(r.variant).toFixed(2)}×`,
      hasParsed ? `${ratio(r.variant, 'fleetcache-parsed').toFixed(2)}×` : '-',
      r.retainedBytes < 0 ? '-' : Math.round(r.retainedBytes).toLocaleString('en-US'),
      r.retainedBytes < 0 ? '-' : `${(r.retainedBytes / base.retainedBytes).toFixed(2)}×`,
      r.retainedBytes < 0 ? '-' : `${(r.retainedBytes / strippedBytes).toFixed(2)}×`,
      r.estimatedBytes < 0 ? '-' : Math.round(r.estimatedBytes).toLocaleString('en-US'),
      r.reconcileUs < 0 ? '-' : Math.round(r.reconcileUs).toLocaleString('en-US'),
      `${r.cpuMs.toFixed(0)} / ${r.gcMs.toFixed(0)} / ${r.wallMs.toFixed(0)}`,
      String(r.cached),
    ];
  });
  const header = ['informer', ...(H2 ? ['h2 vs HTTP/1.1', 'µs/event watch (sys)'] : []), 'events/s per core', 'vs client-node', 'vs parsed', 'retained B/object', 'vs client-node', 'vs stripped JSON', 'estimate B', `µs/${String(READS)} reads`, 'CPU / GC / wall ms', 'cached'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join('  ');
  process.stdout.write(`${line(header)}\n${line(widths.map((w) => '-'.repeat(w)))}\n${rows.map(line).join('\n')}\n`);
  process.stdout.write(`\nmedians of ${ROUNDS} runs (the events/s ratio: median of the ratios within each round). events/s per core = events / (user + system\nCPU time of the informer process, LIST included); GC = main-thread GC pauses; retained = heap growth after GC (streams stopped,\ncache kept) / cached objects; vs parsed = events/s ratio to fleetcache with objects parsed at ingest, within each round; vs stripped JSON\n= retained / ${Math.round(strippedBytes).toLocaleString('en-US')} B, the stripped JSON of one object; estimate = the informer's stats().retainedBytes per object; µs/${String(READS)} reads = one\nreconcile reading ${String(READS)} objects by key after the run (decoded cache: 64 objects by default). Load average (1, 5, 15 min) at the end: ${loadavg().map((l) => l.toFixed(1)).join(' ')}.\n`);
  if (H2) process.stdout.write(`h2 vs HTTP/1.1 = events/s ratio to the same variant over HTTP/1.1 TLS, within each round; µs/event watch = CPU from the first\nwatch event to the last / events (sys = the kernel's share of the whole run's CPU). fleetcache's protocol is asserted in each run.\n`);
}

// The strip pre-pass's paths side by side (issue 27): `node bench/informer.bench.ts --strip`.
// `placed` is today's (each event copied once into the WebAssembly module's memory, walked there);
// `windows` the path before it (each long value copied into the module in its own window); `js`
// the JavaScript scan alone (as under --jitless). The path is chosen in each child by STRIP_PATH.
const STRIP_PATHS = ['placed', 'windows', 'js'] as const;
type StripPath = (typeof STRIP_PATHS)[number];
/** Informer variants whose ingest is compared across the strip paths. */
const STRIP_VARIANTS: readonly { readonly id: Variant; readonly label: string }[] = [
  { id: 'fleetcache-parsed', label: 'informer, objects parsed (default)' },
  { id: 'fleetcache', label: 'informer, lazy objects, head handler' },
  { id: 'floor-keep', label: 'floor: pre-pass + JSON.parse, kept in a Map' },
];

function chooseStripPath(path: string | undefined): void {
  if (path === 'windows') usePlacing(false);
  if (path === 'js') useSimd(false);
}

/** Microseconds of CPU per event for each entry point, over the benchmark's own watch lines (in this child). */
function stripMicro(): Record<string, number> {
  const lines = Array.from({ length: OBJECTS }, (_, i) => Buffer.from(JSON.stringify({ type: 'MODIFIED', object: configMap(i, FIRST_RV + 1 + i) })));
  const time = (f: (line: Buffer) => unknown): number => {
    for (let r = 0; r < 3; r++) for (const line of lines) f(line);
    const cpu0 = process.cpuUsage();
    const repeat = 10;
    for (let r = 0; r < repeat; r++) for (const line of lines) f(line);
    const cpu = process.cpuUsage(cpu0);
    return (cpu.user + cpu.system) / (repeat * lines.length);
  };
  // The same events already stripped: what JSON.parse alone costs once the pre-pass is done.
  const strippedLines = new Map<Buffer, Buffer>(lines.map((line) => [line, Buffer.from(JSON.stringify(parseEventDroppingManagedFields(line)))]));
  return {
    parse: time((line) => parseEventDroppingManagedFields(line)),
    lazy: time((line) => scanEventLazily(line, 0, line.length)),
    plain: time((line) => JSON.parse(line.toString('utf8'))),
    strippedOnly: time((line) => JSON.parse((strippedLines.get(line) ?? line).toString('utf8'))),
  };
}

function stripChild(args: readonly string[], path: StripPath): ChildProcess {
  return benchChild(fileURLToPath(import.meta.url), args, 'ignore', { STRIP_PATH: path });
}

async function stripComparison(): Promise<void> {
  const server = child(['--serve'], 'pipe');
  const info = JSON.parse(await firstLine(server)) as { url: string; watchBytes: number; listBytes: number };
  process.stdout.write(`strip pre-pass paths: ${String(OBJECTS)} ConfigMaps (${String(Math.round(info.watchBytes / EVENTS))} B per watch line), ${String(EVENTS)} MODIFIED events; ${String(ROUNDS)} rounds, paths interleaved\n\n`);
  const micro: { path: StripPath; round: number; us: Record<string, number> }[] = [];
  const ingest: { path: StripPath; round: number; result: Result }[] = [];
  try {
    for (let round = 0; round < ROUNDS; round++) {
      for (const path of STRIP_PATHS) {
        const proc = stripChild(['--strip-micro'], path);
        micro.push({ path, round, us: JSON.parse(await firstLine(proc)) as Record<string, number> });
        await new Promise((resolve) => proc.once('exit', resolve));
      }
      for (const { id } of STRIP_VARIANTS) {
        for (const path of STRIP_PATHS) {
          const proc = stripChild(['--variant', id, '--server', info.url], path);
          ingest.push({ path, round, result: JSON.parse(await firstLine(proc)) as Result });
          await new Promise((resolve) => proc.once('exit', resolve));
        }
      }
    }
  } finally {
    server.stdin?.end();
  }
  const median = (values: readonly number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? Number.NaN;
  const perCore = (r: Result): number => (r.events / r.cpuMs) * 1000;
  const rows: string[][] = [];
  for (const [key, label] of [['parse', 'µs per event: pre-pass + JSON.parse (parsed objects)'], ['lazy', 'µs per event: lazy scan (lazy objects)']] as const) {
    const us = (path: StripPath): number => median(micro.filter((m) => m.path === path).map((m) => m.us[key] ?? Number.NaN));
    const ratio = (path: StripPath): number => median(Array.from({ length: ROUNDS }, (_, round) => {
      const mine = micro.find((m) => m.path === path && m.round === round)?.us[key];
      const old = micro.find((m) => m.path === 'windows' && m.round === round)?.us[key];
      return mine === undefined || old === undefined ? Number.NaN : old / mine;
    }));
    rows.push([label, ...STRIP_PATHS.map((path) => us(path).toFixed(2)), `${ratio('placed').toFixed(2)}×`, `${ratio('js').toFixed(2)}×`]);
  }
  const plain = median(micro.filter((m) => m.path === 'placed').map((m) => m.us.plain ?? Number.NaN));
  const strippedOnly = median(micro.filter((m) => m.path === 'placed').map((m) => m.us.strippedOnly ?? Number.NaN));
  for (const { id, label } of STRIP_VARIANTS) {
    const rate = (path: StripPath): number => median(ingest.filter((r) => r.path === path && r.result.variant === id).map((r) => perCore(r.result)));
    const ratio = (path: StripPath): number => median(Array.from({ length: ROUNDS }, (_, round) => {
      const mine = ingest.find((r) => r.path === path && r.round === round && r.result.variant === id);
      const old = ingest.find((r) => r.path === 'windows' && r.round === round && r.result.variant === id);
      return mine === undefined || old === undefined ? Number.NaN : perCore(mine.result) / perCore(old.result);
    }));
    rows.push([`events/s per core: ${label}`, ...STRIP_PATHS.map((path) => Math.round(rate(path)).toLocaleString('en-US')), `${ratio('placed').toFixed(2)}×`, `${ratio('js').toFixed(2)}×`]);
  }
  const header = ['measure', 'placed (today)', 'windows (before)', 'JavaScript only', 'placed vs windows', 'JS vs windows'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join('  ');
  process.stdout.write(`${line(header)}\n${line(widths.map((w) => '-'.repeat(w)))}\n${rows.map(line).join('\n')}\n`);
  process.stdout.write(`\nmedians of ${String(ROUNDS)} rounds; ratios are the median of the ratios within each round (above 1: faster than the windows path).\nµs = CPU time per event in a fresh process, over the benchmark's ${String(OBJECTS)} watch lines (for scale: JSON.parse of a whole line,\nnothing stripped, ${plain.toFixed(2)} µs; of the same line already stripped, ${strippedOnly.toFixed(2)} µs: the rest of the first row is the pre-pass).\nLoad average (1, 5, 15 min) at the end: ${loadavg().map((l) => l.toFixed(1)).join(' ')}.\n`);
}

const args = process.argv.slice(2);
/** The `--ca` argument (base64 PEM, as `--serve --h2` prints it), decoded. */
function caArgument(): string | undefined {
  const at = args.indexOf('--ca');
  const value = at === -1 ? undefined : args[at + 1];
  return value === undefined ? undefined : Buffer.from(value, 'base64').toString('utf8');
}

if (args[0] === '--serve') {
  await serve(H2);
} else if (args[0] === '--strip') {
  await stripComparison();
} else if (args[0] === '--strip-micro') {
  chooseStripPath(process.env.STRIP_PATH);
  process.stdout.write(`${JSON.stringify(stripMicro())}\n`);
  process.exit(0);
} else if (args[0] === '--variant') {
  chooseStripPath(process.env.STRIP_PATH);
  const result = await runVariant(args[1] as Variant, args[3] ?? '', caArgument());
  process.stdout.write(`${JSON.stringify(result)}\n`);
  process.exit(0);
} else {
  await main();
}
