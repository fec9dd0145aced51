// The registry against two real clusters: "mgmt" holds the owners' kubeconfig Secrets, "remote"
// holds the targets. Garbage-collection timings are shortened, except in the test of the default
// schedule, which runs on a fake clock. Faults a real apiserver cannot produce on demand are in
// registry.test.ts, against the simulated one.
import assert from 'node:assert/strict';
import { createServer, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { helmReleaseCrd, kustomizationCrd } from '../../fixtures/crds/index.ts';
import { useClusters, type TestCluster } from '../../e2e/harness/index.ts';
import { CompositeProvider, CoreV1SecretReader, KubeconfigSecretNotFoundError, SecretProvider, StaticProvider, type ClusterRef } from '../cluster/index.ts';
import { FakeClock, KubeApiError, KubeconfigRefusedError, TransportError, UnknownKindError, type GroupVersionKind } from '../util/index.ts';
import type { Registry} from './index.ts';
import { type RegistryOptions } from './index.ts';
import { eventually } from '../../e2e/harness/index.ts';
import { registryWithKeeper } from './testing.ts';
import { ensureNamespace, putKubeconfigSecret } from '../../fixtures/support/index.ts';

const configMaps: GroupVersionKind = { group: '', version: 'v1', kind: 'ConfigMap' };
const kustomizations: GroupVersionKind = { group: 'kustomize.toolkit.fluxcd.io', version: 'v1', kind: 'Kustomization' };
const helmReleases: GroupVersionKind = { group: 'helm.toolkit.fluxcd.io', version: 'v2', kind: 'HelmRelease' };
const remote: ClusterRef = { kind: 'secret', name: 'remote-kubeconfig' };

/** Takes owner keys off the queue until `expected` shows up (or fails after 20 s). */
async function expectRequeued(registry: Registry, expected: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const next = await registry.queue.get(AbortSignal.timeout(Math.max(1, deadline - Date.now())));
    assert.ok(next !== undefined, 'queue shut down');
    registry.queue.done(next.item);
    registry.queue.forget(next.item);
    if (next.item === expected) return;
  }
}

/** Empties the queue of whatever is waiting now. */
async function drain(registry: Registry): Promise<void> {
  while (registry.queue.len > 0) {
    const next = await registry.queue.get();
    if (next === undefined) return;
    registry.queue.done(next.item);
  }
}

/** Takes owner keys off the queue (each done and forgotten, as a worker would) until every one of `expected` was seen; fails after 20 s. */
async function takeUntil(registry: Registry, ...expected: string[]): Promise<string[]> {
  const missing = new Set(expected);
  const taken: string[] = [];
  const signal = AbortSignal.timeout(20_000);
  while (missing.size > 0) {
    const next = await registry.queue.get(signal);
    assert.ok(next !== undefined, 'queue shut down');
    registry.queue.done(next.item);
    registry.queue.forget(next.item);
    taken.push(next.item);
    missing.delete(next.item);
  }
  return taken;
}

/** Sum of the apiserver's counter of LIST requests for a resource. */
async function listRequests(cluster: TestCluster, resource: string): Promise<number> {
  const res = await cluster.request('GET', '/metrics');
  const text = String(res.body);
  let total = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith('apiserver_request_total{') && line.includes(`resource="${resource}"`) && line.includes('verb="LIST"')) {
      total += Number(line.slice(line.lastIndexOf(' ') + 1));
    }
  }
  return total;
}

/** Open WATCH requests the apiserver is serving for a resource (its long-running request gauge). */
async function openWatches(cluster: TestCluster, resource: string): Promise<number> {
  const res = await cluster.request('GET', '/metrics');
  let total = 0;
  for (const line of String(res.body).split('\n')) {
    if (line.startsWith('apiserver_longrunning_requests{') && line.includes(`resource="${resource}"`) && line.includes('verb="WATCH"')) {
      total += Number(line.slice(line.lastIndexOf(' ') + 1));
    }
  }
  return total;
}

/**
 * Resolves once the garbage collector has checked the registry's only cache `checks` times after
 * the wall-clock time `since` (a check shows as its next one moving further away), or once the
 * cache is gone (the caller's assertion then says so).
 */
async function gcChecksAfter(registry: Registry, since: number, checks: number): Promise<void> {
  let seen = 0;
  let last = registry.caches()[0]?.nextGcCheckInMs;
  await eventually(`${checks} garbage-collection checks ran`, () => {
    const next = registry.caches()[0]?.nextGcCheckInMs;
    if (next === undefined) return true;
    if (last !== undefined && next > last && Date.now() > since) seen += 1;
    last = next;
    return seen >= checks;
  });
}

