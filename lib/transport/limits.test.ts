// Read limits against a hostile API server (fixtures/hostile): every answer a peer sends is read up
// to a limit, then the stream is destroyed with a LimitExceededError, so the memory a hostile server
// can make the process hold is a small multiple of the limit. Each test also keeps a healthy
// simulated cluster syncing, to show the failure stays with the hostile cache.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { inspect } from 'node:util';
import { startHostileApiServer, type HostileApiServer } from '../../fixtures/hostile/index.ts';
import { SimulatedCluster } from '../../fixtures/sim/index.ts';
import { loadKubeconfig, StaticProvider } from '../cluster/index.ts';
import { ResourceInformer } from '../informer/index.ts';
import { KubeApiError, LimitExceededError, TransportError, type GroupVersionKind, type Logger } from '../util/index.ts';
import { ClusterConnection, createListLimiter, DEFAULT_READ_LIMITS, type ReadLimits } from './index.ts';
import { registryWithKeeper } from '../registry/testing.ts';
import { eventually } from '../../fixtures/support/index.ts';

const MiB = 1024 * 1024;
const CONFIGMAP: GroupVersionKind = { group: '', version: 'v1', kind: 'ConfigMap' };
const listLimiter = createListLimiter();
const fast = { backoff: { initialMs: 50, maxMs: 200 }, slowBackoff: { initialMs: 50, maxMs: 200 } } as const;

