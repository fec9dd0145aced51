// Library input validated before any URL is built: group, version, kind, resource, namespace and
// name are checked as path segments (client-go's IsValidPathSegmentName, plus the character rules
// of each field), and the transport refuses any path with a query, fragment or dot segment. A
// refused value is an InvalidPathSegmentError and no request leaves.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { startHostileApiServer, type HostileApiServer } from '../../fixtures/hostile/index.ts';
import { loadKubeconfig, StaticProvider, type ClusterProvider } from '../cluster/index.ts';
import { ResourceInformer } from '../informer/index.ts';
import { InvalidPathSegmentError, UnknownKindError, type GroupVersionKind } from '../util/index.ts';
import { ClusterConnection, createListLimiter, resourcePath, type ResourceInfo } from './index.ts';
import { registryWithKeeper } from '../registry/testing.ts';
import { kubeConfigFor } from '../../fixtures/support/index.ts';

const listLimiter = createListLimiter();
const SECRET_GRAB = 'v1/namespaces/kube-system/secrets/db?';
const configMaps: ResourceInfo = { gvk: { group: '', version: 'v1', kind: 'ConfigMap' }, resource: 'configmaps', namespaced: true, verbs: ['list'] };

function refused(field: string): (err: unknown) => boolean {
  return (err) => err instanceof InvalidPathSegmentError && err.code === 'ERR_INVALID_PATH_SEGMENT' && err.field === field;
}

function total(server: HostileApiServer): number {
  const r = server.counters.requests;
  return r.list + r.watch + r.discovery + r.other;
}

