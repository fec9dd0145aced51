import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { request as httpsRequest } from 'node:https';
import { describe, it } from 'node:test';
import { simulatedClusterForSuite } from '../../fixtures/support/index.ts';
import { eventually } from '../../e2e/harness/index.ts';
import { ClusterSet, LocalProvider } from '../cluster/index.ts';
import { FakeClusters } from '../cluster/testing.ts';
import { ownerKey, Registry } from '../registry/index.ts';
import { FakeClock, noopLogger, type Logger } from '../util/index.ts';
import { parseExposition } from '../../cmd/exposition.test-util.ts';
import { Manager, RunnableFailedError, ShutdownTimeoutError, signalHandler, syncedCheck, type ManagerOptions } from './index.ts';

const leaseKind = { group: 'coordination.k8s.io', version: 'v1', kind: 'Lease', plural: 'leases' } as const;
const loopback = { host: '127.0.0.1', port: 0 };

/** A logger that keeps every message in order (child loggers write to the same list). */
function recordingLogger(lines: string[]): Logger {
  const make = (): Logger => ({
    debug: (msg) => { lines.push(msg); },
    info: (msg) => { lines.push(msg); },
    warn: (msg) => { lines.push(msg); },
    error: (msg) => { lines.push(msg); },
    child: () => make(),
  });
  return make();
}

/** GET over HTTPS trusting anything (the manager's self-signed certificate), with an optional bearer token. */
function getInsecure(url: string, token?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(url, { rejectUnauthorized: false, headers: token === undefined ? {} : { authorization: `Bearer ${token}` } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => { body += chunk; });
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, body }); });
    });
    req.on('error', reject);
    req.end();
  });
}