/** Sockets and timers the process holds (handles other tests leave behind only ever expire). */
function activeHandles(): { sockets: number; timers: number } {
  const info = process.getActiveResourcesInfo();
  return {
    sockets: info.filter((r) => r === 'TCPSocketWrap' || r === 'TLSWrap').length,
    timers: info.filter((r) => r === 'Timeout').length,
  };
}

describe('registry on real clusters', () => {
  const env = useClusters(2, { namePrefix: 'registry' });
  let mgmt: TestCluster;
  let target: TestCluster;
  let hangingPort = 0;
  // Accepts and never answers (it reads, or it would never notice a client closing).
  const hanging = createServer((socket: Socket) => { socket.on('error', () => undefined); socket.resume(); });

  before(async () => {
    [mgmt, target] = env.clusters as [TestCluster, TestCluster];
    await target.installCRDs([kustomizationCrd, helmReleaseCrd]);
    for (const ns of ['team-a', 'team-b', 'team-c']) await ensureNamespace(mgmt, ns);
    await ensureNamespace(target, 'apps');
    await putKubeconfigSecret(mgmt, 'team-a', 'remote-kubeconfig', target.adminKubeconfig);
    await putKubeconfigSecret(mgmt, 'team-b', 'remote-kubeconfig', target.adminKubeconfig);
    await new Promise<void>((resolve) => hanging.listen(0, '127.0.0.1', resolve));
    const address = hanging.address();
    hangingPort = typeof address === 'object' && address !== null ? address.port : 0;
  });
  after(() => new Promise<void>((resolve) => { hanging.close(() => { resolve(); }); }));

  function connectionsTo(server: typeof hanging): Promise<number> {
    return new Promise((resolve, reject) => { server.getConnections((err, count) => { if (err) reject(err); else resolve(count); }); });
  }

  function newProvider(): CompositeProvider {
    const hangingKubeconfig = mgmt.adminKubeconfig.replace(/https:\/\/127\.0\.0\.1:\d+/, `https://127.0.0.1:${hangingPort}`);
    return new CompositeProvider({
      byKind: {
        secret: new SecretProvider({ secrets: new CoreV1SecretReader({ kubeConfig: mgmt.kubeConfig() }) }),
        static: new StaticProvider({ clusters: { hanging: hangingKubeconfig, target: target.adminKubeconfig } }),
      },
    });
  }

  /** A registry with GC timings shortened to milliseconds, closed after the test. */
  function newRegistry(t: { after(fn: () => Promise<void>): void }, overrides: Partial<RegistryOptions> = {}): Registry {
    const registry = registryWithKeeper({ provider: newProvider(), gcInitialDelayMs: 100, gcMaxDelayMs: 400, gcGraceMs: 200, credentialCheckIntervalMs: 0, ...overrides });
    t.after(() => registry.close());
    return registry;
  }

  it('reads a target in a remote cluster through a kubeconfig Secret, and requeues its owner when it changes', async (t) => {
    const registry = newRegistry(t);
    const owner = { namespace: 'team-a', name: 'pipeline' };
    const created = await target.request('POST', '/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/apps/kustomizations', {
      apiVersion: 'kustomize.toolkit.fluxcd.io/v1', kind: 'Kustomization', metadata: { name: 'web' }, spec: { path: './web' },
    });
    assert.equal(created.statusCode, 201);

    const reader = await registry.watchTargetAndGetReader(remote, { gvk: kustomizations, namespace: 'apps', name: 'web' }, owner);
    await reader.waitForSync(AbortSignal.timeout(20_000));
    assert.deepEqual(reader.get('apps', 'web')?.spec, { path: './web' });
    await expectRequeued(registry, 'team-a/pipeline'); // woken once the answer is known

    await drain(registry);
    const updated = await target.request('PUT', '/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/apps/kustomizations/web', {
      ...(created.body as object), spec: { path: './web-v2' },
    });
    assert.equal(updated.statusCode, 200, JSON.stringify(updated.body));
    await expectRequeued(registry, 'team-a/pipeline');
    await eventually('the cache shows the change', () => (reader.get('apps', 'web')?.spec as { path?: string } | undefined)?.path === './web-v2');

    const [info] = registry.caches();
    assert.equal(info?.cluster, 'secret:team-a/remote-kubeconfig');
    assert.equal(info.synced, true);
    assert.equal(info.owners, 1);
  });

  it('serves Kustomization-like and HelmRelease-like kinds as targets, and says when a kind is unknown', async (t) => {
    const registry = newRegistry(t);
    const owner = { namespace: 'team-a', name: 'flux' };
    await target.request('POST', '/apis/helm.toolkit.fluxcd.io/v2/namespaces/apps/helmreleases', {
      apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease', metadata: { name: 'api' }, spec: { chart: { spec: { version: '1.2.3' } } },
    });
    const releases = await registry.watchTargetAndGetReader(remote, { gvk: helmReleases, namespace: 'apps', name: 'api' }, owner);
    const kustomize = await registry.watchTargetAndGetReader(remote, { gvk: kustomizations, namespace: 'apps', name: 'web' }, owner);
    await releases.waitForSync(AbortSignal.timeout(20_000));
    await kustomize.waitForSync(AbortSignal.timeout(20_000));
    assert.deepEqual(releases.get('apps', 'api')?.spec, { chart: { spec: { version: '1.2.3' } } });
    assert.equal(releases.list({ namespace: 'apps' }).length, 1);
    assert.equal(registry.caches().length, 2, 'one cache per kind');

    await assert.rejects(
      registry.watchTargetAndGetReader(remote, { gvk: { group: 'nope.example.com', version: 'v1', kind: 'Nothing' }, name: 'x' }, owner),
      (err: unknown) => err instanceof UnknownKindError && err.cluster === 'secret:team-a/remote-kubeconfig' && err.gvk.kind === 'Nothing',
    );
    assert.equal(registry.caches().length, 2, 'a failed build is not cached');
  });

  it('builds one cache for 200 concurrent calls on a missing key', async (t) => {
    const registry = newRegistry(t);
    const before = await listRequests(target, 'configmaps');
    const readers = await Promise.all(Array.from({ length: 200 }, (_, i) =>
      registry.watchTargetAndGetReader({ kind: 'static', name: 'target' }, { gvk: configMaps, namespace: 'apps', name: `cm-${i}` }, { namespace: 'team-a', name: `owner-${i}` })));
    assert.equal(new Set(readers).size, 1, 'every caller gets the same reader');
    assert.equal(registry.caches().length, 1);
    assert.equal(registry.caches()[0]?.owners, 200);
    await readers[0]?.waitForSync(AbortSignal.timeout(20_000));
    assert.equal(await listRequests(target, 'configmaps') - before, 1, 'exactly one LIST reached the apiserver');
  });

  it('keeps serving healthy clusters while one hangs, and fails the hanging build with a typed error', async (t) => {
    const registry = newRegistry(t, { buildTimeoutMs: 3_000 });
    const owner = { namespace: 'team-a', name: 'mixed' };
    let hangSettled = false;
    const hang = registry.watchTargetAndGetReader({ kind: 'static', name: 'hanging' }, { gvk: configMaps, namespace: 'apps', name: 'x' }, owner)
      .finally(() => { hangSettled = true; });
    const healthy = await registry.watchTargetAndGetReader({ kind: 'static', name: 'target' }, { gvk: configMaps, namespace: 'apps', name: 'x' }, owner);
    await healthy.waitForSync(AbortSignal.timeout(20_000));
    assert.equal(hangSettled, false, 'the healthy cluster was served while the other still hung');
    await assert.rejects(hang, (err: unknown) => err instanceof TransportError && err.cluster === 'static:hanging');
    assert.equal(registry.caches().length, 1, 'nothing cached for the hanging cluster');
    await eventually('the connection to the hanging cluster is released', async () => await connectionsTo(hanging) === 0, 5_000);
  });

  it('shares a cache between two owners, keeps it when one leaves, and tears it down when none needs it', async (t) => {
    const registry = newRegistry(t);
    const targetRef = { gvk: configMaps, namespace: 'apps', name: 'shared' };
    const a = { namespace: 'team-a', name: 'one' };
    const b = { namespace: 'team-a', name: 'two' };
    const reader = await registry.watchTargetAndGetReader(remote, targetRef, a);
    await registry.watchTargetAndGetReader(remote, targetRef, b);
    await reader.waitForSync(AbortSignal.timeout(20_000));
    await eventually('the watch is open', async () => await openWatches(target, 'configmaps') >= 1);
    const watchesWithCache = await openWatches(target, 'configmaps');

    registry.forgetOwner(a);
    await gcChecksAfter(registry, Date.now() + 200, 2); // two checks after the 200 ms grace period
    assert.equal(registry.caches().length, 1, 'still used by the other owner');
    assert.equal(reader.synced, true);

    registry.setOwnerTargets(b, []); // b's pipeline dropped the target
    await eventually('the unused cache is collected', () => registry.caches().length === 0);
    assert.equal(reader.synced, false);
    assert.deepEqual(reader.list(), []);
    await eventually('its watch connection is gone', async () => await openWatches(target, 'configmaps') === watchesWithCache - 1);

    await registry.watchTargetAndGetReader(remote, targetRef, a);
    assert.equal(registry.caches().length, 1, 'asking again rebuilds it');
  });

  it('wakes a selector target\'s owner when a new matching object is created, and not for a non-matching one', async (t) => {
    const registry = newRegistry(t);
    await ensureNamespace(target, 'sets');
    await ensureNamespace(target, 'sets-probe');
    const cluster: ClusterRef = { kind: 'static', name: 'target' };
    const createIn = async (namespace: string, name: string, labels: Record<string, string>): Promise<void> => {
      const res = await target.request('POST', `/api/v1/namespaces/${namespace}/configmaps`, { metadata: { name, namespace, labels } });
      assert.equal(res.statusCode, 201, JSON.stringify(res.body));
    };
    const reader = await registry.watchTargetAndGetReader(cluster, { gvk: configMaps, namespace: 'sets', labelSelector: 'tier=web' }, { namespace: 'team-a', name: 'web-lister' });
    // The sentinel: its own owner, with the same selector in another namespace (so the same cache),
    // woken by a poke made after each change under test on the same watch: once it is taken off the
    // queue, every owner the change woke was taken before it.
    await registry.watchTargetAndGetReader(cluster, { gvk: configMaps, namespace: 'sets-probe', labelSelector: 'tier=web' }, { namespace: 'team-a', name: 'sentinel' });
    await reader.waitForSync(AbortSignal.timeout(20_000));
    assert.equal(registry.caches().length, 1, 'one cache for both');
    await takeUntil(registry, 'team-a/web-lister', 'team-a/sentinel'); // woken once synced
    let pokes = 0;
    const wokenBy = async (change: () => Promise<void>): Promise<string[]> => {
      await change();
      await createIn('sets-probe', `poke-${++pokes}`, { tier: 'web' });
      return (await takeUntil(registry, 'team-a/sentinel')).filter((key) => key !== 'team-a/sentinel');
    };

    assert.deepEqual(await wokenBy(() => createIn('sets', 'db', { tier: 'db' })), [], 'not woken by a non-matching object');
    assert.deepEqual(await wokenBy(() => createIn('apps', 'web-elsewhere', { tier: 'web' })), [], 'nor by a matching one in another namespace');
    assert.deepEqual(await wokenBy(() => createIn('sets', 'web', { tier: 'web' })), ['team-a/web-lister'], 'woken by a new matching object');
    await eventually('the reader holds it', () => reader.get('sets', 'web') !== undefined);
    assert.equal(reader.get('sets', 'db'), undefined, 'the cache holds only what the selector selects');
  });

  it('caches only what a selector selects, shares the cache between equal selectors, deletes an object relabelled out of it (from the watch, no relist) and wakes its owners, and collects it', async (t) => {
    const registry = newRegistry(t);
    await ensureNamespace(target, 'picked');
    const cluster: ClusterRef = { kind: 'static', name: 'target' };
    const path = (name: string): string => `/api/v1/namespaces/picked/configmaps/${name}`;
    const create = async (name: string, labels: Record<string, string>): Promise<void> => {
      const res = await target.request('POST', '/api/v1/namespaces/picked/configmaps', { metadata: { name, namespace: 'picked', labels } });
      assert.equal(res.statusCode, 201, JSON.stringify(res.body));
    };
    const relabel = async (name: string, labels: Record<string, string>): Promise<void> => {
      const got = await target.request('GET', path(name));
      const obj = got.body as { metadata: Record<string, unknown> };
      const res = await target.request('PUT', path(name), { ...obj, metadata: { ...obj.metadata, labels } });
      assert.equal(res.statusCode, 200, JSON.stringify(res.body));
    };
    await create('keep', { app: 'picked' });
    await create('db', { app: 'picked', tier: 'db' });
    await create('other', { app: 'other' });
    const one = { namespace: 'team-a', name: 'one' };
    const two = { namespace: 'team-b', name: 'two' };
    const watchesBefore = await openWatches(target, 'configmaps');
    const reader = await registry.watchTargetAndGetReader(cluster, { gvk: configMaps, namespace: 'picked', labelSelector: 'app in (picked,chosen),tier!=db' }, one);
    assert.equal(await registry.watchTargetAndGetReader(cluster, { gvk: configMaps, namespace: 'picked', labelSelector: ' tier!=db , app in (chosen, picked, chosen)' }, two), reader, 'equal selectors, one reader');
    await reader.waitForSync(AbortSignal.timeout(20_000));
    assert.deepEqual(registry.caches().map((c) => [c.labelSelector, c.owners, c.objects]), [['app in (chosen,picked),tier!=db', 2, 1]], 'one cache, two owners, the one selected object (the canonical selector, as the API server was sent it)');
    assert.deepEqual(reader.list({ namespace: 'picked' }).map((o) => o.metadata?.name), ['keep']);
    await eventually('the watch is open', async () => await openWatches(target, 'configmaps') === watchesBefore + 1);
    await takeUntil(registry, 'team-a/one', 'team-b/two'); // woken once synced

    const lists = await listRequests(target, 'configmaps');
    await relabel('keep', { app: 'gone' });
    await takeUntil(registry, 'team-a/one', 'team-b/two');
    await eventually('the relabelled object left the cache', () => reader.get('picked', 'keep') === undefined);
    await relabel('other', { app: 'picked' });
    await takeUntil(registry, 'team-a/one', 'team-b/two');
    await eventually('the relabelled object entered the cache', () => reader.get('picked', 'other') !== undefined);
    assert.deepEqual(reader.list().map((o) => o.metadata?.name), ['other']);
    assert.equal(await listRequests(target, 'configmaps'), lists, 'both arrived on the watch: the API server sends a DELETED for an object leaving the selection, an ADDED for one entering it');

    registry.setOwnerTargets(one, []);
    registry.forgetOwner(two);
    await eventually('the selector cache nobody uses is collected', () => registry.caches().length === 0);
    assert.equal(reader.synced, false);
    await eventually('its watch is gone', async () => await openWatches(target, 'configmaps') === watchesBefore);
  });

  it('with objects kept as text (informer.objects: lazy), wakes the owner of a changed object and reads the new one, frozen, from a selector cache too', async (t) => {
    const registry = newRegistry(t, { informer: { objects: 'lazy' } });
    await ensureNamespace(target, 'as-text');
    const cluster: ClusterRef = { kind: 'static', name: 'target' };
    const path = (name: string): string => `/api/v1/namespaces/as-text/configmaps/${name}`;
    for (const [name, tier] of [['settings', 'web'], ['extra', 'db']] as const) {
      const res = await target.request('POST', '/api/v1/namespaces/as-text/configmaps', { metadata: { name, namespace: 'as-text', labels: { tier } }, data: { mode: 'blue' } });
      assert.equal(res.statusCode, 201, JSON.stringify(res.body));
    }
    const owner = { namespace: 'team-a', name: 'lazy' };
    const other = { namespace: 'team-b', name: 'lazy-set' };
    const reader = await registry.watchTargetAndGetReader(cluster, { gvk: configMaps, namespace: 'as-text', name: 'settings' }, owner);
    const webs = await registry.watchTargetAndGetReader(cluster, { gvk: configMaps, namespace: 'as-text', labelSelector: 'tier=web' }, other);
    await reader.waitForSync(AbortSignal.timeout(20_000));
    await webs.waitForSync(AbortSignal.timeout(20_000));
    await takeUntil(registry, 'team-a/lazy', 'team-b/lazy-set');
    const read = (): { data?: Record<string, string> } | undefined => reader.get({ namespace: 'as-text', name: 'settings' }) as { data?: Record<string, string> } | undefined;
    assert.deepEqual(read()?.data, { mode: 'blue' });
    assert.deepEqual(webs.list({ namespace: 'as-text' }).map((o) => o.metadata?.name), ['settings'], 'the selector cache holds what it selects');

    const got = await target.request('GET', path('settings'));
    const res = await target.request('PUT', path('settings'), { ...(got.body as object), data: { mode: 'green' } });
    assert.equal(res.statusCode, 200, JSON.stringify(res.body));
    await takeUntil(registry, 'team-a/lazy', 'team-b/lazy-set');
    await eventually('the read after the update gives the new object', () => read()?.data?.mode === 'green');
    const current = read();
    assert.ok(current !== undefined && Object.isFrozen(current) && Object.isFrozen(current.data), 'handed out frozen, as parsed objects are');
    assert.equal((webs.get({ namespace: 'as-text', name: 'settings' }) as { data?: Record<string, string> } | undefined)?.data?.mode, 'green');
  });

  it('with compressed objects (informer.objects: compressed), packs cold objects of a real cluster, reads them back as the server has them, and wakes the owner of a packed object that changes', async (t) => {
    const registry = newRegistry(t, { informer: { objects: 'compressed', compressAfterMs: 200 } });
    await ensureNamespace(target, 'packed');
    const cluster: ClusterRef = { kind: 'static', name: 'target' };
    const config = (i: number, level: string): string => `server:\n  port: ${String(8000 + i)}\n  host: web-${String(i)}.packed.svc\ndatabase:\n  url: postgres://db-${String(i % 3)}.data.svc:5432/web\n  pool: ${String(5 + (i % 7))}\nlogging:\n  level: ${level}\n  format: json\nfeatures:\n  checkout-v2: ${String(i % 2 === 0)}\n`;
    for (let i = 0; i < 30; i++) {
      const res = await target.request('POST', '/api/v1/namespaces/packed/configmaps', { metadata: { name: `web-${String(i)}`, labels: { app: 'web', 'app.kubernetes.io/part-of': 'shop' } }, data: { 'app.yaml': config(i, 'info'), 'extra.yaml': config(i + 100, 'warn') } });
      assert.equal(res.statusCode, 201, JSON.stringify(res.body));
    }
    const owner = { namespace: 'team-a', name: 'packed' };
    const webs = await registry.watchTargetAndGetReader(cluster, { gvk: configMaps, namespace: 'packed', labelSelector: 'app=web' }, owner);
    await webs.waitForSync(AbortSignal.timeout(20_000));
    await takeUntil(registry, 'team-a/packed');
    const info = (): { compressed?: number | undefined; retainedBytes?: number | undefined } | undefined => registry.caches().find((c) => c.labelSelector === 'app=web');
    const asText = info()?.retainedBytes ?? 0;
    await eventually('every object packed', () => info()?.compressed === 30, { timeoutMs: 20_000 });
    assert.ok((info()?.retainedBytes ?? 0) < asText / 2, `${String(info()?.retainedBytes)} B packed, ${String(asText)} B as text`);
    for (const i of [0, 13, 29]) {
      const live = await target.request('GET', `/api/v1/namespaces/packed/configmaps/web-${String(i)}`);
      const cached = webs.get({ namespace: 'packed', name: `web-${String(i)}` });
      assert.deepEqual(cached?.data, (live.body as { data?: unknown }).data);
      assert.equal(cached?.metadata?.resourceVersion, (live.body as { metadata?: { resourceVersion?: string } }).metadata?.resourceVersion);
      assert.ok(cached !== undefined && Object.isFrozen(cached) && Object.isFrozen(cached.data));
    }
    const got = await target.request('GET', '/api/v1/namespaces/packed/configmaps/web-21');
    const res = await target.request('PUT', '/api/v1/namespaces/packed/configmaps/web-21', { ...(got.body as object), data: { 'app.yaml': config(21, 'debug') } });
    assert.equal(res.statusCode, 200, JSON.stringify(res.body));
    await takeUntil(registry, 'team-a/packed');
    await eventually('the read after the update gives the new object', () => (webs.get({ namespace: 'packed', name: 'web-21' })?.data as Record<string, string> | undefined)?.['app.yaml']?.includes('level: debug') === true);
    assert.equal(webs.list({ namespace: 'packed' }).length, 30);
  });

  it('requeues every owner of a cache at each resync (informer.resyncIntervalMs)', async (t) => {
    const resyncIntervalMs = 300;
    const registry = newRegistry(t, { informer: { resyncIntervalMs } });
    await ensureNamespace(target, 'resync');
    const cluster: ClusterRef = { kind: 'static', name: 'target' };
    const present = await target.request('POST', '/api/v1/namespaces/resync/configmaps', { metadata: { name: 'present' } });
    assert.equal(present.statusCode, 201, JSON.stringify(present.body));
    const reader = await registry.watchTargetAndGetReader(cluster, { gvk: configMaps, namespace: 'resync', name: 'present' }, { namespace: 'team-a', name: 'one' });
    await registry.watchTargetAndGetReader(cluster, { gvk: configMaps, namespace: 'resync', name: 'absent' }, { namespace: 'team-a', name: 'two' });
    await reader.waitForSync(AbortSignal.timeout(20_000));
    await takeUntil(registry, 'team-a/one', 'team-a/two'); // woken once synced
    // Nothing changes from here on: only resyncs can requeue the owners, that of the missing target included.
    const startedAt = Date.now();
    const rounds = 3;
    const pops = new Map<string, number>();
    for (let round = 1; round <= rounds; round++) {
      for (const key of await takeUntil(registry, 'team-a/one', 'team-a/two')) pops.set(key, (pops.get(key) ?? 0) + 1);
    }
    const elapsedMs = Date.now() - startedAt;
    assert.deepEqual([...pops.keys()].sort(), ['team-a/one', 'team-a/two'], 'only the cache\'s owners');
    assert.ok((pops.get('team-a/one') ?? 0) >= rounds && (pops.get('team-a/two') ?? 0) >= rounds);
    t.diagnostic(`resync every ${resyncIntervalMs} ms: ${JSON.stringify(Object.fromEntries(pops))} pops in ${elapsedMs} ms`);
  });

  it('refuses exec, file and cross-namespace kubeconfigs with errors that name the rule', async (t) => {
    const registry = newRegistry(t);
    const withExec = target.adminKubeconfig.replace(/"token": "[^"]+"/, '"exec": { "apiVersion": "client.authentication.k8s.io/v1", "command": "steal-credentials" }');
    const withFile = target.adminKubeconfig.replace(/"certificate-authority-data": "[^"]+"/, '"certificate-authority": "/etc/ssl/private/ca.pem"');
    await putKubeconfigSecret(mgmt, 'team-c', 'exec-kubeconfig', withExec);
    await putKubeconfigSecret(mgmt, 'team-c', 'file-kubeconfig', withFile);
    const owner = { namespace: 'team-c', name: 'pipe' };
    const targetRef = { gvk: configMaps, namespace: 'apps', name: 'x' };

    await assert.rejects(registry.watchTargetAndGetReader({ kind: 'secret', name: 'exec-kubeconfig' }, targetRef, owner),
      (err: unknown) => err instanceof KubeconfigRefusedError && err.rule === 'exec' && err.message.includes('steal-credentials'));
    await assert.rejects(registry.watchTargetAndGetReader({ kind: 'secret', name: 'file-kubeconfig' }, targetRef, owner),
      (err: unknown) => err instanceof KubeconfigRefusedError && err.rule === 'local-file' && err.message.includes('ca.pem'));
    await assert.rejects(registry.watchTargetAndGetReader({ kind: 'secret', namespace: 'team-a', name: 'remote-kubeconfig' }, targetRef, owner),
      (err: unknown) => err instanceof KubeconfigRefusedError && err.rule === 'cross-namespace' && err.message.includes('team-a/remote-kubeconfig'));

    // A cache published for team-a does not let team-c in through the hot path.
    const allowed = { namespace: 'team-a', name: 'pipe' };
    await registry.watchTargetAndGetReader(remote, targetRef, allowed);
    await assert.rejects(registry.watchTargetAndGetReader({ kind: 'secret', namespace: 'team-a', name: 'remote-kubeconfig' }, targetRef, owner),
      (err: unknown) => err instanceof KubeconfigRefusedError && err.rule === 'cross-namespace');
    assert.equal(registry.caches().length, 1);
  });

  it('rebuilds a cluster\'s caches when its Secret changes, and stops them when it is deleted', async (t) => {
    const registry = newRegistry(t);
    await putKubeconfigSecret(mgmt, 'team-b', 'rotating', target.adminKubeconfig);
    const ref: ClusterRef = { kind: 'secret', name: 'rotating' };
    const owner = { namespace: 'team-b', name: 'rotator' };
    const reader = await registry.watchTargetAndGetReader(ref, { gvk: configMaps, namespace: 'apps', name: 'x' }, owner);
    await reader.waitForSync(AbortSignal.timeout(20_000));
    assert.equal(reader.lastError, undefined);

    // Rotate to credentials with no RBAC at all: the rebuilt cache must be using them.
    const restricted = await target.restrictedKubeconfig({ namespace: 'apps', serviceAccount: 'no-rights' });
    await putKubeconfigSecret(mgmt, 'team-b', 'rotating', restricted);
    await drain(registry);
    await registry.checkCluster(ref, 'team-b');
    await expectRequeued(registry, 'team-b/rotator');
    await eventually('the rebuilt cache reports the new credentials\' 403', () =>
      reader.lastError instanceof KubeApiError && reader.lastError.statusCode === 403 && reader.lastError.cluster === 'secret:team-b/rotating');
    assert.equal(registry.caches().length, 1, 'the same key, rebuilt');
    assert.ok((registry.caches()[0]?.watchErrors ?? 0) > 0, 'the rebuilt cache counts its failures');

    const deleted = await mgmt.request('DELETE', '/api/v1/namespaces/team-b/secrets/rotating');
    assert.equal(deleted.statusCode, 200);
    await drain(registry);
    await registry.checkCluster(ref, 'team-b');
    await expectRequeued(registry, 'team-b/rotator');
    assert.equal(registry.caches().length, 0, 'the cluster\'s caches are stopped');
    assert.equal(reader.synced, false);
    await assert.rejects(registry.watchTargetAndGetReader(ref, { gvk: configMaps, namespace: 'apps', name: 'x' }, owner),
      (err: unknown) => err instanceof KubeconfigSecretNotFoundError);
  });

  it('checks a used cache at 2 s doubling to 512 s, and collects it a grace period after its last owner left', async (t) => {
    const clock = new FakeClock(Date.now());
    const registry = registryWithKeeper({ provider: newProvider(), clock, credentialCheckIntervalMs: 0 }); // default GC timings
    t.after(() => registry.close());
    const owner = { namespace: 'team-a', name: 'gc' };
    const reader = await registry.watchTargetAndGetReader({ kind: 'static', name: 'target' }, { gvk: configMaps, namespace: 'apps', name: 'x' }, owner);
    await reader.waitForSync();
    const nextCheck = (): number | undefined => registry.caches()[0]?.nextGcCheckInMs;
    const schedule: (number | undefined)[] = [];
    for (let i = 0; i < 10; i++) {
      const due = nextCheck();
      schedule.push(due);
      clock.advance(due ?? 0);
      await eventually('the check ran and rescheduled', () => nextCheck() !== undefined && nextCheck() !== 0);
    }
    assert.deepEqual(schedule, [2_000, 4_000, 8_000, 16_000, 32_000, 64_000, 128_000, 256_000, 512_000, 512_000]);

    registry.forgetOwner(owner);
    assert.equal(nextCheck(), 30_000, 'eligible after the default grace period, not at the next backoff step');
    clock.advance(29_999);
    assert.equal(nextCheck(), 1, 'no check is due before the grace period ends');
    assert.equal(registry.caches().length, 1);
    clock.advance(1);
    await eventually('collected', () => registry.caches().length === 0);
  });

  it('leaves no socket or timer behind after close()', async (t) => {
    // Earlier tests' HTTP clients keep idle sockets for a few seconds: start from a quiet process.
    await eventually('earlier connections wind down', () => { const h = activeHandles(); return h.sockets === 0 && h.timers === 0; }, 15_000)
      .catch(() => undefined);
    const baseline = activeHandles();
    const registry = newRegistry(t);
    // Static references only: a Secret reader's HTTP client (client-node's) belongs to the embedder,
    // and its keep-alive timers are not the registry's to release.
    const targetCluster: ClusterRef = { kind: 'static', name: 'target' };
    const readers = await Promise.all([configMaps, kustomizations, helmReleases].map((gvk) =>
      registry.watchTargetAndGetReader(targetCluster, { gvk, namespace: 'apps', name: 'a' }, { namespace: 'team-a', name: 'x' })));
    await Promise.all(readers.map((r) => r.waitForSync())); // no AbortSignal.timeout: it would be a timer of our own
    const running = activeHandles();
    assert.ok(running.sockets > baseline.sockets && running.timers > baseline.timers, 'watches hold sockets and timers while running');
    await registry.close();
    await registry.close(); // idempotent
    await eventually('every socket and timer is released', () => {
      const now = activeHandles();
      return now.sockets <= baseline.sockets && now.timers <= baseline.timers;
    }, 5_000).catch(() => { assert.deepEqual(activeHandles(), baseline, 'still held after close()'); });
    await assert.rejects(registry.watchTargetAndGetReader(remote, { gvk: configMaps, name: 'a' }, { namespace: 'team-a', name: 'x' }), { code: 'ERR_CLOSED' });
  });
});
