// The two protocol paths of the transport against the simulated API server: HTTP/2 multiplexing
// (one TCP connection per cluster), HTTP/1.1 as the fallback (server without h2, or http2: false),
// and a silently dead HTTP/2 connection noticed by PING so no watch stays silently stale.
import assert from 'node:assert/strict';
import { constants as h2constants, createSecureServer } from 'node:http2';
import { connect as tcpConnect, createServer as createTcpServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import { eventually } from '../../e2e/harness/index.ts';
import { SimulatedCluster } from '../../fixtures/sim/index.ts';
import { SIM_CERT_PEM, simKeyPem } from '../../fixtures/sim/cert.ts';
import { loadKubeconfig } from '../cluster/index.ts';
import { ResourceInformer } from '../informer/index.ts';
import { TransportError, type GroupVersionKind } from '../util/index.ts';
import { ClusterConnection, createListLimiter, type ClusterConnectionOptions } from './index.ts';
import { kubeconfigYaml } from '../../fixtures/support/index.ts';

const CONFIGMAP: GroupVersionKind = { group: '', version: 'v1', kind: 'ConfigMap' };
const NAMESPACES = ['a', 'b', 'c', 'd'];
const listLimiter = createListLimiter();

async function cluster(t: TestContext, http2 = true): Promise<SimulatedCluster> {
  const sim = await SimulatedCluster.start({ namespaces: NAMESPACES, http2 });
  t.after(() => sim.close());
  for (const ns of NAMESPACES) {
    for (let i = 0; i < 3; i++) sim.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `cm-${i}`, namespace: ns }, data: { i: String(i) } });
  }
  return sim;
}

function connection(t: TestContext, kubeconfig: string, options: Partial<ClusterConnectionOptions> = {}): ClusterConnection {
  const conn = new ClusterConnection({ name: 'sim', kubeConfig: loadKubeconfig(kubeconfig, { cluster: 'sim' }), listLimiter, qps: 1000, burst: 1000, ...options });
  t.after(() => conn.close());
  return conn;
}

/** One informer per namespace (one watch each), all synced. */
async function informers(t: TestContext, conn: ClusterConnection, options: { watchInactivityTimeoutMs?: number } = {}): Promise<ResourceInformer[]> {
  const all = NAMESPACES.map((namespace) => new ResourceInformer({ connection: conn, gvk: CONFIGMAP, namespace, backoff: { initialMs: 20, maxMs: 200, jitter: 0 }, ...options }));
  t.after(() => Promise.all(all.map((i) => i.stop())));
  for (const i of all) i.start();
  await Promise.all(all.map((i) => i.waitForSync(AbortSignal.timeout(30_000))));
  return all;
}

/**
 * A TCP relay in front of a simulated cluster whose connections can be frozen: from then on nothing
 * passes either way and nothing is closed, as when a peer's host dies behind a NAT.
 */
class Relay {
  readonly #server: Server;
  readonly #pairs = new Set<readonly [Socket, Socket]>();
  #accepted = 0;

  /** TCP connections accepted so far. */
  accepted(): number {
    return this.#accepted;
  }

  constructor(port: number) {
    this.#server = createTcpServer((client) => {
      this.#accepted += 1;
      const upstream = tcpConnect(port, '127.0.0.1');
      const pair = [client, upstream] as const;
      this.#pairs.add(pair);
      for (const s of pair) {
        s.on('error', () => undefined);
        s.on('close', () => { client.destroy(); upstream.destroy(); this.#pairs.delete(pair); });
      }
      client.pipe(upstream);
      upstream.pipe(client);
    });
  }

