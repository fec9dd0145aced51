import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { after, before, beforeEach, describe, it } from 'node:test';
import { FakeClock } from '../util/index.ts';
import { checkAddress, OutboundError, resolveHost, sendOutbound, type HostResolver, type OutboundRequest } from './outbound.ts';

const MiB = 1024 * 1024;

/** The OutboundError `promise` fails with. */
async function outboundFailure(promise: Promise<unknown>): Promise<OutboundError> {
  return promise.then(() => assert.fail('resolved'), (err: unknown) => {
    assert.ok(err instanceof OutboundError, `expected an OutboundError, got ${String(err)}`);
    return err;
  });
}

/** A port that was free a moment ago and that nothing listens on now. */
async function unusedPort(): Promise<number> {
  const closed = createServer();
  await new Promise<void>((resolve) => { closed.listen(0, '127.0.0.1', resolve); });
  const port = (closed.address() as { port: number }).port;
  await new Promise<void>((resolve) => { closed.close(() => { resolve(); }); });
  return port;
}

const answers = (...addresses: string[]): HostResolver => () => Promise.resolve(addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 })));

describe('resolveHost', () => {
  it('refuses loopback, private, link-local and reserved addresses by default; private networks let only loopback and private through', async () => {
    for (const [address, category] of [['127.0.0.1', 'loopback'], ['10.0.0.1', 'private'], ['fd00::1', 'private'], ['169.254.169.254', 'link-local'], ['::ffff:169.254.169.254', 'link-local'], ['0.0.0.0', 'unspecified'], ['240.0.0.1', 'reserved']] as const) {
      const err = await outboundFailure(resolveHost('hook.example', { resolve: answers(address) }));
      assert.deepEqual([err.failure, err.category, err.address], ['refused', category, address]);
      assert.ok(!err.message.includes(address), 'the address is never in the message');
      const allowed = resolveHost('hook.example', { resolve: answers(address), allowPrivateNetworks: true });
      if (err.relaxable) assert.deepEqual((await allowed).map((a) => a.address), [address]);
      else assert.equal((await outboundFailure(allowed)).category, category);
    }
  });

  it('refuses a name when any one of its addresses is refused, and returns all of them, in order, otherwise', async () => {
    assert.equal((await outboundFailure(resolveHost('hook.example', { resolve: answers('93.184.215.14', '127.0.0.1') }))).category, 'loopback');
    assert.deepEqual((await resolveHost('hook.example', { resolve: answers('93.184.215.14', '2606:2800:21f:cb07:6820:80da:af6b:8b2c') })).map((a) => [a.address, a.family]), [['93.184.215.14', 4], ['2606:2800:21f:cb07:6820:80da:af6b:8b2c', 6]]);
  });

  it('checks an IP literal (bracketed IPv6 too) without asking the resolver', async () => {
    let asked = 0;
    const counting: HostResolver = () => { asked += 1; return Promise.resolve([]); };
    assert.equal((await outboundFailure(resolveHost('[::1]', { resolve: counting }))).category, 'loopback');
    assert.deepEqual(await resolveHost('93.184.215.14', { resolve: counting }), [{ address: '93.184.215.14', family: 4 }]);
    assert.equal(asked, 0);
  });

  it('tells a resolver failure (its error as the cause, its code) from an empty answer', async () => {
    const notFound = Object.assign(new Error('getaddrinfo ENOTFOUND hook.example'), { code: 'ENOTFOUND' });
    const failed = await outboundFailure(resolveHost('hook.example', { resolve: () => Promise.reject(notFound) }));
    assert.deepEqual([failed.failure, failed.peerCode, failed.cause], ['unresolved', 'ENOTFOUND', notFound]);
    assert.equal((await outboundFailure(resolveHost('hook.example', { resolve: answers() }))).failure, 'no-address');
  });

  it('checkAddress throws a TypeError for what is not an IP', () => {
    assert.throws(() => { checkAddress('localhost', {}); }, TypeError);
  });
});

