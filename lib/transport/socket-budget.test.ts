// The socket budget against simulated API servers: more caches than sockets all sync, taking
// turns, with the open connections capped (counted by a relay in front of each server); EMFILE on
// connect is a wait, not a request error; a watch lost under descriptor pressure is noticed and
// the cache relists. HTTP/2 and HTTP/1.1 alike.
import assert from 'node:assert/strict';
import { syncBuiltinESMExports } from 'node:module';
import { connect as tcpConnect, createServer as createTcpServer, type AddressInfo, type Server, type Socket } from 'node:net';
import tls from 'node:tls';
import { describe, it, type TestContext } from 'node:test';
import { eventually } from '../../e2e/harness/index.ts';
import { SimulatedCluster } from '../../fixtures/sim/index.ts';
import { loadKubeconfig } from '../cluster/index.ts';
import { ResourceInformer } from '../informer/index.ts';
import { FakeClock, TransportError, type GroupVersionKind } from '../util/index.ts';
import { ClusterConnection, createListLimiter, SocketBudget, type ClusterConnectionOptions, type RequestObservation } from './index.ts';

const CONFIGMAP: GroupVersionKind = { group: '', version: 'v1', kind: 'ConfigMap' };
const listLimiter = createListLimiter();
const PROTOCOLS = [{ http2: true, name: 'HTTP/2' }, { http2: false, name: 'HTTP/1.1' }] as const;

/** Connections open through every relay of a test, and the most ever open at once. */
interface Tally {
  open: number;
  maxOpen: number;
  accepted: number;
}

/**
 * A TCP relay in front of a simulated cluster counting, in a tally shared by all relays, the
 * connections open through it. A connection counts as closed from the first sign of its client
 * leaving ('end', 'error' or 'close'). The client's FIN precedes any connection it opens next, but
 * the relay may take the new connection from the same poll of the event loop before the old one's
 * FIN: the peak is sampled once that poll's callbacks have all run (setImmediate). A socket really
 * over the budget stays open far longer than that (its TLS handshake alone takes several polls).
 */
class CountingRelay {
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  open = 0;

  constructor(port: number, tally: Tally) {
    this.#server = createTcpServer((client) => {
      tally.accepted += 1;
      tally.open += 1;
      this.open += 1;
      setImmediate(() => { tally.maxOpen = Math.max(tally.maxOpen, tally.open); });
      let counted = true;
      const gone = (): void => {
        if (counted) {
          tally.open -= 1;
          this.open -= 1;
        }
        counted = false;
        client.destroy();
        upstream.destroy();
      };
      const upstream = tcpConnect(port, '127.0.0.1');
      for (const s of [client, upstream]) {
        this.#sockets.add(s);
        s.on('error', gone);
        s.on('end', gone);
        s.on('close', () => { this.#sockets.delete(s); gone(); });
      }
      client.pipe(upstream);
      upstream.pipe(client);
    });
  }

