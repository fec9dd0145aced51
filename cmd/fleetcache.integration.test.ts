import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadAll } from 'js-yaml';
import { useClusters } from '../e2e/harness/index.ts';
import { rawRequest } from '../e2e/harness/api.ts';
import { selfSignedCertificate } from '../lib/manager/index.ts';
import { kustomizationCrd } from '../fixtures/crds/index.ts';
import { eventually } from '../e2e/harness/index.ts';
import { pipelineCrd } from '../lib/pipeline/index.ts';

const root = fileURLToPath(new URL('../', import.meta.url));
const namespace = 'fleetcache-system';

/** The service as a child process, with its stderr parsed as JSON log lines. */
class Service {
  readonly child: ChildProcess;
  readonly lines: Record<string, unknown>[] = [];
  stderr = '';
  readonly exited: Promise<number | null>;

  constructor(args: readonly string[]) {
    this.child = spawn(process.execPath, [path.join(root, 'cmd/fleetcache.ts'), ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, KUBECONFIG: '' } });
    this.exited = new Promise((resolve) => this.child.once('exit', (code) => { resolve(code); }));
    let partial = '';
    this.child.stderr?.on('data', (chunk: Buffer) => {
      this.stderr += chunk.toString('utf8');
      partial += chunk.toString('utf8');
      const parts = partial.split('\n');
      partial = parts.pop() ?? '';
      for (const line of parts) this.lines.push(JSON.parse(line) as Record<string, unknown>);
    });
  }

  async url(server: 'probes' | 'metrics'): Promise<string> {
    const line = await eventually(() => `the ${server} server listens:\n${this.stderr}`, () => this.lines.find((l) => l.msg === 'listening' && l.server === server), { timeoutMs: 10_000, pollMs: 25 });
    return String(line.url);
  }
}

