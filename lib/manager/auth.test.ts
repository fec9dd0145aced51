import assert from 'node:assert/strict';
import { request } from 'node:https';
import { after, before, describe, it } from 'node:test';
import { FakeClock } from '../util/index.ts';
import { KubeAuthFilter, type ReviewClient } from './auth.ts';
import { selfSignedCertificate } from './certificate.ts';
import { HttpServer, probeRoutes } from './server.ts';
import { settle } from '../../fixtures/support/index.ts';

/** A fake management cluster: `tokens` map to users; `allowed` lists "user path verb". */
function fakeReviews(tokens: Record<string, string>, allowed: readonly string[]): { readonly reviews: ReviewClient; readonly made: { path: string; body: Record<string, unknown> }[] } {
  const made: { path: string; body: Record<string, unknown> }[] = [];
  const reviews: ReviewClient = (path, body) => {
    made.push({ path, body: body as Record<string, unknown> });
    const spec = (body as { spec: Record<string, unknown> }).spec;
    if (path.endsWith('/tokenreviews')) {
      const username = tokens[String(spec.token)];
      return Promise.resolve({ status: username === undefined ? { authenticated: false, error: 'invalid' } : { authenticated: true, user: { username, uid: `uid-${username}`, groups: ['system:authenticated'] } } });
    }
    const attrs = spec.nonResourceAttributes as { path: string; verb: string };
    return Promise.resolve({ status: { allowed: allowed.includes(`${String(spec.user)} ${attrs.path} ${attrs.verb}`) } });
  };
  return { reviews, made };
}

/** GET over HTTPS trusting exactly `ca`. */
function get(url: string, ca: string, token?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    request(url, { ca, headers: token === undefined ? {} : { authorization: `Bearer ${token}` } }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => { body += c.toString(); });
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, body }); });
    }).on('error', reject).end();
  });
}

/** GET over HTTPS, with the Retry-After header. */
function getWithHeaders(url: string, ca: string, token: string): Promise<{ status: number; retryAfter: string | undefined }> {
  return new Promise((resolve, reject) => {
    request(url, { ca, headers: { authorization: `Bearer ${token}` } }, (res) => {
      res.resume();
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'] }); });
    }).on('error', reject).end();
  });
}

/**
 * A management cluster that answers one review at a time, in arrival order, when the test says so:
 * what a flood does to a real API server's review throughput, without timing.
 */
function serialReviews(tokens: Record<string, string>, allowed: readonly string[]): { readonly reviews: ReviewClient; readonly calls: string[]; answerNext: () => boolean; readonly pending: () => number } {
  const fake = fakeReviews(tokens, allowed);
  const queue: (() => void)[] = [];
  const calls: string[] = [];
  const reviews: ReviewClient = (path, body) => {
    const spec = (body as { spec: Record<string, unknown> }).spec;
    calls.push(path.endsWith('/tokenreviews') ? `TokenReview ${String(spec.token)}` : `SubjectAccessReview ${String(spec.user)}`);
    return new Promise((resolve) => { queue.push(() => { resolve(fake.reviews(path, body)); }); });
  };
  return { reviews, calls, answerNext: () => { const next = queue.shift(); next?.(); return next !== undefined; }, pending: () => queue.length };
}

function fromPeer(address: string, token: string): Parameters<KubeAuthFilter['check']>[0] {
  return { method: 'GET', headers: { authorization: `Bearer ${token}` }, socket: { remoteAddress: address } } as unknown as Parameters<KubeAuthFilter['check']>[0];
}