  async listen(): Promise<number> {
    await new Promise<void>((resolve) => { this.#server.listen(0, '127.0.0.1', resolve); });
    return (this.#server.address() as AddressInfo).port;
  }

  async close(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((resolve) => { this.#server.close(() => { resolve(); }); });
  }
}

async function simCluster(t: TestContext, options: { http2: boolean; namespaces: readonly string[]; compactionWindow?: number }): Promise<SimulatedCluster> {
  const sim = await SimulatedCluster.start({ namespaces: options.namespaces, http2: options.http2, ...(options.compactionWindow === undefined ? {} : { compactionWindow: options.compactionWindow }) });
  t.after(() => sim.close());
  for (const ns of options.namespaces) {
    for (let i = 0; i < 3; i++) sim.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `cm-${i}`, namespace: ns } });
  }
  return sim;
}

function connection(t: TestContext, name: string, kubeconfig: string, options: Partial<ClusterConnectionOptions>): ClusterConnection {
  const conn = new ClusterConnection({ name, kubeConfig: loadKubeconfig(kubeconfig, { cluster: name }), listLimiter, qps: 1000, burst: 1000, ...options });
  t.after(() => conn.close());
  return conn;
}

function informer(t: TestContext, conn: ClusterConnection, namespace: string): ResourceInformer {
  const inf = new ResourceInformer({ connection: conn, gvk: CONFIGMAP, namespace, backoff: { initialMs: 20, maxMs: 200, jitter: 0 } });
  t.after(() => inf.stop());
  return inf;
}

/**
 * Makes the next `times` TLS connects fail with EMFILE, as when the process has no descriptor
 * left (the socket is destroyed before it connects). Covers the HTTP/2 handshake (node:tls's
 * namespace, synced) and the HTTP/1.1 agent (https calls tls.connect). Returns the connect count.
 */
function injectEmfile(t: TestContext, times: number): { readonly connects: () => number } {
  const original = tls.connect;
  let left = times;
  let connects = 0;
  const patched = function connect(this: unknown, ...args: unknown[]): tls.TLSSocket {
    connects += 1;
    const socket = (original as (...a: unknown[]) => tls.TLSSocket).apply(this, args);
    if (left > 0) {
      left -= 1;
      socket.destroy(Object.assign(new Error('connect EMFILE'), { code: 'EMFILE', errno: -24, syscall: 'connect' }));
    }
    return socket;
  };
  tls.connect = patched;
  syncBuiltinESMExports();
  t.after(() => {
    tls.connect = original;
    syncBuiltinESMExports();
  });
  return { connects: () => connects };
}

describe('socket budget', () => {
  for (const { http2, name } of PROTOCOLS) {
    it(`${name}: caps open sockets with more caches than slots; every cache syncs in the end; no slot leaks`, async (t) => {
      const budget = new SocketBudget({ maxSockets: 2, turnMs: 200 });
      const namespaces = ['a', 'b'];
      const relays: CountingRelay[] = [];
      const tally: Tally = { open: 0, maxOpen: 0, accepted: 0 };
      const conns: ClusterConnection[] = [];
      const all: ResourceInformer[] = [];
      const sims: SimulatedCluster[] = [];
      for (let c = 0; c < 4; c++) {
        const sim = await simCluster(t, { http2, namespaces });
        sims.push(sim);
        const relay = new CountingRelay(sim.port, tally);
        const port = await relay.listen();
        t.after(() => relay.close());
        relays.push(relay);
        const conn = connection(t, `c${c}`, sim.kubeconfig.replace(sim.server, `https://127.0.0.1:${port}`), { http2, socketBudget: budget });
        conns.push(conn);
        for (const ns of namespaces) all.push(informer(t, conn, ns));
      }
      for (const i of all) i.start();
      await Promise.all(all.map((i) => i.waitForSync(AbortSignal.timeout(120_000))));
      assert.ok(all.every((i) => i.store.list().length === 3));
      // Every cache keeps up after its sync, though its cluster holds a socket only in its turns:
      // a watch cut for another cluster's turn resumes in its next one, never silently stale.
      for (const sim of sims) for (const ns of namespaces) sim.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'after-sync', namespace: ns } });
      await eventually('every cache sees the object created after the sync', () => all.every((i) => i.store.list().length === 4), 120_000);
      assert.ok(tally.maxOpen <= 2, `never more than 2 connections open to the four clusters together (${tally.maxOpen})`);
      assert.ok(tally.accepted > 4, `the clusters took turns: ${tally.accepted} connections in all`);
      await Promise.all(all.map((i) => i.stop()));
      await Promise.all(conns.map((c) => c.close()));
      await eventually('every slot is given back', () => budget.inUse === 0 && budget.waiting === 0);
      await eventually('every connection closed', () => relays.every((r) => r.open === 0));
    });

    it(`${name}: EMFILE on connect makes the request wait, then it succeeds: no request error`, async (t) => {
      const sim = await simCluster(t, { http2, namespaces: ['a'] });
      const clock = new FakeClock();
      const budget = new SocketBudget({ maxSockets: 4, recoverMs: 5_000, clock });
      const observed: RequestObservation[] = [];
      const conn = connection(t, 'emfile', sim.kubeconfig, { http2, socketBudget: budget, onRequest: (o) => { observed.push(o); } });
      // Another socket of the process is open: the budget shrinks to it.
      const other = await budget.acquire(AbortSignal.timeout(10_000));
      const injected = injectEmfile(t, 2);
      let settled = false;
      const answer = conn.request({ method: 'GET', path: '/api/v1/namespaces/a/configmaps/cm-0' }).finally(() => { settled = true; });
      await eventually('the first connect failed with EMFILE and the request waits', () => injected.connects() === 1 && budget.waiting === 1);
      assert.equal(budget.limit, 1);
      other.release(); // a descriptor came back: tried again, EMFILE again, waits for the episode to end
      await eventually('the second connect failed too', () => injected.connects() === 2 && budget.waiting === 1);
      assert.equal(settled, false);
      clock.advance(5_000);
      const body = await answer as { metadata?: { name?: string } };
      assert.equal(body.metadata?.name, 'cm-0');
      assert.equal(injected.connects(), 3);
      assert.deepEqual(observed.map((o) => o.code), ['200'], 'one request, answered; no error on the way');
      assert.equal(sim.counters.requests.get, 1);
    });
  }

