// Proofs of the request limiters: the token bucket and the LIST semaphores on a fake clock (their
// queues, tokens and the timers they arm), then a ClusterConnection's requests against a local
// server, observed through the limiters' counters and the fake clock, never through timing.
import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { after, afterEach, before, describe, it } from 'node:test';
import { ClosedError, FakeClock, type Clock, type Timer } from '../util/index.ts';
import { ClusterConnection, createListLimiter, resourcePath } from './index.ts';
import { ConcurrencyLimiter, defaultListLimiter, TokenBucket } from './limiter.ts';
import { closeServer, eventually, kubeConfigFor, listenLoopback, settle } from '../../fixtures/support/index.ts';

/** Tracks whether a promise settled, and how, without awaiting it. */
function track<T>(promise: Promise<T>): { state: 'pending' | 'resolved' | 'rejected'; error?: unknown } {
  const t: { state: 'pending' | 'resolved' | 'rejected'; error?: unknown } = { state: 'pending' };
  promise.then(() => { t.state = 'resolved'; }, (error: unknown) => { t.state = 'rejected'; t.error = error; });
  return t;
}

/** Fails fast, with a message, instead of hanging when a request the limiters should let through never goes. */
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

/**
 * A clock whose time the test sets without firing timers, as a busy event loop fires a real timer
 * late: the armed timers are listed and fired only when the test says.
 */
class LateClock implements Clock {
  time = 0;
  readonly armed = new Set<() => void>();

  now(): number {
    return this.time;
  }

  setTimer(_ms: number, fn: () => void): Timer {
    this.armed.add(fn);
    return { cancel: () => { this.armed.delete(fn); } };
  }

  /** Fires every armed timer (a fired timer is no longer armed). */
  fireAll(): void {
    for (const fn of [...this.armed]) {
      this.armed.delete(fn);
      fn();
    }
  }
}

