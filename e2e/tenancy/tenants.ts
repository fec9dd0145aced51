// Helpers for the tenancy tests: the service's own RBAC exactly as config/rbac ships it, tenants
// with namespaced Roles, requests made as a ServiceAccount, and the service as a child process whose
// every log line is kept (the tests search all of them for planted markers).
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { loadAll } from 'js-yaml';
import { adminApi, rawRequest, type AdminApi, type AdminResponse } from '../harness/api.ts';
import { freePort, type TestCluster } from '../harness/index.ts';

const root = new URL('../../', import.meta.url).pathname;

/** A Kubernetes RBAC rule. */
export interface PolicyRule {
  readonly apiGroups: readonly string[];
  readonly resources: readonly string[];
  readonly verbs: readonly string[];
  readonly resourceNames?: readonly string[];
}

/** Any request that must succeed (2xx), or one of `also`. */
export async function must(api: AdminApi, method: string, path: string, body?: unknown, also: readonly number[] = []): Promise<AdminResponse> {
  const res = await api.request(method, path, body);
  assert.ok((res.statusCode >= 200 && res.statusCode < 300) || also.includes(res.statusCode), `${method} ${path}: HTTP ${res.statusCode} ${JSON.stringify(res.body)}`);
  return res;
}

/** The rules of config/rbac's ClusterRole, as shipped. */
export function shippedClusterRoleRules(): readonly PolicyRule[] {
  const docs = loadAll(readFileSync(join(root, 'config/rbac/role.yaml'), 'utf8')) as { kind: string; rules: PolicyRule[] }[];
  const role = docs.find((d) => d.kind === 'ClusterRole');
  assert.ok(role !== undefined, 'config/rbac/role.yaml has a ClusterRole');
  return role.rules;
}

/**
 * Creates the service's ServiceAccount in `namespace` with exactly config/rbac's roles and
 * bindings, every file its kustomization lists (namespaces rewritten as config/default's
 * kustomization does); returns its kubeconfig.
 */
export async function installServiceRbac(cluster: TestCluster, namespace: string): Promise<string> {
  const kubeconfig = await cluster.restrictedKubeconfig({ namespace, serviceAccount: 'fleetcache' });
  // Every resource kustomize would apply, bar the ServiceAccount (made above, with its token).
  const { resources } = loadAll(readFileSync(join(root, 'config/rbac/kustomization.yaml'), 'utf8'))[0] as { resources: string[] };
  for (const file of resources.filter((r) => r !== 'service_account.yaml')) {
    for (const doc of loadAll(readFileSync(join(root, 'config/rbac', file), 'utf8')) as { kind: string; metadata: { name: string; namespace?: string }; subjects?: { namespace: string }[] }[]) {
      if (doc.metadata.namespace !== undefined) doc.metadata.namespace = namespace;
      for (const s of doc.subjects ?? []) s.namespace = namespace;
      const plural = { ClusterRole: 'clusterroles', ClusterRoleBinding: 'clusterrolebindings', Role: 'roles', RoleBinding: 'rolebindings' }[doc.kind];
      assert.ok(plural !== undefined, `unexpected ${doc.kind} in config/rbac/${file}`);
      const base = `/apis/rbac.authorization.k8s.io/v1${doc.metadata.namespace === undefined ? '' : `/namespaces/${namespace}`}/${plural}`;
      await must(cluster, 'POST', base, doc, [409]);
    }
  }
  return kubeconfig;
}

/** A ServiceAccount with a Role of `rules` in its own namespace; returns its kubeconfig. */
export async function namespacedAccount(cluster: TestCluster, namespace: string, name: string, rules: readonly PolicyRule[]): Promise<string> {
  const kubeconfig = await cluster.restrictedKubeconfig({ namespace, serviceAccount: name });
  await must(cluster, 'POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${namespace}/roles`, { metadata: { name, namespace }, rules }, [409]);
  await must(cluster, 'POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${namespace}/rolebindings`, {
    metadata: { name, namespace },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
    subjects: [{ kind: 'ServiceAccount', name, namespace }],
  }, [409]);
  return kubeconfig;
}

