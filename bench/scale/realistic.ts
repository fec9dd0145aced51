// Objects shaped as a real Flux-managed cluster holds them, for the scale benchmark's
// `--shape=realistic` (issue 27): ConfigMaps of config text whose values vary, Secrets of base64
// random bytes (TLS material and tokens: mostly incompressible), HelmReleases and Kustomizations
// with spec and status as the Flux controllers write them, and the labels and annotations Helm and
// Flux put on what they manage. Every object differs (a seeded generator per cluster, kind and
// index) and each is about 1.8–2.2 KB of JSON as a reader gets it (the server's uid,
// creationTimestamp, resourceVersion and generation included).
import type { Json } from '../../fixtures/index.ts';
import { Prng, seedOf } from './prng.ts';

type JsonObject = Record<string, Json>;

/** What the simulator stores: the object to create, and the status to write after (custom kinds ignore status on create). */
export interface ShapedObject {
  readonly object: JsonObject;
  readonly status?: JsonObject;
}

/** Bytes the server adds to an object's JSON: uid, creationTimestamp, resourceVersion; and generation for custom kinds. */
const SERVER_ADDS = 45 + 43 + 26;
const GENERATION = 15;

const SERVICES = [
  'payments', 'checkout', 'catalog', 'search', 'auth', 'gateway', 'orders', 'inventory', 'billing', 'notifications',
  'ledger', 'profile', 'recommendations', 'shipping', 'reporting', 'ingest', 'scheduler', 'pricing', 'alerts', 'webhooks',
] as const;
const COMPONENTS = ['api', 'worker', 'web', 'cron', 'consumer', 'admin'] as const;
const REGIONS = ['eu-west-1', 'eu-central-1', 'us-east-1', 'us-west-2', 'ap-southeast-1', 'ap-northeast-1', 'sa-east-1'] as const;
const ENVS = ['prod', 'staging', 'qa', 'dev'] as const;
const SECTIONS = ['server', 'database', 'cache', 'queue', 'auth', 'tracing', 'metrics', 'http', 'retry', 'storage', 'upstream', 'scheduler', 'limits'] as const;
const FLAGS = [
  'newCheckoutFlow', 'asyncInvoices', 'betaSearch', 'darkLaunchPricing', 'grpcUpstreams', 'cacheWarmup', 'strictValidation',
  'shadowTraffic', 'regionalFailover', 'auditLog', 'batchExports', 'rateLimitV2', 'legacyAuth', 'compressResponses',
] as const;

/** A cluster's facts, shared by all its objects (as a real cluster's objects share them). */
interface Cluster { readonly name: string; readonly env: string; readonly region: string; readonly domain: string; readonly registry: string }

const clusters = new Map<number, Cluster>();
function clusterOf(index: number): Cluster {
  let c = clusters.get(index);
  if (c === undefined) {
    const r = new Prng(seedOf(index, 0xc1));
    const env = r.pick(ENVS);
    const region = r.pick(REGIONS);
    c = { name: `${env}-${region}-${index}`, env, region, domain: `${env}.${region}.example.com`, registry: r.pick(['registry.example.com', 'ghcr.io/example', `123456789012.dkr.ecr.${region}.amazonaws.com`]) };
    clusters.set(index, c);
  }
  return c;
}

/** RFC 3339 to the second, as the API server writes times. */
const rfc3339 = (ms: number): string => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
/** A time within a few months. */
const time = (r: Prng): string => rfc3339(Date.UTC(2026, 6, 1) + r.int(0, 120 * 86_400) * 1000);
const uuid = (r: Prng): string => `${r.hex(8)}-${r.hex(4)}-4${r.hex(3)}-${r.pick(['8', '9', 'a', 'b'])}${r.hex(3)}-${r.hex(12)}`;
const semver = (r: Prng): string => `${r.int(0, 4)}.${r.int(0, 40)}.${r.int(0, 20)}`;
/** The length `value` adds as a JSON string's content (escapes counted). */
const jsonLength = (value: string): number => JSON.stringify(value).length - 2;