describe('path segments', () => {
  it('resourcePath refuses every bad segment and accepts real ones', () => {
    const gvk = (patch: Partial<GroupVersionKind>): ResourceInfo => ({ ...configMaps, gvk: { ...configMaps.gvk, ...patch } });
    assert.throws(() => resourcePath(gvk({ version: SECRET_GRAB })), refused('version'));
    assert.throws(() => resourcePath(gvk({ version: '..' })), refused('version'));
    assert.throws(() => resourcePath(gvk({ version: 'V1' })), refused('version'));
    assert.throws(() => resourcePath(gvk({ group: 'apps/v1/../../api' })), refused('group'));
    assert.throws(() => resourcePath(gvk({ group: 'a%2fb' })), refused('group'));
    assert.throws(() => resourcePath(gvk({ kind: 'Config/Map' })), refused('kind'));
    assert.throws(() => resourcePath(gvk({ version: '' })), refused('version'));
    assert.throws(() => resourcePath({ ...configMaps, resource: 'secrets/db' }), refused('resource'));
    assert.throws(() => resourcePath({ ...configMaps, resource: '..' }), refused('resource'));
    assert.throws(() => resourcePath(configMaps, { namespace: '..' }), refused('namespace'));
    assert.throws(() => resourcePath(configMaps, { namespace: 'kube-system/secrets' }), refused('namespace'));
    assert.throws(() => resourcePath(configMaps, { namespace: 'ns', name: '.' }), refused('name'));
    assert.throws(() => resourcePath(configMaps, { namespace: 'ns', name: 'a/b' }), refused('name'));
    assert.throws(() => resourcePath(configMaps, { namespace: 'ns', name: '%2e%2e' }), refused('name'));
    assert.throws(() => resourcePath(configMaps, { namespace: 'ns', name: '' }), refused('name'));

    assert.equal(resourcePath(configMaps, { namespace: 'kube-system', name: 'system:controller.v2' }), '/api/v1/namespaces/kube-system/configmaps/system%3Acontroller.v2');
    assert.equal(resourcePath({ ...configMaps, gvk: { group: 'helm.toolkit.fluxcd.io', version: 'v2beta1', kind: 'HelmRelease' }, resource: 'helmreleases' }, { namespace: 'flux-system' }), '/apis/helm.toolkit.fluxcd.io/v2beta1/namespaces/flux-system/helmreleases');
  });

  it('the error escapes and bounds the value it quotes', () => {
    const err = (() => {
      try {
        resourcePath(configMaps, { namespace: 'ns', name: `a/\u202e${'x'.repeat(10_000)}` });
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    assert.ok(err instanceof InvalidPathSegmentError);
    assert.ok(err.message.length < 400, `bounded (${err.message.length})`);
    assert.ok(!err.message.includes('\u202e'));
  });

  describe('nothing is requested', () => {
    let hostile: HostileApiServer;
    before(async () => { hostile = await startHostileApiServer(); });
    after(() => hostile.close());

    it(`ClusterConnection.resolve refuses version ${JSON.stringify(SECRET_GRAB)} before discovery`, async () => {
      const conn = new ClusterConnection({ name: 'c', kubeConfig: loadKubeconfig(hostile.kubeconfig, { cluster: 'c' }), listLimiter });
      after(() => conn.close());
      const before = total(hostile);
      await assert.rejects(conn.resolve({ group: '', version: SECRET_GRAB, kind: 'ConfigMap' }), refused('version'));
      await assert.rejects(conn.resolve({ group: 'evil/../../api', version: 'v1', kind: 'ConfigMap' }), refused('group'));
      await assert.rejects(conn.request({ method: 'GET', path: '/api/v1/namespaces/kube-system/secrets/db?x=1' }), refused('path'));
      await assert.rejects(conn.request({ method: 'GET', path: '/api/v1/namespaces/%2e%2e/secrets' }), refused('path'));
      await assert.rejects(conn.request({ method: 'GET', path: '/api/v1/namespaces/a%2Fb/secrets' }), refused('path'));
      await assert.rejects(conn.request({ method: 'GET', path: 'api/v1/secrets' }), refused('path'));
      assert.equal(total(hostile), before, 'no request reached the server');
      // The same connection still works for valid input.
      assert.equal((await conn.resolve({ group: '', version: 'v1', kind: 'ConfigMap' })).resource, 'configmaps');
    });

    it('an informer and the registry refuse the GVK at once, with a typed error and no request', async () => {
      const conn = new ClusterConnection({ name: 'c', kubeConfig: loadKubeconfig(hostile.kubeconfig, { cluster: 'c' }), listLimiter });
      after(() => conn.close());
      const bad: GroupVersionKind = { group: '', version: SECRET_GRAB, kind: 'Secret' };
      const before = total(hostile);
      assert.throws(() => new ResourceInformer({ connection: conn, gvk: bad }), refused('version'));
      // The provider is not even asked (for a Secret provider that would be a read of the Secret).
      const statics = new StaticProvider({ clusters: { hostile: hostile.kubeconfig } });
      let resolved = 0;
      const provider: ClusterProvider = { resolve: (ref, context) => { resolved++; return statics.resolve(ref, context); } };
      const registry = registryWithKeeper({ provider, credentialCheckIntervalMs: 0 });
      after(() => registry.close());
      await assert.rejects(
        registry.watchTargetAndGetReader({ kind: 'static', name: 'hostile' }, { gvk: bad, namespace: 'kube-system', name: 'db' }, { namespace: 'team', name: 'p' }),
        refused('version'),
      );
      assert.equal(total(hostile), before, 'no request reached the server');
      assert.equal(resolved, 0, 'no credentials were resolved');
      assert.deepEqual(registry.caches(), []);
    });
  });

  it('a discovery entry whose resource name is not a plain segment is left out', async () => {
    const server: Server = createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({
        kind: 'APIResourceList',
        groupVersion: 'v1',
        resources: [
          { name: '..', kind: 'Dots', namespaced: true, verbs: ['list'] },
          { name: 'secrets%2Fdb', kind: 'Encoded', namespaced: true, verbs: ['list'] },
          { name: 'ok', kind: 'Bad/Kind', namespaced: true, verbs: ['list'] },
          { name: 'configmaps', kind: 'ConfigMap', namespaced: true, verbs: ['list'] },
        ],
      }));
    });
    await new Promise<void>((resolve) => { server.listen(0, '127.0.0.1', resolve); });
    after(() => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => { resolve(); }); }));
    const kc = kubeConfigFor(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, { name: 'c' });
    const conn = new ClusterConnection({ name: 'c', kubeConfig: kc, listLimiter });
    after(() => conn.close());
    assert.equal((await conn.resolve({ group: '', version: 'v1', kind: 'ConfigMap' })).resource, 'configmaps');
    await assert.rejects(conn.resolve({ group: '', version: 'v1', kind: 'Dots' }), (err: unknown) => err instanceof UnknownKindError);
    await assert.rejects(conn.resolve({ group: '', version: 'v1', kind: 'Encoded' }), (err: unknown) => err instanceof UnknownKindError);
  });
});