  async listen(): Promise<number> {
    await new Promise<void>((resolve) => { this.#server.listen(0, '127.0.0.1', resolve); });
    return (this.#server.address() as AddressInfo).port;
  }

  /** Every open connection stops passing bytes; returns how many pairs were frozen. */
  freeze(): number {
    for (const [client, upstream] of this.#pairs) {
      client.unpipe(upstream);
      upstream.unpipe(client);
      client.pause();
      upstream.pause();
    }
    return this.#pairs.size;
  }

  async close(): Promise<void> {
    for (const [a, b] of this.#pairs) { a.destroy(); b.destroy(); }
    await new Promise<void>((resolve) => { this.#server.close(() => { resolve(); }); });
  }
}

describe('HTTP/2 transport', () => {
  it('multiplexes every watch and LIST to a cluster over one TCP connection', async (t) => {
    const sim = await cluster(t);
    const conn = connection(t, sim.kubeconfig);
    await informers(t, conn);
    const info = await conn.resolve(CONFIGMAP);
    const lists = await Promise.all(NAMESPACES.map((namespace) => conn.resourceClient(info).list({ namespace, signal: AbortSignal.timeout(30_000) })));
    assert.ok(lists.every((l) => l.items.length === 3));
    const counters = await sim.waitFor((c) => c.openWatches === NAMESPACES.length);
    assert.equal(conn.protocol, 'h2');
    assert.equal(counters.openConnections, 1, `${NAMESPACES.length} watches, ${NAMESPACES.length + 1} LISTs and discovery over one connection`);
    assert.equal(counters.requests.list, NAMESPACES.length * 2);
  });

  it('with http2: false speaks HTTP/1.1: one connection per open watch, and everything syncs', async (t) => {
    const sim = await cluster(t);
    const conn = connection(t, sim.kubeconfig, { http2: false });
    const all = await informers(t, conn);
    const counters = await sim.waitFor((c) => c.openWatches === NAMESPACES.length);
    assert.equal(conn.protocol, 'http/1.1');
    assert.ok(counters.openConnections >= NAMESPACES.length, `each watch holds its own socket (${counters.openConnections})`);
    assert.ok(all.every((i) => i.store.list().length === 3));
  });

  it('falls back to HTTP/1.1 when the server offers no h2, and everything syncs', async (t) => {
    const sim = await cluster(t, false);
    const conn = connection(t, sim.kubeconfig);
    const all = await informers(t, conn);
    assert.equal(conn.protocol, 'http/1.1');
    assert.ok(all.every((i) => i.store.list().length === 3));
    sim.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'late', namespace: 'a' } });
    await eventually('the watch delivers over HTTP/1.1', () => all[0]?.store.getByName('a', 'late'));
  });

  it('a silently dead connection fails its watches (unanswered PING); the caches relist over a new one', async (t) => {
    const sim = await cluster(t);
    const relay = new Relay(sim.port);
    const port = await relay.listen();
    t.after(() => relay.close());
    const kubeconfig = sim.kubeconfig.replace(sim.server, `https://127.0.0.1:${port}`);
    assert.notEqual(kubeconfig, sim.kubeconfig);
    const conn = connection(t, kubeconfig, { pingIntervalMs: 200, pingTimeoutMs: 2_000 });
    // The informers' own inactivity deadline is far away: only the PING can notice.
    const all = await informers(t, conn, { watchInactivityTimeoutMs: 600_000 });
    const before = relay.accepted();
    const errors: Error[] = [];
    for (const i of all) i.on('error', (e) => { errors.push(e); });

    assert.ok(relay.freeze() >= 1);
    for (const namespace of NAMESPACES) sim.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'while-frozen', namespace } });
    await eventually('every cache gets the change made meanwhile, over a new connection', () => all.every((i, n) => i.store.getByName(NAMESPACES[n] ?? '', 'while-frozen') !== undefined), 30_000);
    assert.ok(relay.accepted() > before, 'a new connection was made');
    assert.ok(errors.some((e) => e instanceof TransportError), 'the dead connection surfaced as a TransportError');
  });

  it('a stream reset before its response fails the request with a TransportError; a request after it is answered', async (t) => {
    let resets = 1;
    const server = createSecureServer({ cert: SIM_CERT_PEM, key: simKeyPem() }, (_req, res) => {
      if (resets-- > 0) {
        res.stream.close(h2constants.NGHTTP2_CANCEL);
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ kind: 'APIResourceList', groupVersion: 'v1', resources: [{ name: 'configmaps', kind: 'ConfigMap', namespaced: true, verbs: ['list'] }] }));
    });
    await new Promise<void>((resolve) => { server.listen(0, '127.0.0.1', resolve); });
    t.after(() => new Promise<void>((resolve) => { server.close(() => { resolve(); }); }));
    const conn = connection(t, kubeconfigYaml({ name: 'reset', server: `https://127.0.0.1:${(server.address() as AddressInfo).port}`, caPem: SIM_CERT_PEM, token: 't' }), { requestTimeoutMs: 10_000 });
    const err = await conn.resolve(CONFIGMAP).then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof TransportError, `expected a TransportError, got ${String(err)}`);
    assert.match(err.message, /the stream closed before a response/);
    assert.equal((await conn.resolve(CONFIGMAP)).resource, 'configmaps');
    assert.equal(conn.protocol, 'h2');
  });

  it('sends every header over HTTP/2 as it would over HTTP/1.1: one Impersonate-Group field per group', async (t) => {
    for (const http2 of [true, false]) {
      const sim = await cluster(t);
      const conn = connection(t, sim.kubeconfig, { http2, impersonate: { user: 'alice', groups: ['devs', 'ops'] } });
      assert.equal((await conn.resolve(CONFIGMAP)).resource, 'configmaps');
      assert.equal(conn.protocol, http2 ? 'h2' : 'http/1.1');
      const seen = sim.recentRequests().filter((r) => r.path === '/api/v1');
      assert.equal(seen.length, 1);
      assert.deepEqual(seen.map((r) => [r.user, r.impersonateGroups]), [['alice', ['devs', 'ops']]]);
    }
  });
});