/** A setting's name and a value generator: config lines whose values vary as real ones do. */
type Setting = readonly [string, (r: Prng, c: Cluster) => string];
const SETTINGS: readonly Setting[] = [
  ['host', (r) => `${r.pick(SERVICES)}-${r.hex(5)}.apps.svc.cluster.local`],
  ['port', (r) => String(r.int(1025, 65535))],
  ['timeout', (r) => `${r.int(1, 120)}s`],
  ['maxConnections', (r) => String(r.int(4, 512))],
  ['enabled', (r) => String(r.chance(0.6))],
  ['endpoint', (r, c) => `https://${r.pick(SERVICES)}.${c.domain}:${r.int(443, 9443)}/${r.pick(['v1', 'v2', 'api', 'rpc'])}/${r.pick(SERVICES)}`],
  ['poolSize', (r) => String(r.int(2, 64))],
  ['ttlSeconds', (r) => String(r.int(30, 86_400))],
  ['retries', (r) => String(r.int(0, 10))],
  ['logLevel', (r) => r.pick(['debug', 'info', 'warn', 'error'])],
  ['accountId', (r) => `acct-${r.int(10_000_000, 99_999_999)}`],
  ['clientId', uuid],
  ['bucket', (r, c) => `${c.env}-${r.pick(SERVICES)}-${r.pick(['assets', 'exports', 'backups', 'uploads'])}-${c.region}`],
  ['region', (_, c) => c.region],
  ['batchSize', (r) => String(r.int(1, 50) * 100)],
  ['sampleRate', (r) => String(r.int(1, 1000) / 1000)],
  ['topic', (r, c) => `${c.env}.${r.pick(SERVICES)}.${r.pick(['events', 'commands', 'dlq', 'retry'])}.v${r.int(1, 4)}`],
  ['threshold', (r) => `${r.int(50, 99)}.${r.int(0, 9)}`],
  ['schedule', (r) => `${r.int(0, 59)} ${r.int(0, 23)} * * ${r.pick(['*', '1-5', '0,6'])}`],
  ['dataDir', (r) => `/var/lib/${r.pick(SERVICES)}/${r.pick(['data', 'cache', 'spool', 'tmp'])}`],
];

/**
 * Endless lines of one config file format (YAML sections, properties, JSON-ish feature flags,
 * nginx-like upstreams). A file names a section once and a setting once per section, as real ones do.
 */
function lines(format: 'yaml' | 'properties' | 'json' | 'conf', r: Prng, c: Cluster): () => string {
  const used = new Set<string>();
  /** A name not used yet in this file (`make`'s, else with a number appended). */
  const fresh = (make: () => string): string => {
    for (let tries = 0; tries < 8; tries++) {
      const name = make();
      if (!used.has(name)) {
        used.add(name);
        return name;
      }
    }
    const name = `${make()}${used.size}`;
    used.add(name);
    return name;
  };
  let n = 0;
  let section = '';
  let inSection = 0;
  const setting = (): string => {
    const [key, value] = r.pick(SETTINGS);
    return `${fresh(() => `${section}.${key}`).slice(section.length + 1)}${format === 'yaml' ? ': ' : '='}${value(r, c)}`;
  };
  return () => {
    const first = n++ === 0;
    const next = first || inSection >= 6 || r.chance(0.2);
    if (next && format !== 'json' && format !== 'conf') {
      section = fresh(() => r.pick(SECTIONS));
      inSection = 0;
    }
    inSection++;
    switch (format) {
      case 'yaml': return `${next ? `${section}:\n` : ''}  ${setting()}`;
      case 'properties': return `${section}.${setting()}`;
      case 'json': return `${first ? '{' : ' '}"${fresh(() => r.pick(FLAGS))}": {"enabled": ${String(r.chance(0.5))}, "rollout": ${r.int(0, 100)}, "owner": "team-${r.pick(SERVICES)}"},`;
      case 'conf': return `server ${r.pick(SERVICES)}-${r.int(0, 9)}.${c.region}.internal:${r.int(1025, 65535)} weight=${r.int(1, 10)} max_fails=${r.int(1, 5)} fail_timeout=${r.int(5, 60)}s;`;
    }
  };
}

