// The life of an HTTP/2 session against a small node:http2 server that numbers its sessions: a
// GOAWAY retires the session (the next request opens a new one, the streams already open carry
// on), and a session idle for a whole PING interval is closed and its slot of the socket budget
// given back. The server, not the client, counts sessions and requests: a retry cannot hide a
// request that went to a retired session.
import assert from 'node:assert/strict';
import { constants as h2constants, createSecureServer, type Http2SecureServer, type ServerHttp2Session, type ServerHttp2Stream } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import { createSecureContext } from 'node:tls';
import { eventually } from '../../e2e/harness/index.ts';
import { SIM_CERT_PEM, simKeyPem } from '../../fixtures/sim/cert.ts';
import { loadKubeconfig } from '../cluster/index.ts';
import { FakeClock, type GroupVersionKind } from '../util/index.ts';
import { ClusterConnection, createListLimiter, SocketBudget, type ClusterConnectionOptions, type WatchEvent } from './index.ts';
import { negotiate } from './session.ts';
import { kubeconfigYaml } from '../../fixtures/support/index.ts';

const CONFIGMAP: GroupVersionKind = { group: '', version: 'v1', kind: 'ConfigMap' };
const OBJECT = '/api/v1/namespaces/a/configmaps/cm-0';
const listLimiter = createListLimiter();

function configMap(name: string, resourceVersion: string): Record<string, unknown> {
  return { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: 'a', resourceVersion } };
}

/**
 * An API server of three answers over HTTP/2 only: discovery of v1, one ConfigMap, and a watch
 * held open until the test writes to it or ends it. Every session is numbered from 1 in order of
 * arrival; each request is recorded with the number of the session it came on.
 */
class H2Server {
  readonly #server: Http2SecureServer;
  readonly sessions: ServerHttp2Session[] = [];
  /** Numbers of the sessions whose connection has closed. */
  readonly closed: number[] = [];
  readonly seen: { readonly path: string; readonly session: number }[] = [];
  readonly watches: ServerHttp2Stream[] = [];

