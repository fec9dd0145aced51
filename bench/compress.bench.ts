// What compressed objects (issue 27, `objects: 'compressed'`) do to real objects: a kube-apiserver of
// the test assets (KUBEBUILDER_ASSETS, as `make test` builds them) is started, app-like objects are
// created through it (Deployments, Services, ConfigMaps of config files, Secrets of key material),
// and every kind is LISTed back as the server writes it, with the built-in objects it serves
// (ClusterRoles, ClusterRoleBindings, APIServices, FlowSchemas). Each object's text as a lazy
// cache keeps it (managedFields and the last-applied annotation removed) is then deflated the way
// a compressed cache does it (lib/informer/pack.ts: a dictionary of the kind's first objects, the
// rest packed against it), beside deflate alone, side by side in one process. Prints, per kind,
// the share of the text kept and µs per object to pack, to inflate, to parse, and to read a packed
// object (inflate + parse) against reading a lazy one (parse), medians of ROUNDS (default 7) passes
// of 2,000 calls.
// Run: node bench/compress.bench.ts
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { deflateRawSync, inflateRawSync } from 'node:zlib';
import { startCluster } from '../e2e/harness/index.ts';
import { stripManagedFields } from '../lib/informer/index.ts';
import { MAX_DICTIONARY } from '../lib/informer/lz.ts';
import { seededRandom } from '../lib/util/seeded-random.ts';
import { dictionaryFrom, pack, type Packed } from '../lib/informer/pack.ts';
import { benchChild, firstLine } from './child.ts';
import type { KubeObject } from '../lib/transport/index.ts';

const ROUNDS = Number(process.env.ROUNDS ?? 7);
/** Objects of each app-like kind created. */
const APPS = 150;

function appObjects(i: number, random: () => number): { readonly path: string; readonly body: object }[] {
  const app = `${['web', 'api', 'worker', 'cart', 'search', 'auth'][i % 6] ?? 'web'}-${String(i)}`;
  const labels = { 'app.kubernetes.io/name': app, 'app.kubernetes.io/part-of': 'shop', 'app.kubernetes.io/managed-by': 'Helm', team: `team-${String(i % 7)}` };
  const version = `${String(1 + (i % 3))}.${String(i % 11)}.${String(Math.floor(random() * 40))}`;
  const port = 8000 + (i % 50);
  const bytes = (n: number): string => Buffer.from(Array.from({ length: n }, () => Math.floor(random() * 256))).toString('base64');
  return [
    {
      path: '/apis/apps/v1/namespaces/apps/deployments',
      body: {
        apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: app, labels, annotations: { 'meta.helm.sh/release-name': app, 'meta.helm.sh/release-namespace': 'apps' } },
        spec: {
          replicas: 1 + (i % 4), selector: { matchLabels: { 'app.kubernetes.io/name': app } },
          template: {
            metadata: { labels, annotations: { 'checksum/config': bytes(24) } },
            spec: {
              serviceAccountName: app,
              containers: [{
                name: app.split('-')[0], image: `ghcr.io/acme/${app.split('-')[0] ?? ''}:${version}`, ports: [{ name: 'http', containerPort: port }],
                env: [{ name: 'LOG_LEVEL', value: i % 2 === 0 ? 'debug' : 'info' }, { name: 'REGION', value: `eu-west-${String(i % 3)}` }, { name: 'DATABASE_URL', value: `postgres://db-${String(i % 5)}.data.svc:5432/${app}` }],
                resources: { requests: { cpu: `${String(50 + (i % 20) * 10)}m`, memory: `${String(64 + (i % 8) * 32)}Mi` }, limits: { memory: `${String(256 + (i % 8) * 64)}Mi` } },
                readinessProbe: { httpGet: { path: '/healthz', port: 'http' }, periodSeconds: 10 },
                livenessProbe: { httpGet: { path: '/livez', port: 'http' }, initialDelaySeconds: 5 + (i % 10) },
              }],
            },
          },
        },
      },
    },
    {
      path: '/api/v1/namespaces/apps/services',
      body: { apiVersion: 'v1', kind: 'Service', metadata: { name: app, labels }, spec: { selector: { 'app.kubernetes.io/name': app }, ports: [{ name: 'http', port: 80, targetPort: 'http' }, { name: 'metrics', port: 9090, targetPort: 9090 }] } },
    },
    {
      path: '/api/v1/namespaces/apps/configmaps',
      body: {
        apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `${app}-config`, labels },
        data: {
          'application.yaml': `server:\n  port: ${String(port)}\n  shutdown: graceful\nspring:\n  datasource:\n    url: jdbc:postgresql://db-${String(i % 5)}.data.svc:5432/${app}\n    hikari:\n      maximum-pool-size: ${String(5 + (i % 10))}\nfeatures:\n  new-checkout: ${String(random() < 0.5)}\n  search-v2: ${String(random() < 0.5)}\ncache:\n  ttl: ${String(30 + Math.floor(random() * 600))}s\n  host: redis-${String(i % 4)}.cache.svc\n`,
          'logback.xml': `<configuration>\n  <appender name="STDOUT" class="ch.qos.logback.core.ConsoleAppender">\n    <encoder class="net.logstash.logback.encoder.LogstashEncoder"/>\n  </appender>\n  <logger name="com.acme.${app.split('-')[0] ?? ''}" level="${i % 2 === 0 ? 'DEBUG' : 'INFO'}"/>\n  <root level="INFO"><appender-ref ref="STDOUT"/></root>\n</configuration>\n`,
          'release': `${version}+${bytes(6)}`,
        },
      },
    },
    {
      path: '/api/v1/namespaces/apps/secrets',
      body: { apiVersion: 'v1', kind: 'Secret', type: 'kubernetes.io/tls', metadata: { name: `${app}-tls`, labels }, data: { 'tls.crt': bytes(900), 'tls.key': bytes(1_190) } },
    },
  ];
}

