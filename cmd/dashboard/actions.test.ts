import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, before, beforeEach, describe, it } from 'node:test';
import { HttpServer } from '../../lib/manager/index.ts';
import type { ApprovalClient } from '../../lib/pipeline/index.ts';
import type { RequestOptions } from '../../lib/transport/index.ts';
import { FakeClock, KubeApiError } from '../../lib/util/index.ts';
import { ApprovalEndpoint, APPROVE_PATH } from './actions.ts';

const PIPELINE = '/apis/fleetcache.dev/v1alpha1/namespaces/team-a/pipelines/shop';

/**
 * The management cluster as the endpoint sees it: tokens and who may approve what, one Pipeline
 * (team-a/shop, prod requires approval), and every request kept. `hold` keeps each TokenReview
 * waiting until released.
 */
class FakeManagement implements ApprovalClient {
  readonly tokens = new Map<string, { username: string; uid?: string; groups?: string[] }>([['alice-token', { username: 'alice', uid: 'a-1', groups: ['release'] }], ['bob-token', { username: 'bob' }]]);
  /** `user namespace/name verb` allowed. */
  readonly allowed = new Set(['alice team-a/shop approve', 'alice team-a/gone approve']);
  readonly requests: RequestOptions[] = [];
  pipeline: Record<string, unknown> = {
    metadata: { namespace: 'team-a', name: 'shop', uid: 'u-1', resourceVersion: '7' },
    spec: { environments: [{ name: 'dev', targets: [] }, { name: 'prod', targets: [], requireApproval: true }] },
    status: { observedGeneration: 1 },
  };
  hold: Promise<void> | undefined;

  async request(options: RequestOptions): Promise<unknown> {
    this.requests.push(options);
    const body = options.body as { spec: { token: string; user: string; resourceAttributes: Record<string, string> }; status?: unknown };
    if (options.path === '/apis/authentication.k8s.io/v1/tokenreviews') {
      await this.hold;
      const user = this.tokens.get(body.spec.token);
      return { status: user === undefined ? { authenticated: false } : { authenticated: true, user } };
    }
    if (options.path === '/apis/authorization.k8s.io/v1/subjectaccessreviews') {
      const a = body.spec.resourceAttributes;
      const ok = a.group === 'fleetcache.dev' && a.resource === 'pipelines' && this.allowed.has(`${body.spec.user} ${a.namespace ?? ''}/${a.name ?? ''} ${a.verb ?? ''}`);
      return { status: { allowed: ok } };
    }
    if (options.path.startsWith('/apis/fleetcache.dev/') && options.path !== PIPELINE && options.path !== `${PIPELINE}/status`) {
      throw new KubeApiError({ cluster: 'local', statusCode: 404, status: { reason: 'NotFound' } });
    }
    if (options.method === 'GET' && options.path === PIPELINE) return structuredClone(this.pipeline);
    if (options.method === 'PUT' && options.path === `${PIPELINE}/status`) {
      this.pipeline = { ...this.pipeline, status: body.status };
      return structuredClone(this.pipeline);
    }
    if (options.method === 'POST' && options.path === '/api/v1/namespaces/team-a/events') return body;
    throw new Error(`unexpected ${options.method} ${options.path}`);
  }

  writes(): RequestOptions[] {
    return this.requests.filter((r) => r.method === 'PUT');
  }
}

interface Answer { readonly status: number; readonly headers: Record<string, string | string[] | undefined>; readonly body: Record<string, any> } // eslint-disable-line @typescript-eslint/no-explicit-any

/** One request to the server with node:http (fetch would not let us set Origin or Sec-Fetch-Site). */
function send(url: string, options: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: options.method ?? 'POST', headers: options.headers ?? {} }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => { text += chunk; });
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, headers: res.headers, body: String(res.headers['content-type']).startsWith('application/json') ? JSON.parse(text) as Answer['body'] : { text } }); });
    });
    req.once('error', reject);
    req.end(options.body);
  });
}

const json = { 'content-type': 'application/json' };
const good = JSON.stringify({ namespace: 'team-a', pipeline: 'shop', environment: 'prod', revision: '1.2.0' });

