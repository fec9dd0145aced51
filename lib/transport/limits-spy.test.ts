// Proofs that a ClusterConnection's requests pass its limiters, observed through a spy on
// Bottleneck's schedule and a fake heartbeat (node:test's mocked setInterval and Date), never timing.
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, afterEach, before, describe, it } from 'node:test';
import Bottleneck from 'bottleneck';
import { KubeConfig } from '@kubernetes/client-node';
import { ClusterConnection, createListLimiter, resourcePath } from './index.ts';
import { createRequestLimiter, defaultListLimiter } from './limiter.ts';

const configMapGvk = { group: '', version: 'v1', kind: 'ConfigMap' };
const ITEMS = ['a', 'b', 'c', 'd', 'e'];

/** What the spy knows of one limiter: jobs scheduled, and jobs running now. */
interface LimiterSpy {
  scheduled: number;
  active: number;
}

const spies = new Map<Bottleneck, LimiterSpy>();
type Schedule = (this: Bottleneck, ...args: unknown[]) => Promise<unknown>;
// eslint-disable-next-line @typescript-eslint/unbound-method -- kept to be restored, and only ever called with its limiter as `this`
const originalSchedule = Bottleneck.prototype.schedule as Schedule;

/** Counts every job scheduled on any Bottleneck and tracks which limiters have a job running. */
function installSpy(): void {
  const spied: Schedule = function spiedSchedule(this: Bottleneck, ...args: unknown[]): Promise<unknown> {
    let spy = spies.get(this);
    if (spy === undefined) {
      spy = { scheduled: 0, active: 0 };
      spies.set(this, spy);
    }
    const s = spy;
    s.scheduled++;
    const wrapped = args.map((arg) => (typeof arg !== 'function' ? arg : async (...jobArgs: unknown[]): Promise<unknown> => {
      s.active++;
      try {
        return await (arg as (...a: unknown[]) => Promise<unknown>)(...jobArgs);
      } finally {
        s.active--;
      }
    }));
    return originalSchedule.apply(this, wrapped);
  };
  Bottleneck.prototype.schedule = spied;
}

/** One request as the server saw it, with which limiters held a running job at that moment. */
interface Arrival {
  readonly kind: 'discovery' | 'list' | 'continue' | 'watch' | 'get';
  /** Running jobs of limiters other than the LIST limiter under test. */
  readonly requestJobs: number;
  readonly listJobs: number;
}

function kubeConfig(server: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server, skipTLSVerify: true }],
    users: [{ name: 'u', token: 'limits-token' }],
    contexts: [{ name: 'ctx', cluster: 'c', user: 'u' }],
    currentContext: 'ctx',
  });
  return kc;
}

/** Waits until the limiter has filed every job it received (Bottleneck queues them asynchronously). */
async function filed(limiter: Bottleneck): Promise<void> {
  while (limiter.counts().RECEIVED > 0) await new Promise<void>((resolve) => { setImmediate(resolve); });
}

/** Fails fast, with a message, instead of hanging when a job the limiter should release never runs. */
async function released<T>(what: string, promise: Promise<T>, timeoutMs = 5_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => { reject(new Error(`the limiter did not release ${what} within ${timeoutMs / 1000} s`)); }, timeoutMs);
  });
  try {
    return await Promise.race([promise, expired]);
  } finally {
    clearTimeout(timer);
  }
}