/** Labels and annotations as Helm (through Flux's helm-controller) or kustomize-controller put them on what they apply. */
function managedMeta(r: Prng, i: number, app: string, service: string): { labels: Record<string, string>; annotations: Record<string, string> } {
  if (r.chance(0.6)) {
    const chart = semver(r);
    return {
      labels: {
        app: `app-${i % 10}`, 'app.kubernetes.io/name': app, 'app.kubernetes.io/instance': app, 'app.kubernetes.io/version': semver(r),
        'app.kubernetes.io/managed-by': 'Helm', 'helm.sh/chart': `${app}-${chart}`, 'helm.toolkit.fluxcd.io/name': app, 'helm.toolkit.fluxcd.io/namespace': 'apps',
      },
      annotations: { 'meta.helm.sh/release-name': app, 'meta.helm.sh/release-namespace': 'apps' },
    };
  }
  return {
    labels: {
      app: `app-${i % 10}`, 'app.kubernetes.io/name': app, 'app.kubernetes.io/part-of': service,
      'kustomize.toolkit.fluxcd.io/name': `apps-${service}`, 'kustomize.toolkit.fluxcd.io/namespace': 'flux-system',
    },
    annotations: r.chance(0.3) ? { 'kustomize.toolkit.fluxcd.io/ssa': 'IfNotPresent' } : {},
  };
}

/** Text in PEM armour around `der` (base64 lines of 64). */
function pem(label: string, der: Buffer): string {
  const body = der.toString('base64').replace(/.{1,64}/g, '$&\n');
  return `-----BEGIN ${label}-----\n${body}-----END ${label}-----\n`;
}
const b64 = (text: string | Buffer): string => Buffer.from(text).toString('base64');

function configMap(r: Prng, c: Cluster, i: number, target: number): ShapedObject {
  const service = r.pick(SERVICES);
  const app = `${service}-${r.pick(COMPONENTS)}`;
  const files = [
    ['application.yaml', 'yaml'], ['application.properties', 'properties'], ['features.json', 'json'], ['upstreams.conf', 'conf'], ['logging.yaml', 'yaml'],
  ] as const;
  const chosen = files.filter(() => r.chance(0.55));
  if (chosen.length === 0) chosen.push(files[0]);
  const data: Record<string, string> = Object.fromEntries(chosen.map(([name]) => [name, '']));
  const object = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `obj-${i}`, namespace: 'apps', ...managedMeta(r, i, app, service) }, data };
  // Lines go round the files until the next would pass the target size.
  let size = JSON.stringify(object).length + SERVER_ADDS;
  const makers = chosen.map(([name, format]) => [name, lines(format, r, c)] as const);
  for (let k = 0; ; k++) {
    const maker = makers[k % makers.length];
    if (maker === undefined) break;
    const [name, next] = maker;
    const line = `${next()}\n`;
    const cost = jsonLength(line);
    if (size + cost > target) break;
    data[name] = (data[name] ?? '') + line;
    size += cost;
  }
  return { object };
}

function secret(r: Prng, i: number, target: number): ShapedObject {
  const service = r.pick(SERVICES);
  const app = `${service}-${r.pick(COMPONENTS)}`;
  const tls = r.chance(0.45);
  const data: Record<string, string> = {};
  const object = { apiVersion: 'v1', kind: 'Secret', metadata: { name: `obj-${i}`, namespace: 'apps', ...managedMeta(r, i, app, service) }, type: tls ? 'kubernetes.io/tls' : 'Opaque', data };
  if (tls) {
    // An EC P-256 key (121 bytes of DER) and a certificate whose DER fills the rest.
    data['tls.key'] = b64(pem('EC PRIVATE KEY', r.bytes(121)));
    const room = target - (JSON.stringify(object).length + SERVER_ADDS) - ',"tls.crt":""'.length;
    // base64(PEM) is 4/3 of the PEM; the PEM is 53 bytes of armour and 65/64 of base64(DER), 4/3 of the DER.
    let der = Math.floor(((room * 3) / 4 - 53) * (64 / 65) * (3 / 4));
    while (der > 64 && b64(pem('CERTIFICATE', Buffer.alloc(der))).length > room) der -= 3;
    data['tls.crt'] = b64(pem('CERTIFICATE', r.bytes(Math.max(der, 64))));
    return { object };
  }
  const user = `svc_${service}_${r.hex(4)}`;
  const password = r.base64Chars(r.int(20, 32));
  data.username = b64(user);
  data.password = b64(password);
  data['api-token'] = b64(`${r.pick(['ghp', 'glpat', 'xoxb', 'sk_live', 'tok'])}_${r.base64Chars(r.int(36, 48))}`);
  if (r.chance(0.6)) data['database-url'] = b64(`postgres://${user}:${password}@pg-${r.hex(6)}.db.internal:5432/${service}?sslmode=require`);
  if (r.chance(0.5)) data['client-secret'] = b64(r.hex(64));
  // A signing key (random bytes) takes what is left.
  const room = target - (JSON.stringify(object).length + SERVER_ADDS) - ',"signing-key":""'.length;
  data['signing-key'] = r.bytes(Math.max(16, Math.floor((room * 3) / 4) - 2)).toString('base64');
  return { object };
}

