import assert from 'node:assert/strict';
import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { setImmediate as tick } from 'node:timers/promises';
import { afterEach, describe, it } from 'node:test';
import { FakeClock } from '../../lib/util/index.ts';
import { EventStream, type EventStreamOptions } from './stream.ts';
import { eventually, EVERY_TURN } from '../../fixtures/support/index.ts';

/** One SSE client over a real socket: the frames it received, parsed. */
interface Client {
  readonly res: IncomingMessage;
  /** `state` documents received, in order. */
  readonly documents: unknown[];
  /** Comment lines (heartbeats) received. */
  readonly comments: string[];
  /** Event names of every frame with data, in order. */
  readonly events: string[];
  readonly ended: Promise<void>;
  close(): void;
}

const servers: Server[] = [];
const sockets: Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await Promise.all(servers.splice(0).map((server) => new Promise<void>((resolve) => {
    server.close(() => { resolve(); });
    server.closeAllConnections();
  })));
});

async function serve(stream: EventStream): Promise<string> {
  // Each client names its identity in a header (the dashboard takes the authenticated user).
  const server = createServer((req, res) => { stream.attach(res, req.method ?? 'GET', String(req.headers['x-identity'] ?? 'viewer')); });
  servers.push(server);
  await new Promise<void>((resolve) => { server.listen(0, '127.0.0.1', resolve); });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
}

function open(url: string, method = 'GET', identity = 'viewer'): Promise<Client> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, headers: { 'x-identity': identity } }, (res) => {
      const documents: unknown[] = [];
      const comments: string[] = [];
      const events: string[] = [];
      let buffer = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        buffer += chunk;
        for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
          const frame = buffer.slice(0, end).split('\n');
          buffer = buffer.slice(end + 2);
          const event = frame.find((line) => line.startsWith('event: '))?.slice(7) ?? 'message';
          for (const line of frame) {
            if (line.startsWith('data: ')) {
              events.push(event);
              if (event === 'state') documents.push(JSON.parse(line.slice(6)));
            } else if (line.startsWith(':')) comments.push(line);
          }
        }
      });
      const ended = new Promise<void>((done) => { res.once('close', () => { done(); }); });
      resolve({ res, documents, comments, events, ended, close: () => { req.destroy(); } });
    });
    req.once('error', reject);
    req.end();
  });
}

function setUp(options: EventStreamOptions = {}): { clock: FakeClock; stream: EventStream; set: (value: unknown) => void; reads: () => number } {
  const clock = new FakeClock(1_000_000);
  let document: unknown = { version: 0 };
  let reads = 0;
  const stream = new EventStream(() => { reads += 1; return JSON.stringify(document); }, { clock, ...options });
  return { clock, stream, set: (value) => { document = value; }, reads: () => reads };
}