function json(res: ServerResponse, body: unknown): void {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

describe('ClusterConnection limits', () => {
  const arrivals: Arrival[] = [];
  let listLimiterUnderTest: Bottleneck | undefined;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const listJobs = listLimiterUnderTest === undefined ? 0 : spies.get(listLimiterUnderTest)?.active ?? 0;
    let requestJobs = 0;
    for (const [limiter, spy] of spies) if (limiter !== listLimiterUnderTest) requestJobs += spy.active;
    const record = (kind: Arrival['kind']): void => { arrivals.push({ kind, requestJobs, listJobs }); };
    if (url.pathname === '/api/v1') {
      record('discovery');
      json(res, { kind: 'APIResourceList', groupVersion: 'v1', resources: [{ name: 'configmaps', kind: 'ConfigMap', namespaced: true, verbs: ['list', 'watch', 'get'] }] });
    } else if (url.pathname === '/api/v1/namespaces/ns/configmaps' && url.searchParams.get('watch') === 'true') {
      record('watch');
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}}\n');
    } else if (url.pathname === '/api/v1/namespaces/ns/configmaps') {
      record(url.searchParams.has('continue') ? 'continue' : 'list');
      const start = Number(url.searchParams.get('continue') ?? '0');
      const limit = Number(url.searchParams.get('limit') ?? String(ITEMS.length));
      const end = Math.min(ITEMS.length, start + limit);
      json(res, { metadata: { resourceVersion: '9', ...(end < ITEMS.length ? { continue: String(end) } : {}) }, items: ITEMS.slice(start, end).map((name) => ({ metadata: { name, namespace: 'ns' } })) });
    } else {
      record('get');
      json(res, { metadata: { name: 'x', namespace: 'ns' } });
    }
  });
  let url = '';

  before(async () => {
    installSpy();
    await new Promise<void>((resolve) => { server.listen(0, '127.0.0.1', resolve); });
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    Bottleneck.prototype.schedule = originalSchedule;
    server.closeAllConnections();
    await new Promise<void>((resolve) => { server.close(() => { resolve(); }); });
  });
  afterEach(() => {
    arrivals.length = 0;
    spies.clear();
    listLimiterUnderTest = undefined;
  });

  /** The connection's own request limiter: the one limiter the spy saw that is not a LIST limiter. */
  function requestLimiterOf(listLimiter: Bottleneck): Bottleneck {
    const others = [...spies.keys()].filter((l) => l !== listLimiter);
    assert.equal(others.length, 1, 'one request limiter for the connection');
    const [limiter] = others;
    assert.ok(limiter !== undefined);
    return limiter;
  }

  it('sends every fresh request (discovery, first LIST page, WATCH, request()) from inside a job of its QPS/burst limiter, and every LIST page, continuation pages included, from inside a job of the LIST limiter', async (t) => {
    // The limiter's heartbeat (its token refill) moves only when the test ticks.
    t.mock.timers.enable({ apis: ['setInterval', 'Date'] });
    const listLimiter = createListLimiter(3);
    t.after(() => listLimiter.stop());
    listLimiterUnderTest = listLimiter;
    const conn = new ClusterConnection({ name: 'limited', kubeConfig: kubeConfig(url), listLimiter, qps: 4, burst: 100 });
    t.after(() => conn.close());
    const signal = AbortSignal.timeout(10_000);

    const client = conn.resourceClient(await conn.resolve(configMapGvk, signal));
    const names: string[] = [];
    let token: string | undefined;
    do {
      const page = await client.list({ namespace: 'ns', limit: 2, continue: token, signal });
      names.push(...page.items.map((i) => i.metadata?.name ?? ''));
      token = page.metadata.continue;
    } while (token !== undefined);
    assert.deepEqual(names, ITEMS, 'three pages');
    assert.equal((await client.list({ namespace: 'ns', signal })).items.length, ITEMS.length);
    const stream = await client.watch({ namespace: 'ns', resourceVersion: '9', timeoutSeconds: 300, allowWatchBookmarks: true, signal });
    for await (const _batch of stream) { /* one bookmark, then the end */ }
    for (let i = 0; i < 5; i++) await conn.request({ method: 'GET', path: resourcePath({ gvk: configMapGvk, resource: 'configmaps', namespaced: true, verbs: [] }, { namespace: 'ns', name: 'x' }), signal });

    assert.deepEqual(arrivals.map((a) => a.kind), ['discovery', 'list', 'continue', 'continue', 'list', 'watch', 'get', 'get', 'get', 'get', 'get']);
    for (const [i, a] of arrivals.entries()) {
      // A continuation page is the rest of a LIST already admitted: it pays no QPS token (as
      // client-go's pager), but it still takes a LIST slot.
      if (a.kind === 'continue') assert.equal(a.requestJobs, 0, `continuation page ${i} must not wait for the request limiter`);
      else assert.ok(a.requestJobs >= 1, `request ${i} (${a.kind}) arrived outside the request limiter`);
      if (a.kind === 'list' || a.kind === 'continue') assert.ok(a.listJobs >= 1, `LIST page ${i} arrived outside the LIST limiter`);
      else assert.equal(a.listJobs, 0, `${a.kind} ${i} must not hold a LIST slot`);
    }
    const fresh = arrivals.filter((a) => a.kind !== 'continue').length;
    const requestLimiter = requestLimiterOf(listLimiter);
    assert.equal(spies.get(listLimiter)?.scheduled, 4, 'one LIST-limiter job per page, continuation pages included');
    assert.equal(spies.get(requestLimiter)?.scheduled, fresh, 'one request-limiter job per fresh request');
    // Each fresh request took one token of the connection's burst; a heartbeat adds qps/4.
    assert.equal(await requestLimiter.currentReservoir(), 100 - fresh);
    t.mock.timers.tick(250);
    assert.equal(await requestLimiter.currentReservoir(), 100 - fresh + 1);
  });

  it('holds requests beyond the burst until the limiter refills at qps', async (t) => {
    t.mock.timers.enable({ apis: ['setInterval', 'Date'] });
    const listLimiter = createListLimiter(3);
    t.after(() => listLimiter.stop());
    listLimiterUnderTest = listLimiter;
    const conn = new ClusterConnection({ name: 'burst', kubeConfig: kubeConfig(url), listLimiter, qps: 4, burst: 2 });
    t.after(() => conn.close());
    const signal = AbortSignal.timeout(10_000);
    const path = '/api/v1/namespaces/ns/configmaps/x';
    const done: number[] = [];
    const requests = [0, 1, 2].map((i) => conn.request({ method: 'GET', path, signal }).then(() => { done.push(i); }));
    await Promise.all(requests.slice(0, 2));
    const requestLimiter = requestLimiterOf(listLimiter);
    await filed(requestLimiter);
    assert.equal(await requestLimiter.currentReservoir(), 0, 'the burst of 2 is spent');
    assert.equal(requestLimiter.counts().QUEUED, 1, 'the third request waits in the limiter');
    assert.equal(arrivals.length, 2, 'and has not reached the server');
    assert.deepEqual(done, [0, 1]);
    t.mock.timers.tick(250);
    await released('the third request after one heartbeat', requests[2] ?? Promise.reject(new Error('no third request')));
    assert.equal(arrivals.length, 3, 'a heartbeat later (qps 4 = one token per 250 ms) it is sent');
  });

  it('gives each connection its own request limiter', async (t) => {
    const listLimiter = createListLimiter(3);
    t.after(() => listLimiter.stop());
    listLimiterUnderTest = listLimiter;
    const conns = [0, 1].map((i) => new ClusterConnection({ name: `c${i}`, kubeConfig: kubeConfig(url), listLimiter }));
    t.after(() => Promise.all(conns.map((c) => c.close())));
    for (const c of conns) await c.request({ method: 'GET', path: '/api/v1/namespaces/ns/configmaps/x', signal: AbortSignal.timeout(10_000) });
    const requestLimiters = [...spies.entries()].filter(([l]) => l !== listLimiter);
    assert.equal(requestLimiters.length, 2, 'two connections, two request limiters');
    assert.deepEqual(requestLimiters.map(([, s]) => s.scheduled), [1, 1]);
  });

  it('uses the process-wide LIST limiter of 50 when given none', async (t) => {
    const conn = new ClusterConnection({ name: 'default-lists', kubeConfig: kubeConfig(url) });
    t.after(() => conn.close());
    const signal = AbortSignal.timeout(10_000);
    const client = conn.resourceClient(await conn.resolve(configMapGvk, signal));
    await client.list({ namespace: 'ns', signal });
    const shared = defaultListLimiter();
    assert.equal(spies.get(shared)?.scheduled, 1, 'the LIST went through the process-wide limiter');
    assert.equal(await shared.check(50), true, '50 LISTs may run at once');
    assert.equal(await shared.check(51), false, 'not 51');
  });
});

