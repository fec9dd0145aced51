import assert from 'node:assert/strict';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { after, before, describe, it } from 'node:test';
import { inspect } from 'node:util';
import { eventually } from '../../e2e/harness/index.ts';
import { HOSTILE_INTERNAL_SECRET, HostileWebhookReceiver } from '../../fixtures/index.ts';
import { FakeClock, realClock } from '../util/index.ts';
import { PromotionError, WebhookRefusedError } from './errors.ts';
import { deliverWebhook, parseWebhookUrl, type WebhookDelivery, type WebhookResolver } from './webhook.ts';
import { settle } from '../../fixtures/support/index.ts';

const MiB = 1024 * 1024;

async function failure(promise: Promise<unknown>): Promise<Error> {
  return promise.then(() => assert.fail('the delivery resolved'), (e: unknown) => {
    assert.ok(e instanceof Error);
    return e;
  });
}

describe('webhook delivery', () => {
  let receiver: HostileWebhookReceiver;
  let port = 0;
  before(async () => {
    receiver = await HostileWebhookReceiver.start();
    port = Number(new URL(receiver.url).port);
  });
  after(() => receiver.close());

  const deliver = (options: Partial<WebhookDelivery> = {}): Promise<number> => deliverWebhook({
    url: `${receiver.url}/hook?token=secret-token`,
    body: { revision: '1.2.0' },
    idempotencyKey: 'uid/staging/1.2.0',
    timeoutMs: 30_000,
    clock: realClock,
    allowPrivateNetworks: true,
    ...options,
  });

  describe('with private networks allowed (the receiver is on loopback)', () => {
    it('POSTs JSON with the Idempotency-Key, sends URL credentials as Basic auth, resolves with a 2xx status', async () => {
      receiver.received.length = 0;
      receiver.answer({ kind: 'plain', status: 202, body: 'queued' });
      assert.equal(await deliver({ url: `http://hook-user:hook%20pass@127.0.0.1:${port}/hook?token=secret-token` }), 202);
      const [only, ...more] = receiver.received;
      assert.ok(only !== undefined && more.length === 0);
      assert.equal(only.headers['idempotency-key'], 'uid/staging/1.2.0');
      assert.equal(only.headers['content-type'], 'application/json');
      assert.equal(only.headers.authorization, `Basic ${Buffer.from('hook-user:hook pass').toString('base64')}`);
      assert.equal(only.url, '/hook?token=secret-token');
      assert.deepEqual(JSON.parse(only.body), { revision: '1.2.0' });
    });

    it('fails on a non-2xx answer with its status and a fixed reason: nothing the receiver sent, no credential', async () => {
      receiver.answer({ kind: 'echo-secrets', status: 503 });
      const err = await failure(deliver({ url: `http://hook-user:hook-pass@127.0.0.1:${port}/hook?token=secret-token` }));
      assert.ok(err instanceof PromotionError);
      assert.equal(err.statusCode, 503);
      assert.equal(err.message, `the webhook http://127.0.0.1:${port} answered HTTP 503`);
      for (const leak of [HOSTILE_INTERNAL_SECRET, 'hook-user', 'hook-pass', '/hook', 'secret-token', 'Basic', '\u001b', '\u202e', '\n']) assert.ok(!err.message.includes(leak), leak);
    });

    it('does not follow redirects', async () => {
      const elsewhere = await HostileWebhookReceiver.start();
      after(() => elsewhere.close());
      receiver.answer({ kind: 'redirect', status: 307, location: `${elsewhere.url}/internal` });
      const err = await failure(deliver());
      assert.match(err.message, /answered HTTP 307 \(redirects are not followed\)$/);
      assert.equal(elsewhere.received.length, 0);
    });

    it('reports an unreachable receiver by its error code only', async () => {
      const closed = await HostileWebhookReceiver.start();
      await closed.close();
      const err = await failure(deliver({ url: `${closed.url}/?token=secret-token` }));
      assert.ok(err instanceof PromotionError);
      assert.match(err.message, /^the webhook http:\/\/127\.0\.0\.1:\d+ could not be reached \(ECONNREFUSED\)$/);
    });

    it('reads a huge 2xx answer only up to maxAnswerBytes, then fails and drops the connection', async () => {
      receiver.answer({ kind: 'huge', status: 200, bytes: 256 * MiB });
      const sentBefore = receiver.bytesSent;
      const err = await failure(deliver());
      assert.ok(err instanceof PromotionError);
      assert.match(err.message, /answered HTTP 200 with a body over 65536 bytes$/);
      await eventually('the receiver sees the connection gone', () => receiver.openAnswers === 0);
      const sent = receiver.bytesSent - sentBefore;
      assert.ok(sent < 32 * MiB, `the receiver wrote ${sent} bytes before the client hung up`);
    });

    it('drains a 256 MiB answer without keeping it: resident memory grows by less than three quarters of the answer', async () => {
      receiver.answer({ kind: 'huge', status: 200, bytes: 256 * MiB });
      const before = process.memoryUsage.rss();
      let peak = before;
      const sampler = setInterval(() => { peak = Math.max(peak, process.memoryUsage.rss()); }, 20);
      try {
        assert.equal(await deliver({ maxAnswerBytes: 512 * MiB }), 200);
      } finally {
        clearInterval(sampler);
      }
      peak = Math.max(peak, process.memoryUsage.rss());
      const growth = peak - before;
      process.stdout.write(`# 256 MiB answer drained: RSS before ${(before / MiB).toFixed(1)} MiB, peak growth ${(growth / MiB).toFixed(1)} MiB\n`);
      // Receiver and client share this process, and its garbage collector lets young chunks pile up
      // for a while: V8 may commit up to 128 MiB of young generation under this allocation rate
      // (60-70 MiB measured alone, 133 MiB once with the machine loaded by other test files). A
      // client that kept the answer grows by more than the whole 256 MiB (786 MiB measured).
      assert.ok(growth < 192 * MiB, `RSS grew by ${(growth / MiB).toFixed(1)} MiB`);
    });

    it('fails when the receiver sends 2xx headers and then hangs: the body is part of the answer', async () => {
      const clock = new FakeClock();
      receiver.answer({ kind: 'hang-after-headers', status: 200 });
      const open = receiver.openAnswers;
      // Node's HTTP client publishes each response as its headers arrive, before its 'response' event.
      let headersArrived = false;
      const onResponse = (): void => { headersArrived = true; };
      subscribe('http.client.response.finish', onResponse);
      const pending = deliver({ clock, timeoutMs: 10_000 }).finally(() => { unsubscribe('http.client.response.finish', onResponse); });
      let settled = false;
      pending.then(() => { settled = true; }, () => { settled = true; });
      await eventually('the receiver sent its headers', () => receiver.openAnswers > open);
      await eventually('the headers reached the client', () => headersArrived, 10_000);
      await settle(); // the client's response handler has run: it must still be waiting for the body
      assert.equal(settled, false, 'settled before the deadline');
      clock.advance(10_000);
      const err = await failure(pending);
      assert.ok(err instanceof PromotionError);
      assert.match(err.message, /did not finish within 10000 ms \((reading|waiting for) the answer\)$/);
      await eventually('the hanging connection is dropped', () => receiver.openAnswers === open);
    });

    it('fails when the receiver never answers, and when the name never resolves', async () => {
      const clock = new FakeClock();
      receiver.answer({ kind: 'silent' });
      const count = receiver.received.length;
      const silent = deliver({ clock, timeoutMs: 5_000 });
      await eventually('the request arrived', () => receiver.received.length > count);
      clock.advance(5_000);
      assert.match((await failure(silent)).message, /did not finish within 5000 ms \(waiting for the answer\)$/);

      const never: WebhookResolver = () => new Promise(() => undefined);
      const unresolved = deliver({ clock, timeoutMs: 5_000, url: 'http://hooks.example.com/x', resolve: never });
      clock.advance(5_000);
      assert.match((await failure(unresolved)).message, /^the webhook http:\/\/hooks\.example\.com did not finish within 5000 ms \(connecting\)$/);
    });

    it('stops when its signal aborts', async () => {
      receiver.answer({ kind: 'silent' });
      const controller = new AbortController();
      const pending = deliver({ signal: controller.signal });
      controller.abort(new Error('stopping'));
      assert.equal((await failure(pending)).message, 'stopping');
    });

    it('still refuses link-local, unspecified and multicast addresses', async () => {
      for (const [host, category] of [['169.254.169.254', 'link-local'], ['[fe80::1]', 'link-local'], ['0.0.0.0', 'unspecified'], ['224.0.0.1', 'multicast'], ['[::ffff:169.254.169.254]', 'link-local']] as const) {
        const err = await failure(deliver({ url: `http://${host}:${port}/` }));
        assert.ok(err instanceof WebhookRefusedError, host);
        assert.equal(err.category, category, host);
      }
    });
  });

  describe('by default', () => {
    const deliverDefault = (url: string, resolve?: WebhookResolver): Promise<number> => deliver({ url, allowPrivateNetworks: false, resolve });

    it('refuses loopback in every notation the URL parser accepts, sending nothing', async () => {
      receiver.answer({ kind: 'plain', status: 200 });
      const count = receiver.received.length;
      const notations = [
        '127.0.0.1', '127.1', '0x7f.0.0.1', '0x7f.1', '2130706433', '0177.0.0.1', '017700000001', '127.0.0.255',
        '[::1]', '[::ffff:127.0.0.1]', '[::ffff:7f00:1]', '[0:0:0:0:0:ffff:127.0.0.1]', '[64:ff9b::127.0.0.1]', '[2002:7f00:1::]',
      ];
      for (const host of notations) {
        const err = await failure(deliverDefault(`http://${host}:${port}/hook?token=secret-token`));
        assert.ok(err instanceof WebhookRefusedError, `${host}: ${err.message}`);
        assert.equal(err.refusal, 'address');
        assert.equal(err.category, 'loopback', host);
        assert.match(err.message, /^refused the webhook http:\/\/[^/]+: it resolves to a loopback address \(private networks are allowed only with --allow-private-webhooks\)$/);
      }
      assert.equal(receiver.received.length, count, 'nothing reached the receiver');
    });

    it('refuses private, CGNAT, ULA, link-local, unspecified, multicast and reserved addresses', async () => {
      const cases = [
        ['10.1.2.3', 'private'], ['172.16.0.1', 'private'], ['192.168.1.1', 'private'], ['100.64.0.1', 'private'],
        ['[fc00::1]', 'private'], ['[fd12:3456::1]', 'private'], ['[::ffff:10.0.0.1]', 'private'], ['[::ffff:a00:1]', 'private'],
        ['169.254.169.254', 'link-local'], ['[fe80::1]', 'link-local'], ['0.0.0.0', 'unspecified'], ['0', 'unspecified'], ['[::]', 'unspecified'],
        ['224.0.0.251', 'multicast'], ['[ff02::1]', 'multicast'], ['255.255.255.255', 'reserved'], ['192.0.2.1', 'reserved'],
      ] as const;
      for (const [host, category] of cases) {
        const err = await failure(deliverDefault(`http://${host}:${port}/`));
        assert.ok(err instanceof WebhookRefusedError, `${host}: ${err.message}`);
        assert.equal(err.category, category, host);
      }
    });

    it('refuses a name whose DNS answer is loopback at connect time (rebinding), never naming the address', async () => {
      const count = receiver.received.length;
      const asked: string[] = [];
      const rebinding: WebhookResolver = (hostname) => {
        asked.push(hostname);
        return Promise.resolve([{ address: '127.0.0.1', family: 4 }]);
      };
      const err = await failure(deliverDefault(`http://hooks.example.com:${port}/`, rebinding));
      assert.ok(err instanceof WebhookRefusedError);
      assert.equal(err.address, '127.0.0.1');
      assert.equal(err.message, `refused the webhook http://hooks.example.com:${port}: it resolves to a loopback address (private networks are allowed only with --allow-private-webhooks)`);
      assert.deepEqual(asked, ['hooks.example.com']);
      assert.equal(receiver.received.length, count);
    });

    it('refuses an answer that mixes a public address with an inside one, or hides one as IPv4-mapped IPv6', async () => {
      const count = receiver.received.length;
      for (const answers of [
        [{ address: '93.184.215.14', family: 4 }, { address: '127.0.0.1', family: 4 }],
        [{ address: '2606:2800:21f:cb07:6820:80da:af6b:8b2c', family: 6 }, { address: '::ffff:127.0.0.1', family: 6 }],
        [{ address: '93.184.215.14', family: 4 }, { address: '169.254.169.254', family: 4 }],
      ] as const) {
        const err = await failure(deliverDefault(`http://hooks.example.com:${port}/`, () => Promise.resolve(answers)));
        assert.ok(err instanceof WebhookRefusedError, err.message);
      }
      assert.equal(receiver.received.length, count);
    });

    it('refuses the connected address itself: an answer that reads public when checked and loopback when used is refused at connect', async () => {
      receiver.answer({ kind: 'plain', status: 200 });
      const count = receiver.received.length;
      // Rebinding between the DNS check and the connect, as a resolver can do it: the first read of
      // the address (the check) sees a public one, every later read (the socket's) sees loopback.
      // Only the check on the connected socket stands between this and the receiver on 127.0.0.1.
      let reads = 0;
      const answer = { family: 4 as const, get address(): string { reads += 1; return reads === 1 ? '93.184.215.14' : '127.0.0.1'; } };
      const err = await failure(deliverDefault(`http://hooks.example.com:${port}/`, () => Promise.resolve([answer])));
      assert.ok(reads >= 2, 'the address was read again after its check');
      assert.ok(err instanceof WebhookRefusedError, err.message);
      assert.equal(err.refusal, 'address');
      assert.equal(err.category, 'loopback');
      assert.equal(err.address, '127.0.0.1');
      assert.equal(receiver.received.length, count, 'nothing reached the receiver');
    });

    it('refuses localhost through the system resolver', async () => {
      const err = await failure(deliverDefault(`http://localhost:${port}/`));
      assert.ok(err instanceof WebhookRefusedError, err.message);
      assert.equal(err.category, 'loopback');
    });

    it('connects to the address the resolver gave, once allowed', async () => {
      receiver.answer({ kind: 'plain', status: 200 });
      const status = await deliver({ url: `http://hooks.example.com:${port}/`, resolve: () => Promise.resolve([{ address: '127.0.0.1', family: 4 }]) });
      assert.equal(status, 200);
      assert.equal(receiver.received.at(-1)?.headers.host, `hooks.example.com:${port}`);
    });
  });

  describe('a URL whose path is the credential (Slack, Teams, Discord incoming webhooks)', () => {
    const SECRET = 'T0SECRETPATHb7Zq';
    const hook = (origin: string): string => `${origin}/services/T00000000/B00000000/${SECRET}?key=q-${SECRET}#f-${SECRET}`;
    /** Everything an error could show anywhere: message, stack, own properties, causes. */
    const everything = (err: Error): string => inspect(err, { depth: 8, showHidden: true });

    it('is echoed beyond its scheme and host by no failure: refused, timed out, non-2xx, DNS failure, redirect, unreachable', async () => {
      const clock = new FakeClock();
      // Each failure is caught as it is made: none waits unhandled while an earlier one is checked.
      const failures: (readonly [string, Promise<Error>, RegExp])[] = [];
      failures.push(['refused address', failure(deliver({ url: hook(`http://u-${SECRET}:p-${SECRET}@127.0.0.1:${port}`), allowPrivateNetworks: false })), new RegExp(`^refused the webhook http://127\\.0\\.0\\.1:${port}: it resolves to a loopback address`)]);
      const notFound: WebhookResolver = (hostname) => Promise.reject(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND', hostname }));
      failures.push(['DNS failure', failure(deliver({ url: hook('https://hooks.slack.com'), resolve: notFound })), /^the webhook https:\/\/hooks\.slack\.com could not be reached \(ENOTFOUND\)$/]);
      const closed = await HostileWebhookReceiver.start();
      await closed.close();
      failures.push(['unreachable', failure(deliver({ url: hook(closed.url) })), /^the webhook http:\/\/127\.0\.0\.1:\d+ could not be reached \(ECONNREFUSED\)$/]);
      for (const [what, failed, expected] of failures) {
        const err = await failed;
        assert.match(err.message, expected, what);
        assert.ok(!everything(err).includes(SECRET), `${what}: ${everything(err)}`);
      }
      for (const [what, answer, expected] of [
        ['non-2xx', { kind: 'plain', status: 404, body: `no such hook ${SECRET}` }, /^the webhook http:\/\/127\.0\.0\.1:\d+ answered HTTP 404$/],
        ['redirect', { kind: 'redirect', status: 302, location: hook('http://elsewhere.example') }, /^the webhook http:\/\/127\.0\.0\.1:\d+ answered HTTP 302 \(redirects are not followed\)$/],
      ] as const) {
        receiver.answer(answer);
        const err = await failure(deliver({ url: hook(receiver.url) }));
        assert.match(err.message, expected, what);
        assert.ok(!everything(err).includes(SECRET), `${what}: ${everything(err)}`);
        assert.ok(receiver.received.at(-1)?.url.includes(SECRET), 'the receiver was sent the whole path');
      }
      receiver.answer({ kind: 'silent' });
      const count = receiver.received.length;
      const timingOut = deliver({ url: hook(receiver.url), clock, timeoutMs: 5_000 });
      await eventually('the request arrived', () => receiver.received.length > count);
      clock.advance(5_000);
      const err = await failure(timingOut);
      assert.match(err.message, /^the webhook http:\/\/127\.0\.0\.1:\d+ did not finish within 5000 ms \(waiting for the answer\)$/);
      assert.ok(!everything(err).includes(SECRET), everything(err));
    });
  });

  it('refuses URLs that are not http(s), without echoing them', () => {
    assert.throws(() => parseWebhookUrl('file:///etc/passwd'), (err: unknown) => err instanceof WebhookRefusedError && err.refusal === 'url' && err.message.includes('must be http or https, not file:'));
    assert.throws(() => parseWebhookUrl('not a url with-token'), (err: unknown) => err instanceof WebhookRefusedError && !err.message.includes('with-token'));
  });
});
