// ClusterConnection's onRequest hook: one observation per request that reached the transport,
// with the cluster, method, status code (client-go's: '200', '201', '404', '<error>'), and duration
// on the connection's clock, on HTTP/2 and on HTTP/1.1.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, it } from 'node:test';
import { SimulatedCluster } from '../../fixtures/sim/index.ts';
import { loadKubeconfig } from '../cluster/index.ts';
import { FakeClock, KubeApiError, TransportError } from '../util/index.ts';
import { ClusterConnection, type RequestObservation } from './index.ts';
import { kubeConfigFor } from '../../fixtures/support/index.ts';

const configMaps = { gvk: { group: '', version: 'v1', kind: 'ConfigMap' }, resource: 'configmaps', namespaced: true, verbs: ['list', 'watch'] } as const;

describe('ClusterConnection onRequest', () => {
  const clock = new FakeClock(1_000);
  const server = createServer((req, res) => {
    // Each answer "takes" 250 ms on the connection's clock.
    clock.advance(250);
    if (req.url?.includes('watch=') === true) {
      // A watch: the headers now, one event, and the stream stays open until the client aborts.
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"apps","resourceVersion":"2"}}}\n');
      return;
    }
    if (req.url?.startsWith('/api/v1/namespaces/apps/configmaps/missing') === true) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ kind: 'Status', status: 'Failure', reason: 'NotFound', code: 404, message: 'not found' }));
      return;
    }
    res.writeHead(201, { 'content-type': 'application/json' });
    res.end('{"kind":"ConfigMap"}');
  });
  after(() => { server.closeAllConnections(); server.close(); });

  it('reports every request with cluster, method, code and duration; a failing observer fails nothing', async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const seen: RequestObservation[] = [];
    const connection = new ClusterConnection({ name: 'secret:apps/prod', kubeConfig: kubeConfigFor(url), clock, onRequest: (o) => { seen.push(o); } });
    const refused = new ClusterConnection({ name: 'refused', kubeConfig: kubeConfigFor('http://127.0.0.1:1'), clock, onRequest: (o) => { seen.push(o); } });
    const throwing = new ClusterConnection({ name: 'throwing', kubeConfig: kubeConfigFor(url), clock, onRequest: () => { throw new Error('observer broke'); } });
    after(() => Promise.all([connection.close(), refused.close(), throwing.close()]));

    assert.deepEqual(await connection.request({ method: 'POST', path: '/api/v1/namespaces/apps/configmaps', body: {} }), { kind: 'ConfigMap' });
    await assert.rejects(connection.request({ method: 'GET', path: '/api/v1/namespaces/apps/configmaps/missing' }), KubeApiError);
    await assert.rejects(refused.request({ method: 'GET', path: '/api/v1/namespaces' }), TransportError);
    const stop = new AbortController();
    const stream = await connection.resourceClient(configMaps).watch({ namespace: 'apps', resourceVersion: '1', timeoutSeconds: 300, allowWatchBookmarks: true, signal: stop.signal });
    for await (const batch of stream) {
      assert.equal(batch[0]?.type, 'ADDED');
      break;
    }
    stop.abort();
    assert.deepEqual(await throwing.request({ method: 'PUT', path: '/api/v1/namespaces/apps/configmaps/x', body: {} }), { kind: 'ConfigMap' }, 'the observer\'s throw is not the request\'s');

    assert.deepEqual(seen.map(({ cluster, method, code }) => ({ cluster, method, code })), [
      { cluster: 'secret:apps/prod', method: 'POST', code: '201' },
      { cluster: 'secret:apps/prod', method: 'GET', code: '404' },
      { cluster: 'refused', method: 'GET', code: '<error>' },
      { cluster: 'secret:apps/prod', method: 'GET', code: '200' }, // the watch, once its headers arrived
    ]);
    assert.deepEqual(seen.slice(0, 2).map((o) => o.durationMs), [250, 250]);
    assert.throws(() => new ClusterConnection({ name: 'x', kubeConfig: kubeConfigFor(url), onRequest: 'no' as never }), /onRequest must be a function/);
  });

  for (const http2 of [true, false]) {
    it(`reports the status code the API server sent, over ${http2 ? 'HTTP/2' : 'HTTP/1.1'}`, async (t) => {
      const sim = await SimulatedCluster.start({ namespaces: ['apps'], http2 });
      const seen: RequestObservation[] = [];
      const conn = new ClusterConnection({ name: 'sim', kubeConfig: loadKubeconfig(sim.kubeconfig, { cluster: 'sim' }), onRequest: (o) => { seen.push(o); } });
      t.after(async () => { await conn.close(); await sim.close(); });
      const cm = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'a', namespace: 'apps' } };
      await conn.request({ method: 'POST', path: '/api/v1/namespaces/apps/configmaps', body: cm });
      await conn.request({ method: 'GET', path: '/api/v1/namespaces/apps/configmaps/a' });
      await assert.rejects(conn.request({ method: 'POST', path: '/api/v1/namespaces/apps/configmaps', body: cm }), KubeApiError);
      assert.equal(conn.protocol, http2 ? 'h2' : 'http/1.1');
      assert.deepEqual(seen.map(({ method, code }) => `${method} ${code}`), ['POST 201', 'GET 200', 'POST 409']);
    });
  }
});