describe('failed reviews do not starve good ones', () => {
  const PROMETHEUS = 'system:serviceaccount:monitoring:prometheus';

  it('a flood of 300 made-up tokens from one peer: a valid token from another waits for a handful of reviews, not 300', async () => {
    const clock = new FakeClock(1_000_000);
    const apiserver = serialReviews({ 'reader-token': PROMETHEUS }, [`${PROMETHEUS} /metrics get`]);
    const filter = new KubeAuthFilter({ reviews: apiserver.reviews, clock });
    const flood = Array.from({ length: 300 }, (_, i) => filter.check(fromPeer('10.0.0.66', `made-up-${i}`), '/metrics'));
    await settle(5);
    let decided: Awaited<ReturnType<KubeAuthFilter['check']>> | undefined;
    void filter.check(fromPeer('10.0.0.7', 'reader-token'), '/metrics').then((d) => { decided = d; });
    await settle(5);
    let answered = 0;
    while (decided === undefined && apiserver.answerNext()) {
      answered += 1;
      await settle(5);
    }
    assert.deepEqual(decided, { allowed: true, user: PROMETHEUS });
    // Each of the valid token's two reviews waits for the 4 reviews in flight and at most two turns
    // of the flooding peer: its TokenReview is the 6th call, its SubjectAccessReview at most the
    // 12th, and the decision came after at most 12 answers (before this bound: after all 300).
    assert.equal(apiserver.calls.indexOf('TokenReview reader-token'), 5, apiserver.calls.slice(0, 12).join(', '));
    assert.ok(apiserver.calls.indexOf(`SubjectAccessReview ${PROMETHEUS}`) <= 11, apiserver.calls.slice(0, 12).join(', '));
    assert.ok(answered <= 12, `the valid token waited for ${answered} answers`);
    while (apiserver.answerNext()) await settle(5);
    const results = await Promise.all(flood);
    assert.equal(results.filter((r) => !r.allowed && r.status === 401).length, 10, 'the peer\'s budget of 10 failed reviews was reviewed');
    assert.equal(results.filter((r) => !r.allowed && r.status === 429).length, 290, 'the rest were refused without a review');
    assert.equal(apiserver.calls.filter((c) => c.startsWith('TokenReview made-up')).length, 10);
    assert.deepEqual(results.find((r) => !r.allowed && r.status === 429), { allowed: false, status: 429, message: 'Too many requests', retryAfterSeconds: 2 });
  });

  it('refills a peer\'s budget over time and never charges it for a valid token', async () => {
    const clock = new FakeClock(1_000_000);
    const apiserver = serialReviews({ 'reader-token': PROMETHEUS, 'other-token': 'alice' }, [`${PROMETHEUS} /metrics get`]);
    const filter = new KubeAuthFilter({ reviews: apiserver.reviews, clock, failedReviewBurst: 2 });
    const check = async (token: string): Promise<number | 'allowed'> => {
      const pending = filter.check(fromPeer('10.0.0.66', token), '/metrics');
      for (let i = 0; i < 5; i++) { await settle(5); apiserver.answerNext(); }
      const d = await pending;
      return d.allowed ? 'allowed' : d.status;
    };
    assert.equal(await check('reader-token'), 'allowed');
    assert.equal(await check('other-token'), 403);
    assert.equal(await check('bad-1'), 401);
    assert.equal(await check('bad-2'), 401);
    assert.equal(await check('bad-3'), 429);
    assert.equal(await check('reader-token'), 'allowed', 'a cached valid token is served whatever the peer\'s budget');
    clock.advance(2_000);
    assert.equal(await check('bad-4'), 401, 'one attempt regained after 2 s');
    assert.equal(await check('bad-5'), 429);
  });

  it('reviews a token once however many requests carry it at once', async () => {
    const apiserver = serialReviews({ 'reader-token': PROMETHEUS }, [`${PROMETHEUS} /metrics get`]);
    const filter = new KubeAuthFilter({ reviews: apiserver.reviews, clock: new FakeClock() });
    const all = Array.from({ length: 20 }, (_, i) => filter.check(fromPeer(`10.0.1.${i}`, 'reader-token'), '/metrics'));
    await settle(5);
    while (apiserver.answerNext()) await settle(5);
    assert.ok((await Promise.all(all)).every((d) => d.allowed));
    assert.deepEqual(apiserver.calls, ['TokenReview reader-token', `SubjectAccessReview ${PROMETHEUS}`]);
  });

  it('keeps a valid token cached through a flood of invalid ones that overflows the cache', async () => {
    const apiserver = serialReviews({ 'reader-token': PROMETHEUS }, [`${PROMETHEUS} /metrics get`]);
    const filter = new KubeAuthFilter({ reviews: apiserver.reviews, clock: new FakeClock(), cacheSize: 4 });
    const run = async (address: string, token: string): Promise<void> => {
      const pending = filter.check(fromPeer(address, token), '/metrics');
      for (let i = 0; i < 3; i++) { await settle(5); apiserver.answerNext(); }
      await pending;
    };
    await run('10.0.0.7', 'reader-token');
    for (let i = 0; i < 40; i++) await run(`10.0.2.${i}`, `made-up-${i}`);
    const made = filter.reviewsMade;
    await run('10.0.0.7', 'reader-token');
    assert.equal(filter.reviewsMade, made, 'answered from the cache of valid tokens');
  });

  it('refuses with 429 a peer with too many requests waiting for a review', async () => {
    const apiserver = serialReviews({}, []);
    const filter = new KubeAuthFilter({ reviews: apiserver.reviews, clock: new FakeClock(), maxConcurrentReviews: 1, maxWaitingReviewsPerPeer: 2, failedReviewBurst: 100 });
    const waiting = Array.from({ length: 3 }, (_, i) => filter.check(fromPeer('10.0.0.66', `t-${i}`), '/metrics'));
    const over = await filter.check(fromPeer('10.0.0.66', 't-3'), '/metrics');
    assert.equal(over.allowed ? 0 : over.status, 429);
    assert.equal(apiserver.calls.length, 1);
    while (apiserver.answerNext()) await settle(5);
    assert.deepEqual((await Promise.all(waiting)).map((d) => (d.allowed ? 0 : d.status)), [401, 401, 401]);
  });
});