/** Median of `values`. */
function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

/** Calls per pass: the items over and over, so a pass outlasts a garbage collection or two. */
const CALLS = 2_000;

/** µs per call of `fn` over `items`, median of ROUNDS passes of {@link CALLS} calls (one warm-up pass first). */
function perItem<I>(items: readonly I[], fn: (item: I) => unknown): number {
  const rounds: number[] = [];
  for (let r = 0; r <= ROUNDS; r++) {
    const start = process.hrtime.bigint();
    for (let k = 0; k < CALLS; k++) fn(items[k % items.length] as I);
    if (r > 0) rounds.push(Number(process.hrtime.bigint() - start) / 1_000 / CALLS);
  }
  return median(rounds);
}

/** Packs in the memory comparison. */
const CHURN_CALLS = 60_000;

if (process.argv[2] === '--churn') {
  // A child: pack then unpack the corpus with one codec; print the growth after full GCs.
  const texts = JSON.parse(readFileSync(process.argv[4] ?? '', 'utf8')) as string[];
  const gc = (): void => { for (let k = 0; k < 3; k++) (globalThis as { gc?: () => void }).gc?.(); };
  const dictionary = dictionaryFrom(texts, 1 << 20) ?? new Uint8Array(0);
  const zlibDictionary = Buffer.from(dictionary);
  const zlib = process.argv[3] === 'zlib';
  gc();
  const before = process.memoryUsage();
  const kept: (string | Packed | undefined)[] = [];
  for (let k = 0; k < CHURN_CALLS; k++) {
    const text = texts[k % texts.length] ?? '';
    kept.push(zlib ? deflateRawSync(Buffer.from(text), { dictionary: zlibDictionary }).toString('latin1') : pack(text, dictionary));
  }
  let chars = 0;
  for (let k = 0; k < CHURN_CALLS; k += 2) {
    const one = kept[k];
    chars += typeof one === 'string' ? inflateRawSync(Buffer.from(one, 'latin1'), { dictionary: zlibDictionary }).length : one?.text().length ?? 0;
  }
  gc();
  const after = process.memoryUsage();
  process.stdout.write(`${JSON.stringify({ rss: after.rss - before.rss, heap: after.heapUsed - before.heapUsed, committed: after.heapTotal - before.heapTotal, kept: kept.length, chars })}\n`);
  process.exit(0);
}

