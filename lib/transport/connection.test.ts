import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTcpServer } from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { eventually } from '../../e2e/harness/index.ts';
import { FakeClock, KubeApiError, TransportError, UnknownKindError, WatchDecodeError } from '../util/index.ts';
import { ClusterConnection } from './connection.ts';
import { verbSet } from './discovery.ts';
import { createListLimiter, resourcePath, type WatchEvent } from './index.ts';
import { kubeConfigFor } from '../../fixtures/support/index.ts';

const TOKEN = 'secret-token-never-logged';
const configMaps = { gvk: { group: '', version: 'v1', kind: 'ConfigMap' }, resource: 'configmaps', namespaced: true, verbs: ['list', 'watch'] } as const;

type Route = (req: IncomingMessage, res: ServerResponse, url: URL) => void;

/** A loopback HTTP server whose routes the tests swap; counts TCP connections. */
class TestServer {
  readonly server: Server;
  routes = new Map<string, Route>();
  connections = 0;
  readonly sockets = new Set<Socket>();
  readonly requests: { method: string; url: URL; auth: string | undefined; contentType: string | undefined; body: string }[] = [];

  constructor() {
    this.server = createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (c: string) => { body += c; });
      req.on('end', () => {
        this.requests.push({ method: req.method ?? '', url, auth: req.headers.authorization, contentType: req.headers['content-type'], body });
        const route = this.routes.get(url.pathname);
        if (route === undefined) {
          res.writeHead(404, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ kind: 'Status', status: 'Failure', reason: 'NotFound', code: 404, message: 'the server could not find the requested resource' }));
          return;
        }
        route(req, res, url);
      });
    });
    this.server.on('connection', (s: Socket) => {
      this.connections++;
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => { this.server.listen(0, '127.0.0.1', resolve); });
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => { this.server.close(() => { resolve(); }); });
  }
}

function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

const coreV1 = { kind: 'APIResourceList', groupVersion: 'v1', resources: [
  { name: 'configmaps', kind: 'ConfigMap', namespaced: true, verbs: ['list', 'watch', 'get'] },
  { name: 'namespaces', kind: 'Namespace', namespaced: false, verbs: ['list', 'watch'] },
  { name: 'namespaces/status', kind: 'Namespace', namespaced: false, verbs: ['get'] },
] };