describe('the fleetcache process', () => {
  const fixture = useClusters(1);
  const dir = mkdtempSync(path.join(tmpdir(), 'fleetcache-cmd-'));
  const kubeconfigPath = path.join(dir, 'kubeconfig');
  let token = '';
  /** Bearer tokens of a ServiceAccount bound to fleetcache-metrics-reader, and of one with no RBAC. */
  let readerToken = '';
  let nobodyToken = '';
  const services: Service[] = [];
  after(() => {
    for (const s of services) if (s.child.exitCode === null) s.child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  const cluster = (): NonNullable<(typeof fixture.clusters)[0]> => {
    const c = fixture.clusters[0];
    return c;
  };

  before(async () => {
    const c = cluster();
    await c.installCRDs([pipelineCrd, kustomizationCrd]);
    // The service runs as the ServiceAccount of config/rbac, with exactly the RBAC shipped there.
    const kubeconfig = await c.restrictedKubeconfig({ namespace, serviceAccount: 'fleetcache' });
    token = /"?token"?: *"?([^"\s]+)"?/.exec(kubeconfig)?.[1] ?? '';
    assert.ok(token.length > 20, 'the restricted kubeconfig carries a bearer token');
    writeFileSync(kubeconfigPath, kubeconfig);
    for (const file of ['role.yaml', 'role_binding.yaml', 'leader_election_role.yaml', 'leader_election_role_binding.yaml', 'metrics_auth_role.yaml', 'metrics_auth_role_binding.yaml', 'metrics_reader_role.yaml']) {
      for (const doc of loadAll(readFileSync(path.join(root, 'config/rbac', file), 'utf8')) as { kind: string; metadata: { name: string; namespace?: string }; subjects?: { namespace: string }[] }[]) {
        if (doc.metadata.namespace !== undefined) doc.metadata.namespace = namespace; // what config/default's kustomization does
        for (const s of doc.subjects ?? []) s.namespace = namespace;
        const plural = { ClusterRole: 'clusterroles', ClusterRoleBinding: 'clusterrolebindings', Role: 'roles', RoleBinding: 'rolebindings' }[doc.kind];
        const base = `/apis/rbac.authorization.k8s.io/v1${doc.metadata.namespace === undefined ? '' : `/namespaces/${namespace}`}/${plural ?? ''}`;
        const res = await c.request('POST', base, doc);
        assert.ok(res.statusCode === 201 || res.statusCode === 409, `${doc.kind} ${doc.metadata.name}: ${res.statusCode}`);
      }
    }
    const tokenOf = (yaml: string): string => /"?token"?: *"?([^"\s]+)"?/.exec(yaml)?.[1] ?? '';
    readerToken = tokenOf(await c.restrictedKubeconfig({ namespace: 'monitoring', serviceAccount: 'prometheus' }));
    nobodyToken = tokenOf(await c.restrictedKubeconfig({ namespace: 'monitoring', serviceAccount: 'nobody' }));
    const binding = await c.request('POST', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      metadata: { name: 'prometheus-fleetcache-metrics' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'fleetcache-metrics-reader' },
      subjects: [{ kind: 'ServiceAccount', name: 'prometheus', namespace: 'monitoring' }],
    });
    assert.equal(binding.statusCode, 201, JSON.stringify(binding.body));
    await c.request('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'apps' } });
    const pipeline = {
      apiVersion: 'fleetcache.dev/v1alpha1',
      kind: 'Pipeline',
      metadata: { namespace: 'apps', name: 'web' },
      spec: {
        appRef: { apiVersion: 'kustomize.toolkit.fluxcd.io/v1', kind: 'Kustomization', name: 'web' },
        environments: [{ name: 'dev', targets: [{ namespace: 'web-dev' }] }, { name: 'prod', targets: [{ namespace: 'web-prod' }] }],
        promotion: { strategy: 'patch', patch: { path: '/spec/path' } },
        revisionPath: '/spec/path',
      },
    };
    const created = await c.request('POST', '/apis/fleetcache.dev/v1alpha1/namespaces/apps/pipelines', pipeline);
    assert.equal(created.statusCode, 201, JSON.stringify(created.body));
  }, { timeout: 120_000 });

  const lease = async (): Promise<string | undefined> => {
    const res = await cluster().request('GET', `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases/fleetcache-leader`);
    return res.statusCode === 200 ? (res.body as { spec: { holderIdentity?: string } }).spec.holderIdentity ?? '' : undefined;
  };

  it('serves probes, metrics and caches under least-privilege RBAC, then shuts down cleanly on SIGTERM', async () => {
    const service = new Service(['--kubeconfig', kubeconfigPath, '--allow-cross-namespace-targets', '--leader-elect', '--leader-election-namespace', namespace, '--health-probe-bind-address', '127.0.0.1:0', '--metrics-bind-address', '127.0.0.1:0', '--log-level', 'debug']);
    services.push(service);
    const probes = await service.url('probes');
    const metrics = await service.url('metrics');
    assert.equal((await fetch(`${probes}/healthz`)).status, 200);
    await eventually('readiness', async () => ((await fetch(`${probes}/readyz`)).status === 200 ? true : undefined));
    const holder = await eventually('the lease', async () => { const h = await lease(); return h === '' ? undefined : h; });
    assert.match(holder, /_[0-9a-f-]{36}$/, 'hostname_uuid');

    // The controller reconciled the Pipeline with the shipped RBAC: it wrote status.
    const status = await eventually('Pipeline status', async () => {
      const res = await cluster().request('GET', '/apis/fleetcache.dev/v1alpha1/namespaces/apps/pipelines/web');
      const s = (res.body as { status?: { conditions?: unknown[] } }).status;
      return s?.conditions !== undefined && s.conditions.length > 0 ? s : undefined;
    });
    assert.ok(status.conditions !== undefined);

    // Metrics are HTTPS behind TokenReview + SubjectAccessReview by default (self-signed here).
    const scrape = async (route: string): Promise<string> => {
      const res = await rawRequest(`${metrics}${route}`, { headers: { authorization: `Bearer ${readerToken}` }, insecure: true });
      assert.equal(res.statusCode, 200, res.text);
      return res.text;
    };
    assert.match(metrics, /^https:/);
    const text = await scrape('/metrics');
    assert.match(text, /^fleetcache_leader 1$/m);
    assert.match(text, /^workqueue_adds_total\{controller="pipeline",name="owners"\} [1-9]/m);
    assert.match(text, /^controller_runtime_reconcile_total\{controller="pipeline",result="success"\} [1-9]/m);
    const caches = await eventually('a cache', async () => {
      const body = JSON.parse(await scrape('/debug/caches')) as { caches: { cluster: string; gvk: string; synced: boolean }[] };
      return body.caches.find((c) => c.gvk === 'kustomize.toolkit.fluxcd.io/v1, Kind=Kustomization' && c.synced);
    });
    assert.equal(caches.cluster, 'local');

    service.child.kill('SIGTERM');
    assert.equal(await service.exited, 0, service.stderr);
    assert.equal(await lease(), '', 'the lease was released');
    assert.ok(service.lines.some((l) => l.msg === 'stopped' && l.graceful === true));
    await assert.rejects(fetch(`${probes}/healthz`), 'the servers are closed');
    // JSON lines only, and never the bearer token of the kubeconfig, even at debug level.
    assert.ok(!service.stderr.includes(token));
  });

  it('authenticates /metrics and /debug/caches as kubebuilder v4 does; probes stay plain', async () => {
    const certDir = path.join(dir, 'metrics-certs');
    const own = selfSignedCertificate({ commonName: 'fleetcache-metrics-test', hosts: ['127.0.0.1'] });
    mkdirSync(certDir);
    writeFileSync(path.join(certDir, 'tls.crt'), own.cert);
    writeFileSync(path.join(certDir, 'tls.key'), own.key, { mode: 0o600 });
    const service = new Service(['--kubeconfig', kubeconfigPath, '--health-probe-bind-address', '127.0.0.1:0', '--metrics-bind-address', '127.0.0.1:0', '--metrics-cert-path', certDir]);
    services.push(service);
    const probes = await service.url('probes');
    const metrics = await service.url('metrics');
    // The certificate from --metrics-cert-path: a client trusting exactly it connects.
    const get = (route: string, bearer?: string): Promise<{ statusCode: number; text: string }> =>
      rawRequest(`${metrics}${route}`, { ca: own.cert, headers: bearer === undefined ? {} : { authorization: `Bearer ${bearer}` } });
    for (const route of ['/metrics', '/debug/caches']) {
      assert.deepEqual(await get(route), { statusCode: 401, text: 'Unauthorized\n' }, `${route} without a token`);
      assert.deepEqual(await get(route, 'not-a-real-token'), { statusCode: 401, text: 'Unauthorized\n' }, `${route} with a made-up token`);
      assert.deepEqual(await get(route, nobodyToken), { statusCode: 403, text: 'Authorization denied for user system:serviceaccount:monitoring:nobody\n' }, `${route} without RBAC`);
      assert.equal((await get(route, readerToken)).statusCode, 200, `${route} as a metrics reader`);
    }
    assert.match((await get('/metrics', readerToken)).text, /^controller_runtime_reconcile_total\{/m);
    // The reviews themselves are requests to the management cluster, counted as client-go counts them.
    assert.match((await get('/metrics', readerToken)).text, /^rest_client_requests_total\{cluster="local",code="201",method="POST"\} [1-9]/m);
    await assert.rejects(fetch(`${metrics.replace('https:', 'http:')}/metrics`), 'no plain HTTP on the metrics port');
    assert.equal((await fetch(`${probes}/healthz`)).status, 200, 'probes need no token');
    service.child.kill('SIGTERM');
    assert.equal(await service.exited, 0, service.stderr);

    // --metrics-secure=false: plain HTTP to anyone, and a warning saying so.
    const open = new Service(['--kubeconfig', kubeconfigPath, '--health-probe-bind-address', '127.0.0.1:0', '--metrics-bind-address', '127.0.0.1:0', '--metrics-secure=false']);
    services.push(open);
    const plain = await open.url('metrics');
    assert.match(plain, /^http:/);
    assert.equal((await fetch(`${plain}/metrics`)).status, 200);
    assert.ok(open.lines.some((l) => l.level === 'warn' && String(l.msg).includes('--metrics-secure=false')));
    open.child.kill('SIGTERM');
    assert.equal(await open.exited, 0, open.stderr);
  });

  it('exits at once with status 1 on a second signal', async () => {
    const service = new Service(['--kubeconfig', kubeconfigPath, '--health-probe-bind-address', '127.0.0.1:0', '--metrics-bind-address', '0']);
    services.push(service);
    const probes = await service.url('probes');
    await eventually('readiness', async () => ((await fetch(`${probes}/readyz`)).status === 200 ? true : undefined));
    // Two different signals: two of the same kind may be merged into one by the kernel.
    service.child.kill('SIGTERM');
    service.child.kill('SIGINT');
    assert.equal(await service.exited, 1);
  });

  it('answers --help and -h on stdout, and a bad flag with one line naming it on stderr and status 2', async () => {
    const run = (args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> => new Promise((resolve) => {
      const child = spawn(process.execPath, [path.join(root, 'cmd/fleetcache.ts'), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (c: Buffer) => { stdout += c.toString('utf8'); });
      child.stderr.on('data', (c: Buffer) => { stderr += c.toString('utf8'); });
      child.once('close', (code) => { resolve({ code, stdout, stderr }); });
    });
    const { usage } = await import('./flags.ts');
    assert.deepEqual(await run(['--help']), { code: 0, stdout: usage(), stderr: '' });
    assert.deepEqual(await run(['-h']), { code: 0, stdout: usage(), stderr: '' });
    assert.deepEqual(await run(['--concurrency', 'many']), { code: 2, stdout: '', stderr: 'fleetcache: --concurrency must be an integer from 1 to 1000, got "many"\nsee fleetcache --help\n' });
  });
});