const cluster = await startCluster({ name: 'compress-bench' });
try {
  const created = await cluster.request('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'apps' } });
  if (created.statusCode !== 201) throw new Error(`namespace: ${String(created.statusCode)}`);
  const random = seededRandom(27);
  for (let i = 0; i < APPS; i++) {
    for (const { path, body } of appObjects(i, random)) {
      const res = await cluster.request('POST', path, body);
      if (res.statusCode !== 201) throw new Error(`${path}: ${String(res.statusCode)} ${JSON.stringify(res.body).slice(0, 200)}`);
    }
  }
  const kinds: readonly (readonly [string, string])[] = [
    ['Deployment', '/apis/apps/v1/namespaces/apps/deployments'],
    ['Service', '/api/v1/namespaces/apps/services'],
    ['ConfigMap (config files)', '/api/v1/namespaces/apps/configmaps'],
    ['Secret (TLS, not packed by a cache)', '/api/v1/namespaces/apps/secrets'],
    ['ClusterRole', '/apis/rbac.authorization.k8s.io/v1/clusterroles'],
    ['ClusterRoleBinding', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings'],
    ['APIService', '/apis/apiregistration.k8s.io/v1/apiservices'],
  ];
  // Warm-up, so that the first kind measured does not pay the JIT's first calls.
  const warmTexts = Array.from({ length: 40 }, (_, i) => JSON.stringify(appObjects(i, seededRandom(1))[0]?.body));
  const warmDictionary = dictionaryFrom(warmTexts, 1 << 20) ?? new Uint8Array(0);
  for (let k = 0; k < 3_000; k++) JSON.parse(pack(warmTexts[k % 40] ?? '', warmDictionary)?.text() ?? '{}');
  console.log(`\nbench/compress.bench.ts: real kube-apiserver objects, the text a lazy cache keeps; each kind packed as one compressed cache packs it (a dictionary of its first objects, an eighth of its text up to ${String(MAX_DICTIONARY)} B; the objects in it left out of the figures) beside zlib's deflate alone and with the same dictionary; medians of ${String(ROUNDS)} passes; load average ${loadavg().map((l) => l.toFixed(1)).join(' ')}\n`);
  console.log('| kind | objects packed | text B/object | dictionary B | kept: deflate alone | deflate + dictionary | **packed (lz + dictionary)** | pack µs | unpack µs | parse µs | read packed (unpack + parse) vs lazy (parse) |');
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const [kind, path] of kinds) {
    const res = await cluster.request('GET', path);
    const items = (res.body as { items: KubeObject[] }).items;
    const texts = items.map((o) => JSON.stringify(stripManagedFields(o)));
    const dictionary = dictionaryFrom(texts, texts.reduce((sum, t) => sum + t.length, 0));
    if (dictionary === undefined) {
      console.log(`| ${kind} | none: ${String(texts.length)} objects are too little text for a dictionary | | | | | | | | | |`);
      continue;
    }
    // What the dictionary holds whole packs to nothing against it: only the others are measured.
    let inDictionary = 0;
    for (let size = 0; inDictionary < texts.length && size + (texts[inDictionary]?.length ?? 0) <= dictionary.length; inDictionary++) size += texts[inDictionary]?.length ?? 0;
    const rest = texts.slice(Math.max(1, inDictionary));
    const textBytes = rest.reduce((sum, t) => sum + Buffer.byteLength(t), 0);
    const zlibDictionary = Buffer.from(dictionary);
    const alone = rest.reduce((sum, t) => sum + deflateRawSync(Buffer.from(t)).length, 0);
    const zlibWith = rest.reduce((sum, t) => sum + deflateRawSync(Buffer.from(t), { dictionary: zlibDictionary }).length, 0);
    const packed = rest.map((t) => pack(t, dictionary));
    // Not worth packing (kept as text) counts whole.
    const ours = packed.reduce((sum, p, k) => sum + (p?.length ?? Buffer.byteLength(rest[k] ?? '')), 0);
    const kept = packed.filter((p): p is Packed => p !== undefined);
    const packUs = perItem(rest, (t) => pack(t, dictionary));
    const unpackUs = kept.length === 0 ? Number.NaN : perItem(kept, (p) => p.text());
    const parseUs = perItem(rest, (t) => JSON.parse(t));
    const readUs = kept.length === 0 ? Number.NaN : perItem(kept, (p) => JSON.parse(p.text()));
    const share = (n: number): string => `${(100 * n / textBytes).toFixed(1)} %`;
    console.log(`| ${kind} | ${String(kept.length)} of ${String(rest.length)} | ${(textBytes / rest.length).toFixed(0)} | ${String(dictionary.length)} | ${share(alone)} | ${share(zlibWith)} | **${share(ours)}** | ${packUs.toFixed(1)} | ${unpackUs.toFixed(1)} | ${parseUs.toFixed(1)} | ${(readUs / parseUs).toFixed(2)}× (${readUs.toFixed(1)} µs) |`);
  }
  // Why not zlib: what each codec leaves resident, packing and unpacking the Deployments over and
  // over in a process of its own (the texts kept packed, as a cache keeps them).
  const deployments = ((await cluster.request('GET', '/apis/apps/v1/namespaces/apps/deployments')).body as { items: KubeObject[] }).items.map((o) => JSON.stringify(stripManagedFields(o)));
  const corpus = join(tmpdir(), `fleetcache-compress-${String(process.pid)}.json`);
  writeFileSync(corpus, JSON.stringify(deployments));
  try {
    console.log(`\n${String(CHURN_CALLS)} packs then ${String(CHURN_CALLS / 2)} unpacks of the Deployments (their text kept packed), each codec in a fresh process: growth after full GCs, MiB\n`);
    console.log('| codec | RSS | V8 heap used | V8 heap committed | RSS outside V8\'s heap | per call, B |');
    console.log('| --- | --- | --- | --- | --- | --- |');
    for (const codec of ['lz', 'zlib'] as const) {
      const line = await firstLine(benchChild(fileURLToPath(import.meta.url), ['--churn', codec, corpus], 'ignore'));
      const r = JSON.parse(line) as { rss: number; heap: number; committed: number };
      const mib = (n: number): string => (n / 2 ** 20).toFixed(1);
      console.log(`| ${codec === 'lz' ? 'lz (what caches use)' : 'zlib deflateRawSync / inflateRawSync'} | ${mib(r.rss)} | ${mib(r.heap)} | ${mib(r.committed)} | ${mib(r.rss - r.committed)} | ${((r.rss - r.committed) / (CHURN_CALLS * 1.5)).toFixed(0)} |`);
    }
  } finally {
    rmSync(corpus, { force: true });
  }
} finally {
  await cluster.stop();
}
