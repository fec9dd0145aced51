// The dashboard's streams against a real kube-apiserver's TokenReview, SubjectAccessReview and
// RBAC: a viewer whose ClusterRoleBinding is deleted while its stream is open is refused when the
// stream's lifetime ends and the page reconnects; one user's streams are counted together
// whatever token it comes with. The review caches are off (TTL 0) so that each reconnection asks
// the apiserver; the service's own caches add their TTLs to the bound (see README, Dashboard).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadAll } from 'js-yaml';
import { useClusters, type TestCluster } from '../../e2e/harness/index.ts';
import { HttpServer, KubeAuthFilter } from '../../lib/manager/index.ts';
import { Dashboard } from './index.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));
const NAMESPACE = 'monitoring';

/** One event stream: its status, the events received by name, and when it ended. */
interface Stream {
  readonly status: number;
  readonly events: string[];
  readonly done: Promise<void>;
  close(): void;
}

async function open(url: string, token: string): Promise<Stream> {
  const abort = new AbortController();
  const res = await fetch(url, { headers: { authorization: `Bearer ${token}` }, signal: abort.signal });
  const events: string[] = [];
  const close = (): void => { abort.abort(); };
  if (res.status !== 200 || res.body === null) return { status: res.status, events, done: res.text().then(() => undefined), close };
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  const done = (async () => {
    let buffer = '';
    for (;;) {
      const chunk: { done: boolean; value?: Uint8Array | undefined } = await reader.read().catch(() => ({ done: true }));
      if (chunk.done) return;
      buffer += decoder.decode(chunk.value, { stream: true });
      for (let i = buffer.indexOf('\n\n'); i >= 0; i = buffer.indexOf('\n\n')) {
        const name = buffer.slice(0, i).split('\n').find((l) => l.startsWith('event: '));
        if (name !== undefined) events.push(name.slice(7));
        buffer = buffer.slice(i + 2);
      }
    }
  })();
  return { status: res.status, events, done, close };
}

/** A fresh TokenRequest token of a ServiceAccount (each call a different token of the same user). */
async function tokenOf(cluster: TestCluster, serviceAccount: string): Promise<string> {
  const kubeconfig = await cluster.restrictedKubeconfig({ namespace: NAMESPACE, serviceAccount });
  const token = /"?token"?: *"?([^"\s]+)"?/.exec(kubeconfig)?.[1] ?? '';
  assert.ok(token.length > 20);
  return token;
}

async function bind(cluster: TestCluster, serviceAccount: string): Promise<string> {
  const name = `${serviceAccount}-dashboard`;
  const res = await cluster.request('POST', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
    metadata: { name },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'fleetcache-metrics-reader' },
    subjects: [{ kind: 'ServiceAccount', name: serviceAccount, namespace: NAMESPACE }],
  });
  assert.equal(res.statusCode, 201, JSON.stringify(res.body));
  return name;
}

describe('dashboard streams against real RBAC', () => {
  const fixture = useClusters(1, { namePrefix: 'dashaccess' });
  // Streams that live half a second, and streams that live their default (so that shares do not
  // depend on how fast the reviews are).
  const shortLived = new Dashboard({ stream: { lifetimeMs: 500, random: () => 0 } });
  const longLived = new Dashboard({ stream: { maxClientsPerIdentity: 2 } });
  const servers: HttpServer[] = [];
  let shortUrl = '';
  let longUrl = '';
  const streams: Stream[] = [];
  const cluster = (): TestCluster => {
    const c = fixture.clusters[0];
    return c;
  };

  before(async () => {
    for (const doc of loadAll(readFileSync(path.join(root, 'config/rbac/metrics_reader_role.yaml'), 'utf8')) as object[]) {
      const res = await cluster().request('POST', '/apis/rbac.authorization.k8s.io/v1/clusterroles', doc);
      assert.equal(res.statusCode, 201, JSON.stringify(res.body));
    }
    const filter = new KubeAuthFilter({
      reviews: async (apiPath, body) => (await cluster().request('POST', apiPath, body)).body,
      authenticatedTtlMs: 0,
      unauthenticatedTtlMs: 0,
      allowedTtlMs: 0,
      deniedTtlMs: 0,
    });
    for (const dashboard of [shortLived, longLived]) {
      servers.push(await HttpServer.start({
        name: 'metrics',
        address: { host: '127.0.0.1', port: 0 },
        routes: {},
        handlers: dashboard.handlers,
        publicPaths: dashboard.publicPaths,
        authorize: (req, urlPath) => filter.check(req, urlPath),
      }));
    }
    [shortUrl, longUrl] = servers.map((server) => `${server.url}/dashboard/events`) as [string, string];
  }, { timeout: 120_000 });

  after(async () => {
    for (const s of streams) s.close();
    await Promise.all(streams.map((s) => s.done));
    for (const server of servers) await server.close();
  });

  async function stream(token: string, url = shortUrl): Promise<Stream> {
    const s = await open(url, token);
    streams.push(s);
    return s;
  }

  it('refuses a viewer whose binding was deleted once its stream ends and it reconnects; another viewer carries on', { timeout: 60_000 }, async () => {
    const [alice, bob] = [await tokenOf(cluster(), 'alice'), await tokenOf(cluster(), 'bob')];
    const aliceBinding = await bind(cluster(), 'alice');
    await bind(cluster(), 'bob');
    const first = await stream(alice);
    assert.equal(first.status, 200);
    await first.done;
    assert.equal(first.events.at(-1), 'reconnect', 'the lifetime ended it, asking for a reconnection');
    const again = await stream(alice);
    assert.equal(again.status, 200, 'still bound: the reconnection is served');

    const deleted = await cluster().request('DELETE', `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${aliceBinding}`);
    assert.equal(deleted.statusCode, 200, JSON.stringify(deleted.body));
    await again.done;
    assert.equal(again.events.at(-1), 'reconnect');
    // The apiserver's RBAC cache follows the deletion within moments: reconnect until it does.
    let status = 0;
    for (let i = 0; i < 100 && status !== 403; i++) {
      const next = await stream(alice);
      status = next.status;
      if (status === 200) {
        next.close();
        await delay(100);
      }
    }
    assert.equal(status, 403, 'the revoked viewer is refused');
    const other = await stream(bob);
    assert.equal(other.status, 200, 'a viewer still bound is served');
    other.close();
  });

  it('counts one user\'s streams together whatever token it sends: over its share is 429, another user is served', { timeout: 60_000 }, async () => {
    await bind(cluster(), 'carol');
    const tokens = [await tokenOf(cluster(), 'carol'), await tokenOf(cluster(), 'carol'), await tokenOf(cluster(), 'carol')];
    assert.equal(new Set(tokens).size, 3, 'three different tokens');
    const held = [await stream(tokens[0] ?? '', longUrl), await stream(tokens[1] ?? '', longUrl)];
    assert.deepEqual(held.map((s) => s.status), [200, 200]);
    const third = await stream(tokens[2] ?? '', longUrl);
    assert.equal(third.status, 429, 'the same user with a third token');
    const bob = await stream(await tokenOf(cluster(), 'bob'), longUrl);
    assert.equal(bob.status, 200);
    for (const s of [...held, bob]) s.close();
  });
});