describe('the authenticated metrics server', () => {
  const clock = new FakeClock(1_000_000);
  const fake = fakeReviews({ 'reader-token': 'system:serviceaccount:monitoring:prometheus', 'nobody-token': 'system:serviceaccount:team-a:default' }, [
    'system:serviceaccount:monitoring:prometheus /metrics get',
  ]);
  const filter = new KubeAuthFilter({ reviews: fake.reviews, clock });
  const tls = selfSignedCertificate({ commonName: 'fleetcache-metrics', hosts: ['127.0.0.1'] });
  let server: HttpServer;
  before(async () => {
    server = await HttpServer.start({
      name: 'metrics',
      address: { host: '127.0.0.1', port: 0 },
      routes: { '/metrics': () => ({ status: 200, contentType: 'text/plain', body: 'fleetcache_up 1\n' }), '/debug/caches': () => ({ status: 200, contentType: 'application/json', body: '{"caches":[]}' }) },
      tls,
      authorize: (req, path) => filter.check(req, path),
    });
  });
  after(() => server.close());

  it('serves HTTPS only', async () => {
    assert.match(server.url, /^https:\/\/127\.0\.0\.1:\d+$/);
    await assert.rejects(fetch(server.url.replace('https:', 'http:') + '/metrics'));
  });

  it('answers 401 without a token, or with one the TokenReview does not authenticate', async () => {
    const before = fake.made.length;
    assert.deepEqual(await get(`${server.url}/metrics`, tls.cert), { status: 401, body: 'Unauthorized\n' });
    assert.equal(fake.made.length, before, 'no review for a request without a token');
    assert.deepEqual(await get(`${server.url}/metrics`, tls.cert, 'made-up'), { status: 401, body: 'Unauthorized\n' });
    assert.equal(fake.made.at(-1)?.path, '/apis/authentication.k8s.io/v1/tokenreviews');
  });

  it('answers 403 when the SubjectAccessReview denies get on the path, 200 when it allows it', async () => {
    const denied = await get(`${server.url}/metrics`, tls.cert, 'nobody-token');
    assert.deepEqual(denied, { status: 403, body: 'Authorization denied for user system:serviceaccount:team-a:default\n' });
    const sar = fake.made.at(-1);
    assert.equal(sar?.path, '/apis/authorization.k8s.io/v1/subjectaccessreviews');
    assert.deepEqual(sar.body.spec, { user: 'system:serviceaccount:team-a:default', uid: 'uid-system:serviceaccount:team-a:default', groups: ['system:authenticated'], nonResourceAttributes: { path: '/metrics', verb: 'get' } });
    assert.deepEqual(await get(`${server.url}/metrics`, tls.cert, 'reader-token'), { status: 200, body: 'fleetcache_up 1\n' });
    // /debug/caches is its own path: get on /metrics does not cover it.
    assert.equal((await get(`${server.url}/debug/caches`, tls.cert, 'reader-token')).status, 403);
  });

  it('caches answers briefly: allowed for 5 min, denied for 30 s, tokens for 1 min / 10 s', async () => {
    const count = filter.reviewsMade;
    await get(`${server.url}/metrics`, tls.cert, 'reader-token');
    await get(`${server.url}/metrics`, tls.cert, 'nobody-token');
    await get(`${server.url}/metrics`, tls.cert, 'made-up');
    assert.equal(filter.reviewsMade, count, 'all three answered from the caches');
    clock.advance(10_000);
    await get(`${server.url}/metrics`, tls.cert, 'made-up');
    assert.equal(filter.reviewsMade, count + 1, 'an invalid token is reviewed again after 10 s');
    clock.advance(20_000);
    await get(`${server.url}/metrics`, tls.cert, 'nobody-token');
    assert.equal(filter.reviewsMade, count + 2, 'a denial is asked again after 30 s (the token is still cached)');
    clock.advance(30_000);
    await get(`${server.url}/metrics`, tls.cert, 'reader-token');
    assert.equal(filter.reviewsMade, count + 3, 'the token is reviewed again after 1 min, the permission is still cached');
  });

  it('answers 500 when the reviews cannot be made, and keeps a flood of made-up tokens bounded', async () => {
    const failing = new KubeAuthFilter({ reviews: () => Promise.reject(new Error('apiserver down')), clock, cacheSize: 4 });
    const bounded = new KubeAuthFilter({ reviews: fake.reviews, clock, cacheSize: 4, failedReviewBurst: 1_000 });
    const req = (token: string): Parameters<KubeAuthFilter['check']>[0] => fromPeer('10.0.0.1', token);
    assert.deepEqual(await failing.check(req('reader-token'), '/metrics'), { allowed: false, status: 500, message: 'Authentication failed' });
    for (let i = 0; i < 50; i++) await bounded.check(req(`flood-${i}`), '/metrics');
    const made = bounded.reviewsMade;
    await bounded.check(req('flood-49'), '/metrics');
    assert.equal(bounded.reviewsMade, made, 'the newest is cached');
    await bounded.check(req('flood-0'), '/metrics');
    assert.equal(bounded.reviewsMade, made + 1, 'the oldest was evicted: at most cacheSize entries are kept');
  });

  it('answers 429 with Retry-After once a peer has spent its budget of failed reviews', async () => {
    const limited = new KubeAuthFilter({ reviews: fake.reviews, clock, failedReviewBurst: 2 });
    const server2 = await HttpServer.start({ name: 'metrics', address: { host: '127.0.0.1', port: 0 }, routes: { '/metrics': () => ({ status: 200, contentType: 'text/plain', body: 'ok\n' }) }, tls, authorize: (req, path) => limited.check(req, path) });
    after(() => server2.close());
    for (const token of ['guess-1', 'guess-2']) assert.equal((await get(`${server2.url}/metrics`, tls.cert, token)).status, 401);
    const made = limited.reviewsMade;
    const refused = await getWithHeaders(`${server2.url}/metrics`, tls.cert, 'guess-3');
    assert.equal(refused.status, 429);
    assert.equal(refused.retryAfter, '2');
    assert.equal(limited.reviewsMade, made, 'no review for a peer past its budget');
  });

  it('leaves probes plain and unauthenticated', async () => {
    const probes = await HttpServer.start({ name: 'probes', address: { host: '127.0.0.1', port: 0 }, routes: probeRoutes([]) });
    after(() => probes.close());
    assert.match(probes.url, /^http:/);
    assert.equal((await fetch(`${probes.url}/healthz`)).status, 200);
  });
});
