// The service's wiring, on simulated API servers: main() run in-process with real flags, and the
// registry it builds on a fake clock. What is checked here is what the flags and cmd/main.ts decide
// (which cluster references resolve, which kubeconfigs are refused, that credentials are re-checked
// by default); the library's own behaviour is tested in lib/.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { startSimulatedClusters, type KindDefinition, type KubeObject, type SimulatedCluster } from '../fixtures/index.ts';
import { eventually } from '../e2e/harness/index.ts';
import { defaultControllerRateLimiter, RateLimitingWorkQueue } from '../lib/queue/index.ts';
import type { OwnerKey } from '../lib/registry/index.ts';
import { FakeClock, noopLogger } from '../lib/util/index.ts';
import { parseExposition } from './exposition.test-util.ts';
import { parseFlags, type Config } from './flags.ts';
import { main, serviceClusters, serviceRegistry } from './main.ts';
import { kubeConfigFrom, PIPELINE_KIND } from '../fixtures/support/index.ts';

const helmReleaseKind: KindDefinition = { group: 'helm.toolkit.fluxcd.io', version: 'v2', kind: 'HelmRelease', plural: 'helmreleases', namespaced: true, status: true };
const eventKind: KindDefinition = { group: '', version: 'v1', kind: 'Event', plural: 'events', namespaced: true };
const configMaps = { group: '', version: 'v1', kind: 'ConfigMap' };

function config(args: readonly string[]): Config {
  const invocation = parseFlags(args);
  assert.equal(invocation.kind, 'run');
  return invocation.config;
}

function secret(namespace: string, name: string, kubeconfig: string): KubeObject {
  return { apiVersion: 'v1', kind: 'Secret', metadata: { namespace, name }, data: { value: Buffer.from(kubeconfig).toString('base64') } };
}

