// Node's own cost of one cluster's connection, layer by layer (issue 27), in the measured process of
// `bench/percluster.bench.ts --layers`: to N simulated clusters, (1) one TLS socket each (ALPN h2,
// verified against the kubeconfig's CA, the secure context shared or one per socket), (2) an HTTP/2
// session over it, (3) every kind LISTed on it (the sim host's objects, read as text and dropped,
// 50 sessions at a time), (4) a watch of each kind from its LIST's resourceVersion, as an informer
// opens them, (5) every session destroyed (what malloc keeps), (6) V8's memory-reducing GC. Process
// memory after a full GC is taken after each layer; one cluster goes through every layer first and
// is not counted (module loading, OpenSSL's and nghttp2's one-time set-up). Layers reuse what the
// one before freed (nghttp2 allocates from the handshake's free chunks), so read live memory from
// the trimmed rows: LAYERS_TRIM=1 calls glibc's malloc_trim(0) through gdb before the base, once the
// watches are open (the brk heap then holds live allocations only) and at the end. LAYERS_IDLE=MS
// waits that long idle before (6); LAYERS_MAPS=FILE copies /proc/self/smaps at the base, after (5)
// and after (6) to FILE.base, FILE.closed, FILE.reduced.
// argv: fleet file, N, `shared` | `own` (secure contexts), `ours` | `node` (session settings:
// the transport's, or node:http2's defaults). Prints one JSON line: the memory after each layer.
import * as http2 from 'node:http2';
import { readFileSync, writeFileSync } from 'node:fs';
import * as tls from 'node:tls';
import { setTimeout as delay } from 'node:timers/promises';
import { getHeapSpaceStatistics } from 'node:v8';
import { brkHeapBytes, fullGcs, mallocTrim, memoryReducingGc } from '../process-memory.ts';

interface Target { readonly name: string; readonly kubeconfig: string }
const fleet = JSON.parse(readFileSync(process.argv[2] ?? '', 'utf8')) as Target[];
const n = Number(process.argv[3] ?? 100);
const contexts = process.argv[4] === 'own' ? 'own' : 'shared';
const settings = process.argv[5] === 'node' ? 'node' : 'ours';
if (fleet.length < n + 1) throw new TypeError(`layers: ${n} clusters and a warm-up one needed, the fleet has ${fleet.length}`);

const field = (text: string, key: string): string => {
  const match = new RegExp(`^\\s*${key}: (.+)$`, 'm').exec(text);
  if (match === null) throw new TypeError(`kubeconfig without ${key}`);
  const value = match[1] ?? '';
  return value.startsWith('"') ? JSON.parse(value) as string : value;
};
const targets = fleet.map((c) => {
  const url = new URL(field(c.kubeconfig, 'server'));
  return { host: url.hostname, port: Number(url.port), ca: Buffer.from(field(c.kubeconfig, 'certificate-authority-data'), 'base64'), token: field(c.kubeconfig, 'token') };
});
type T = (typeof targets)[number];

const memory = (): Record<string, number> => {
  const m = process.memoryUsage();
  const spaces = getHeapSpaceStatistics();
  return {
    rss: m.rss, heapUsed: m.heapUsed, heapTotal: m.heapTotal, external: m.external, arrayBuffers: m.arrayBuffers, brk: brkHeapBytes(),
    newSpace: spaces.find((s) => s.space_name === 'new_space')?.space_size ?? 0,
  };
};

const ALPN = new DataView(new TextEncoder().encode('\x02h2').buffer);
let shared: tls.SecureContext | undefined;
const contextFor = (t: T): tls.SecureContext => (contexts === 'own' ? tls.createSecureContext({ ca: t.ca }) : (shared ??= tls.createSecureContext({ ca: t.ca })));