describe('ClusterConnection', () => {
  const srv = new TestServer();
  let url = '';
  const listLimiter = createListLimiter(2);
  before(async () => { url = await srv.listen(); });
  after(async () => { await srv.close(); await listLimiter.stop(); });

  function connect(options: { requestTimeoutMs?: number } = {}): ClusterConnection {
    return new ClusterConnection({ name: 'east', kubeConfig: kubeConfigFor(url, { token: TOKEN }), listLimiter, ...options });
  }

  it('resolves kinds through discovery, caches them, and re-reads on a miss so a late CRD is found', async () => {
    srv.routes.set('/api/v1', (_q, res) => { json(res, 200, coreV1); });
    const conn = connect();
    try {
      const before = srv.requests.length;
      assert.deepEqual(await conn.resolve({ group: '', version: 'v1', kind: 'Namespace' }), {
        gvk: { group: '', version: 'v1', kind: 'Namespace' }, resource: 'namespaces', namespaced: false, verbs: ['list', 'watch'],
      });
      const cm = await conn.resolve({ group: '', version: 'v1', kind: 'ConfigMap' });
      assert.equal(cm.resource, 'configmaps');
      assert.equal(cm.namespaced, true);
      assert.equal(srv.requests.length - before, 1, 'one discovery request for the group/version');

      const widget = { group: 'example.com', version: 'v1', kind: 'Widget' };
      const err = await conn.resolve(widget).then(() => undefined, (e: unknown) => e);
      assert.ok(err instanceof UnknownKindError);
      assert.equal(err.statusCode, 404);
      assert.equal(err.cluster, 'east');
      assert.deepEqual(err.gvk, widget);

      srv.routes.set('/apis/example.com/v1', (_q, res) => { json(res, 200, { resources: [{ name: 'gadgets', kind: 'Gadget', namespaced: true }] }); });
      assert.equal((await conn.resolve({ ...widget, kind: 'Gadget' })).resource, 'gadgets');
      await assert.rejects(conn.resolve(widget), UnknownKindError);
      srv.routes.set('/apis/example.com/v1', (_q, res) => { json(res, 200, { resources: [{ name: 'widgets', kind: 'Widget', namespaced: true }] }); });
      assert.equal((await conn.resolve(widget)).resource, 'widgets', 'a cached group that lacks the kind is re-read');
    } finally {
      await conn.close();
    }
  });

  it('remembers the discovery of 64 group/versions, re-reading the least recently used beyond them', async () => {
    // The bound keeps a connection's discovery small whatever a fleet's kinds.
    const groups = Array.from({ length: 65 }, (_, i) => `g${i}.example.com`);
    for (const group of groups) srv.routes.set(`/apis/${group}/v1`, (_q, res) => { json(res, 200, { resources: [{ name: 'things', kind: 'Thing', namespaced: true }] }); });
    const conn = connect();
    const reads = (group: string): number => srv.requests.filter((r) => r.url.pathname === `/apis/${group}/v1`).length;
    try {
      for (const group of groups.slice(0, 64)) await conn.resolve({ group, version: 'v1', kind: 'Thing' });
      for (const group of groups.slice(0, 64)) await conn.resolve({ group, version: 'v1', kind: 'Thing' });
      assert.ok(groups.slice(0, 64).every((g) => reads(g) === 1), '64 group/versions are all remembered');
      await conn.resolve({ group: groups[64] ?? '', version: 'v1', kind: 'Thing' });
      await conn.resolve({ group: groups[0] ?? '', version: 'v1', kind: 'Thing' });
      assert.equal(reads(groups[0] ?? ''), 2, 'the 65th pushed out the least recently used, read again');
      assert.equal(reads(groups[1] ?? ''), 1);
    } finally {
      await conn.close();
      for (const group of groups) srv.routes.delete(`/apis/${group}/v1`);
    }
  });

  it('trusts a discovery result for discoveryTtlMs after it was read, however often it is used', async () => {
    srv.routes.set('/api/v1', (_q, res) => { json(res, 200, coreV1); });
    const clock = new FakeClock(1_000);
    const conn = new ClusterConnection({ name: 'east', kubeConfig: kubeConfigFor(url, { token: TOKEN }), listLimiter, clock, discoveryTtlMs: 10_000 });
    const reads = (): number => srv.requests.filter((r) => r.url.pathname === '/api/v1').length;
    const gvk = { group: '', version: 'v1', kind: 'ConfigMap' };
    try {
      const before = reads();
      await conn.resolve(gvk);
      clock.advance(6_000);
      await conn.resolve(gvk);
      clock.advance(4_000);
      await conn.resolve(gvk);
      assert.equal(reads() - before, 1, 'trusted for the whole TTL, and a hit does not extend it');
      clock.advance(1);
      await conn.resolve(gvk);
      assert.equal(reads() - before, 2, 'read again once the TTL passed');
      await conn.resolve(gvk);
      assert.equal(reads() - before, 2, 'and trusted again');
    } finally {
      await conn.close();
    }
  });

  it('reuses one keep-alive socket for many requests and sends the bearer token on each', async () => {
    srv.routes.set('/api/v1/namespaces/ns/configmaps/x', (_q, res) => { json(res, 200, { metadata: { name: 'x' } }); });
    const conn = connect();
    try {
      const connectionsBefore = srv.connections;
      const first = srv.requests.length;
      for (let i = 0; i < 20; i++) await conn.request({ method: 'GET', path: resourcePath(configMaps, { namespace: 'ns', name: 'x' }) });
      assert.equal(srv.connections - connectionsBefore, 1, 'one TCP (and TLS) connection for 20 requests');
      assert.ok(srv.requests.slice(first).every((r) => r.auth === `Bearer ${TOKEN}`));
    } finally {
      await conn.close();
    }
  });

  it('turns a non-2xx answer into a KubeApiError with the Status and Retry-After, and never leaks the token', async () => {
    srv.routes.set('/api/v1/namespaces/locked/configmaps', (_q, res) => {
      json(res, 403, { kind: 'Status', status: 'Failure', reason: 'Forbidden', code: 403, message: 'configmaps is forbidden: User "system:serviceaccount:x:y" cannot list resource' });
    });
    srv.routes.set('/api/v1/namespaces/busy/configmaps', (_q, res) => {
      json(res, 429, { kind: 'Status', reason: 'TooManyRequests', code: 429 }, { 'retry-after': '3' });
    });
    const conn = connect();
    try {
      const client = conn.resourceClient(configMaps);
      const forbidden = await client.list({ namespace: 'locked', signal: AbortSignal.timeout(5000) }).then(() => undefined, (e: unknown) => e);
      assert.ok(forbidden instanceof KubeApiError);
      assert.equal(forbidden.statusCode, 403);
      assert.equal(forbidden.reason, 'Forbidden');
      assert.equal(forbidden.cluster, 'east');
      assert.deepEqual(forbidden.gvk, configMaps.gvk);
      assert.ok(!forbidden.message.includes(TOKEN) && !JSON.stringify(forbidden).includes(TOKEN));
      const busy = await client.list({ namespace: 'busy', signal: AbortSignal.timeout(5000) }).then(() => undefined, (e: unknown) => e);
      assert.ok(busy instanceof KubeApiError);
      assert.equal(busy.retryAfterSeconds, 3);
    } finally {
      await conn.close();
    }
  });

  it('sends LIST paging and selectors as query parameters', async () => {
    srv.routes.set('/api/v1/configmaps', (_q, res) => { json(res, 200, { metadata: { resourceVersion: '7', continue: 'next' }, items: [{ metadata: { name: 'a' } }] }); });
    const conn = connect();
    try {
      const list = await conn.resourceClient(configMaps).list({ limit: 2, continue: 'tok', labelSelector: 'app=web', fieldSelector: 'metadata.name=a', signal: AbortSignal.timeout(5000) });
      assert.equal(list.metadata.continue, 'next');
      const q = srv.requests.at(-1)?.url.searchParams;
      assert.deepEqual([q?.get('limit'), q?.get('continue'), q?.get('labelSelector'), q?.get('fieldSelector')], ['2', 'tok', 'app=web', 'metadata.name=a']);
    } finally {
      await conn.close();
    }
  });

  it('decodes a watch stream split at arbitrary points, and turns an ERROR event into a KubeApiError', async () => {
    const lines = [
      JSON.stringify({ type: 'ADDED', object: { metadata: { name: 'a', resourceVersion: '2' }, data: { s: 'ü'.repeat(50) } } }),
      JSON.stringify({ type: 'BOOKMARK', object: { metadata: { resourceVersion: '3' } } }),
      JSON.stringify({ type: 'ERROR', object: { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version' } }),
    ];
    const bytes = Buffer.from(lines.join('\n') + '\n', 'utf8');
    srv.routes.set('/api/v1/namespaces/w/configmaps', (_q, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      // Seven-byte pieces split lines and multi-byte characters alike.
      let at = 0;
      const step = (): void => {
        if (at >= bytes.length) { res.end(); return; }
        res.write(bytes.subarray(at, at + 7));
        at += 7;
        setImmediate(step);
      };
      step();
    });
    const conn = connect();
    try {
      const stream = await conn.resourceClient(configMaps).watch({ namespace: 'w', resourceVersion: '1', timeoutSeconds: 300, allowWatchBookmarks: true, signal: AbortSignal.timeout(5000) });
      const q = srv.requests.at(-1)?.url.searchParams;
      assert.deepEqual([q?.get('watch'), q?.get('resourceVersion'), q?.get('allowWatchBookmarks'), q?.get('timeoutSeconds')], ['true', '1', 'true', '300']);
      const seen: WatchEvent[] = [];
      const failure = await (async () => { for await (const batch of stream) seen.push(...batch); })().then(() => undefined, (e: unknown) => e);
      assert.deepEqual(seen.map((e) => [e.type, e.object.metadata?.resourceVersion]), [['ADDED', '2'], ['BOOKMARK', '3']]);
      assert.equal((seen[0]?.object as { data: { s: string } }).data.s, 'ü'.repeat(50));
      assert.ok(failure instanceof KubeApiError && failure.isGone && failure.statusCode === 410);
    } finally {
      await conn.close();
    }
  });

  it('reports a malformed line as WatchDecodeError and a stream cut mid-event as TransportError', async () => {
    const conn = connect();
    try {
      for (const [body, type] of [['{"type":"ADDED","object":{}}\nnot json\n', WatchDecodeError], ['{"type":"ADDED","object":{}}\n{"type":"ADD', TransportError]] as const) {
        srv.routes.set('/api/v1/namespaces/m/configmaps', (_q, res) => { res.writeHead(200); res.end(body); });
        const stream = await conn.resourceClient(configMaps).watch({ namespace: 'm', resourceVersion: '1', timeoutSeconds: 300, allowWatchBookmarks: true, signal: AbortSignal.timeout(5000) });
        let count = 0;
        const failure = await (async () => { for await (const batch of stream) count += batch.length; })().then(() => undefined, (e: unknown) => e);
        assert.equal(count, 1);
        assert.ok(failure instanceof type, String(failure));
      }
    } finally {
      await conn.close();
    }
  });

  it('fails a request that gets no complete answer within requestTimeoutMs', async () => {
    srv.routes.set('/api/v1/namespaces/slow/configmaps', () => { /* never answers */ });
    const conn = connect({ requestTimeoutMs: 200 });
    try {
      await assert.rejects(conn.resourceClient(configMaps).list({ namespace: 'slow', signal: AbortSignal.timeout(5000) }), (e: unknown) => e instanceof TransportError && e.message.includes('200 ms'));
    } finally {
      await conn.close();
    }
  });

  it('sends writes with their content type and returns the parsed body', async () => {
    srv.routes.set('/api/v1/namespaces/ns/configmaps/x', (req, res) => { json(res, 200, { echoed: req.method }); });
    const conn = connect();
    try {
      const out = await conn.request({ method: 'PATCH', path: '/api/v1/namespaces/ns/configmaps/x', body: { data: { a: '1' } }, contentType: 'application/merge-patch+json', query: { fieldManager: 'fleetcache', dryRun: undefined } });
      assert.deepEqual(out, { echoed: 'PATCH' });
      const req = srv.requests.at(-1);
      assert.equal(req?.contentType, 'application/merge-patch+json');
      assert.deepEqual(JSON.parse(req.body), { data: { a: '1' } });
      assert.equal(req.url.search, '?fieldManager=fleetcache');
    } finally {
      await conn.close();
    }
  });

  it('close() ends open watches and releases the sockets', async () => {
    let watchSocket: Socket | undefined;
    srv.routes.set('/api/v1/namespaces/hang/configmaps', (req, res) => {
      watchSocket = req.socket;
      res.writeHead(200);
      res.write('{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"5"}}}\n');
    });
    const conn = connect();
    const stream = await conn.resourceClient(configMaps).watch({ namespace: 'hang', resourceVersion: '1', timeoutSeconds: 300, allowWatchBookmarks: true, signal: new AbortController().signal });
    let outcome: 'ended' | 'failed' | undefined;
    const consumed = (async () => { for await (const _ of stream) { /* drain */ } })().then(() => { outcome = 'ended'; }, () => { outcome = 'failed'; });
    // The watch resolved, so the server has answered its headers on this socket.
    const socket = watchSocket;
    assert.ok(socket !== undefined && srv.sockets.has(socket), 'the watch holds a server socket');
    await conn.close();
    await eventually('close() ends the watch stream', () => outcome, 10_000);
    await consumed;
    await eventually('the watch socket is closed', () => !srv.sockets.has(socket), 10_000);
    await assert.rejects(conn.request({ method: 'GET', path: '/api/v1' }), /closed/);
  });

  it('releases a socket stuck in the TLS handshake when the request is aborted or the connection closed', async () => {
    // A server that accepts connections and never answers: the TLS handshake never completes.
    const held = new Set<Socket>();
    // It reads (and discards) what arrives, or it would never notice the client closing.
    const silent = createTcpServer((socket) => { held.add(socket); socket.on('close', () => held.delete(socket)); socket.on('error', () => undefined); socket.resume(); });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    after(() => new Promise<void>((resolve) => { for (const s of held) s.destroy(); silent.close(() => { resolve(); }); }));
    const conn = new ClusterConnection({ name: 'silent', kubeConfig: kubeConfigFor(`https://127.0.0.1:${(silent.address() as AddressInfo).port}`, { token: TOKEN }) });
    const waitFor = async (what: string, check: () => boolean): Promise<void> => { await eventually(what, check, 10_000); };

    const aborted = new AbortController();
    const first = conn.request({ method: 'GET', path: '/api/v1', signal: aborted.signal });
    await waitFor('the client connected', () => held.size === 1);
    aborted.abort();
    await assert.rejects(first);
    await waitFor('the aborted request\'s socket is closed', () => held.size === 0);

    const second = assert.rejects(conn.request({ method: 'GET', path: '/api/v1' }), /closed/);
    await waitFor('the client connected again', () => held.size === 1);
    await conn.close();
    await second;
    await waitFor('close() ends the connecting socket', () => held.size === 0);
  });

  it('rejects invalid options with a TypeError naming the option', () => {
    assert.throws(() => new ClusterConnection({ name: '', kubeConfig: kubeConfigFor(url, { token: TOKEN }) }), /name/);
    assert.throws(() => new ClusterConnection({ name: 'x', kubeConfig: kubeConfigFor(url, { token: TOKEN }), qps: 0 }), /qps/);
    assert.throws(() => new ClusterConnection({ name: 'x', kubeConfig: kubeConfigFor(url, { token: TOKEN }), burst: 1.5 }), /burst/);
  });
});

describe('verbSet', () => {
  it('shares a usual verb list between kinds, but never keeps a long one for the process\'s life', () => {
    const usual = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];
    assert.equal(verbSet([...usual]), verbSet([...usual]));
    assert.ok(Object.isFrozen(verbSet(usual)));
    // A hostile server's list: equal contents, yet a copy each time (nothing interned to return).
    const long = Array.from({ length: 64 }, (_, i) => `verb-${i}`);
    const first = verbSet(long);
    assert.deepEqual(first, long);
    assert.notEqual(verbSet([...long]), first);
  });
});