describe('Manager', () => {
  const suite = simulatedClusterForSuite({ namespaces: ['ops'], kinds: [{ ...leaseKind, namespaced: true }] });
  const { kubeConfig } = suite;

  const clusters: ManagerOptions['clusters'] = ({ onRequest }) => new ClusterSet({ local: kubeConfig, provider: new LocalProvider({ kubeConfig }), onRequest, logger: noopLogger });
  const registry: ManagerOptions['registry'] = ({ queue, clusters: keeper }) => new Registry({ clusters: keeper, queue, logger: noopLogger });

  /** Starts `manager` until the returned stop() is called; stop resolves with start's outcome. */
  function run(manager: Manager): { readonly stop: () => Promise<void>; readonly done: Promise<void>; readonly signal: AbortController } {
    const signal = new AbortController();
    const done = manager.start(signal.signal);
    return { signal, done, stop: async () => { signal.abort(); await done; } };
  }

  it('serves /readyz from its checks and the ones added: 500 naming each failing one, 200 once all pass', async () => {
    const manager = new Manager({ clusters, registry, healthProbeBindAddress: loopback });
    let synced = false;
    let alive = true;
    manager.addReadyzCheck('informers', () => (synced ? undefined : 'the Widget cache has not synced'));
    manager.addReadyzCheck('throws', () => { if (!synced) throw new Error('not yet'); return undefined; });
    manager.addHealthzCheck('loop', () => Promise.resolve(alive ? undefined : 'stuck'));
    const running = run(manager);
    try {
      const url = await eventually('the probe server', () => manager.probeUrl);
      const notReady = await fetch(`${url}/readyz`);
      assert.equal(notReady.status, 500);
      const body = await notReady.text();
      assert.match(body, /\[-\]informers failed: the Widget cache has not synced/);
      assert.match(body, /\[-\]throws failed: not yet/);
      assert.match(body, /\[\+\]shutdown ok/);
      synced = true;
      assert.deepEqual([(await fetch(`${url}/readyz`)).status, await (await fetch(`${url}/readyz`)).text()], [200, 'ok']);
      assert.equal((await fetch(`${url}/healthz`)).status, 200);
      alive = false;
      const unhealthy = await fetch(`${url}/healthz`);
      assert.equal(unhealthy.status, 500);
      assert.match(await unhealthy.text(), /\[-\]loop failed: stuck/);
    } finally {
      await running.stop();
    }
  });

  it('serves added routes and handlers behind the metrics authentication: no token, 401 (public handlers excepted)', async () => {
    const manager = new Manager({ clusters, registry, metricsServer: { bindAddress: loopback } });
    manager.addRoute('/debug/things', () => ({ status: 200, contentType: 'text/plain', body: 'things\n' }));
    manager.addHandler('/dashboard/', (_req, res) => { res.writeHead(200, { 'content-type': 'text/plain' }); res.end('dashboard\n'); });
    manager.addHandler('/public/', (_req, res, url) => { res.writeHead(200, { 'content-type': 'text/plain' }); res.end(`public ${url.pathname}\n`); }, { public: true });
    const running = run(manager);
    try {
      const url = await eventually('the metrics server', () => manager.metricsUrl);
      assert.match(url, /^https:/);
      for (const path of ['/metrics', '/debug/things', '/dashboard/', '/dashboard/app.js']) {
        assert.deepEqual(await getInsecure(`${url}${path}`), { status: 401, body: 'Unauthorized\n' }, `${path} without a token`);
      }
      assert.deepEqual(await getInsecure(`${url}/public/page.html`), { status: 200, body: 'public /public/page.html\n' }, 'a public handler needs no token');
      assert.equal((await getInsecure(`${url}/elsewhere`)).status, 404);
    } finally {
      await running.stop();
    }
  });

  it('without secure, answers added routes and subtree handlers (plain HTTP), and /metrics carries the controllers\' series', async () => {
    const manager = new Manager({ clusters, registry, metricsServer: { bindAddress: loopback, secure: false }, metrics: { defaultMetrics: false } });
    manager.addRoute('/debug/things', () => ({ status: 200, contentType: 'text/plain', body: 'things\n' }));
    manager.addHandler('/dashboard/', (_req, res, url) => { res.writeHead(200, { 'content-type': 'text/plain' }); res.end(`dashboard ${url.pathname}\n`); });
    const reconciled: string[] = [];
    manager.add({ name: 'widgets', workers: 2, reconcile: (key) => { reconciled.push(key); return Promise.resolve(); } });
    const running = run(manager);
    try {
      const url = await eventually('the metrics server', () => manager.metricsUrl);
      assert.equal(await (await fetch(`${url}/debug/things`)).text(), 'things\n');
      assert.equal(await (await fetch(`${url}/dashboard/app.js`)).text(), 'dashboard /dashboard/app.js\n');
      manager.registry.queue.add(ownerKey({ group: 'example.com', kind: 'Widget', namespace: 'ns', name: 'a' }));
      await eventually('the key was reconciled', () => (reconciled.length > 0 ? true : undefined));
      const m = parseExposition(await (await fetch(`${url}/metrics`)).text());
      assert.equal(m.value('controller_runtime_reconcile_total', { controller: 'widgets', result: 'success' }), 1);
      assert.equal(m.value('controller_runtime_max_concurrent_reconciles', { controller: 'widgets' }), 2);
      assert.equal(m.value('workqueue_adds_total', { controller: 'widgets', name: 'owners' }), 1, 'the registry\'s queue carries the controller consuming it');
      assert.equal(m.value('leader_election_master_status', { name: '' }), undefined, 'no Lease, no leader_election_master_status sample (as controller-runtime)');
    } finally {
      await running.stop();
    }
  });

  it('stops in order: reconciles in flight finish, then the Lease is released, then start resolves', async () => {
    const events: string[] = [];
    const manager = new Manager({
      clusters,
      registry,
      logger: recordingLogger(events),
      leaderElection: { name: 'widgets-leader', namespace: 'ops', leaseDurationMs: 2_000, renewDeadlineMs: 1_500, retryPeriodMs: 200 },
    });
    let started = (): void => undefined;
    const inFlight = new Promise<void>((resolve) => { started = resolve; });
    manager.add({
      name: 'widgets',
      reconcile: async (key, { signal }) => {
        started();
        await new Promise((resolve) => { signal.addEventListener('abort', resolve, { once: true }); });
        // Still busy after the stop was asked: a release racing ahead of us would log first. The
        // wait is bounded so that a correct manager (which waits for us) is never stuck.
        const deadline = Date.now() + 2_000;
        while (!events.includes('released the lease') && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
        events.push(`reconciled ${key}`);
      },
    });
    const lease = (): string | undefined => (suite.cluster.store.get({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', namespace: 'ops', name: 'widgets-leader' })?.spec as { holderIdentity?: string } | undefined)?.holderIdentity;
    const running = run(manager);
    await eventually('this replica leads', () => (manager.isLeader ? true : undefined));
    assert.equal(lease(), manager.identity);
    manager.registry.queue.add(ownerKey({ group: 'example.com', kind: 'Widget', namespace: 'ns', name: 'a' }));
    await inFlight;
    running.signal.abort();
    await running.done;
    events.push('start resolved');
    const order = events.filter((e) => e === 'reconciled example.com/Widget/ns/a' || e === 'released the lease' || e === 'start resolved');
    assert.deepEqual(order, ['reconciled example.com/Widget/ns/a', 'released the lease', 'start resolved']);
    assert.equal(lease(), '', 'the Lease is free for a follower');
  });

  it('rejects with RunnableFailedError when a runnable fails, after stopping the rest', async () => {
    const manager = new Manager({ clusters, registry });
    let otherStopped = false;
    manager.add({ name: 'broken', start: () => Promise.reject(new Error('boom')) });
    manager.add({ name: 'other', needLeaderElection: false, start: (signal) => new Promise<void>((resolve) => { signal.addEventListener('abort', () => { otherStopped = true; resolve(); }, { once: true }); }) });
    const outcome = await manager.start(new AbortController().signal).then(() => undefined, (err: unknown) => err);
    assert.ok(outcome instanceof RunnableFailedError, String(outcome));
    assert.equal(outcome.runnable, 'broken');
    assert.equal(outcome.code, 'ERR_RUNNABLE_FAILED');
    assert.equal(otherStopped, true);
  });

  it('stops waiting for a stuck controller after the grace period, rejecting with ShutdownTimeoutError naming it', { timeout: 20_000 }, async () => {
    const clock = new FakeClock();
    const manager = new Manager({ clusters, registry, clock, gracefulShutdownTimeoutMs: 5_000 });
    let running = false;
    let release = (): void => undefined;
    manager.add({ name: 'stuck', start: () => new Promise<void>((resolve) => { running = true; release = resolve; }) });
    const stop = new AbortController();
    let settled = false;
    const done = manager.start(stop.signal).then(() => undefined, (err: unknown) => err).finally(() => { settled = true; });
    await eventually('the runnable runs', () => running || undefined);
    stop.abort();
    await eventually('the grace period is timed', () => (clock.pendingTimers > 0 ? true : undefined));
    clock.advance(4_999);
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(settled, false, 'still within the grace period');
    clock.advance(1);
    const outcome = await done;
    assert.ok(outcome instanceof ShutdownTimeoutError, String(outcome));
    assert.deepEqual([outcome.code, outcome.pending, outcome.gracePeriodMs], ['ERR_SHUTDOWN_TIMEOUT', ['stuck'], 5_000]);
    release();
  });

  it('refuses invalid options with a TypeError naming the option', () => {
    assert.throws(() => new Manager({ clusters, registry, leaderElection: { name: 'x' } }), /leaderElection\.namespace/);
    assert.throws(() => new Manager({ clusters, registry, leaderElection: { name: 'x', namespace: 'ops', leaseDurationMs: 1_000, renewDeadlineMs: 5_000 } }), /leaseDurationMs/);
    assert.throws(() => new Manager({ clusters, registry, gracefulShutdownTimeoutMs: -1 }), /gracefulShutdownTimeoutMs/);
    assert.throws(() => new Manager({ clusters, registry, healthProbeBindAddress: { host: '', port: 70_000 } }), /healthProbeBindAddress/);
    assert.throws(() => { new Manager({ clusters, registry }).addRoute('/x', () => ({ status: 200, contentType: 'text/plain', body: '' })); }, /metricsServer/);
    assert.throws(() => new Manager({ clusters: {} as never, registry }), { name: 'TypeError', message: /^Manager option clusters must be a keeper of clusters/ });
    assert.throws(() => new Manager({ clusters: () => ({}) as never, registry }), { name: 'TypeError', message: /^Manager option clusters: the factory must return a keeper/ });
  });

  it('lends the keeper it was given to the registry, and closes it after the registry when it stops', async () => {
    const events: string[] = [];
    class RecordingClusters extends FakeClusters {
      override async close(): Promise<void> {
        events.push('keeper closed');
        await super.close();
      }
    }
    const keeper = new RecordingClusters({ client: () => { throw new Error('no caches in this test'); } });
    let lent: unknown;
    const manager = new Manager({
      clusters: keeper,
      registry: ({ queue, clusters: given }) => {
        lent = given;
        const built = new Registry({ clusters: given, queue });
        const close = built.close.bind(built);
        built.close = async () => { await close(); events.push('registry closed'); };
        return built;
      },
    });
    assert.equal(lent, keeper);
    assert.equal(manager.clusters, keeper);
    const stop = new AbortController();
    const done = manager.start(stop.signal);
    stop.abort();
    await done;
    assert.deepEqual(events, ['registry closed', 'keeper closed']);
  });
});

describe('syncedCheck', () => {
  it('passes once the source has synced, naming what has not', () => {
    const source = { synced: false, cluster: 'local', gvk: { kind: 'Pipeline' } };
    const check = syncedCheck(source);
    assert.equal(check(), 'Pipeline in local has not synced');
    source.synced = true;
    assert.equal(check(), undefined);
  });
});

describe('signalHandler', () => {
  it('aborts on the first SIGTERM or SIGINT and exits 1 on the second', () => {
    const source = new EventEmitter();
    const exits: number[] = [];
    const signal = signalHandler({ source, exit: (code) => { exits.push(code); } });
    assert.equal(signal.aborted, false);
    source.emit('SIGINT');
    assert.equal(signal.aborted, true);
    assert.match((signal.reason as Error).message, /SIGINT/);
    assert.deepEqual(exits, []);
    source.emit('SIGTERM');
    assert.deepEqual(exits, [1]);
  });

  it('without exit, lets go of both signals after the first, so a second gets the default action', () => {
    const source = new EventEmitter();
    const signal = signalHandler({ source });
    assert.equal(source.listenerCount('SIGTERM') + source.listenerCount('SIGINT'), 2);
    source.emit('SIGTERM');
    assert.equal(signal.aborted, true);
    assert.equal(source.listenerCount('SIGTERM') + source.listenerCount('SIGINT'), 0);
  });
});