  constructor() {
    this.#server = createSecureServer({ cert: SIM_CERT_PEM, key: simKeyPem(), allowHTTP1: false });
    this.#server.on('session', (session) => {
      const n = this.sessions.push(session);
      session.on('error', () => undefined);
      session.on('close', () => { this.closed.push(n); });
    });
    this.#server.on('stream', (stream, headers) => {
      stream.on('error', () => undefined);
      const [path = '', query = ''] = String(headers[':path']).split('?', 2);
      this.seen.push({ path, session: this.sessions.indexOf(stream.session as ServerHttp2Session) + 1 });
      const json = (status: number, body: unknown): void => {
        stream.respond({ ':status': status, 'content-type': 'application/json' });
        stream.end(JSON.stringify(body));
      };
      if (path === '/api/v1') {
        json(200, { kind: 'APIResourceList', groupVersion: 'v1', resources: [{ name: 'configmaps', kind: 'ConfigMap', namespaced: true, verbs: ['get', 'list', 'watch'] }] });
      } else if (path === OBJECT) {
        json(200, configMap('cm-0', '1'));
      } else if (path === '/api/v1/namespaces/a/configmaps' && new URLSearchParams(query).get('watch') === 'true') {
        stream.respond({ ':status': 200, 'content-type': 'application/json' });
        this.watches.push(stream);
      } else {
        json(404, { kind: 'Status', status: 'Failure', reason: 'NotFound', code: 404 });
      }
    });
  }

  static async start(t: TestContext): Promise<H2Server> {
    const server = new H2Server();
    await new Promise<void>((resolve) => { server.#server.listen(0, '127.0.0.1', resolve); });
    t.after(() => server.close());
    return server;
  }

  get port(): number {
    return (this.#server.address() as AddressInfo).port;
  }

  get kubeconfig(): string {
    return kubeconfigYaml({ name: 'h2', server: `https://127.0.0.1:${this.port}`, caPem: SIM_CERT_PEM, token: 't' });
  }

  /**
   * Sends a graceful GOAWAY (NO_ERROR, every stream opened so far still served) on session `n`,
   * then a PING: its answer comes after the client has read the GOAWAY, frames being read in order.
   */
  async goaway(n: number): Promise<void> {
    const session = this.sessions[n - 1];
    if (session === undefined) throw new Error(`no session ${n}`);
    session.goaway(h2constants.NGHTTP2_NO_ERROR, 2 ** 31 - 1);
    await new Promise<void>((resolve, reject) => {
      session.ping((err) => { if (err === null) resolve(); else reject(err); });
    });
  }

  async close(): Promise<void> {
    for (const session of this.sessions) session.destroy();
    await new Promise<void>((resolve) => { this.#server.close(() => { resolve(); }); });
  }
}

function connection(t: TestContext, kubeconfig: string, options: Partial<ClusterConnectionOptions> = {}): ClusterConnection {
  const conn = new ClusterConnection({ name: 'h2', kubeConfig: loadKubeconfig(kubeconfig, { cluster: 'h2' }), listLimiter, qps: 1000, burst: 1000, requestTimeoutMs: 10_000, ...options });
  t.after(() => conn.close());
  return conn;
}

describe('HTTP/2 session', () => {
  it('a GOAWAY retires the session: the next request opens a new one, sent once; the watch already open carries on', { timeout: 60_000 }, async (t) => {
    const server = await H2Server.start(t);
    const conn = connection(t, server.kubeconfig);
    const info = await conn.resolve(CONFIGMAP);
    const stop = new AbortController();
    t.after(() => { stop.abort(); });
    const watch = await conn.resourceClient(info).watch({ namespace: 'a', resourceVersion: '1', timeoutSeconds: 300, allowWatchBookmarks: false, signal: stop.signal });
    assert.equal(server.sessions.length, 1, 'discovery and the watch share one session');

    await server.goaway(1);
    const body = await conn.request({ method: 'GET', path: OBJECT, signal: AbortSignal.timeout(10_000) }) as { metadata?: { name?: string } };
    assert.equal(body.metadata?.name, 'cm-0');
    assert.equal(server.sessions.length, 2, 'the request after the GOAWAY opened a second session');
    assert.deepEqual(server.seen.map((r) => [r.path, r.session]), [
      ['/api/v1', 1],
      ['/api/v1/namespaces/a/configmaps', 1],
      [OBJECT, 2],
    ], 'the request went to the new session, once');
    assert.equal(conn.protocol, 'h2');
    await conn.request({ method: 'GET', path: OBJECT, signal: AbortSignal.timeout(10_000) });
    assert.deepEqual([server.sessions.length, server.seen.at(-1)?.session], [2, 2], 'later requests stay on the new session');

    // The retired session still carries its watch, then closes once the watch ends.
    const events = watch[Symbol.asyncIterator]();
    const stream = server.watches[0];
    assert.ok(stream !== undefined);
    stream.write(`${JSON.stringify({ type: 'ADDED', object: configMap('after-goaway', '2') })}\n`);
    const next = await events.next();
    assert.deepEqual((next.value as readonly WatchEvent[] | undefined)?.map((e) => [e.type, e.object.metadata?.name]), [['ADDED', 'after-goaway']]);
    assert.equal(server.closed.length, 0, 'no session closed while a stream runs on it');
    stream.end();
    assert.equal((await events.next()).done, true);
    await eventually('the retired session closes once its last stream ended', () => server.closed.includes(1), 10_000);
    assert.ok(!server.closed.includes(2), 'the live session stays');
  });

  it('a session with no stream open for a whole PING interval is closed, and its slot of the socket budget given back', { timeout: 60_000 }, async (t) => {
    const server = await H2Server.start(t);
    const clock = new FakeClock();
    const [interval, timeout] = [30_000, 15_000];
    const budget = new SocketBudget({ maxSockets: 1, clock: new FakeClock() });
    const slot = await budget.acquire(AbortSignal.timeout(10_000));
    let socketClosed = false;
    const { done } = negotiate(
      { host: '127.0.0.1', port: server.port, servername: undefined, secureContext: createSecureContext({ ca: SIM_CERT_PEM }), rejectUnauthorized: true },
      { pingIntervalMs: interval, pingTimeoutMs: timeout, clock },
      () => { socketClosed = true; slot.release(); },
    );
    const negotiated = await done;
    assert.equal(negotiated.protocol, 'h2');
    const session = negotiated.session;
    t.after(() => { session.destroy(); });
    slot.hold(session);
    const get = (path: string, long: boolean): ReturnType<typeof session.request> => {
      const stream = session.request([':method', 'GET', ':path', path, ':scheme', 'https', ':authority', `127.0.0.1:${server.port}`], { endStream: true }, long);
      stream.on('error', () => undefined);
      return stream;
    };

    // A watch is open through the first interval: a PING goes out instead, is answered, and the
    // next interval starts; the session stays.
    const watch = get('/api/v1/namespaces/a/configmaps?watch=true', true);
    await new Promise((resolve) => { watch.once('response', resolve); });
    clock.advance(interval);
    assert.equal(clock.nextTimerIn, timeout, 'a PING is out, with its deadline');
    await eventually('the PING is answered and the next interval armed', () => clock.nextTimerIn === interval, 10_000);
    assert.equal(session.usable, true);
    assert.equal(budget.inUse, 1);

    // The watch ends, and so does a request after it: no stream open for the whole next interval.
    const closed = (stream: ReturnType<typeof get>): Promise<unknown> => new Promise((resolve) => { stream.once('close', resolve); });
    const watchClosed = closed(watch);
    server.watches[0]?.end();
    watch.resume();
    await watchClosed;
    const request = get(OBJECT, false);
    request.resume();
    await closed(request);
    assert.equal(session.streams, 0);
    clock.advance(interval);
    assert.equal(session.usable, false, 'idle a whole interval: drained, not PINGed');
    assert.equal(clock.pendingTimers, 0, 'no PING deadline, no next interval');
    await eventually('the server sees the connection close', () => server.closed.includes(1), 10_000);
    await eventually('the socket closed and gave its slot back', () => socketClosed && budget.inUse === 0, 10_000);
    assert.deepEqual(server.seen.map((r) => r.path), ['/api/v1/namespaces/a/configmaps', OBJECT]);
  });
});