// Every test runs on both protocols: the servers offer HTTP/2 (the client's default) or only HTTP/1.1.
for (const http2 of [true, false]) {
const protocol = http2 ? 'h2' : 'http/1.1';

function connect(name: string, kubeconfig: string, limits: ReadLimits = {}): ClusterConnection {
  return new ClusterConnection({ name, kubeConfig: loadKubeconfig(kubeconfig, { cluster: name }), listLimiter, qps: 1000, burst: 1000, ...limits });
}

/**
 * Runs `fn` while sampling RSS every 2 ms; resolves with what `fn` resolved or threw and the peak
 * growth over the RSS measured just before (a generous measure: it includes the hostile server,
 * which runs in this process, and garbage not yet collected).
 */
async function peakRssGrowth<T>(fn: () => Promise<T>): Promise<{ readonly outcome: { value: T } | { error: unknown }; readonly growthMiB: number }> {
  const base = process.memoryUsage.rss();
  let peak = base;
  const timer = setInterval(() => { peak = Math.max(peak, process.memoryUsage.rss()); }, 2);
  let outcome: { value: T } | { error: unknown };
  try {
    outcome = { value: await fn() };
  } catch (error) {
    outcome = { error };
  } finally {
    clearInterval(timer);
  }
  peak = Math.max(peak, process.memoryUsage.rss());
  return { outcome, growthMiB: (peak - base) / MiB };
}

function errorOf(outcome: { value: unknown } | { error: unknown }): unknown {
  assert.ok('error' in outcome, 'the read failed');
  return outcome.error;
}

/** A healthy cluster with an informer on ConfigMaps: proves other caches carry on. */
class Healthy {
  readonly sim = new SimulatedCluster({ name: 'healthy', http2 });
  connection!: ClusterConnection;
  informer!: ResourceInformer;
  #n = 0;

  async start(): Promise<void> {
    await this.sim.start();
    this.connection = connect('healthy', this.sim.kubeconfig);
    this.informer = new ResourceInformer({ connection: this.connection, gvk: CONFIGMAP, namespace: 'default', ...fast });
    this.informer.start();
    await this.informer.waitForSync(AbortSignal.timeout(30_000));
  }

  /** Creates a ConfigMap on the healthy cluster and waits for its cache to show it. */
  async stillUpdates(): Promise<void> {
    const name = `alive-${++this.#n}`;
    this.sim.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: 'default' }, data: { n: String(this.#n) } });
    await eventually(`${name} in the healthy cache`, () => this.informer.store.getByName('default', name) !== undefined, 60_000);
  }

  async stop(): Promise<void> {
    await this.informer.stop();
    await this.connection.close();
    await this.sim.close();
  }
}

describe(`read limits against a hostile API server (${protocol})`, () => {
  let hostile: HostileApiServer;
  const healthy = new Healthy();
  before(async () => {
    hostile = await startHostileApiServer({ http2 });
    await healthy.start();
    assert.equal(healthy.connection.protocol, protocol);
  });
  after(async () => {
    await healthy.stop();
    await hostile.close();
  });

  it('has the documented defaults', () => {
    assert.deepEqual({ ...DEFAULT_READ_LIMITS }, { maxWatchEventBytes: 16 * MiB, maxListBytes: 64 * MiB, maxResponseBytes: 16 * MiB, maxErrorBytes: 64 * 1024 });
    assert.throws(() => connect('bad', hostile.kubeconfig, { maxListBytes: 0 }), (err: unknown) => err instanceof TypeError && err.message.includes('maxListBytes'));
    assert.throws(() => connect('bad', hostile.kubeconfig, { maxWatchEventBytes: 1.5 }), (err: unknown) => err instanceof TypeError && err.message.includes('maxWatchEventBytes'));
  });

  it('a 256 MiB watch line without a newline fails at the 16 MiB default, holding a small multiple of it', async () => {
    hostile.list = { kind: 'normal' };
    hostile.watch = { kind: 'huge-body', bytes: 256 * MiB };
    const sentBefore = hostile.counters.bytesSent;
    const conn = connect('hostile', hostile.kubeconfig);
    after(() => conn.close());
    const client = conn.resourceClient(await conn.resolve(CONFIGMAP));
    const { outcome, growthMiB } = await peakRssGrowth(async () => {
      const stream = await client.watch({ resourceVersion: '1', timeoutSeconds: 300, allowWatchBookmarks: true, signal: AbortSignal.timeout(120_000) });
      for await (const batch of stream) assert.fail(`no event expected, got ${batch.length}`);
    });
    const err = errorOf(outcome);
    assert.ok(err instanceof LimitExceededError, inspect(err));
    assert.equal(err.code, 'ERR_LIMIT_EXCEEDED');
    assert.equal(err.cluster, 'hostile');
    assert.deepEqual(err.gvk, CONFIGMAP);
    assert.equal(err.limit, 'maxWatchEventBytes');
    assert.equal(err.limitBytes, 16 * MiB);
    assert.match(err.message, /cluster hostile, v1, Kind=ConfigMap: a watch event exceeds 16777216 bytes, the limit maxWatchEventBytes/);
    const sentMiB = (hostile.counters.bytesSent - sentBefore) / MiB;
    console.log(`watch line: server sent ${sentMiB.toFixed(1)} MiB of 256 MiB; peak RSS growth ${growthMiB.toFixed(1)} MiB (limit 16 MiB)`);
    assert.ok(sentMiB < 48, `the client stopped reading soon after the limit (server sent ${sentMiB.toFixed(1)} MiB)`);
    assert.ok(growthMiB < 96, `peak RSS growth ${growthMiB.toFixed(1)} MiB stays below 96 MiB (6× the limit; +274 MiB before limits)`);
    await healthy.stillUpdates();
  });

  it('a 256 MiB LIST body fails at the 64 MiB default, holding a small multiple of it', async () => {
    hostile.list = { kind: 'huge-body', bytes: 256 * MiB };
    const sentBefore = hostile.counters.bytesSent;
    const conn = connect('hostile', hostile.kubeconfig);
    after(() => conn.close());
    const client = conn.resourceClient(await conn.resolve(CONFIGMAP));
    const { outcome, growthMiB } = await peakRssGrowth(() => client.list({ signal: AbortSignal.timeout(120_000) }));
    const err = errorOf(outcome);
    assert.ok(err instanceof LimitExceededError, inspect(err));
    assert.equal(err.limit, 'maxListBytes');
    assert.equal(err.limitBytes, 64 * MiB);
    assert.deepEqual(err.request, { method: 'GET', path: '/api/v1/configmaps' });
    const sentMiB = (hostile.counters.bytesSent - sentBefore) / MiB;
    console.log(`LIST body: server sent ${sentMiB.toFixed(1)} MiB of 256 MiB; peak RSS growth ${growthMiB.toFixed(1)} MiB (limit 64 MiB)`);
    assert.ok(sentMiB < 96, `the client stopped reading soon after the limit (server sent ${sentMiB.toFixed(1)} MiB)`);
    assert.ok(growthMiB < 192, `peak RSS growth ${growthMiB.toFixed(1)} MiB stays below 192 MiB (3× the limit; +785 MiB before limits)`);
    await healthy.stillUpdates();
  });

  it('a LIST whose Content-Length is over the limit is refused before its body is read', async () => {
    hostile.list = { kind: 'huge-body', bytes: 256 * MiB, declareLength: true };
    const sentBefore = hostile.counters.bytesSent;
    const conn = connect('hostile', hostile.kubeconfig);
    after(() => conn.close());
    const client = conn.resourceClient(await conn.resolve(CONFIGMAP));
    await assert.rejects(client.list({ signal: AbortSignal.timeout(60_000) }), (err: unknown) => err instanceof LimitExceededError && err.limit === 'maxListBytes');
    const sentMiB = (hostile.counters.bytesSent - sentBefore) / MiB;
    assert.ok(sentMiB < 16, `little was sent before the client hung up (${sentMiB.toFixed(1)} MiB)`);
    await healthy.stillUpdates();
  });

  it('a 256 MiB error body leaves the HTTP status, with the limit as cause, and is not read past 64 KiB', async () => {
    hostile.list = { kind: 'huge-error', bytes: 256 * MiB, statusCode: 503 };
    const sentBefore = hostile.counters.bytesSent;
    const conn = connect('hostile', hostile.kubeconfig);
    after(() => conn.close());
    const client = conn.resourceClient(await conn.resolve(CONFIGMAP));
    const { outcome, growthMiB } = await peakRssGrowth(() => client.list({ signal: AbortSignal.timeout(60_000) }));
    const err = errorOf(outcome);
    assert.ok(err instanceof KubeApiError, inspect(err));
    assert.equal(err.statusCode, 503);
    assert.equal(err.status, undefined);
    assert.ok(err.cause instanceof LimitExceededError);
    assert.equal(err.cause.limit, 'maxErrorBytes');
    assert.equal(err.cause.limitBytes, 64 * 1024);
    const sentMiB = (hostile.counters.bytesSent - sentBefore) / MiB;
    console.log(`error body: server sent ${sentMiB.toFixed(1)} MiB of 256 MiB; peak RSS growth ${growthMiB.toFixed(1)} MiB (limit 64 KiB)`);
    assert.ok(sentMiB < 16, `the client stopped reading (server sent ${sentMiB.toFixed(1)} MiB)`);
    assert.ok(growthMiB < 48, `peak RSS growth ${growthMiB.toFixed(1)} MiB stays below 48 MiB`);
    await healthy.stillUpdates();
  });

  it('a discovery body over maxResponseBytes fails with the limit named', async () => {
    hostile.discovery = { kind: 'huge-body', bytes: 64 * MiB };
    const conn = connect('hostile', hostile.kubeconfig, { maxResponseBytes: MiB });
    after(() => conn.close());
    await assert.rejects(conn.resolve(CONFIGMAP), (err: unknown) => err instanceof LimitExceededError && err.limit === 'maxResponseBytes' && err.limitBytes === MiB && err.request?.path === '/api/v1');
    hostile.discovery = { kind: 'normal' };
    await healthy.stillUpdates();
  });

  it('an informer whose watch exceeds the limit backs off and retries; the healthy cluster keeps syncing', async () => {
    hostile.list = { kind: 'normal' };
    hostile.discovery = { kind: 'normal' };
    hostile.watch = { kind: 'huge-body', bytes: 8 * MiB };
    const conn = connect('hostile', hostile.kubeconfig, { maxWatchEventBytes: MiB });
    const informer = new ResourceInformer({ connection: conn, gvk: CONFIGMAP, ...fast });
    const errors: Error[] = [];
    informer.on('error', (e) => errors.push(e));
    after(async () => { await informer.stop(); await conn.close(); });
    const watchesBefore = hostile.counters.requests.watch;
    informer.start();
    await informer.waitForSync(AbortSignal.timeout(30_000));
    await eventually('three failed watches', () => errors.length >= 3, 60_000);
    assert.ok(errors.every((e) => e instanceof LimitExceededError && e.limit === 'maxWatchEventBytes' && e.limitBytes === MiB));
    assert.ok(informer.stats().lastError instanceof LimitExceededError);
    assert.ok(hostile.counters.requests.watch - watchesBefore >= 3, 'the watch was retried');
    await healthy.stillUpdates();
    assert.equal(healthy.informer.stats().lastError, undefined);
  });

  it('a registry given readLimits reports the exceeded limit on the hostile cache; its cache on the healthy cluster carries on', async () => {
    hostile.list = { kind: 'normal' };
    hostile.discovery = { kind: 'normal' };
    hostile.watch = { kind: 'huge-body', bytes: 8 * MiB };
    const registry = registryWithKeeper({
      provider: new StaticProvider({ clusters: { hostile: hostile.kubeconfig, healthy: healthy.sim.kubeconfig } }),
      credentialCheckIntervalMs: 0,
      readLimits: { maxWatchEventBytes: MiB },
      informer: fast,
    });
    after(() => registry.close());
    assert.throws(() => registryWithKeeper({ provider: new StaticProvider({ clusters: {} }), readLimits: { maxErrorBytes: -1 } }), (err: unknown) => err instanceof TypeError && err.message.includes('maxErrorBytes'));
    const owner = { namespace: 'team', name: 'pipeline' };
    const bad = await registry.watchTargetAndGetReader({ kind: 'static', name: 'hostile' }, { gvk: CONFIGMAP, namespace: 'default', name: 'x' }, owner);
    const good = await registry.watchTargetAndGetReader({ kind: 'static', name: 'healthy' }, { gvk: CONFIGMAP, namespace: 'default', name: 'reg' }, owner);
    await good.waitForSync(AbortSignal.timeout(30_000));
    await eventually('the hostile cache to report its error', () => bad.lastError !== undefined, 60_000);
    const err = bad.lastError;
    assert.ok(err instanceof LimitExceededError, inspect(err));
    assert.equal(err.limit, 'maxWatchEventBytes');
    assert.equal(err.limitBytes, MiB);
    assert.equal(err.cluster, 'static:hostile');
    healthy.sim.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'reg', namespace: 'default' }, data: { v: '1' } });
    await eventually('the healthy cache through the registry', () => good.get('default', 'reg') !== undefined, 60_000);
    assert.equal(good.lastError, undefined);
  });

  it('a slow-loris watch (a byte at a time, never a line) is cut by the inactivity deadline', async () => {
    hostile.watch = { kind: 'slow-loris', intervalMs: 50 };
    const conn = connect('hostile', hostile.kubeconfig);
    const informer = new ResourceInformer({ connection: conn, gvk: CONFIGMAP, watchInactivityTimeoutMs: 1_000, ...fast });
    const errors: Error[] = [];
    informer.on('error', (e) => errors.push(e));
    after(async () => { await informer.stop(); await conn.close(); });
    informer.start();
    await informer.waitForSync(AbortSignal.timeout(30_000));
    await eventually('the silent watch to be cut', () => errors.length >= 1, 60_000);
    assert.ok(errors[0] instanceof TransportError && errors[0].message.includes('silent'), inspect(errors[0]));
    await healthy.stillUpdates();
  });

  it('an ERROR event with a 1 MiB message is kept and logged bounded, with control and bidi characters escaped', async () => {
    hostile.watch = { kind: 'error-event', messageBytes: MiB, messageText: 'ok\u202e\n\u001b[31mx' };
    const logged: string[] = [];
    const capture: Logger = {
      debug: () => undefined,
      info: () => undefined,
      warn: (msg, fields) => { logged.push(`${msg} ${JSON.stringify(fields ?? {})}`); },
      error: (msg, fields) => { logged.push(`${msg} ${JSON.stringify(fields ?? {})}`); },
      child: () => capture,
    };
    const conn = connect('hostile', hostile.kubeconfig);
    const informer = new ResourceInformer({ connection: conn, gvk: CONFIGMAP, logger: capture, ...fast });
    const errors: Error[] = [];
    informer.on('error', (e) => errors.push(e));
    after(async () => { await informer.stop(); await conn.close(); });
    informer.start();
    await eventually('two ERROR events', () => errors.length >= 2, 60_000);
    const err = informer.stats().lastError;
    assert.ok(err instanceof KubeApiError, inspect(err));
    assert.equal(err.statusCode, 500);
    assert.ok(err.message.length < 2048, `message bounded (${err.message.length} characters)`);
    assert.ok((err.status?.message ?? '').length < 2048, 'the kept Status is bounded too');
    assert.match(err.message, /…\[\d+ more characters\]/);
    assert.match(err.message, /ok\\u\{202e\}\\u\{a\}\\u\{1b\}\[31mx/);
    for (const raw of ['\u202e', '\n', '\u001b']) assert.ok(!err.message.includes(raw), `no raw ${JSON.stringify(raw)}`);
    assert.ok(logged.length > 0);
    for (const line of logged) {
      assert.ok(line.length < 4096, `log line bounded (${line.length})`);
      assert.doesNotMatch(line, /\u202e/u);
    }
    await healthy.stillUpdates();
  });
});
}