describe('TokenBucket', () => {
  it('lets burst requests through at once, then one per 1000/qps ms, refilling up to the burst and no further', async () => {
    const clock = new FakeClock();
    const bucket = new TokenBucket({ qps: 4, burst: 3, clock });
    const takes = [0, 1, 2, 3, 4].map(() => track(bucket.take()));
    await settle(5);
    assert.deepEqual(takes.map((t) => t.state), ['resolved', 'resolved', 'resolved', 'pending', 'pending'], 'the burst of 3 is there at start');
    assert.equal(bucket.waiting, 2);
    assert.equal(clock.nextTimerIn, 250, 'the next token is due in 1000/qps ms');
    clock.advance(249);
    await settle(5);
    assert.equal(takes[3]?.state, 'pending', 'no token before 250 ms');
    clock.advance(1);
    await settle(5);
    assert.deepEqual(takes.map((t) => t.state), ['resolved', 'resolved', 'resolved', 'resolved', 'pending']);
    clock.advance(250);
    await settle(5);
    assert.equal(takes[4]?.state, 'resolved');
    assert.equal(bucket.tokens, 0);
    clock.advance(10_000);
    assert.equal(bucket.tokens, 3, 'refilled up to the burst, no further');
    const again = [0, 1, 2, 3].map(() => track(bucket.take()));
    await settle(5);
    assert.deepEqual(again.map((t) => t.state), ['resolved', 'resolved', 'resolved', 'pending']);
    clock.advance(250);
    await settle(5);
    assert.equal(again[3]?.state, 'resolved');
  });

  it('hands tokens out in arrival order; a newcomer never overtakes a waiter, even when its timer fires late', async () => {
    const clock = new LateClock();
    const bucket = new TokenBucket({ qps: 1, burst: 1, clock });
    const order: number[] = [];
    const takes = [0, 1, 2, 3].map((i) => bucket.take().then(() => { order.push(i); }));
    await settle(5);
    assert.deepEqual(order, [0]);
    // A second passes but the timer has not fired yet (a busy loop): the token is the head's.
    clock.time = 1_000;
    const late = bucket.take().then(() => { order.push(4); });
    await settle(5);
    assert.deepEqual(order, [0, 1], 'the waiting head got the accrued token, not the newcomer');
    for (let t = 2_000; t <= 4_000; t += 1_000) {
      clock.time = t;
      clock.fireAll();
      await settle(5);
    }
    await Promise.all([...takes, late]);
    assert.deepEqual(order, [0, 1, 2, 3, 4]);
    assert.equal(clock.armed.size, 0);
  });

  it('frees the place of a waiter whose signal aborts, with one abort listener on a signal many waiters share', async () => {
    const clock = new FakeClock();
    const bucket = new TokenBucket({ qps: 1, burst: 1, clock });
    await bucket.take();
    const leaving = new AbortController();
    const shared = new AbortController();
    const gone = track(bucket.take(leaving.signal));
    const stays = [0, 1, 2].map(() => track(bucket.take(shared.signal)));
    assert.equal(getEventListeners(shared.signal, 'abort').length, 1, 'three waiters, one listener on their shared signal');
    leaving.abort(new Error('caller left'));
    await settle(5);
    assert.equal(gone.state, 'rejected');
    assert.equal((gone.error as Error).message, 'caller left', 'rejected with the signal\'s reason');
    assert.equal(bucket.waiting, 3);
    assert.equal(getEventListeners(leaving.signal, 'abort').length, 0, 'its listener is gone');
    clock.advance(1_000);
    await settle(5);
    assert.deepEqual(stays.map((t) => t.state), ['resolved', 'pending', 'pending'], 'the next waiter took the aborted one\'s token');
    assert.equal(getEventListeners(shared.signal, 'abort').length, 1);
    shared.abort();
    await settle(5);
    assert.deepEqual(stays.map((t) => t.state), ['resolved', 'rejected', 'rejected']);
    assert.equal(bucket.waiting, 0);
    assert.equal(clock.pendingTimers, 0, 'the last waiter gone, its timer is cancelled');
    assert.equal(getEventListeners(shared.signal, 'abort').length, 0);
  });

  it('arms no timer while idle: none for 1,000 buckets, none once a queue drained, and one while 100 wait', async () => {
    const clock = new FakeClock();
    const buckets = Array.from({ length: 1_000 }, () => new TokenBucket({ qps: 20, burst: 30, clock }));
    for (const b of buckets) await b.take();
    assert.equal(clock.pendingTimers, 0, '1,000 idle buckets, no timer');
    clock.advance(60_000);
    assert.equal(clock.pendingTimers, 0, 'and none after a minute');
    const bucket = new TokenBucket({ qps: 10, burst: 1, clock });
    const waiters = Array.from({ length: 101 }, () => bucket.take());
    assert.equal(bucket.waiting, 100);
    assert.equal(clock.pendingTimers, 1, '100 waiters, one timer');
    assert.equal(clock.nextTimerIn, 100);
    clock.advance(10_000);
    await Promise.all(waiters);
    assert.equal(bucket.waiting, 0);
    assert.equal(clock.pendingTimers, 0, 'the queue drained, no timer left');
  });

  it('close() rejects the waiters with a ClosedError, cancels the timer and refuses later takes', async () => {
    const clock = new FakeClock();
    const bucket = new TokenBucket({ qps: 1, burst: 1, clock });
    await bucket.take();
    const waiting = bucket.take();
    bucket.close();
    await assert.rejects(waiting, ClosedError);
    assert.equal(clock.pendingTimers, 0);
    await assert.rejects(bucket.take(), ClosedError);
    bucket.close();
  });

  it('rejects invalid options with a TypeError naming the option', () => {
    assert.throws(() => new TokenBucket({ qps: 0, burst: 1 }), { name: 'TypeError', message: /qps/ });
    assert.throws(() => new TokenBucket({ qps: Number.POSITIVE_INFINITY, burst: 1 }), { name: 'TypeError', message: /qps/ });
    assert.throws(() => new TokenBucket({ qps: 1, burst: 0 }), { name: 'TypeError', message: /burst/ });
    assert.throws(() => new TokenBucket({ qps: 1, burst: 1.5 }), { name: 'TypeError', message: /burst/ });
  });
});

