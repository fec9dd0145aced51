// The informer against a real kube-apiserver (e2e/harness): paging, events, a watch gap across an
// apiserver restart, a CRD installed late, selectors, and RBAC errors that heal. Paging and events,
// the gap and selectors run with both ways of keeping objects: parsed (the default) and as their
// stripped text (`objects: 'lazy'`), whose reads must give the same objects.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { KubeConfig } from '@kubernetes/client-node';
import { openCrd } from '../../fixtures/crds/index.ts';
import { useClusters, type TestCluster } from '../../e2e/harness/index.ts';
import { ClusterConnection, createListLimiter, resourcePath, type KubeObject, type ResourceClient } from '../transport/index.ts';
import { KubeApiError, UnknownKindError, type GroupVersionKind } from '../util/index.ts';
import { ResourceInformer, type InformerHandler, type InformerOptions } from './index.ts';
import { eventually } from '../../e2e/harness/index.ts';
import { kubeConfigFrom } from '../../fixtures/support/index.ts';

const CONFIGMAP: GroupVersionKind = { group: '', version: 'v1', kind: 'ConfigMap' };
const WIDGET: GroupVersionKind = { group: 'example.com', version: 'v1', kind: 'Widget' };
const widgetCrd = openCrd({ group: 'example.com', version: 'v1', kind: 'Widget', plural: 'widgets' });
const fast = { slowBackoff: { initialMs: 300, maxMs: 1_000 }, backoff: { initialMs: 200, maxMs: 1_000 } } as const;
const listLimiter = createListLimiter();
/** The two ways an informer keeps objects; the tests that run with both. */
const MODES = ['parsed', 'lazy'] as const;

type Seen = readonly [string, string, ...unknown[]];

function recorder(): { readonly seen: Seen[]; readonly handler: InformerHandler } {
  const seen: Seen[] = [];
  const name = (o: KubeObject): string => o.metadata?.name ?? '';
  return {
    seen,
    handler: {
      add: (o, initial) => { seen.push(['add', name(o), initial]); },
      update: (a, b) => { seen.push(['update', name(a), (a as { data?: unknown }).data, (b as { data?: unknown }).data]); },
      delete: (o, unknown) => { seen.push(['delete', name(o), unknown]); },
    },
  };
}

/** Polls `check` until it holds (informer events arrive asynchronously from a real server). */
function connect(cluster: TestCluster, kubeConfig: KubeConfig = cluster.kubeConfig()): ClusterConnection {
  return new ClusterConnection({ name: cluster.name, kubeConfig, listLimiter, qps: 200, burst: 200 });
}

async function createNamespace(conn: ClusterConnection, name: string): Promise<void> {
  await conn.request({ method: 'POST', path: '/api/v1/namespaces', body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name } } });
}

async function createConfigMap(conn: ClusterConnection, ns: string, name: string, data: Record<string, string>, labels: Record<string, string> = {}): Promise<void> {
  await conn.request({ method: 'POST', path: `/api/v1/namespaces/${ns}/configmaps`, body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, labels }, data } });
}

/** A client that counts LIST calls, to see paging happen against the real server. */
function counting(client: ResourceClient): { client: ResourceClient; pages: () => number } {
  let pages = 0;
  return {
    client: { cluster: client.cluster, info: client.info, list: (o) => { pages++; return client.list(o); }, watch: (o) => client.watch(o) },
    pages: () => pages,
  };
}

/** etcd's v3 JSON gateway: lets a test change storage while the apiserver is down. */
async function etcd(cluster: TestCluster, op: 'range' | 'put' | 'deleterange', key: string, value?: string): Promise<{ kvs?: { value: string }[] }> {
  const b64 = (s: string): string => Buffer.from(s, 'utf8').toString('base64');
  const res = await fetch(`${cluster.etcdEndpoint}/v3/kv/${op}`, {
    method: 'POST',
    body: JSON.stringify(value === undefined ? { key: b64(key) } : { key: b64(key), value: b64(value) }),
  });
  assert.equal(res.status, 200, `etcd ${op} ${key}`);
  return (await res.json()) as { kvs?: { value: string }[] };
}

