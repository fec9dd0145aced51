import assert from 'node:assert/strict';
import { Script } from 'node:vm';
import { setImmediate as tick } from 'node:timers/promises';
import { after, describe, it } from 'node:test';
import type { InformerHandler } from '../../lib/informer/index.ts';
import type { CacheInfo, HeldReader } from '../../lib/registry/index.ts';
import type { KubeObject } from '../../lib/transport/index.ts';
import { FakeClock, type GroupVersionKind } from '../../lib/util/index.ts';
import { HttpServer, type HttpServerOptions, type ShardStatus } from '../../lib/manager/index.ts';
import { Dashboard, type DashboardRegistry, type DashboardState } from './index.ts';
import { appJs, pageHtml, securityHeaders } from './page.ts';
import { unreachablePipeline } from './fleet.test-util.ts';
import { eventually, EVERY_TURN } from '../../fixtures/support/index.ts';

const PIPELINE_GVK: GroupVersionKind = { group: 'fleetcache.dev', version: 'v1alpha1', kind: 'Pipeline' };

/** A held reader of Pipelines over an array: what the registry's reader offers the dashboard. */
class ArrayReader implements HeldReader {
  readonly cluster = 'local';
  readonly gvk = PIPELINE_GVK;
  readonly lastError = undefined;
  readonly resourceVersion = '1';
  synced = true;
  released = false;
  readonly objects: KubeObject[] = [];
  get(): KubeObject | undefined { return undefined; }
  list(): KubeObject[] { return [...this.objects]; }
  waitForSync(): Promise<void> { return Promise.resolve(); }
  release(): void { this.released = true; }
}

/** A registry whose Pipeline reader fails `failures` times (the CRD not installed yet), then works. */
class FakeRegistry implements DashboardRegistry {
  readonly pipelines = new ArrayReader();
  handler: InformerHandler | undefined;
  attempts = 0;
  cacheInfos: CacheInfo[] = [];
  failures: number;
  constructor(failures: number) {
    this.failures = failures;
  }
  caches(): CacheInfo[] { return this.cacheInfos; }
  reader<T extends KubeObject = KubeObject>(_ref: unknown, gvk: GroupVersionKind, options: { readonly handler?: InformerHandler | undefined } = {}): Promise<HeldReader<T>> {
    this.attempts += 1;
    assert.deepEqual(gvk, PIPELINE_GVK);
    if (this.failures > 0) {
      this.failures -= 1;
      return Promise.reject(new Error('the server could not find the requested resource'));
    }
    this.handler = options.handler;
    return Promise.resolve(this.pipelines as unknown as HeldReader<T>);
  }
}

function pipeline(revision: string): KubeObject {
  return {
    metadata: { namespace: 'delivery', name: 'podinfo', generation: 1 },
    status: { observedGeneration: 1, environments: [{ name: 'dev', ready: true, revision, targets: [] }] },
  };
}

interface Events {
  readonly status: number;
  readonly retryAfter: string | null;
  readonly documents: { now: number; state: DashboardState }[];
  /** True once a `reconnect` event came. */
  readonly reconnect: boolean;
  readonly done: Promise<void>;
  close(): void;
}

/** GETs the event stream and parses its documents as they come. */
async function events(url: string, headers: Record<string, string> = {}): Promise<Events> {
  const abort = new AbortController();
  const res = await fetch(url, { headers, signal: abort.signal });
  const documents: Events['documents'] = [];
  const close = (): void => { abort.abort(); };
  const seen = { reconnect: false };
  if (res.body === null || res.status !== 200) return { status: res.status, retryAfter: res.headers.get('retry-after'), documents, reconnect: false, done: res.text().then(() => undefined), close };
  const decoder = new TextDecoder();
  const reader = res.body.getReader();
  let buffer = '';
  const done = (async () => {
    for (;;) {
      let chunk: Awaited<ReturnType<typeof reader.read>>;
      try {
        chunk = await reader.read();
      } catch {
        return; // cut: the server closed
      }
      if (chunk.done) return;
      buffer += decoder.decode(chunk.value as Uint8Array, { stream: true });
      for (let i = buffer.indexOf('\n\n'); i >= 0; i = buffer.indexOf('\n\n')) {
        const frame = buffer.slice(0, i).split('\n');
        buffer = buffer.slice(i + 2);
        const data = frame.find((l) => l.startsWith('data: '));
        if (frame.includes('event: reconnect')) seen.reconnect = true;
        else if (data !== undefined) documents.push(JSON.parse(data.slice(6)) as Events['documents'][number]);
      }
    }
  })();
  return { status: res.status, retryAfter: res.headers.get('retry-after'), documents, get reconnect() { return seen.reconnect; }, done, close };
}