describe('ConcurrencyLimiter', () => {
  it('holds at most max at once and grants released slots in arrival order; a newcomer waits behind the queue', async () => {
    const slots = new ConcurrencyLimiter({ maxConcurrent: 2 });
    const releases: (() => void)[] = [];
    const order: number[] = [];
    const acquire = (i: number): Promise<void> => slots.acquire().then((release) => { order.push(i); releases.push(release); });
    const first = [0, 1, 2, 3].map(acquire);
    await settle(5);
    assert.deepEqual(order, [0, 1]);
    assert.equal(slots.held, 2);
    assert.equal(slots.waiting, 2);
    releases[0]?.();
    releases[0]?.();
    const late = acquire(4);
    await settle(5);
    assert.deepEqual(order, [0, 1, 2], 'the released slot went to the head of the queue (releasing twice counts once)');
    assert.equal(slots.held, 2);
    releases[1]?.();
    releases[2]?.();
    await Promise.all([...first, late]);
    assert.deepEqual(order, [0, 1, 2, 3, 4]);
    for (const release of releases.slice(3)) release();
    assert.equal(slots.held, 0);
    assert.equal(slots.waiting, 0);
  });

  it('frees the place of a waiter whose signal aborts', async () => {
    const slots = new ConcurrencyLimiter({ maxConcurrent: 1 });
    const release = await slots.acquire();
    const leaving = new AbortController();
    const gone = track(slots.run(leaving.signal, () => Promise.resolve('ran')));
    const next = slots.run(undefined, () => Promise.resolve('next ran'));
    leaving.abort();
    await settle(5);
    assert.equal(gone.state, 'rejected');
    assert.equal(slots.waiting, 1);
    release();
    assert.equal(await next, 'next ran', 'the slot went to the waiter behind the one that left');
    assert.equal(slots.held, 0);
    assert.equal(getEventListeners(leaving.signal, 'abort').length, 0);
  });

  it('stop() rejects the waiters with a ClosedError and refuses later acquisitions; holders keep their slot', async () => {
    const slots = createListLimiter(1);
    const release = await slots.acquire();
    const waiting = slots.acquire();
    await slots.stop();
    await assert.rejects(waiting, ClosedError);
    await assert.rejects(slots.acquire(), ClosedError);
    assert.equal(slots.held, 1);
    release();
    assert.equal(slots.held, 0);
  });

  it('createListLimiter defaults to 50 slots and takes another bound; an invalid one is a TypeError', () => {
    assert.equal(createListLimiter().max, 50);
    assert.equal(createListLimiter(5).max, 5);
    assert.throws(() => createListLimiter(0), { name: 'TypeError', message: /maxConcurrent/ });
    assert.throws(() => new ConcurrencyLimiter({ maxConcurrent: 1.5 }), { name: 'TypeError', message: /maxConcurrent/ });
  });
});

const configMapGvk = { group: '', version: 'v1', kind: 'ConfigMap' };
const ITEMS = ['a', 'b', 'c', 'd', 'e'];

/** One request as the server saw it, with the LIST slots held at that moment. */
interface Arrival {
  readonly kind: 'discovery' | 'list' | 'continue' | 'watch' | 'get' | 'hang';
  /** Slots of the shared LIST limiter under test held when the request arrived. */
  readonly listSlots: number;
}