/** Requests made with the bearer token of `kubeconfig` (a harness kubeconfig, which is JSON). */
export function apiAs(cluster: TestCluster, kubeconfig: string): AdminApi {
  const config = JSON.parse(kubeconfig) as { users: { user: { token: string } }[] };
  const token = config.users[0]?.user.token;
  assert.ok(token !== undefined && token !== '');
  return adminApi(`${cluster.name}-as-sa`, cluster.server, cluster.caData, (method, path, body) => rawRequest(`${cluster.server}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, accept: 'application/json', ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    ca: cluster.caData,
  }));
}

/** The service as a child process (`node cmd/fleetcache.ts`), every stderr line kept. */
export interface ServiceRun {
  /** All of stderr so far. */
  readonly output: () => string;
  readonly exited: Promise<number | null>;
  /** SIGTERM, then the exit status. */
  stop(): Promise<number | null>;
}

/** Starts the service with `kubeconfig` and `args`; resolves once /readyz answers 200. */
export async function runService(name: string, kubeconfig: string, args: readonly string[]): Promise<ServiceRun> {
  const dir = await mkdtemp(join(tmpdir(), `fleetcache-${name}-`));
  const path = join(dir, 'kubeconfig');
  await writeFile(path, kubeconfig, { mode: 0o600 });
  const probePort = await freePort();
  const child: ChildProcess = spawn(process.execPath, [
    join(root, 'cmd/fleetcache.ts'),
    `--kubeconfig=${path}`,
    `--health-probe-bind-address=127.0.0.1:${probePort}`,
    '--metrics-bind-address=0',
    '--log-level=debug',
    '--cache-gc-grace-period=1s',
    ...args,
  ], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, KUBECONFIG: '' } });
  let output = '';
  child.stderr?.on('data', (chunk: Buffer) => { output += chunk.toString('utf8'); });
  const exited = new Promise<number | null>((resolve) => { child.once('exit', (code) => { resolve(code); }); });
  void exited.then(() => rm(dir, { recursive: true, force: true }));
  const run: ServiceRun = {
    output: () => output,
    exited,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      return exited;
    },
  };
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`service ${name} exited with ${child.exitCode}:\n${output}`);
    if (await fetch(`http://127.0.0.1:${probePort}/readyz`).then((r) => r.ok, () => false)) return run;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      await exited;
      throw new Error(`service ${name} not ready within 60 s:\n${output}`);
    }
    await delay(100);
  }
}

/**
 * After a failed test, the service's last `lines` log lines on stderr (the reporter shows them
 * with the failure): a wait that timed out says nothing of why without them.
 */
export function dumpServiceLogOnFailure(context: { readonly name: string }, service: ServiceRun | undefined, lines = 200): void {
  // afterEach runs for tests, never suites; SuiteContext has no `passed`.
  if (!('passed' in context) || context.passed === true || service === undefined) return;
  const tail = service.output().trimEnd().split('\n').slice(-lines).join('\n');
  process.stderr.write(`--- the service's last ${lines} log lines after "${context.name}" failed:\n${tail}\n---\n`);
}

/**
 * Everything a tenant could be shown: every Pipeline (status included) and every Event in every
 * namespace, read with admin rights, as one string to search.
 */
export async function everythingShown(cluster: TestCluster): Promise<string> {
  const pipelines = await must(cluster, 'GET', '/apis/fleetcache.dev/v1alpha1/pipelines');
  const events = await must(cluster, 'GET', '/api/v1/events');
  return JSON.stringify(pipelines.body) + JSON.stringify(events.body);
}

/** HelmReleases' API path. */
export const HR = '/apis/helm.toolkit.fluxcd.io/v2';

export interface Release { readonly metadata: { readonly generation: number }; readonly spec: { readonly chart: { readonly spec: { readonly version: string } } }; readonly status?: { readonly history?: readonly { readonly chartVersion: string }[] } }

export function helmRelease(namespace: string, version: string, name = 'podinfo'): object {
  return { apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease', metadata: { name, namespace }, spec: { chart: { spec: { chart: name, version } } } };
}

export async function release(cluster: TestCluster, namespace: string, name = 'podinfo'): Promise<Release> {
  return (await must(cluster, 'GET', `${HR}/namespaces/${namespace}/helmreleases/${name}`)).body as Release;
}

/** Sets a HelmRelease's chart version, reading again after a conflict (the Flux stand-in writes status). */
export async function setVersion(cluster: TestCluster, namespace: string, version: string, name = 'podinfo'): Promise<void> {
  for (;;) {
    const current = await release(cluster, namespace, name);
    const res = await cluster.request('PUT', `${HR}/namespaces/${namespace}/helmreleases/${name}`, { ...current, spec: { chart: { spec: { ...current.spec.chart.spec, version } } } });
    if (res.statusCode === 200) return;
    assert.equal(res.statusCode, 409, JSON.stringify(res.body));
  }
}

/** The tenant whose Pipelines the tenancy scenarios run, and its neighbour. */
export const TENANT = 'team-a';
export const OTHER = 'team-b';
export const PIPELINES = `/apis/fleetcache.dev/v1alpha1/namespaces/${TENANT}/pipelines`;

/** A Pipeline of the tenant promoting its HelmRelease `podinfo` by patch; `spec` completes it (environments…). */
export function tenantPipeline(name: string, spec: Record<string, unknown>): object {
  return {
    apiVersion: 'fleetcache.dev/v1alpha1',
    kind: 'Pipeline',
    metadata: { name, namespace: TENANT },
    spec: {
      appRef: { apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease', name: 'podinfo' },
      promotion: { strategy: 'patch', patch: { path: '/spec/chart/spec/version' } },
      ...spec,
    },
  };
}