describe('limiter factories', () => {
  it('createListLimiter defaults to 50 concurrent LISTs and takes another bound', async () => {
    const lists = createListLimiter();
    assert.equal(await lists.check(50), true);
    assert.equal(await lists.check(51), false);
    const small = createListLimiter(5);
    assert.equal(await small.check(5), true);
    assert.equal(await small.check(6), false);
    assert.throws(() => createListLimiter(0), /maxConcurrent/);
    await Promise.all([lists.stop(), small.stop()]);
  });

  it('createRequestLimiter lets a burst through, then refills qps/4 tokens per 250 ms heartbeat up to the burst', async (t) => {
    t.mock.timers.enable({ apis: ['setInterval', 'Date'] });
    const limiter = createRequestLimiter(8, 3);
    t.after(() => limiter.disconnect(false));
    assert.equal(await limiter.check(3), true);
    assert.equal(await limiter.check(4), false, 'the burst is 3');
    const ran: number[] = [];
    const jobs = [0, 1, 2, 3, 4].map((i) => limiter.schedule(() => { ran.push(i); return Promise.resolve(); }));
    await Promise.all(jobs.slice(0, 3));
    await filed(limiter);
    assert.equal(limiter.counts().QUEUED, 2, 'two jobs wait for tokens');
    assert.deepEqual(ran, [0, 1, 2]);
    t.mock.timers.tick(250);
    await released('two jobs after one heartbeat', Promise.all(jobs.slice(3)));
    assert.deepEqual(ran, [0, 1, 2, 3, 4], 'qps 8: two tokens per heartbeat');
    for (let i = 0; i < 4; i++) t.mock.timers.tick(250);
    assert.equal(await limiter.currentReservoir(), 3, 'refilled up to the burst, no further');
  });
});