/** A one-environment Pipeline in `apps` whose only target is the HelmRelease `podinfo` in the cluster `clusterRef` names. */
function pipeline(name: string, clusterRef: { readonly kind: string; readonly name: string }): KubeObject {
  return {
    apiVersion: 'fleetcache.dev/v1alpha1',
    kind: 'Pipeline',
    metadata: { namespace: 'apps', name },
    spec: {
      appRef: { apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease', name: 'podinfo' },
      environments: [{ name: 'prod', targets: [{ namespace: 'apps', clusterRef }] }],
      promotion: { strategy: 'patch', patch: { path: '/spec/chart/spec/version' } },
    },
  };
}

/**
 * `cluster`'s kubeconfig with its bearer token replaced by an exec credential plugin that prints
 * the same token: accepted, it authenticates; refused, nothing runs.
 */
function execKubeconfig(cluster: SimulatedCluster): string {
  const script = `process.stdout.write(JSON.stringify({ apiVersion: 'client.authentication.k8s.io/v1beta1', kind: 'ExecCredential', status: { token: ${JSON.stringify(cluster.token)} } }))`;
  const exec = [
    '    exec:',
    '      apiVersion: client.authentication.k8s.io/v1beta1',
    `      command: ${JSON.stringify(process.execPath)}`,
    `      args: [${JSON.stringify('-e')}, ${JSON.stringify(script)}]`,
    '      interactiveMode: Never',
  ].join('\n');
  const token = `    token: ${JSON.stringify(cluster.token)}`;
  assert.ok(cluster.kubeconfig.includes(token));
  return cluster.kubeconfig.replace(token, exec);
}

interface TargetView { readonly cluster: string; readonly readable?: boolean; readonly error?: string }

describe('the service wiring', () => {
  let management: SimulatedCluster;
  let remote: SimulatedCluster;
  const dir = mkdtempSync(path.join(tmpdir(), 'fleetcache-main-'));
  const kubeconfigPath = path.join(dir, 'kubeconfig');

  before(async () => {
    [management, remote] = await startSimulatedClusters(2, { namePrefix: 'wiring', namespaces: ['apps'], kinds: [PIPELINE_KIND, helmReleaseKind, eventKind] });
    writeFileSync(kubeconfigPath, management.kubeconfig, { mode: 0o600 });
    remote.store.create({ apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease', metadata: { namespace: 'apps', name: 'podinfo' }, spec: { chart: { spec: { version: '1.0.0' } } } });
    // Cluster API's convention: the kubeconfig of Cluster `remote` is key `value` of Secret `remote-kubeconfig`.
    management.store.create(secret('apps', 'remote-kubeconfig', remote.kubeconfig));
    management.store.create(secret('apps', 'exec-kubeconfig', execKubeconfig(remote)));
    management.store.create(pipeline('capi', { kind: 'Cluster', name: 'remote' }));
    management.store.create(pipeline('exec', { kind: 'Secret', name: 'exec-kubeconfig' }));
  });
  after(async () => {
    await Promise.all([management.close(), remote.close()]);
    rmSync(dir, { recursive: true, force: true });
  });

  /** The prod target of a Pipeline as its status reports it, once the service has read it (or failed to). */
  async function target(name: string): Promise<TargetView> {
    return eventually(`the status of Pipeline ${name} reports its target`, () => {
      const status = management.store.get({ apiVersion: 'fleetcache.dev/v1alpha1', kind: 'Pipeline', namespace: 'apps', name })?.status as { environments?: { targets: TargetView[] }[] } | undefined;
      const seen = status?.environments?.[0]?.targets[0];
      return seen?.readable === undefined ? undefined : seen;
    }, 20_000);
  }

  /** Runs main() in-process with `flags` until `body` returns, then stops it with the signal, as SIGTERM does. */
  async function withService(flags: readonly string[], body: (logs: () => string) => Promise<void>): Promise<void> {
    for (const name of ['capi', 'exec']) {
      const current = management.store.get({ apiVersion: 'fleetcache.dev/v1alpha1', kind: 'Pipeline', namespace: 'apps', name });
      assert.ok(current !== undefined);
      management.store.updateStatus({ ...current, status: {} }); // each run starts from a blank status
    }
    const stop = new AbortController();
    const stderr = new PassThrough();
    let logs = '';
    stderr.on('data', (chunk: Buffer) => { logs += chunk.toString('utf8'); });
    const status = main({
      argv: [`--kubeconfig=${kubeconfigPath}`, '--metrics-bind-address=0', '--health-probe-bind-address=0', ...flags],
      env: {},
      stdout: new PassThrough(),
      stderr,
      signal: stop.signal,
    });
    try {
      await body(() => logs);
    } catch (err) {
      throw new Error(`${err instanceof Error ? err.message : String(err)}\nservice logs:\n${logs}`, { cause: err });
    } finally {
      stop.abort();
      assert.equal(await status, 0, logs);
    }
  }

  it('resolves a Cluster API reference (kind: Cluster) through the <name>-kubeconfig Secret\'s value key', async () => {
    await withService([], async () => {
      const seen = await target('capi');
      assert.equal(seen.cluster, 'cluster-api:apps/remote');
      assert.equal(seen.readable, true, `the target was read: ${seen.error ?? ''}`);
    });
  });

  it('refuses an exec kubeconfig by default, with the typed error in the Pipeline status', async () => {
    await withService([], async () => {
      const seen = await target('exec');
      assert.equal(seen.readable, false);
      // KubeconfigRefusedError's message: the cluster, what was refused and the rule.
      assert.match(seen.error ?? '', /^cluster secret:apps\/exec-kubeconfig: refused user "[^"]+" exec command ".+": rule "exec"/);
    });
  });

  it('refuses new target caches over --memory-budget, with the typed error in the Pipeline status', async () => {
    // 1 MiB: any process is over it. The Pipelines' own cache is a held reader, never refused.
    await withService(['--memory-budget=1'], async () => {
      const seen = await target('capi');
      assert.equal(seen.readable, false);
      assert.match(seen.error ?? '', /^cluster cluster-api:apps\/remote, helm\.toolkit\.fluxcd\.io\/v2, Kind=HelmRelease: new cache refused: the process's resident memory \(\d+ MiB\) is over its budget of 1 MiB/);
    });
  });

  it('accepts an exec kubeconfig with --allow-exec-kubeconfigs (the plugin runs and authenticates)', async () => {
    await withService(['--allow-exec-kubeconfigs'], async () => {
      const seen = await target('exec');
      assert.equal(seen.readable, true, `the target was read: ${seen.error ?? ''}`);
    });
  });

  it('serves controller-runtime and client-go metrics from a real run (--metrics-secure=false)', async () => {
    await withService(['--metrics-secure=false', '--metrics-bind-address=127.0.0.1:0'], async (logs) => {
      const seen = await target('capi');
      assert.equal(seen.readable, true, `the target was read: ${seen.error ?? ''}`);
      const url = await eventually('the metrics server\'s address', () => logs().split('\n').filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as { server?: string; url?: string })
        .find((l) => l.server === 'metrics' && l.url !== undefined)?.url);
      assert.match(url, /^http:/);
      const res = await fetch(`${url}/metrics`);
      assert.equal(res.status, 200);
      const m = parseExposition(await res.text());
      const at = (name: string, labels: Record<string, string>): number => {
        const value = m.value(name, labels);
        assert.ok(value !== undefined, `${name}${JSON.stringify(labels)} is missing`);
        return value;
      };
      assert.ok(at('controller_runtime_reconcile_total', { controller: 'pipeline', result: 'success' }) >= 1);
      assert.ok(at('controller_runtime_reconcile_time_seconds_count', { controller: 'pipeline' }) >= 1);
      assert.equal(at('controller_runtime_max_concurrent_reconciles', { controller: 'pipeline' }), 4, 'the --concurrency default');
      assert.ok(at('workqueue_adds_total', { controller: 'pipeline', name: 'owners' }) >= 1);
      // The remote cluster, reached through the registry's connection, and the management cluster.
      assert.ok(at('rest_client_requests_total', { cluster: 'cluster-api:apps/remote', code: '200', method: 'GET' }) >= 1);
      assert.ok(at('rest_client_requests_total', { cluster: 'local', code: '200', method: 'GET' }) >= 1);
      assert.ok(at('rest_client_request_duration_seconds_count', { cluster: 'cluster-api:apps/remote', verb: 'GET' }) >= 1);
      assert.equal(at('fleetcache_cached_objects', { cluster: 'cluster-api:apps/remote', group: 'helm.toolkit.fluxcd.io', version: 'v2', kind: 'HelmRelease' }), 1);
      assert.equal(at('leader_election_master_status', { name: 'fleetcache-leader' }), 1, 'without --leader-elect this process leads');
      assert.equal(m.type('nodejs_eventloop_lag_seconds'), 'gauge');
    });
  });

  it('re-checks credentials periodically by default: a rotated Secret takes effect after 60 s, unprompted', async (t) => {
    const [a, b] = await startSimulatedClusters(2, { namePrefix: 'rotation', namespaces: ['apps'] });
    t.after(() => Promise.all([a.close(), b.close()]));
    for (const [cluster, name] of [[a, 'a'], [b, 'b']] as const) {
      cluster.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { namespace: 'apps', name: 'settings' }, data: { cluster: name } });
    }
    const secretRef = { apiVersion: 'v1', kind: 'Secret', namespace: 'apps', name: 'rotating-kubeconfig' };
    management.store.create(secret('apps', 'rotating-kubeconfig', a.kubeconfig));

    const clock = new FakeClock(Date.now());
    const kubeConfig = kubeConfigFrom(management.kubeconfig);
    const queue = new RateLimitingWorkQueue<OwnerKey>({ name: 'owners', clock, rateLimiter: defaultControllerRateLimiter({ clock }) });
    // The flags' defaults, as a bare `fleetcache` runs.
    const clusters = serviceClusters(config([]), { kubeConfig, logger: noopLogger, clock });
    t.after(() => clusters.close());
    const registry = serviceRegistry(config([]), { clusters, queue, logger: noopLogger, clock });
    t.after(() => registry.close());

    const reader = await registry.watchTargetAndGetReader({ kind: 'secret', name: 'rotating-kubeconfig' }, { gvk: configMaps, namespace: 'apps', name: 'settings' }, { namespace: 'apps', name: 'web' });
    await reader.waitForSync(AbortSignal.timeout(20_000));
    assert.deepEqual(reader.get('apps', 'settings')?.data, { cluster: 'a' });

    const stored = management.store.get(secretRef);
    assert.ok(stored !== undefined);
    management.store.update({ ...stored, data: { value: Buffer.from(b.kubeconfig).toString('base64') } });
    // Nobody calls checkCluster(): only the keeper's own timer can notice the rotation.
    clock.advance(60_000);
    await eventually('the cache reads the cluster the rotated Secret names', () => (reader.get('apps', 'settings')?.data as { cluster?: string } | undefined)?.cluster === 'b', 20_000);
  });
});

describe('--log-format', () => {
  /** Runs main() with a kubeconfig that does not exist: it logs its start, fails and returns 1. */
  async function firstLines(flags: readonly string[]): Promise<string[]> {
    const stderr = new PassThrough();
    let logs = '';
    stderr.on('data', (chunk: Buffer) => { logs += chunk.toString('utf8'); });
    const status = await main({ argv: ['--kubeconfig=/nonexistent/kubeconfig', '--metrics-bind-address=0', '--health-probe-bind-address=0', ...flags], env: {}, stdout: new PassThrough(), stderr, signal: new AbortController().signal });
    assert.equal(status, 1, logs);
    return logs.split('\n').filter((l) => l !== '');
  }

  it('is json by default, with zap\'s keys', async () => {
    const [first] = await firstLines([]);
    const line = JSON.parse(first ?? '') as Record<string, unknown>;
    assert.deepEqual(Object.keys(line).slice(0, 4), ['level', 'ts', 'logger', 'msg']);
    assert.equal(line.msg, 'starting');
  });

  it('console: tab-separated time, LEVEL, logger, message and fields', async () => {
    const [first] = await firstLines(['--log-format=console']);
    assert.match(first ?? '', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\tINFO\tfleetcache\tstarting\t\{"version":/);
  });
});

describe('--cache-objects', () => {
  it('compressed: the registry\'s caches pack cold objects and read them back whole', async (t) => {
    const [cluster] = await startSimulatedClusters(1, { namePrefix: 'packed', namespaces: ['apps'] });
    t.after(() => cluster.close());
    // Enough similar text for a dictionary of the cache's own (twice 8 KiB).
    for (let i = 0; i < 40; i++) {
      cluster.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { namespace: 'apps', name: `settings-${String(i)}`, labels: { app: 'web', tier: `t${String(i % 3)}` } }, data: { 'app.yaml': `server:\n  port: ${String(8000 + i)}\n  host: web-${String(i)}.apps.svc\nfeatures:\n  beta: ${String(i % 2 === 0)}\n  cache: redis://cache-${String(i % 4)}:6379\nlogging:\n  level: info\n  format: json\n`.repeat(2) } });
    }
    const flags = config(['--cache-objects=compressed', '--cache-compress-after=100ms']);
    const clock = new FakeClock(Date.now());
    const queue = new RateLimitingWorkQueue<OwnerKey>({ name: 'owners', clock, rateLimiter: defaultControllerRateLimiter({ clock }) });
    const clusters = serviceClusters(flags, { kubeConfig: kubeConfigFrom(cluster.kubeconfig), logger: noopLogger, clock });
    t.after(() => clusters.close());
    const registry = serviceRegistry(flags, { clusters, queue, logger: noopLogger, clock });
    t.after(() => registry.close());
    const reader = await registry.watchTargetAndGetReader({ kind: 'local' }, { gvk: configMaps, namespace: 'apps', labelSelector: 'app=web' }, { namespace: 'apps', name: 'web' });
    await reader.waitForSync(AbortSignal.timeout(20_000));
    await eventually('cold objects packed', () => (registry.caches()[0]?.compressed ?? 0) === 40, 20_000);
    assert.match(String((reader.get('apps', 'settings-7')?.data as Record<string, string> | undefined)?.['app.yaml']), /port: 8007\n {2}host: web-7\.apps\.svc/);
  });
});