function helmRelease(r: Prng, c: Cluster, i: number, target: number, apiVersion: string): ShapedObject {
  const service = r.pick(SERVICES);
  const app = `${service}-${r.pick(COMPONENTS)}`;
  const chart = semver(r);
  const appVersion = semver(r);
  const port = r.int(1025, 9999);
  const env: Record<string, string> = { LOG_LEVEL: r.pick(['debug', 'info', 'warn']) };
  const object = {
    apiVersion, kind: 'HelmRelease',
    metadata: {
      name: `obj-${i}`, namespace: 'apps', finalizers: ['finalizers.fluxcd.io'],
      labels: { app: `app-${i % 10}`, 'app.kubernetes.io/part-of': service, 'kustomize.toolkit.fluxcd.io/name': `apps-${c.env}`, 'kustomize.toolkit.fluxcd.io/namespace': 'flux-system' },
    },
    spec: {
      interval: r.pick(['5m', '10m', '15m', '30m', '1h']), releaseName: app,
      chart: { spec: { chart: app, version: r.chance(0.7) ? chart : `>=${chart.split('.')[0] ?? '1'}.0.0`, sourceRef: { kind: 'HelmRepository', name: r.pick(['internal-charts', 'platform-charts', 'bitnami']), namespace: 'flux-system' }, interval: '1h' } },
      upgrade: { cleanupOnFail: true, remediation: { retries: r.int(1, 5) } },
      values: {
        replicaCount: r.int(1, 12),
        image: { repository: `${c.registry}/${service}/${app}`, tag: `${appVersion}-${r.hex(7)}`, pullPolicy: 'IfNotPresent' },
        resources: { requests: { cpu: `${r.int(1, 20) * 50}m`, memory: `${r.int(1, 16) * 128}Mi` } },
        service: { port },
        ingress: { enabled: r.chance(0.5), host: `${app}.${c.domain}` },
        env,
      },
    },
  };
  const revision = r.int(1, 60);
  const reason = revision === 1 ? 'InstallSucceeded' : 'UpgradeSucceeded';
  const message = `Helm ${revision === 1 ? 'install' : 'upgrade'} succeeded for release apps/${app}.v${revision} with chart ${app}@${chart}`;
  const first = time(r);
  const at = revision === 1 ? first : rfc3339(Date.parse(first) + r.int(60, 30 * 86_400) * 1000);
  const configDigest = `sha256:${r.hex(64)}`;
  const status = {
    conditions: [
      { type: 'Ready', status: 'True', observedGeneration: 1, lastTransitionTime: at, reason, message },
    ],
    helmChart: `flux-system/apps-${app}`,
    history: [{
      name: app, namespace: 'apps', version: revision, status: 'deployed', chartName: app, chartVersion: chart, appVersion,
      configDigest, digest: `sha256:${r.hex(64)}`, firstDeployed: first, lastDeployed: at,
    }],
    lastAttemptedConfigDigest: configDigest, lastAttemptedGeneration: 1, lastAttemptedReleaseAction: revision === 1 ? 'install' : 'upgrade',
    lastAttemptedRevision: chart, observedGeneration: 1,
  };
  // Environment variables for the chart's values fill the rest.
  let size = JSON.stringify(object).length + ',"status":'.length + JSON.stringify(status).length + SERVER_ADDS + GENERATION;
  for (;;) {
    const [key, value] = r.pick(SETTINGS);
    const name = `${r.pick(SECTIONS)}_${key}`.replace(/[A-Z]/g, (m) => `_${m}`).toUpperCase();
    const text = value(r, c);
    const cost = JSON.stringify(name).length + JSON.stringify(text).length + 2;
    if (size + cost > target) break;
    if (name in env) continue;
    env[name] = text;
    size += cost;
  }
  return { object, status };
}