function json(res: ServerResponse, body: unknown): void {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

describe('ClusterConnection limits', () => {
  const arrivals: Arrival[] = [];
  /** LISTs in namespace `hang`: accepted, never answered (until the test ends them). */
  const hanging = new Set<ServerResponse>();
  let listLimiterUnderTest: ConcurrencyLimiter = defaultListLimiter();
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const record = (kind: Arrival['kind']): void => { arrivals.push({ kind, listSlots: listLimiterUnderTest.held }); };
    if (url.pathname === '/api/v1') {
      record('discovery');
      json(res, { kind: 'APIResourceList', groupVersion: 'v1', resources: [{ name: 'configmaps', kind: 'ConfigMap', namespaced: true, verbs: ['list', 'watch', 'get'] }] });
    } else if (url.pathname === '/api/v1/namespaces/hang/configmaps') {
      record('hang');
      hanging.add(res);
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
  const info = { gvk: configMapGvk, resource: 'configmaps', namespaced: true, verbs: ['list', 'watch'] } as const;
  const getPath = resourcePath(info, { namespace: 'ns', name: 'x' });

  before(async () => { url = await listenLoopback(server); });
  after(async () => {
    await closeServer(server);
  });
  afterEach(() => {
    arrivals.length = 0;
    for (const res of hanging) res.destroy();
    hanging.clear();
    listLimiterUnderTest = defaultListLimiter();
  });

  it('takes a token for every fresh request (discovery, first LIST page, WATCH, request()) and none for continuation pages, which still take a LIST slot', async (t) => {
    // Time stands still unless the test moves it: the bucket never refills by itself.
    const clock = new FakeClock();
    const listLimiter = createListLimiter(3);
    listLimiterUnderTest = listLimiter;
    const conn = new ClusterConnection({ name: 'limited', kubeConfig: kubeConfigFor(url, { token: 'limits-token' }), listLimiter, qps: 1, burst: 2, clock });
    t.after(() => conn.close());
    const signal = AbortSignal.timeout(10_000);

    const client = conn.resourceClient(await conn.resolve(configMapGvk, signal));
    const names: string[] = [];
    let token: string | undefined;
    do {
      const page = await released('a LIST page', client.list({ namespace: 'ns', limit: 2, continue: token, signal }));
      names.push(...page.items.map((i) => i.metadata?.name ?? ''));
      token = page.metadata.continue;
    } while (token !== undefined);
    assert.deepEqual(names, ITEMS, 'three pages, two of them continuations, with the burst of 2 spent on discovery and the first page');
    assert.deepEqual(arrivals.map((a) => [a.kind, a.listSlots]), [['discovery', 0], ['list', 1], ['continue', 1], ['continue', 1]], 'every LIST page inside a LIST slot; discovery outside');
    assert.equal(listLimiter.held, 0);
    assert.equal(clock.pendingTimers, 0, 'nobody waits: no timer');

    // Each fresh request now waits for its token, which comes 1000/qps ms later.
    const fresh: [Arrival['kind'], () => Promise<unknown>][] = [
      ['list', () => client.list({ namespace: 'ns', signal })],
      ['watch', async () => { for await (const _batch of await client.watch({ namespace: 'ns', resourceVersion: '9', timeoutSeconds: 300, allowWatchBookmarks: true, signal })) { /* one bookmark */ } }],
      ['get', () => conn.request({ method: 'GET', path: getPath, signal })],
    ];
    for (const [kind, send] of fresh) {
      const before = arrivals.length;
      const sent = send();
      await settle(5);
      assert.equal(arrivals.length, before, `the ${kind} waits for a token`);
      assert.equal(clock.nextTimerIn, 1_000, `one timer, due with the ${kind}'s token`);
      clock.advance(1_000);
      await released(`the ${kind} once its token came`, sent);
      assert.equal(arrivals.at(-1)?.kind, kind);
      assert.equal(arrivals.at(-1)?.listSlots, kind === 'list' ? 1 : 0, `${kind}: a LIST slot for LISTs only`);
    }
    assert.equal(clock.pendingTimers, 0, 'idle again: no timer');
  });

  it('gives each connection its own request bucket', async (t) => {
    const clock = new FakeClock();
    const conns = [0, 1].map((i) => new ClusterConnection({ name: `c${i}`, kubeConfig: kubeConfigFor(url, { token: 'limits-token' }), qps: 1, burst: 1, clock }));
    t.after(() => Promise.all(conns.map((c) => c.close())));
    for (const c of conns) await released('the first request of each connection', c.request({ method: 'GET', path: getPath, signal: AbortSignal.timeout(10_000) }));
    assert.equal(arrivals.length, 2, 'two connections, a burst of one each, no waiting');
  });

  it('a cluster\'s LIST pages take at most its share of the shared slots; beyond the shared cap, LISTs wait for a slot', async (t) => {
    const listLimiter = createListLimiter(3);
    listLimiterUnderTest = listLimiter;
    const connect = (name: string): ClusterConnection => {
      const conn = new ClusterConnection({ name, kubeConfig: kubeConfigFor(url, { token: 'limits-token' }), listLimiter, maxListsPerCluster: 2, qps: 1000, burst: 1000 });
      t.after(() => conn.close());
      return conn;
    };
    const stuck = new AbortController();
    t.after(() => { stuck.abort(); });
    /** Starts `count` LISTs on `cluster` that hang until `stuck` aborts; waits until `arrived` hang at the server. */
    const hang = async (cluster: string, count: number, what: string, arrived: number): Promise<Promise<string>[]> => {
      const client = connect(cluster).resourceClient(info);
      const lists = Array.from({ length: count }, () => client.list({ namespace: 'hang', signal: stuck.signal }).then(() => 'answered', () => 'aborted'));
      await eventually(what, () => hanging.size === arrived, 5_000);
      await settle(5);
      return lists;
    };
    const pending = await hang('hung', 4, 'the hung cluster\'s first LISTs to arrive', 2);
    assert.equal(listLimiter.held, 2, 'the hung cluster holds its share of 2');
    assert.equal(listLimiter.waiting, 0, 'its other LISTs wait in its share, not in the shared queue');

    const healthy = await released('a healthy cluster\'s LIST', connect('healthy').resourceClient(info).list({ namespace: 'ns', signal: AbortSignal.timeout(10_000) }));
    assert.equal(healthy.items.length, ITEMS.length, 'the healthy cluster listed while the hung one held its share');

    const more = await hang('other-hung', 2, 'the other hung cluster\'s first LIST to arrive', 3);
    assert.equal(listLimiter.held, 3, 'the shared cap of 3');
    assert.equal(listLimiter.waiting, 1, 'the next LIST waits for a shared slot');
    stuck.abort();
    assert.deepEqual(await Promise.all([...pending, ...more]), Array.from({ length: 6 }, () => 'aborted'));
    assert.equal(listLimiter.waiting, 0, 'aborted waiters left the shared queue');
  });

  it('uses the process-wide LIST limiter of 50 when given none', async (t) => {
    const conn = new ClusterConnection({ name: 'default-lists', kubeConfig: kubeConfigFor(url, { token: 'limits-token' }) });
    t.after(() => conn.close());
    const signal = AbortSignal.timeout(10_000);
    const client = conn.resourceClient(await conn.resolve(configMapGvk, signal));
    await client.list({ namespace: 'ns', signal });
    assert.deepEqual(arrivals.map((a) => [a.kind, a.listSlots]), [['discovery', 0], ['list', 1]], 'the LIST held a slot of the process-wide limiter');
    assert.equal(defaultListLimiter().max, 50);
  });
});
