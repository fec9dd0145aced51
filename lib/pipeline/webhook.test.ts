import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { realClock } from '../util/index.ts';
import { PromotionError } from './errors.ts';
import { deliverWebhook, parseWebhookUrl } from './webhook.ts';

interface Received {
  readonly headers: IncomingMessage['headers'];
  readonly body: unknown;
}

describe('webhook delivery', () => {
  const received: Received[] = [];
  let answer: (res: ServerResponse) => void = (res) => { res.writeHead(204).end(); };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ headers: req.headers, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown });
      answer(res);
    });
  });
  let url = '';
  before(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook?token=secret-token`;
  });
  after(() => { server.closeAllConnections(); server.close(); });

  const deliver = (timeoutMs = 5_000): Promise<number> => deliverWebhook({ url, body: { revision: '1.2.0' }, idempotencyKey: 'uid/staging/1.2.0', timeoutMs, clock: realClock });

  it('POSTs JSON with the Idempotency-Key and resolves with a 2xx status', async () => {
    received.length = 0;
    answer = (res) => { res.writeHead(202).end('queued'); };
    assert.equal(await deliver(), 202);
    const [only, ...more] = received;
    assert.ok(only !== undefined && more.length === 0);
    assert.equal(only.headers['idempotency-key'], 'uid/staging/1.2.0');
    assert.equal(only.headers['content-type'], 'application/json');
    assert.deepEqual(only.body, { revision: '1.2.0' });
  });

  it('fails on a non-2xx answer with its status, never repeating the URL', async () => {
    answer = (res) => { res.writeHead(503).end('receiver overloaded'); };
    const err = await deliver().then(() => assert.fail('resolved'), (e: unknown) => e);
    assert.ok(err instanceof PromotionError);
    assert.equal(err.statusCode, 503);
    assert.match(err.message, /HTTP 503: receiver overloaded/);
    assert.doesNotMatch(err.message, /secret-token/);
  });

  it('does not follow redirects', async () => {
    answer = (res) => { res.writeHead(302, { location: 'http://example.invalid/' }).end(); };
    await assert.rejects(deliver(), /HTTP 302/);
  });

  it('times out a receiver that never answers', async () => {
    answer = () => undefined; // hold the request
    await assert.rejects(deliver(100), (err: unknown) => err instanceof PromotionError && err.message.includes('did not answer within 100 ms'));
  });

  it('reports an unreachable receiver', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => { resolve(); }));
    await assert.rejects(
      deliverWebhook({ url: `http://127.0.0.1:${port}/`, body: {}, idempotencyKey: 'k', timeoutMs: 5_000, clock: realClock }),
      /the webhook could not be reached: .*ECONNREFUSED/,
    );
  });

  it('refuses URLs that are not http(s), without echoing them', () => {
    assert.throws(() => parseWebhookUrl('file:///etc/passwd'), /must be http or https, not file:/);
    assert.throws(() => parseWebhookUrl('not a url with-token'), (err: unknown) => err instanceof PromotionError && !err.message.includes('with-token'));
  });
});