describe('sendOutbound', () => {
  let server: Server;
  let port = 0;
  let handler: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => { res.end(); };
  const seen: IncomingMessage[] = [];
  before(async () => {
    server = createServer((req, res) => { seen.push(req); handler(req, res); });
    await new Promise<void>((resolve) => { server.listen(0, '127.0.0.1', resolve); });
    port = (server.address() as { port: number }).port;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => { server.close(() => { resolve(); }); });
  });
  beforeEach(() => { seen.length = 0; });

  const send = (options: Partial<OutboundRequest> = {}): ReturnType<typeof sendOutbound> => sendOutbound({
    url: new URL(`http://127.0.0.1:${port}/hook?q=1`),
    method: 'POST',
    headers: { 'content-type': 'text/plain' },
    body: Buffer.from('ping'),
    policy: { allowPrivateNetworks: true },
    timeoutMs: 30_000,
    maxBodyBytes: 1024,
    ...options,
  });

  it('refuses an IP literal in the URL before connecting, in any notation the URL parser accepts', async () => {
    // A port nothing listens on: a refusal that waited for the connection would be ECONNREFUSED.
    const closedPort = await unusedPort();
    for (const host of ['127.0.0.1', '127.1', '0x7f.0.0.1', '2130706433', '[::ffff:127.0.0.1]']) {
      const err = await outboundFailure(send({ url: new URL(`http://${host}:${closedPort}/`), policy: {} }));
      assert.deepEqual([err.failure, err.category], ['refused', 'loopback'], host);
    }
    assert.equal(seen.length, 0);
  });

  it('resolves a name once, at connect time, and refuses it when an answer is inside', async () => {
    let asked = 0;
    const rebinding: HostResolver = () => { asked += 1; return Promise.resolve([{ address: '127.0.0.1', family: 4 }]); };
    const err = await outboundFailure(send({ url: new URL(`http://hook.example:${port}/`), policy: { resolve: rebinding } }));
    assert.deepEqual([err.failure, err.category, asked], ['refused', 'loopback', 1]);
    assert.equal(seen.length, 0);
    const answer = await send({ url: new URL(`http://hook.example:${port}/`), policy: { resolve: rebinding, allowPrivateNetworks: true } });
    assert.deepEqual([answer.status, asked, seen[0]?.headers.host], [200, 2, `hook.example:${port}`]);
  });

  it('connects only to the pinned addresses, never resolving the name, and sends the name as Host', async () => {
    handler = (_req, res) => { res.end('pong'); };
    const never: HostResolver = () => assert.fail('resolved a pinned name');
    const answer = await send({ url: new URL(`http://pinned.invalid:${port}/a`), path: '/b/c?d=e', addresses: [{ address: '127.0.0.1', family: 4 }], policy: { allowPrivateNetworks: true, resolve: never } });
    assert.deepEqual([answer.status, answer.body?.toString()], [200, 'pong']);
    assert.equal(seen[0]?.headers.host, `pinned.invalid:${port}`);
    assert.equal(seen.at(0)?.url, '/b/c?d=e');
  });

  it('checks the address the socket connected to, whatever resolved it', async () => {
    // Pinned addresses are trusted as checked: only the check at connect time stands between
    // this request and loopback.
    const err = await outboundFailure(send({ url: new URL(`http://pinned.invalid:${port}/`), addresses: [{ address: '127.0.0.1', family: 4 }], policy: {} }));
    assert.deepEqual([err.failure, err.category, err.address], ['refused', 'loopback', '127.0.0.1']);
  });

  it('sends credentials in the URL as Basic authentication, and does not follow redirects', async () => {
    handler = (_req, res) => { res.writeHead(302, { location: `http://127.0.0.1:${port}/elsewhere` }).end(); };
    const answer = await send({ url: new URL(`http://u:p%20w@127.0.0.1:${port}/hook`) });
    assert.equal(answer.status, 302);
    assert.equal(seen.length, 1);
    assert.equal(seen[0]?.headers.authorization, `Basic ${Buffer.from('u:p w').toString('base64')}`);
  });

  it('bounds the body: over maxBodyBytes is too-large with the status; kept, drained, or not read at all', async () => {
    handler = (_req, res) => {
      res.writeHead(200);
      const chunk = Buffer.alloc(64 * 1024);
      const pump = (): void => { while (!res.destroyed && res.write(chunk)); if (!res.destroyed) res.once('drain', pump); };
      pump();
    };
    const tooLarge = await outboundFailure(send({ maxBodyBytes: MiB }));
    assert.deepEqual([tooLarge.failure, tooLarge.statusCode], ['too-large', 200]);
    assert.match(tooLarge.message, /^answered HTTP 200 with a body over 1048576 bytes$/);
    handler = (_req, res) => { res.writeHead(200, { 'content-length': String(2 * MiB) }).end(Buffer.alloc(2 * MiB)); };
    assert.equal((await outboundFailure(send({ maxBodyBytes: MiB }))).failure, 'too-large', 'a declared length over the bound');
    assert.equal((await send({ maxBodyBytes: 2 * MiB, keepBody: false })).body?.length, 0);
    assert.equal((await send({ maxBodyBytes: 2 * MiB })).body?.length, 2 * MiB);
    handler = (_req, res) => { res.writeHead(500).end('x'.repeat(4096)); };
    assert.deepEqual(await send({ readBody: (status) => status < 300 }), { status: 500, body: undefined });
  });

  it('has one deadline over the whole exchange, naming the stage it passed in', { timeout: 10_000 }, async () => {
    const clock = new FakeClock();
    const never: HostResolver = () => new Promise(() => undefined);
    const resolving = send({ url: new URL(`http://hook.example:${port}/`), policy: { resolve: never }, clock, timeoutMs: 5_000 });
    clock.advance(5_000);
    const connecting = await outboundFailure(resolving);
    assert.deepEqual([connecting.failure, connecting.stage], ['deadline', 'connecting']);
    assert.equal(connecting.message, 'did not finish within 5000 ms (connecting)');

    for (const [stage, silent] of [
      ['waiting for the answer', (): void => undefined],
      ['reading the answer', (_req: IncomingMessage, res: ServerResponse): void => { res.writeHead(200).write('['); }],
    ] as const) {
      handler = silent;
      let headers = false;
      const pending = send({ clock, timeoutMs: 5_000, readBody: () => { headers = true; return true; } });
      // Wait on the condition (the server saw the request; the client saw the headers), not on time.
      const reached = (): boolean => seen.length > 0 && (stage === 'waiting for the answer' || headers);
      while (!reached()) await new Promise((resolve) => { setImmediate(resolve); });
      clock.advance(4_999);
      await new Promise((resolve) => { setImmediate(resolve); });
      let settled = false;
      pending.then(() => { settled = true; }, () => { settled = true; });
      await new Promise((resolve) => { setImmediate(resolve); });
      assert.equal(settled, false, 'settled before its deadline');
      clock.advance(1);
      const err = await outboundFailure(pending);
      assert.deepEqual([err.failure, err.stage], ['deadline', stage]);
      seen.length = 0;
    }
  });

  it('reports an unreachable host by its error code, and a hang-up mid-body as broken', async () => {
    const closedPort = await unusedPort();
    const unreachable = await outboundFailure(send({ url: new URL(`http://127.0.0.1:${closedPort}/`) }));
    assert.deepEqual([unreachable.failure, unreachable.peerCode, unreachable.message], ['unreachable', 'ECONNREFUSED', 'could not be reached (ECONNREFUSED)']);

    handler = (_req, res) => { res.writeHead(200, { 'content-length': '100' }).write('x', () => { res.socket?.destroy(); }); };
    const broken = await outboundFailure(send());
    assert.deepEqual([broken.failure, broken.statusCode], ['broken', 200]);
  });

  it('stops with the signal\'s reason', async () => {
    handler = (): void => undefined;
    const controller = new AbortController();
    const pending = send({ signal: controller.signal });
    controller.abort(new Error('stopping'));
    await assert.rejects(pending, /^Error: stopping$/);
    const aborted = new AbortController();
    aborted.abort(new Error('already'));
    await assert.rejects(send({ signal: aborted.signal }), /already/);
  });

  it('throws a TypeError naming the option for a bad maxBodyBytes or a scheme other than http(s)', async () => {
    await assert.rejects(send({ maxBodyBytes: -1 }), (err: unknown) => err instanceof TypeError && err.message.includes('maxBodyBytes'));
    await assert.rejects(send({ url: new URL('ftp://127.0.0.1/') }), (err: unknown) => err instanceof TypeError && err.message.includes('url'));
  });
});