describe('--kube-api-request-timeout', () => {
  it('bounds every request of the registry\'s connections: a build against an API server that never answers fails at 2s', async (t) => {
    const [hung] = await startSimulatedClusters(1, { namePrefix: 'hung', namespaces: ['apps'] });
    t.after(() => hung.close());
    const clock = new FakeClock(Date.now());
    const kubeConfig = kubeConfigFrom(hung.kubeconfig);
    const queue = new RateLimitingWorkQueue<OwnerKey>({ name: 'owners', clock, rateLimiter: defaultControllerRateLimiter({ clock }) });
    const clusters = serviceClusters(config(['--kube-api-request-timeout=2s']), { kubeConfig, logger: noopLogger, clock });
    t.after(() => clusters.close());
    const registry = serviceRegistry(config(['--kube-api-request-timeout=2s']), { clusters, queue, logger: noopLogger, clock });
    t.after(() => registry.close());
    await hung.faults.down({ mode: 'hang' }); // accepts connections, never answers
    let settled = false;
    const build = registry.watchTargetAndGetReader({ kind: 'local' }, { gvk: configMaps, namespace: 'apps', name: 'x' }, { namespace: 'apps', name: 'web' });
    void build.catch(() => undefined).finally(() => { settled = true; });
    await hung.waitFor((c) => c.openConnections >= 1);
    clock.advance(1_999);
    await new Promise((resolve) => { setImmediate(resolve); });
    assert.equal(settled, false, 'not before the request timeout');
    clock.advance(1); // the build's own deadline (30 s) is far off
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<never>((_resolve, reject) => { timer = setTimeout(() => { reject(new Error('the build did not fail at the request timeout')); }, 10_000); });
    t.after(() => { clearTimeout(timer); });
    await assert.rejects(Promise.race([build, bound]), (err: unknown) => err instanceof Error && err.message.includes('no complete response within 2000 ms'));
  });
});