  it('HTTP/2: a session fresh from its handshake is not closed for a waiter before its requests ran', async (t) => {
    const turnMs = 10_000;
    const clock = new FakeClock();
    const budget = new SocketBudget({ maxSockets: 1, turnMs, clock });
    const conns: ClusterConnection[] = [];
    for (let c = 0; c < 3; c++) {
      const sim = await simCluster(t, { http2: true, namespaces: ['a'] });
      conns.push(connection(t, `fresh${c}`, sim.kubeconfig, { http2: true, socketBudget: budget }));
    }
    // Three clusters, one socket: each request waits, gets a fresh session, and must run on it
    // although the others wait; the idle session is what goes to the next one. A session whose
    // request was answered falls idle, but the budget hears of it at its next turn: the clock
    // moves a turn on only while every request not yet answered waits for the socket, so no
    // session the test ages is fresh (one holding the slot for an unanswered request).
    for (let round = 0; round < 3; round++) {
      let answered = 0;
      const all = Promise.all(conns.map((conn) => conn.request({ method: 'GET', path: '/api/v1/namespaces/a/configmaps/cm-0', signal: AbortSignal.timeout(30_000) }).finally(() => { answered += 1; })));
      let failed = false;
      all.catch(() => { failed = true; });
      await eventually(`round ${round}: every request answered`, () => {
        if (answered === conns.length || failed) return true;
        if (budget.waiting > 0 && budget.waiting === conns.length - answered) clock.advance(turnMs);
        return false;
      });
      const answers = await all;
      assert.equal(answers.length, 3);
    }
    await Promise.all(conns.map((c) => c.close()));
    await eventually('every slot is given back', () => budget.inUse === 0);
  });

  it('a cache losing its watch under descriptor pressure reports an error, waits for a socket, and relists', async (t) => {
    const sim = await simCluster(t, { http2: false, namespaces: ['a'], compactionWindow: 3 });
    const clock = new FakeClock();
    const budget = new SocketBudget({ maxSockets: 4, recoverMs: 5_000, clock });
    const conn = connection(t, 'pressure', sim.kubeconfig, { http2: false, socketBudget: budget });
    const inf = informer(t, conn, 'a');
    const errors: Error[] = [];
    const relists: string[] = [];
    inf.on('error', (e) => { errors.push(e); });
    inf.on('relisted', (s) => { relists.push(s.reason); });
    inf.start();
    await inf.waitForSync(AbortSignal.timeout(30_000));
    await sim.waitFor((c) => c.openWatches === 1);

    const injected = injectEmfile(t, 2);
    assert.equal(sim.faults.cutWatches({ mode: 'reset' }), 1);
    await eventually('the lost watch surfaced as an error', () => errors.some((e) => e instanceof TransportError));
    await eventually('the reconnect hit EMFILE and waits for a socket', () => injected.connects() >= 1 && budget.waiting === 1);
    // Meanwhile more changes than the server keeps history for: the old resourceVersion expires.
    for (let i = 0; i < 6; i++) sim.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `while-waiting-${i}`, namespace: 'a' } });
    assert.equal(inf.store.getByName('a', 'while-waiting-0'), undefined, 'stale while it waits');
    assert.ok(inf.stats().lastError !== undefined, 'and it says so');
    clock.advance(5_000); // the episode ends: tried again, EMFILE again, a new episode
    await eventually('tried again, EMFILE again', () => injected.connects() === 2 && budget.waiting === 1);
    clock.advance(5_000);
    await eventually('the cache relisted and holds every change', () => relists.includes('gone') && inf.store.list().length === 9);
    await sim.waitFor((c) => c.openWatches === 1);
    assert.equal(inf.stats().lastError, undefined);
  });
});