const INVENTORY = [
  ['', 'ConfigMap'], ['', 'Service'], ['', 'ServiceAccount'], ['', 'Secret'], ['apps', 'Deployment'], ['apps', 'StatefulSet'], ['networking.k8s.io', 'Ingress'],
  ['policy', 'PodDisruptionBudget'], ['autoscaling', 'HorizontalPodAutoscaler'], ['monitoring.coreos.com', 'ServiceMonitor'],
  ['rbac.authorization.k8s.io', 'Role'], ['rbac.authorization.k8s.io', 'RoleBinding'], ['helm.toolkit.fluxcd.io', 'HelmRelease'],
] as const;

function kustomization(r: Prng, c: Cluster, i: number, target: number, apiVersion: string): ShapedObject {
  const service = r.pick(SERVICES);
  const revision = `main@sha1:${r.hex(40)}`;
  const substitute: Record<string, string> = { cluster_name: c.name, cluster_env: c.env, cluster_region: c.region, domain: c.domain, replicas: String(r.int(1, 6)) };
  const object = {
    apiVersion, kind: 'Kustomization',
    metadata: {
      name: `obj-${i}`, namespace: 'apps', finalizers: ['finalizers.fluxcd.io'],
      labels: { app: `app-${i % 10}`, 'app.kubernetes.io/part-of': service, 'kustomize.toolkit.fluxcd.io/name': 'flux-system', 'kustomize.toolkit.fluxcd.io/namespace': 'flux-system' },
    },
    spec: {
      interval: r.pick(['5m', '10m', '30m', '1h']), retryInterval: '2m', timeout: r.pick(['3m', '5m', '10m']),
      path: `./clusters/${c.env}/${c.region}/apps/${service}`, prune: true, wait: r.chance(0.5), targetNamespace: 'apps',
      sourceRef: { kind: 'GitRepository', name: r.pick(['fleet-infra', 'platform', 'apps']), namespace: 'flux-system' },
      dependsOn: [{ name: r.pick(['infra-controllers', 'infra-configs', 'crds']) }],
      postBuild: { substitute, substituteFrom: [{ kind: 'ConfigMap', name: 'cluster-vars' }, { kind: 'Secret', name: 'cluster-secrets', optional: true }] },
    },
  };
  const entries: { id: string; v: string }[] = [];
  const status = {
    conditions: [{ type: 'Ready', status: 'True', observedGeneration: 1, lastTransitionTime: time(r), reason: 'ReconciliationSucceeded', message: `Applied revision: ${revision}` }],
    inventory: { entries },
    lastAppliedRevision: revision, lastAttemptedRevision: revision, observedGeneration: 1,
  };
  // Inventory entries (`namespace_name_group_Kind`), with now and then a substitution, fill the rest.
  let size = JSON.stringify(object).length + ',"status":'.length + JSON.stringify(status).length + SERVER_ADDS + GENERATION;
  for (;;) {
    if (r.chance(0.2)) {
      const [key, value] = r.pick(SETTINGS);
      const name = `${service}_${key}`.toLowerCase();
      const text = value(r, c);
      const cost = JSON.stringify(name).length + JSON.stringify(text).length + 2;
      if (size + cost > target) break;
      if (!(name in substitute)) {
        substitute[name] = text;
        size += cost;
      }
      continue;
    }
    const [group, kind] = r.pick(INVENTORY);
    const entry = { id: `apps_${service}-${r.pick(COMPONENTS)}${r.chance(0.3) ? `-${r.int(0, 9)}` : ''}_${group}_${kind}`, v: kind === 'HorizontalPodAutoscaler' ? 'v2' : kind === 'HelmRelease' ? 'v2' : 'v1' };
    const cost = JSON.stringify(entry).length + 1;
    if (size + cost > target) break;
    entries.push(entry);
    size += cost;
  }
  return { object, status };
}

/** Object `index` of `kind` in cluster `cluster` (0-based), deterministic. */
export function realisticObject(kind: string, apiVersion: string, cluster: number, index: number): ShapedObject {
  const r = new Prng(seedOf(cluster, ...Buffer.from(kind), index));
  const target = r.int(1_880, 2_180);
  const c = clusterOf(cluster);
  switch (kind) {
    case 'ConfigMap': return configMap(r, c, index, target);
    case 'Secret': return secret(r, index, target);
    case 'HelmRelease': return helmRelease(r, c, index, target, apiVersion);
    case 'Kustomization': return kustomization(r, c, index, target, apiVersion);
    default: throw new TypeError(`no realistic shape for kind ${kind}`);
  }
}
