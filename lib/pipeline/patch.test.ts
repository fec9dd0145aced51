import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { RequestOptions, ResourceInfo } from '../transport/index.ts';
import { KubeApiError, type GroupVersionKind } from '../util/index.ts';
import { PromotionError } from './errors.ts';
import { getAtPointer } from './json-pointer.ts';
import { setRevision, type WriteConnection } from './patch.ts';

const gvk: GroupVersionKind = { group: 'helm.toolkit.fluxcd.io', version: 'v2', kind: 'HelmRelease' };

/**
 * One object behind a connection that applies JSON patches the way the API server does: `test`
 * ops are checked, each write bumps the resourceVersion. `interfere` runs before each PATCH.
 */
class FakeObjectConnection implements WriteConnection {
  readonly name = 'fake';
  object: Record<string, unknown>;
  rv = 1;
  readonly requests: RequestOptions[] = [];
  interfere: () => void = () => undefined;

  constructor(spec: Record<string, unknown>) {
    this.object = { metadata: { name: 'podinfo', namespace: 'apps', resourceVersion: '1' }, spec };
  }

  resolve(): Promise<ResourceInfo> {
    return Promise.resolve({ gvk, resource: 'helmreleases', namespaced: true, verbs: [] });
  }

  bump(): void {
    this.rv += 1;
    (this.object.metadata as Record<string, unknown>).resourceVersion = String(this.rv);
  }

  request(options: RequestOptions): Promise<unknown> {
    this.requests.push(options);
    if (options.method === 'GET') return Promise.resolve(structuredClone(this.object));
    this.interfere();
    const ops = options.body as { op: string; path: string; value: unknown }[];
    for (const op of ops) {
      if (op.op === 'test' && getAtPointer(this.object, op.path) !== op.value) {
        return Promise.reject(new KubeApiError({ cluster: 'fake', gvk, statusCode: 422, status: { reason: 'Invalid', message: `the server rejected our request due to an error in our request: testing value ${op.path} failed` } }));
      }
    }
    for (const op of ops) {
      if (op.op === 'test') continue;
      const tokens = op.path.slice(1).split('/');
      let node = this.object;
      for (const t of tokens.slice(0, -1)) node = node[t] as Record<string, unknown>;
      node[tokens.at(-1) ?? ''] = op.value;
    }
    this.bump();
    return Promise.resolve(structuredClone(this.object));
  }
}

const options = (connection: WriteConnection, revision = '2.0.0'): Parameters<typeof setRevision>[0] => ({ connection, gvk, namespace: 'apps', name: 'podinfo', path: '/spec/chart/spec/version', revision });

describe('setRevision (patch strategy)', () => {
  it('patches with a resourceVersion test, then the value', async () => {
    const conn = new FakeObjectConnection({ chart: { spec: { version: '1.0.0' } } });
    assert.equal(await setRevision(options(conn)), 'patched');
    assert.equal(getAtPointer(conn.object, '/spec/chart/spec/version'), '2.0.0');
    const patch = conn.requests.find((r) => r.method === 'PATCH');
    assert.equal(patch?.contentType, 'application/json-patch+json');
    assert.equal(patch.path, '/apis/helm.toolkit.fluxcd.io/v2/namespaces/apps/helmreleases/podinfo');
    assert.deepEqual(patch.body, [
      { op: 'test', path: '/metadata/resourceVersion', value: '1' },
      { op: 'replace', path: '/spec/chart/spec/version', value: '2.0.0' },
    ]);
  });

  it('is idempotent: an object already at the revision is not written', async () => {
    const conn = new FakeObjectConnection({ chart: { spec: { version: '2.0.0' } } });
    assert.equal(await setRevision(options(conn)), 'unchanged');
    assert.ok(conn.requests.every((r) => r.method === 'GET'));
  });

  it('re-reads and retries when a concurrent writer wins, keeping the other writer\'s change', async () => {
    const conn = new FakeObjectConnection({ chart: { spec: { version: '1.0.0' } }, values: { replicas: 1 } });
    let interfered = 0;
    conn.interfere = () => {
      if (interfered++ > 0) return;
      (conn.object.spec as Record<string, unknown>).values = { replicas: 3 };
      conn.bump();
    };
    assert.equal(await setRevision(options(conn)), 'patched');
    assert.equal(conn.requests.filter((r) => r.method === 'PATCH').length, 2);
    assert.deepEqual(conn.object.spec, { chart: { spec: { version: '2.0.0' } }, values: { replicas: 3 } });
  });

  it('gives up after persistent conflicts with a PromotionError', async () => {
    const conn = new FakeObjectConnection({ chart: { spec: { version: '1.0.0' } } });
    conn.interfere = () => { conn.bump(); };
    await assert.rejects(setRevision({ ...options(conn), maxAttempts: 3 }), (err: unknown) => err instanceof PromotionError && err.message.includes('still conflicting after 3 attempts'));
  });

  it('creates missing parents, and refuses to write through a non-object', async () => {
    const conn = new FakeObjectConnection({});
    assert.equal(await setRevision(options(conn)), 'patched');
    assert.deepEqual(conn.object.spec, { chart: { spec: { version: '2.0.0' } } });
    const bad = new FakeObjectConnection({ chart: 'podinfo' });
    await assert.rejects(setRevision(options(bad)), (err: unknown) => err instanceof PromotionError && err.message.includes('/spec/chart is not an object'));
  });

  it('passes other API errors through (a missing object is not a conflict)', async () => {
    const conn = new FakeObjectConnection({});
    conn.request = () => Promise.reject(new KubeApiError({ cluster: 'fake', gvk, statusCode: 404, status: { reason: 'NotFound', message: 'not found' } }));
    await assert.rejects(setRevision(options(conn)), (err: unknown) => err instanceof KubeApiError && err.statusCode === 404);
  });
});