describe('the dashboard event stream', () => {
  it('sends the current document on connect, stamped with the server time, as text/event-stream', async () => {
    const { stream } = setUp();
    const client = await open(await serve(stream));
    assert.equal(client.res.statusCode, 200);
    assert.equal(client.res.headers['content-type'], 'text/event-stream; charset=utf-8');
    assert.equal(client.res.headers['cache-control'], 'no-store');
    await eventually('the first document', () => client.documents.length === 1, EVERY_TURN);
    assert.deepEqual(client.documents[0], { now: 1_000_000, state: { version: 0 } });
    assert.equal(stream.clients, 1);
  });

  it('coalesces: many changes within the interval go out as one update, an unchanged document not at all', async () => {
    const { clock, stream, set, reads } = setUp({ minIntervalMs: 250 });
    const client = await open(await serve(stream));
    await eventually('the first document', () => client.documents.length === 1, EVERY_TURN);
    clock.advance(250);
    const readsBefore = reads();
    for (let i = 1; i <= 100; i++) {
      set({ version: i });
      stream.notify();
    }
    assert.equal(reads(), readsBefore, 'nothing is read before the update is due');
    clock.advance(0);
    await eventually('one update', () => client.documents.length === 2, EVERY_TURN);
    assert.deepEqual(client.documents[1], { now: 1_000_250, state: { version: 100 } }, 'only the last state');
    assert.equal(reads(), readsBefore + 1, 'read once for a hundred notifications');

    // The next change waits for the interval to pass since the last update.
    set({ version: 101 });
    stream.notify();
    clock.advance(249);
    await tick();
    assert.equal(client.documents.length, 2, 'not before the interval');
    clock.advance(1);
    await eventually('the second update', () => client.documents.length === 3, EVERY_TURN);

    // Notified, but nothing changed: nothing is sent.
    stream.notify();
    clock.advance(250);
    set({ version: 101 });
    stream.notify();
    clock.advance(250);
    for (let i = 0; i < 20; i++) await tick();
    assert.equal(client.documents.length, 3);
    assert.equal(stream.stats().sent, 3);
  });

  it('reads the document again every refresh interval, and sends a heartbeat comment when idle', async () => {
    const { clock, stream, set } = setUp({ refreshMs: 1_000, heartbeatMs: 5_000 });
    const client = await open(await serve(stream));
    await eventually('the first document', () => client.documents.length === 1, EVERY_TURN);
    clock.advance(0); // the update a connect schedules for the others: nothing new
    set({ version: 1 }); // changed without a notify (a counter)
    clock.advance(1_000);
    await eventually('the refresh', () => client.documents.length === 2, EVERY_TURN);
    assert.deepEqual(client.documents[1], { now: 1_001_000, state: { version: 1 } });
    clock.advance(4_000);
    for (let i = 0; i < 20; i++) await tick();
    assert.deepEqual(client.comments, []);
    clock.advance(1_000);
    await eventually('a heartbeat', () => client.comments.length === 1, EVERY_TURN);
    assert.equal(client.comments[0], ': keep-alive');
  });

  it('drops a client that stops reading once its unsent bytes pass the bound, and keeps serving the others', async (t) => {
    const { clock, stream, set } = setUp({ maxBufferedBytes: 256 * 1024, minIntervalMs: 10 });
    const url = new URL(await serve(stream));
    const fast = await open(url.href);
    // A client that sends its request and never reads a byte of the answer.
    const slow = connect(Number(url.port), '127.0.0.1');
    sockets.push(slow);
    slow.pause();
    slow.write(`GET / HTTP/1.1\r\nHost: ${url.host}\r\n\r\n`);
    await eventually('both connected', () => stream.clients === 2, EVERY_TURN);
    const slowClosed = new Promise<void>((resolve) => { slow.once('close', () => { resolve(); }); });
    const big = 'x'.repeat(64 * 1024);
    let version = 0;
    // Each update is 64 KiB; the kernel's socket buffers take some, then Node's buffer grows.
    for (; version < 2_000 && stream.clients === 2; version++) {
      set({ version, big });
      stream.notify();
      clock.advance(10);
      await eventually(`update ${version} reaches the fast client`, () => fast.documents.length >= version + 2 || stream.clients < 2, EVERY_TURN);
    }
    assert.equal(stream.clients, 1, `the slow client was dropped after ${version} updates`);
    t.diagnostic(`the slow client was dropped after ${version} updates of 64 KiB (the rest sat in kernel buffers)`);
    assert.equal(stream.stats().dropped, 1);
    slow.resume(); // read what was sent, then see the end
    await slowClosed;
    set({ version: 'after' });
    stream.notify();
    clock.advance(10);
    await eventually('the fast client still gets updates', () => (fast.documents.at(-1) as { state: { version: unknown } }).state.version === 'after', EVERY_TURN);
  });

  it('answers 503 beyond maxClients, and headers only to HEAD', async () => {
    const { stream } = setUp({ maxClients: 2 });
    const url = await serve(stream);
    const a = await open(url);
    const b = await open(url);
    await eventually('two clients', () => stream.clients === 2, EVERY_TURN);
    const c = await open(url);
    assert.equal(c.res.statusCode, 503);
    assert.equal(c.res.headers['retry-after'], '5');
    await c.ended;
    a.close();
    await eventually('one left', () => stream.clients === 1, EVERY_TURN);
    const head = await open(url, 'HEAD');
    assert.equal(head.res.statusCode, 200);
    await head.ended;
    assert.equal(stream.clients, 1, 'HEAD is not a client');
    b.close();
    await eventually('none left', () => stream.clients === 0, EVERY_TURN);
  });

  it('close() ends every stream, refuses new ones and leaves no timer behind', async () => {
    const { clock, stream } = setUp();
    const url = await serve(stream);
    const clients = [await open(url), await open(url), await open(url)];
    await eventually('three clients', () => stream.clients === 3, EVERY_TURN);
    stream.notify();
    assert.ok(clock.pendingTimers > 0);
    stream.close();
    await Promise.all(clients.map((c) => c.ended));
    for (const c of clients) assert.equal(c.res.complete, true, 'ended cleanly, not cut');
    assert.equal(stream.clients, 0);
    assert.equal(clock.pendingTimers, 0);
    const late = await open(url);
    assert.equal(late.res.statusCode, 503);
    stream.close(); // idempotent
  });

  it('stops its timers when the last client leaves', async () => {
    const { clock, stream } = setUp();
    const client = await open(await serve(stream));
    await eventually('connected', () => stream.clients === 1, EVERY_TURN);
    assert.ok(clock.pendingTimers > 0);
    client.close();
    await eventually('gone', () => stream.clients === 0, EVERY_TURN);
    assert.equal(clock.pendingTimers, 0);
  });

  it('sends a first document larger than the unsent-bytes bound whole: a document\'s size is never a reason to drop a viewer', async () => {
    const { clock, stream, set } = setUp({ maxBufferedBytes: 64 * 1024, minIntervalMs: 10 });
    const big = { version: 1, big: 'x'.repeat(256 * 1024) };
    set(big);
    const client = await open(await serve(stream));
    await eventually('the first document', () => client.documents.length === 1 || stream.clients === 0, EVERY_TURN);
    assert.deepEqual((client.documents[0] as { state: unknown } | undefined)?.state, big);
    assert.equal(stream.stats().dropped, 0);
    // And a later one as large, once the first is read.
    set({ ...big, version: 2 });
    stream.notify();
    clock.advance(10);
    await eventually('the second document', () => client.documents.length === 2 || stream.clients === 0, EVERY_TURN);
    assert.equal(stream.clients, 1);
    assert.equal(stream.stats().dropped, 0);
  });

  it('gives one identity at most its share of the clients: one more is answered 429 with Retry-After, others are unaffected', async () => {
    const { stream } = setUp({ maxClients: 16, maxClientsPerIdentity: 4 });
    const url = await serve(stream);
    const greedy: Client[] = [];
    for (let i = 0; i < 4; i++) greedy.push(await open(url, 'GET', 'user:greedy'));
    await eventually('four streams', () => stream.clientsOf('user:greedy') === 4, EVERY_TURN);
    for (let i = 0; i < 12; i++) {
      const over = await open(url, 'GET', 'user:greedy');
      assert.equal(over.res.statusCode, 429);
      assert.equal(over.res.headers['retry-after'], '5');
      await over.ended;
    }
    assert.equal(stream.stats().refusedOverShare, 12);
    const others = [await open(url, 'GET', 'user:alice'), await open(url, 'GET', 'user:bob')];
    for (const other of others) assert.equal(other.res.statusCode, 200);
    await eventually('the others served', () => others.every((o) => o.documents.length >= 1), EVERY_TURN);
    assert.equal(stream.clients, 6);
    // A stream of the identity ends: its slot is its own again.
    greedy[0]?.close();
    await eventually('a slot freed', () => stream.clientsOf('user:greedy') === 3, EVERY_TURN);
    const again = await open(url, 'GET', 'user:greedy');
    assert.equal(again.res.statusCode, 200);
    await eventually('served again', () => again.documents.length === 1, EVERY_TURN);
  });

  it('ends each stream after its lifetime, with jitter, telling the page to reconnect; the timer goes with the stream', async () => {
    const draws = [0, 0.5];
    const { clock, stream } = setUp({ lifetimeMs: 60_000, refreshMs: 1_000_000, heartbeatMs: 1_000_000, random: () => draws.shift() ?? 0 });
    const url = await serve(stream);
    const first = await open(url); // lives 60 s
    await eventually('connected', () => stream.clients === 1, EVERY_TURN);
    const second = await open(url); // lives 90 s
    await eventually('both connected', () => stream.clients === 2, EVERY_TURN);
    clock.advance(59_999);
    for (let i = 0; i < 20; i++) await tick();
    assert.equal(stream.clients, 2, 'not before the lifetime');
    clock.advance(1);
    await first.ended;
    assert.equal(first.res.complete, true, 'ended cleanly, not cut');
    assert.equal(first.events.at(-1), 'reconnect');
    assert.equal(stream.clients, 1);
    clock.advance(29_999);
    for (let i = 0; i < 20; i++) await tick();
    assert.equal(stream.clients, 1, 'the jitter lengthens the second');
    clock.advance(1);
    await second.ended;
    assert.equal(second.events.at(-1), 'reconnect');
    assert.deepEqual(stream.stats().expired, 2);
    assert.equal(clock.pendingTimers, 0);
    // A client that leaves early takes its expiry with it.
    const third = await open(url);
    await eventually('connected again', () => stream.clients === 1, EVERY_TURN);
    third.close();
    await eventually('gone', () => stream.clients === 0, EVERY_TURN);
    assert.equal(clock.pendingTimers, 0);
  });

  it('rejects invalid options with a TypeError naming the option', () => {
    assert.throws(() => new EventStream(() => '{}', { maxClientsPerIdentity: 0 }), /maxClientsPerIdentity must be a positive integer, got 0/);
    assert.throws(() => new EventStream(() => '{}', { lifetimeMs: -1 }), /lifetimeMs must be a positive number, got -1/);
    assert.throws(() => new EventStream(() => '{}', { minIntervalMs: 0 }), /minIntervalMs must be a positive number, got 0/);
    assert.throws(() => new EventStream(() => '{}', { maxClients: 1.5 }), /maxClients must be a positive integer, got 1.5/);
    assert.throws(() => new EventStream(() => '{}', { maxBufferedBytes: Number.NaN }), TypeError);
  });
});