describe('ResourceInformer against a real kube-apiserver', () => {
  const env = useClusters(1, { namePrefix: 'informer' });
  const informers: ResourceInformer[] = [];
  const connections: ClusterConnection[] = [];

  function informer(options: InformerOptions): ResourceInformer {
    const inf = new ResourceInformer({ ...fast, ...options });
    informers.push(inf);
    return inf;
  }

  async function cleanup(): Promise<void> {
    await Promise.all(informers.splice(0).map((i) => i.stop()));
    await Promise.all(connections.splice(0).map((c) => c.close()));
  }

  function cluster(): TestCluster {
    const c = env.clusters[0];
    return c;
  }

  function admin(): ClusterConnection {
    const conn = connect(cluster());
    connections.push(conn);
    return conn;
  }

  for (const objects of MODES) it(`lists across several pages and reports add, update and delete with the right objects (${objects} objects)`, async () => {
    try {
      const conn = admin();
      const ns = `paged-${objects}`;
      await createNamespace(conn, ns);
      for (let i = 0; i < 25; i++) await createConfigMap(conn, ns, `cm-${i}`, { i: String(i) });
      const info = await conn.resolve(CONFIGMAP);
      const { client, pages } = counting(conn.resourceClient(info));
      const inf = informer({ client, namespace: ns, pageSize: 10, objects });
      const { seen, handler } = recorder();
      inf.addHandler(handler);
      inf.start();
      await inf.waitForSync(AbortSignal.timeout(30_000));
      assert.equal(inf.store.size, 25);
      assert.equal(pages(), 3, '25 objects in pages of 10');
      assert.equal(seen.length, 25);
      assert.ok(seen.every((s) => s[0] === 'add' && s[2] === true));
      assert.equal(inf.store.get(`${ns}/cm-3`)?.kind, 'ConfigMap');
      assert.deepEqual(inf.store.get(`${ns}/cm-3`)?.data, { i: '3' });
      seen.length = 0;

      await createConfigMap(conn, ns, 'fresh', { v: '1' });
      await conn.request({ method: 'PATCH', path: resourcePath(info, { namespace: ns, name: 'fresh' }), body: { data: { v: '2' } }, contentType: 'application/merge-patch+json' });
      await conn.request({ method: 'DELETE', path: resourcePath(info, { namespace: ns, name: 'fresh' }) });
      await eventually('add, update, delete', () => seen.length >= 3);
      assert.deepEqual(seen, [
        ['add', 'fresh', false],
        ['update', 'fresh', { v: '1' }, { v: '2' }],
        ['delete', 'fresh', false],
      ]);
      assert.equal(inf.store.get(`${ns}/fresh`), undefined);
    } finally {
      await cleanup();
    }
  });

  it('finds a CRD kind installed after the informer asked for it', async () => {
    try {
      const conn = admin();
      await createNamespace(conn, 'late');
      const inf = informer({ connection: conn, gvk: WIDGET, namespace: 'late' });
      inf.start();
      await eventually('an UnknownKindError', () => inf.stats().lastError instanceof UnknownKindError);
      assert.equal(inf.synced, false);
      await cluster().installCRDs([widgetCrd]);
      await conn.request({ method: 'POST', path: '/apis/example.com/v1/namespaces/late/widgets', body: { apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w1' }, spec: { size: 1 } } });
      await inf.waitForSync(AbortSignal.timeout(30_000));
      await eventually('the widget', () => inf.store.get('late/w1') !== undefined);
      assert.equal(inf.stats().lastError, undefined);
    } finally {
      await cleanup();
    }
  });

  for (const objects of MODES) it(`reports what changed and vanished while its apiserver was down, after the restart (${objects} objects)`, async () => {
    const c = cluster();
    try {
      const conn = admin();
      await c.installCRDs([widgetCrd]);
      const ns = `gap-${objects}`;
      await createNamespace(conn, ns);
      const body = (name: string, size: number): object => ({ apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name }, spec: { size } });
      for (const name of ['keep', 'change', 'gone']) await conn.request({ method: 'POST', path: `/apis/example.com/v1/namespaces/${ns}/widgets`, body: body(name, 1) });
      const inf = informer({ connection: conn, gvk: WIDGET, namespace: ns, objects });
      const seen: Seen[] = [];
      inf.addHandler({
        add: (o, initial) => { seen.push(['add', o.metadata?.name ?? '', initial]); },
        update: (a, b) => { seen.push(['update', a.metadata?.name ?? '', (a as { spec?: unknown }).spec, (b as { spec?: unknown }).spec]); },
        delete: (o, unknown) => { seen.push(['delete', o.metadata?.name ?? '', unknown]); },
      });
      inf.start();
      await inf.waitForSync(AbortSignal.timeout(30_000));
      seen.length = 0;

      await c.stopApiserver();
      // Custom resources are stored as JSON: change one and delete another behind the server's back.
      const key = `/registry/example.com/widgets/${ns}/change`;
      const stored = (await etcd(c, 'range', key)).kvs?.[0]?.value;
      assert.ok(stored !== undefined, 'the widget is in etcd');
      const obj = JSON.parse(Buffer.from(stored, 'base64').toString('utf8')) as { spec: { size: number } };
      obj.spec.size = 2;
      await etcd(c, 'put', key, JSON.stringify(obj));
      await etcd(c, 'deleterange', `/registry/example.com/widgets/${ns}/gone`);
      await c.startApiserver();

      await eventually('the update and the delete', () => seen.length >= 2, 60_000);
      assert.deepEqual(seen.filter((s) => s[0] === 'update'), [['update', 'change', { size: 1 }, { size: 2 }]]);
      const deletes = seen.filter((s) => s[0] === 'delete');
      assert.equal(deletes.length, 1);
      const stats = inf.stats();
      // A restarted apiserver no longer knows the old resourceVersion: 410, relist, deletes inferred.
      assert.ok(stats.relists >= 1, `relisted (stats ${JSON.stringify({ relists: stats.relists, gones: stats.gones, reconnects: stats.reconnects })})`);
      assert.deepEqual(deletes[0], ['delete', 'gone', true]);
      assert.equal(seen.some((s) => s[1] === 'keep'), false, 'an unchanged object is not reported');
      assert.deepEqual(inf.store.keys().sort(), [`${ns}/change`, `${ns}/keep`]);
      assert.deepEqual((inf.store.get(`${ns}/change`) as { spec?: unknown } | undefined)?.spec, { size: 2 }, 'a read after the relist gives the new object');
    } finally {
      await cleanup();
    }
  });

  for (const objects of MODES) it(`applies label and field selectors and namespace scope to LIST and WATCH (${objects} objects)`, async () => {
    try {
      const conn = admin();
      const [a, b] = [`sel-a-${objects}`, `sel-b-${objects}`];
      await createNamespace(conn, a);
      await createNamespace(conn, b);
      await createConfigMap(conn, a, 'web-1', {}, { app: 'web' });
      await createConfigMap(conn, a, 'db-1', {}, { app: 'db' });
      await createConfigMap(conn, b, 'web-2', {}, { app: 'web' });
      const byLabel = informer({ connection: conn, gvk: CONFIGMAP, namespace: a, labelSelector: 'app=web', objects });
      const byField = informer({ connection: conn, gvk: CONFIGMAP, fieldSelector: `metadata.name=web-2,metadata.namespace=${b}`, objects });
      const labelled = recorder();
      byLabel.addHandler(labelled.handler);
      byLabel.start();
      byField.start();
      await byLabel.waitForSync(AbortSignal.timeout(30_000));
      await byField.waitForSync(AbortSignal.timeout(30_000));
      assert.deepEqual(byLabel.store.keys(), [`${a}/web-1`]);
      assert.deepEqual(byField.store.keys(), [`${b}/web-2`]);
      // byField has no handler: kept as text, its object is parsed when read (and only then).
      assert.equal(byField.stats().decodes, 0);
      assert.deepEqual(byField.store.get(`${b}/web-2`)?.metadata?.labels, { app: 'web' });
      assert.equal(byField.stats().decodes, objects === 'lazy' ? 1 : 0);

      await createConfigMap(conn, a, 'web-3', {}, { app: 'web' });
      await createConfigMap(conn, a, 'db-2', {}, { app: 'db' });
      await createConfigMap(conn, b, 'web-4', {}, { app: 'web' });
      // An object that stops matching leaves the cache.
      await conn.request({ method: 'PATCH', path: `/api/v1/namespaces/${a}/configmaps/web-1`, body: { metadata: { labels: { app: 'db' } } }, contentType: 'application/merge-patch+json' });
      await eventually('web-3 added and web-1 gone', () => byLabel.store.keys().join() === `${a}/web-3`);
      assert.deepEqual(labelled.seen.map((s) => s.slice(0, 2)), [['add', 'web-1'], ['add', 'web-3'], ['delete', 'web-1']]);
      assert.deepEqual(byField.store.keys(), [`${b}/web-2`]);
    } finally {
      await cleanup();
    }
  });

  it('reports 403 for a restricted user as a typed error and recovers once RBAC is granted', async () => {
    const c = cluster();
    try {
      const conn = admin();
      const yaml = await c.restrictedKubeconfig({ namespace: 'rbac', serviceAccount: 'reader' });
      const kc = kubeConfigFrom(yaml);
      const restricted = connect(c, kc);
      connections.push(restricted);
      await createConfigMap(conn, 'rbac', 'visible', { ok: 'yes' });
      const inf = informer({ connection: restricted, gvk: CONFIGMAP, namespace: 'rbac' });
      inf.start();
      await eventually('a 403', () => inf.stats().lastError instanceof KubeApiError);
      const err = inf.stats().lastError;
      assert.ok(err instanceof KubeApiError);
      assert.equal(err.statusCode, 403);
      assert.equal(err.reason, 'Forbidden');
      assert.equal(err.cluster, c.name);
      assert.deepEqual(err.gvk, CONFIGMAP);
      assert.equal(inf.synced, false);

      await conn.request({ method: 'POST', path: '/apis/rbac.authorization.k8s.io/v1/namespaces/rbac/roles', body: {
        apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: { name: 'read-cm' },
        rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list', 'watch'] }],
      } });
      await conn.request({ method: 'POST', path: '/apis/rbac.authorization.k8s.io/v1/namespaces/rbac/rolebindings', body: {
        apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'RoleBinding', metadata: { name: 'read-cm' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'read-cm' },
        subjects: [{ kind: 'ServiceAccount', name: 'reader', namespace: 'rbac' }],
      } });
      await inf.waitForSync(AbortSignal.timeout(30_000));
      assert.equal(inf.store.get('rbac/visible')?.metadata?.name, 'visible');
      assert.equal(inf.stats().lastError, undefined);
    } finally {
      await cleanup();
    }
  });
});