const connect = (t: T): Promise<tls.TLSSocket> => new Promise((resolve, reject) => {
  const socket = tls.connect({ host: t.host, port: t.port, secureContext: contextFor(t), ALPNProtocols: ALPN });
  socket.once('secureConnect', () => { resolve(socket); });
  socket.once('error', reject);
});
const session = (socket: tls.TLSSocket, t: T): Promise<http2.ClientHttp2Session> => new Promise((resolve, reject) => {
  const s = http2.connect(`https://${t.host}:${t.port}`, {
    createConnection: () => socket,
    ...(settings === 'ours' ? { settings: { enablePush: false, initialWindowSize: 4 * 1024 * 1024 }, maxSessionMemory: 64 } : {}),
  });
  s.once('connect', () => {
    if (settings === 'ours') s.setLocalWindowSize(32 * 1024 * 1024);
    resolve(s);
  });
  s.once('error', reject);
});
const PLURALS = ['/api/v1/namespaces/apps/configmaps', '/api/v1/namespaces/apps/secrets', '/apis/helm.toolkit.fluxcd.io/v2/namespaces/apps/helmreleases', '/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/apps/kustomizations'];
/** One GET on the session, its body as text; `resolve` on the response when `held` (a watch). */
const get = (s: http2.ClientHttp2Session, t: T, path: string): Promise<string> => new Promise((resolve, reject) => {
  const stream = s.request({ ':method': 'GET', ':path': path, authorization: `Bearer ${t.token}`, accept: 'application/json' });
  let body = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk: string) => { body += chunk; });
  stream.once('end', () => { resolve(body); });
  stream.once('error', reject);
});
/** Every kind LISTed (one page, as the sim host's 200 objects are): the resourceVersion of each. */
const lists = async (s: http2.ClientHttp2Session, t: T): Promise<string[]> => {
  const versions: string[] = [];
  for (const path of PLURALS) versions.push((JSON.parse(await get(s, t, path)) as { metadata: { resourceVersion: string } }).metadata.resourceVersion);
  return versions;
};
const watches = (s: http2.ClientHttp2Session, t: T, versions: readonly string[]): Promise<http2.ClientHttp2Stream[]> => Promise.all(PLURALS.map((path, i) => new Promise<http2.ClientHttp2Stream>((resolve, reject) => {
  const stream = s.request({ ':method': 'GET', ':path': `${path}?watch=true&allowWatchBookmarks=true&resourceVersion=${versions[i] ?? ''}`, authorization: `Bearer ${t.token}`, accept: 'application/json' });
  stream.on('data', () => undefined);
  stream.once('response', (h) => { if (h[':status'] === 200) resolve(stream); else reject(new Error(`watch ${path}: ${String(h[':status'])}`)); });
  stream.once('error', reject);
})));
/** A fleet's first sync: LISTs a few sessions at a time (the keeper's LIST limit is 50). */
const listAll = async (all: readonly { readonly t: T; readonly s: http2.ClientHttp2Session }[]): Promise<string[][]> => {
  const out: string[][] = [];
  for (let i = 0; i < all.length; i += 50) out.push(...await Promise.all(all.slice(i, i + 50).map(({ t, s }) => lists(s, t))));
  return out;
};

// One cluster through every layer, not counted.
const [warm, ...counted] = targets.slice(0, n + 1);
if (warm === undefined) throw new TypeError('no cluster');
const warmSession = await session(await connect(warm), warm);
await watches(warmSession, warm, await lists(warmSession, warm));

const trimming = process.env.LAYERS_TRIM === '1';
await fullGcs();
if (trimming) mallocTrim();
const base = memory();
const maps = process.env.LAYERS_MAPS;
if (maps !== undefined) writeFileSync(`${maps}.base`, readFileSync('/proc/self/smaps'));
const sockets = await Promise.all(counted.map(async (t) => ({ t, socket: await connect(t) })));
await fullGcs();
const tlsLayer = memory();
const sessions = await Promise.all(sockets.map(async ({ t, socket }) => ({ t, s: await session(socket, t) })));
await fullGcs();
const h2Layer = memory();
const versions = await listAll(sessions);
await delay(500);
await fullGcs();
const listLayer = memory();
await Promise.all(sessions.map(({ t, s }, i) => watches(s, t, versions[i] ?? [])));
await delay(1_000);
await fullGcs();
const watchLayer = memory();
let live: Record<string, number> | undefined;
if (trimming) {
  mallocTrim();
  live = memory();
}
// Every session and socket destroyed: what stays is malloc's (free pages it keeps), not theirs.
for (const { s } of sessions) s.destroy();
await delay(1_000);
await fullGcs();
const closedLayer = memory();
if (maps !== undefined) writeFileSync(`${maps}.closed`, readFileSync('/proc/self/smaps'));
await delay(Number(process.env.LAYERS_IDLE ?? 0));
const idleLayer = memory();
// V8's memory-reducing collection (what its memory reducer runs on an idle process): it also
// hands back the 256 KiB pages V8 keeps pooled, resident but outside `heapTotal`.
memoryReducingGc();
await delay(500);
const reducedLayer = memory();
if (maps !== undefined) writeFileSync(`${maps}.reduced`, readFileSync('/proc/self/smaps'));
let trimmed: Record<string, number> | undefined;
if (trimming) {
  mallocTrim();
  trimmed = memory();
}
process.stdout.write(`${JSON.stringify({ clusters: counted.length, contexts, settings, base, tls: tlsLayer, h2: h2Layer, lists: listLayer, watches: watchLayer, ...(live === undefined ? {} : { 'watches, malloc_trim(0)': live }), closed: closedLayer, idle: idleLayer, reduced: reducedLayer, ...(trimmed === undefined ? {} : { trimmed }) })}\n`);
process.exit(0);
