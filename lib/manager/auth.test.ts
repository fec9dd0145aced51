import assert from 'node:assert/strict';
import { request } from 'node:https';
import { after, before, describe, it } from 'node:test';
import { FakeClock } from '../util/index.ts';
import { KubeAuthFilter, type ReviewClient } from './auth.ts';
import { selfSignedCertificate } from './certificate.ts';
import { HttpServer, probeRoutes } from './server.ts';

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
    const bounded = new KubeAuthFilter({ reviews: fake.reviews, clock, cacheSize: 4 });
    const req = (token: string): Parameters<KubeAuthFilter['check']>[0] => ({ method: 'GET', headers: { authorization: `Bearer ${token}` } }) as Parameters<KubeAuthFilter['check']>[0];
    assert.deepEqual(await failing.check(req('reader-token'), '/metrics'), { allowed: false, status: 500, message: 'Authentication failed' });
    for (let i = 0; i < 50; i++) await bounded.check(req(`flood-${i}`), '/metrics');
    const made = bounded.reviewsMade;
    await bounded.check(req('flood-49'), '/metrics');
    assert.equal(bounded.reviewsMade, made, 'the newest is cached');
    await bounded.check(req('flood-0'), '/metrics');
    assert.equal(bounded.reviewsMade, made + 1, 'the oldest was evicted: at most cacheSize entries are kept');
  });

  it('leaves probes plain and unauthenticated', async () => {
    const probes = await HttpServer.start({ name: 'probes', address: { host: '127.0.0.1', port: 0 }, routes: probeRoutes([]) });
    after(() => probes.close());
    assert.match(probes.url, /^http:/);
    assert.equal((await fetch(`${probes.url}/healthz`)).status, 200);
  });
});