/** The dashboard's handlers on a loopback HTTP server that asks `authorize` about every request. */
function serveDashboard(dashboard: Dashboard, authorize: NonNullable<HttpServerOptions['authorize']>): Promise<HttpServer> {
  return HttpServer.start({
    name: 'metrics',
    address: { host: '127.0.0.1', port: 0 },
    routes: {},
    handlers: dashboard.handlers,
    publicPaths: dashboard.publicPaths,
    authorize,
  });
}

describe('the dashboard', () => {
  const clock = new FakeClock(Date.UTC(2026, 10, 23, 9));
  const dashboard = new Dashboard({ clock, stream: { minIntervalMs: 250 } });
  const registry = new FakeRegistry(2);
  const stop = new AbortController();
  let running: Promise<void> | undefined;
  let server: HttpServer | undefined;
  after(async () => {
    stop.abort();
    await running;
    await server?.close();
  });

  it('serves the page to anyone with a strict CSP, and the state only to who the server authorizes', async () => {
    const asked: string[] = [];
    server = await serveDashboard(dashboard, (req, path) => {
      asked.push(path);
      return Promise.resolve(req.headers.authorization === 'Bearer good'
        ? { allowed: true, user: 'reader' }
        : { allowed: false, status: 401, message: 'Unauthorized' });
    });
    for (const [path, type] of [['/dashboard/', 'text/html; charset=utf-8'], ['/dashboard/app.js', 'text/javascript; charset=utf-8'], ['/dashboard/app.css', 'text/css; charset=utf-8'], ['/dashboard/favicon.svg', 'image/svg+xml']] as const) {
      const res = await fetch(`${server.url}${path}`);
      assert.equal(res.status, 200, path);
      assert.equal(res.headers.get('content-type'), type);
      assert.equal(res.headers.get('content-security-policy'), securityHeaders['content-security-policy']);
      assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
      assert.equal(res.headers.get('x-frame-options'), 'DENY');
      await res.text();
    }
    const redirect = await fetch(`${server.url}/dashboard`, { redirect: 'manual' });
    assert.equal(redirect.status, 308);
    assert.equal(redirect.headers.get('location'), 'dashboard/');
    await redirect.text();
    const unknown = await fetch(`${server.url}/dashboard/state.json`);
    assert.equal(unknown.status, 404, 'nothing else under the public subtree');
    await unknown.text();
    assert.deepEqual(asked, [], 'the static page carries no data: no review for it');

    const refused = await events(`${server.url}/dashboard/events`);
    assert.equal(refused.status, 401);
    const wrong = await events(`${server.url}/dashboard/events`, { authorization: 'Bearer bad' });
    assert.equal(wrong.status, 401);
    assert.deepEqual(asked, ['/dashboard/events', '/dashboard/events']);
    const allowed = await events(`${server.url}/dashboard/events`, { authorization: 'Bearer good' });
    assert.equal(allowed.status, 200);
    await eventually('the first document', () => allowed.documents.length === 1, EVERY_TURN);
    assert.deepEqual(allowed.documents[0]?.state.pipelines, [], 'not running yet: an empty state');
    await fetch(`${server.url}/dashboard/events`, { method: 'POST', headers: { authorization: 'Bearer good' } }).then(async (r) => {
      assert.equal(r.status, 405, 'read-only');
      await r.text();
    });
  });

  it('carries the page\'s security headers on the event stream (GET and HEAD) and on the approval\'s answer', async () => {
    // The stream and the action are answers of the same origin as the page: one served without the
    // CSP, nosniff or frame-ancestors could be sniffed, framed or rendered as a document of its own.
    const streams = dashboard.clients;
    const own = await HttpServer.start({
      name: 'metrics', address: { host: '127.0.0.1', port: 0 }, routes: {},
      handlers: dashboard.handlers, publicPaths: dashboard.publicPaths, actionPaths: dashboard.actionPaths,
      authorize: (req) => Promise.resolve(req.headers.authorization === 'Bearer good' ? { allowed: true, user: 'reader' } : { allowed: false, status: 401, message: 'Unauthorized' }),
    });
    try {
      const secure = (what: string, headers: Headers): void => {
        for (const [name, value] of Object.entries(securityHeaders)) assert.equal(headers.get(name), value, `${what}: ${name}`);
        assert.match(headers.get('content-security-policy') ?? '', /frame-ancestors 'none'/, what);
      };
      const head = await fetch(`${own.url}/dashboard/events`, { method: 'HEAD', headers: { authorization: 'Bearer good' } });
      assert.equal(head.status, 200);
      assert.equal(head.headers.get('content-type'), 'text/event-stream; charset=utf-8');
      secure('HEAD /dashboard/events', head.headers);
      const abort = new AbortController();
      const get = await fetch(`${own.url}/dashboard/events`, { headers: { authorization: 'Bearer good' }, signal: abort.signal });
      assert.equal(get.status, 200);
      secure('GET /dashboard/events', get.headers);
      abort.abort();
      await get.body?.cancel().catch(() => undefined);
      // No token: the endpoint's own refusal, an answer like any other.
      const approve = await fetch(`${own.url}/dashboard/api/approve`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
      assert.equal(approve.status, 401);
      assert.equal(approve.headers.get('x-content-type-options'), 'nosniff');
      secure('POST /dashboard/api/approve', approve.headers);
      await approve.text();
    } finally {
      await own.close();
    }
    await eventually('the stream is gone', () => dashboard.clients === streams, EVERY_TURN);
  });

  it('shows the Pipelines once their cache can be built, retrying with backoff until then, and pushes every change', async () => {
    assert.ok(server !== undefined);
    const client = await events(`${server.url}/dashboard/events`, { authorization: 'Bearer good' });
    await eventually('the first document', () => client.documents.length === 1, EVERY_TURN);
    registry.pipelines.objects.push(pipeline('1.0.0'));
    running = dashboard.run(registry, stop.signal);
    await eventually('the first attempt', () => registry.attempts === 1, EVERY_TURN);
    clock.advance(1_000);
    await eventually('the second attempt', () => registry.attempts === 2, EVERY_TURN);
    clock.advance(1_999);
    await tick();
    assert.equal(registry.attempts, 2, 'the backoff doubled');
    clock.advance(1);
    await eventually('the third attempt', () => registry.attempts === 3, EVERY_TURN);
    clock.advance(250);
    await eventually('the Pipeline shown', () => client.documents.at(-1)?.state.pipelines[0]?.environments[0]?.revision === '1.0.0', EVERY_TURN);
    await assert.rejects(dashboard.run(registry, stop.signal), /already running/);

    // An informer event: the page hears of it within the interval.
    registry.pipelines.objects[0] = pipeline('1.1.0');
    await registry.handler?.update?.(pipeline('1.0.0'), pipeline('1.1.0'));
    clock.advance(250);
    await eventually('the change pushed', () => client.documents.at(-1)?.state.pipelines[0]?.environments[0]?.revision === '1.1.0', EVERY_TURN);

    // Requests to a cluster are counted.
    dashboard.observeRequest({ cluster: 'secret:delivery/prod-kubeconfig', method: 'GET', code: '200', durationMs: 3 });
    dashboard.observeRequest({ cluster: 'secret:delivery/prod-kubeconfig', method: 'GET', code: '<error>', durationMs: 3 });
    clock.advance(250);
    await eventually('the requests counted', () => client.documents.at(-1)?.state.clusters.find((c) => c.name === 'secret:delivery/prod-kubeconfig')?.requests === 2, EVERY_TURN);
    assert.equal(client.documents.at(-1)?.state.clusters.find((c) => c.name === 'secret:delivery/prod-kubeconfig')?.failedRequests, 1, 'the 200 is no failure, the <error> is');
  });

  it('ends every stream and releases the Pipeline reader when its signal aborts', async () => {
    assert.ok(server !== undefined);
    const client = await events(`${server.url}/dashboard/events`, { authorization: 'Bearer good' });
    await eventually('connected', () => client.documents.length === 1, EVERY_TURN);
    assert.ok(dashboard.clients >= 1);
    stop.abort();
    await running;
    await client.done;
    assert.equal(dashboard.clients, 0);
    assert.equal(registry.pipelines.released, true);
    assert.equal(clock.pendingTimers, 0, 'no timer left');
    const late = await fetch(`${server.url}/dashboard/events`, { headers: { authorization: 'Bearer good' } });
    assert.equal(late.status, 503);
    await late.text();
  });
});

/** `count` Pipelines with `targets` unreachable targets in each of two environments. */
function unreachableFleet(count: number, targets: number): KubeObject[] {
  return Array.from({ length: count }, (_, p) => unreachablePipeline(p, targets));
}

describe('the dashboard under load and over time', () => {
  const clock = new FakeClock(Date.UTC(2026, 10, 23, 9));
  const dashboard = new Dashboard({ clock, stream: { lifetimeMs: 60_000, random: () => 0 } });
  const registry = new FakeRegistry(0);
  const stop = new AbortController();
  /** Bearer token → user; a user in `revoked` is refused (its binding deleted). */
  const users = new Map([['Bearer greedy', 'greedy'], ['Bearer alice', 'alice'], ['Bearer bob', 'bob']]);
  const revoked = new Set<string>();
  const asked: string[] = [];
  let running: Promise<void> | undefined;
  let server: HttpServer | undefined;
  const opened: Events[] = [];
  after(async () => {
    for (const e of opened) e.close();
    stop.abort();
    await running;
    await Promise.all(opened.map((e) => e.done));
    await server?.close();
  });

  async function open(token: string): Promise<Events> {
    assert.ok(server !== undefined);
    const res = await events(`${server.url}/dashboard/events`, { authorization: `Bearer ${token}` });
    opened.push(res);
    return res;
  }

  it('serves 6 Pipelines × 1,000 unreachable targets (over 1 MiB of status) to every viewer, cut to its bound with a marker', async () => {
    registry.pipelines.objects.push(...unreachableFleet(6, 1_000));
    server = await serveDashboard(dashboard, (req) => {
      const user = users.get(req.headers.authorization ?? '');
      asked.push(user ?? '');
      if (user === undefined) return Promise.resolve({ allowed: false, status: 401, message: 'Unauthorized' });
      if (revoked.has(user)) return Promise.resolve({ allowed: false, status: 403, message: `Authorization denied for user ${user}` });
      return Promise.resolve({ allowed: true, user });
    });
    running = dashboard.run(registry, stop.signal);
    await eventually('the Pipelines read', () => registry.attempts === 1, EVERY_TURN);
    const viewers = [await open('alice'), await open('bob')];
    for (const viewer of viewers) {
      assert.equal(viewer.status, 200);
      await eventually('a first document', () => viewer.documents.some((d) => d.state.pipelines.length === 6), EVERY_TURN);
    }
    assert.equal(dashboard.clients, 2, 'no viewer dropped');
    const doc = viewers[0]?.documents.find((d) => d.state.pipelines.length === 6);
    assert.ok(doc !== undefined);
    assert.ok(Buffer.byteLength(JSON.stringify(doc.state)) <= 512 * 1024);
    const marker = doc.state.truncated;
    assert.ok(marker !== undefined, 'the document says it was cut');
    assert.equal(marker.maxBytes, 512 * 1024);
    assert.equal(marker.pipelines, 0, 'every Pipeline shown');
    const shown = doc.state.pipelines.reduce((n, p) => n + p.environments.reduce((m, e) => m + e.targets.length, 0), 0);
    const omitted = doc.state.pipelines.reduce((n, p) => n + p.environments.reduce((m, e) => m + (e.omittedTargets ?? 0), 0), 0);
    assert.equal(shown + omitted, 12_000);
    assert.equal(marker.targets, omitted);
    for (const viewer of viewers) viewer.close();
    await eventually('both gone', () => dashboard.clients === 0, EVERY_TURN);
    registry.pipelines.objects.splice(0);
  });

  it('gives one user at most 4 streams: the next is 429 with Retry-After, and other users are served', async () => {
    const greedy: Events[] = [];
    for (let i = 0; i < 4; i++) greedy.push(await open('greedy'));
    assert.deepEqual(greedy.map((g) => g.status), [200, 200, 200, 200]);
    for (let i = 0; i < 12; i++) {
      const over = await open('greedy');
      assert.equal(over.status, 429);
      assert.equal(over.retryAfter, '5');
    }
    const alice = await open('alice');
    assert.equal(alice.status, 200);
    await eventually('alice served', () => alice.documents.length === 1, EVERY_TURN);
    assert.equal(dashboard.clients, 5);
    for (const g of [...greedy, alice]) g.close();
    await eventually('all gone', () => dashboard.clients === 0, EVERY_TURN);
  });

  it('ends a stream after its lifetime; the reconnection is authorised again, so a viewer whose access was revoked is refused', async () => {
    const alice = await open('alice');
    const bob = await open('bob');
    await eventually('both served', () => alice.documents.length === 1 && bob.documents.length === 1, EVERY_TURN);
    revoked.add('alice'); // her binding is deleted while her stream is open
    asked.splice(0);
    clock.advance(60_000);
    await alice.done;
    await bob.done;
    assert.equal(alice.reconnect, true, 'told to reconnect');
    assert.equal(dashboard.clients, 0);
    const aliceAgain = await open('alice');
    assert.equal(aliceAgain.status, 403, 'refused on reconnecting');
    const bobAgain = await open('bob');
    assert.equal(bobAgain.status, 200);
    assert.deepEqual(asked, ['alice', 'bob'], 'each reconnection went through authorisation');
    await eventually('bob served again', () => bobAgain.documents.length === 1, EVERY_TURN);
    bobAgain.close();
    await eventually('gone', () => dashboard.clients === 0, EVERY_TURN);
  });

  it('rejects a document bound too small for its marker, or a share that is not a positive integer, with a TypeError naming the option', () => {
    assert.throws(() => new Dashboard({ maxDocumentBytes: 4_096 }), /Dashboard option maxDocumentBytes must be an integer of at least 65536, got 4096/);
    assert.throws(() => new Dashboard({ stream: { maxClientsPerIdentity: 0.5 } }), /maxClientsPerIdentity must be a positive integer, got 0.5/);
  });
});

describe('the dashboard page', () => {
  it('is a script that parses, builds elements from text only, and loads nothing from elsewhere', () => {
    assert.doesNotThrow(() => new Script(appJs, { filename: 'app.js' }));
    for (const sink of ['innerHTML', 'outerHTML', 'insertAdjacentHTML', 'document.write', 'eval(', 'new Function', 'srcdoc']) {
      assert.ok(!appJs.includes(sink), `app.js uses ${sink}`);
    }
    // The only absolute URL is the SVG namespace; everything else is relative to /dashboard/.
    assert.deepEqual(pageHtml.match(/(?:src|href)="[^"]*"/g), ['href="favicon.svg"', 'href="app.css"', 'src="app.js"', 'src="favicon.svg"']);
    assert.ok(!/https?:\/\//.test(appJs));
    assert.match(securityHeaders['content-security-policy'] ?? '', /default-src 'none'/);
    assert.match(securityHeaders['content-security-policy'] ?? '', /require-trusted-types-for 'script'/);
    assert.ok(!(securityHeaders['content-security-policy'] ?? '').includes('unsafe'), 'no unsafe-inline, no unsafe-eval');
  });
});

describe('the dashboard of a sharded service', () => {
  it('sends this replica\'s view of its shard group read from the `shards` option on every document, and none without it', async () => {
    const clock = new FakeClock(Date.UTC(2026, 10, 23, 9));
    let owned: string[] = [];
    const status = (): ShardStatus => ({
      identity: 'replica-a', joined: true, peers: [{ identity: 'replica-a', weight: 1, live: true, self: true }],
      owned, handoff: [], unowned: [], boundMs: 34_000, orphaned: [],
    });
    const sharded = new Dashboard({ clock, stream: { minIntervalMs: 250, refreshMs: 1_000 }, shards: { status, keys: () => ['team-a', 'team-b'] } });
    const plain = new Dashboard({ clock });
    const servers = await Promise.all([sharded, plain].map((d) => HttpServer.start({
      name: 'metrics', address: { host: '127.0.0.1', port: 0 }, routes: {}, handlers: d.handlers, publicPaths: d.publicPaths,
      authorize: () => Promise.resolve({ allowed: true, user: 'reader' }),
    })));
    after(async () => { await Promise.all(servers.map((s) => s.close())); });
    const [one, two] = await Promise.all(servers.map((s) => events(`${s.url}/dashboard/events`)));
    assert.ok(one !== undefined && two !== undefined);
    await eventually('both first documents', () => one.documents.length === 1 && two.documents.length === 1, EVERY_TURN);
    assert.deepEqual(one.documents[0]?.state.shards?.peers.map((p) => [p.identity, p.assigned.count, p.acting]), [['replica-a', 2, 0]]);
    assert.equal(one.documents[0].state.shards.keys, 2);
    assert.equal(two.documents[0] === undefined ? undefined : 'shards' in two.documents[0].state, false, 'unsharded: no shard view');
    // The fences taken tell nothing: the stream's refresh reads the status again.
    owned = ['team-a', 'team-b'];
    clock.advance(1_000);
    await eventually('the refreshed document', () => one.documents.length === 2, EVERY_TURN);
    assert.equal(one.documents[1]?.state.shards?.peers[0]?.acting, 2);
    one.close();
    two.close();
    await eventually('gone', () => sharded.clients === 0 && plain.clients === 0, EVERY_TURN);
  });
});