describe('the approval endpoint', () => {
  let server: HttpServer;
  let url = '';
  let api: FakeManagement;
  let running = true;
  const clock = new FakeClock(Date.parse('2026-05-06T07:08:09Z'));

  before(async () => {
    const endpoint = new ApprovalEndpoint({
      management: () => (running ? Promise.resolve(api) : Promise.reject(new Error('not running'))),
      clock,
      maxBodyBytes: 512,
      maxInFlight: 2,
    });
    // Behind a server whose own authentication refuses everything: the action decides by itself.
    server = await HttpServer.start({
      name: 'test', address: { host: '127.0.0.1', port: 0 }, routes: {}, handlers: { [APPROVE_PATH]: endpoint.handle, '/dashboard/events': (_req, res) => { res.end('state'); } }, actionPaths: new Set([APPROVE_PATH]),
      authorize: () => Promise.resolve({ allowed: false, status: 403, message: 'the server filter was asked' }),
    });
    url = `${server.url}${APPROVE_PATH}`;
  });
  after(() => server.close());
  beforeEach(() => { api = new FakeManagement(); running = true; });

  it('records the approval of someone the SubjectAccessReview allows, names them in an Event, and answers it', async () => {
    const res = await send(url, { headers: { ...json, authorization: 'Bearer alice-token', origin: new URL(url).origin, 'sec-fetch-site': 'same-origin' }, body: good });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const approval = { environment: 'prod', revision: '1.2.0', approver: { username: 'alice', uid: 'a-1' }, approvedAt: '2026-05-06T07:08:09Z' };
    assert.deepEqual(res.body, { approval, created: true });
    assert.deepEqual((api.pipeline.status as Record<string, unknown>).approvals, [approval]);
    const sar = api.requests.find((r) => r.path.endsWith('/subjectaccessreviews'))?.body as { spec: unknown };
    assert.deepEqual(sar.spec, { user: 'alice', uid: 'a-1', groups: ['release'], resourceAttributes: { namespace: 'team-a', verb: 'approve', group: 'fleetcache.dev', resource: 'pipelines', name: 'shop' } });
    const event = api.requests.find((r) => r.path.endsWith('/events'))?.body as { reason: string; message: string; involvedObject: { name: string; uid: string } };
    assert.equal(event.reason, 'PromotionApproved');
    assert.equal(event.message, 'alice approved 1.2.0 for prod');
    assert.deepEqual([event.involvedObject.name, event.involvedObject.uid], ['shop', 'u-1']);
    assert.match(String(res.headers['content-security-policy']), /default-src 'none'/);
    assert.equal(res.headers['cache-control'], 'no-store');

    const again = await send(url, { headers: { ...json, authorization: 'Bearer alice-token' }, body: good });
    assert.equal(again.status, 200);
    assert.equal(again.body.created, false, 'the approval on record is kept');
    assert.equal(api.writes().length, 1);
  });

  it('approves one wave of a fleet environment as <environment>/<wave>', async () => {
    api.pipeline.spec = { environments: [{ name: 'dev', targets: [] }, { name: 'prod', fleet: { namespace: 'app', clusters: [], waves: [{ name: 'canary', count: 1 }, { name: 'rest', count: 1, requireApproval: true }] } }] };
    const res = await send(url, { headers: { ...json, authorization: 'Bearer alice-token' }, body: good.replace('"prod"', '"prod/rest"') });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual((api.pipeline.status as { approvals: { environment: string }[] }).approvals.map((a) => a.environment), ['prod/rest']);
    const canary = await send(url, { headers: { ...json, authorization: 'Bearer alice-token' }, body: good.replace('"prod"', '"prod/canary"') });
    assert.equal(canary.status, 422, 'a wave without the gate');
  });

  it('records a retry of a stopped wave ("action": "retry") for someone allowed the verb approve, with an Event; refuses others', async () => {
    api.pipeline.spec = { environments: [{ name: 'dev', targets: [] }, { name: 'prod', fleet: { namespace: 'app', clusters: [], waves: [{ name: 'canary', count: 1 }, { name: 'rest', count: 1 }] } }] };
    api.pipeline.status = { promotions: [{ environment: 'prod', wave: 'canary', revision: '1.2.0', strategy: 'patch', state: 'Failed', attempts: 1, startedAt: '2026-05-06T06:00:00Z', committedAt: '2026-05-06T06:00:00Z' }] };
    const body = JSON.stringify({ namespace: 'team-a', pipeline: 'shop', environment: 'prod/canary', revision: '1.2.0', action: 'retry' });
    const bob = await send(url, { headers: { ...json, authorization: 'Bearer bob-token' }, body });
    assert.equal(bob.status, 403, 'the same right as approving');
    const res = await send(url, { headers: { ...json, authorization: 'Bearer alice-token' }, body });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const retry = { environment: 'prod', wave: 'canary', revision: '1.2.0', attempt: 1, requestedBy: { username: 'alice', uid: 'a-1' }, requestedAt: '2026-05-06T07:08:09Z' };
    assert.deepEqual(res.body, { retry, created: true });
    assert.deepEqual((api.pipeline.status as Record<string, unknown>).retries, [retry]);
    const event = api.requests.find((r) => r.path.endsWith('/events'))?.body as { reason: string; message: string };
    assert.equal(event.reason, 'WaveRetryRequested');
    assert.match(event.message, /^alice asked to carry out wave canary of prod at 1\.2\.0 again/);
    const rest = await send(url, { headers: { ...json, authorization: 'Bearer alice-token' }, body: body.replace('prod/canary', 'prod/rest') });
    assert.equal(rest.status, 422, 'a wave not stopped there');
    const bad = await send(url, { headers: { ...json, authorization: 'Bearer alice-token' }, body: body.replace('"retry"', '"rollback"') });
    assert.equal(bad.status, 400);
    assert.equal(api.writes().length, 1);
  });

  it('refuses without a token (401) or with one the TokenReview does not accept (401), before writing anything', async () => {
    for (const authorization of [undefined, 'Basic YWxpY2U6eA==', 'Bearer ', 'Bearer made-up', 'Bearer two tokens']) {
      const res = await send(url, { headers: { ...json, ...(authorization === undefined ? {} : { authorization }) }, body: good });
      assert.equal(res.status, 401, String(authorization).slice(0, 20));
      assert.equal(res.headers['www-authenticate'], 'Bearer');
    }
    assert.equal(api.writes().length, 0);
  });

  it('refuses someone the SubjectAccessReview does not allow (403), whether the Pipeline exists or not', async () => {
    const shop = await send(url, { headers: { ...json, authorization: 'Bearer bob-token' }, body: good });
    const gone = await send(url, { headers: { ...json, authorization: 'Bearer bob-token' }, body: good.replace('"shop"', '"gone"') });
    assert.deepEqual([shop.status, gone.status], [403, 403]);
    assert.equal(shop.body.error, 'user bob may not approve pipelines.fleetcache.dev shop in namespace team-a');
    assert.equal(api.requests.filter((r) => r.path.startsWith('/apis/fleetcache.dev/')).length, 0, 'the Pipeline is never read for them');
    // To someone allowed, a missing Pipeline is 404; an environment without the gate is 422.
    assert.equal((await send(url, { headers: { ...json, authorization: 'Bearer alice-token' }, body: good.replace('"shop"', '"gone"') })).status, 404);
    const ungated = await send(url, { headers: { ...json, authorization: 'Bearer alice-token' }, body: good.replace('"prod"', '"dev"') });
    assert.equal(ungated.status, 422);
    assert.match(ungated.body.error as string, /does not require approval/);
    assert.equal(api.writes().length, 0);
  });

  it('refuses cross-site requests, other methods and media types, big bodies and malformed ones', async () => {
    const bearer = { authorization: 'Bearer alice-token' };
    const cases: [string, Parameters<typeof send>[1], number][] = [
      ['GET', { method: 'GET', headers: bearer }, 405],
      ['a cross-site fetch', { headers: { ...json, ...bearer, 'sec-fetch-site': 'cross-site' }, body: good }, 403],
      ['another site\'s Origin', { headers: { ...json, ...bearer, origin: 'https://evil.example' }, body: good }, 403],
      ['a malformed Origin', { headers: { ...json, ...bearer, origin: 'null' }, body: good }, 403],
      ['a form post', { headers: { ...bearer, 'content-type': 'application/x-www-form-urlencoded' }, body: 'namespace=team-a' }, 415],
      ['text/plain', { headers: { ...bearer, 'content-type': 'text/plain' }, body: good }, 415],
      ['a body over the bound', { headers: { ...json, ...bearer }, body: JSON.stringify({ namespace: 'team-a', pipeline: 'shop', environment: 'prod', revision: 'x'.repeat(600) }) }, 413],
      ['not JSON', { headers: { ...json, ...bearer }, body: '{' }, 400],
      ['an array', { headers: { ...json, ...bearer }, body: '[]' }, 400],
      ['an unknown field', { headers: { ...json, ...bearer }, body: good.replace('}', ',"approver":"mallory"}') }, 400],
      ['a missing field', { headers: { ...json, ...bearer }, body: JSON.stringify({ namespace: 'team-a', pipeline: 'shop', environment: 'prod' }) }, 400],
      ['a bad namespace', { headers: { ...json, ...bearer }, body: good.replace('"team-a"', '"../kube-system"') }, 400],
      ['a bad name', { headers: { ...json, ...bearer }, body: good.replace('"shop"', '"Shop"') }, 400],
      ['an environment path deeper than <environment>/<wave>', { headers: { ...json, ...bearer }, body: good.replace('"prod"', '"prod/rest/x"') }, 400],
      ['an empty wave', { headers: { ...json, ...bearer }, body: good.replace('"prod"', '"prod/"') }, 400],
      ['a revision with a space', { headers: { ...json, ...bearer }, body: good.replace('"1.2.0"', '"1.2.0 rc"') }, 400],
      ['a revision with a bidi override', { headers: { ...json, ...bearer }, body: good.replace('"1.2.0"', '"1.2.0\\u202e"') }, 400],
      ['a number for a revision', { headers: { ...json, ...bearer }, body: good.replace('"1.2.0"', '12') }, 400],
    ];
    for (const [what, options, status] of cases) {
      const res = await send(url, options);
      assert.equal(res.status, status, `${what}: ${JSON.stringify(res.body)}`);
      assert.equal(typeof res.body.error, 'string', what);
    }
    assert.equal(api.requests.length, 0, 'nothing reached the API server');
  });

  it('answers 503 beyond its requests in flight, and while the dashboard is not running', async () => {
    let release: () => void = () => undefined;
    api.hold = new Promise((resolve) => { release = resolve; });
    const held = [1, 2].map(() => send(url, { headers: { ...json, authorization: 'Bearer alice-token' }, body: good }));
    while (api.requests.length < 2) await new Promise((resolve) => setImmediate(resolve));
    const third = await send(url, { headers: { ...json, authorization: 'Bearer alice-token' }, body: good });
    assert.equal(third.status, 503);
    assert.equal(third.headers['retry-after'], '1');
    release();
    assert.deepEqual((await Promise.all(held)).map((r) => r.status).sort(), [200, 200]);
    running = false;
    assert.equal((await send(url, { headers: { ...json, authorization: 'Bearer alice-token' }, body: good })).status, 503);
  });

  it('disconnects a client whose body does not come, without holding a review slot', async () => {
    const slow = new ApprovalEndpoint({ management: () => Promise.resolve(api), bodyTimeoutMs: 1_000, maxInFlight: 1 });
    const slowServer = await HttpServer.start({ name: 'slow', address: { host: '127.0.0.1', port: 0 }, routes: {}, handlers: { [APPROVE_PATH]: slow.handle }, actionPaths: new Set([APPROVE_PATH]) });
    try {
      const target = `${slowServer.url}${APPROVE_PATH}`;
      let sent: () => void = () => undefined;
      const written = new Promise<void>((resolve) => { sent = resolve; });
      const stalled = new Promise<string>((resolve) => {
        const req = httpRequest(target, { method: 'POST', headers: { ...json, authorization: 'Bearer alice-token', 'content-length': String(good.length) } }, () => { resolve('answered'); });
        req.once('error', (err) => { resolve((err as NodeJS.ErrnoException).code ?? err.message); });
        req.write(good.slice(0, 10), () => { sent(); }); // and never the rest
      });
      await written;
      // Meanwhile a whole request is served: the stalled one holds no slot.
      assert.equal((await send(target, { headers: { ...json, authorization: 'Bearer alice-token' }, body: good })).status, 200);
      assert.equal(await stalled, 'ECONNRESET');
    } finally {
      await slowServer.close();
    }
  });

  it('answers 500 when a review cannot be made, without the token in the answer', async () => {
    api.request = (options) => Promise.reject(new KubeApiError({ cluster: 'local', statusCode: 500, status: { reason: 'InternalError' }, request: { method: options.method, path: options.path } }));
    const res = await send(url, { headers: { ...json, authorization: 'Bearer alice-token' }, body: good });
    assert.equal(res.status, 500);
    assert.ok(!JSON.stringify(res.body).includes('alice-token'));
  });

  it('is the only path that takes POST and skips the server\'s authentication', async () => {
    const other = `${server.url}/dashboard/events`;
    assert.equal((await send(other, { headers: { ...json, authorization: 'Bearer alice-token' }, body: good })).status, 405);
    const res = await fetch(other, { headers: { authorization: 'Bearer alice-token' } });
    assert.equal(res.status, 403);
    assert.equal(await res.text(), 'the server filter was asked\n');
    assert.equal((await send(`${url}/more`, { headers: { ...json, authorization: 'Bearer alice-token' }, body: good })).status, 404);
  });

  it('takes options as documented', () => {
    const management = (): Promise<ApprovalClient> => Promise.resolve(api);
    assert.throws(() => new ApprovalEndpoint({ management: undefined as unknown as typeof management }), /option management/);
    assert.throws(() => new ApprovalEndpoint({ management, maxBodyBytes: 0 }), /option maxBodyBytes must be a positive integer, got 0/);
    assert.throws(() => new ApprovalEndpoint({ management, maxInFlight: 1.5 }), /option maxInFlight/);
    assert.throws(() => new ApprovalEndpoint({ management, bodyTimeoutMs: -1 }), /option bodyTimeoutMs/);
  });
});
