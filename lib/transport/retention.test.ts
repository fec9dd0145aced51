// What a connection keeps for a socket's life keeps nothing of the requests made on it: a
// keep-alive socket (HTTP/1.1) or a session (HTTP/2) lives for minutes, and a listener that
// closed over the request that opened it kept that request's LIST page, up to 500 objects per
// cache, as long (found by a heap snapshot of the informer benchmark: every object twice).
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { SimulatedCluster } from '../../fixtures/index.ts';
import { loadKubeconfig } from '../cluster/index.ts';
import { ClusterConnection, createListLimiter } from './index.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const listLimiter = createListLimiter();
// Given, not discovered: the first LIST is the request that opens the connection.
const configMaps = { gvk: { group: '', version: 'v1', kind: 'ConfigMap' }, resource: 'configmaps', namespaced: true, verbs: ['list', 'watch'] } as const;

/** One LIST on `conn`; only a weak reference to its result leaves this function. */
async function listOnce(conn: ClusterConnection): Promise<WeakRef<object>> {
  const client = conn.resourceClient(configMaps);
  const list = await client.list({ namespace: 'apps', signal: AbortSignal.timeout(10_000) });
  assert.equal(list.items.length, 3);
  return new WeakRef(list);
}

async function collected(ref: WeakRef<object>): Promise<boolean> {
  for (let i = 0; i < 5; i++) {
    await new Promise((resolve) => { setImmediate(resolve); });
    gc();
    if (ref.deref() === undefined) return true;
  }
  return false;
}

async function check(t: TestContext, http2: boolean): Promise<void> {
  const sim = await SimulatedCluster.start({ namespaces: ['apps'], http2 });
  t.after(() => sim.close());
  for (let i = 0; i < 3; i++) sim.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `cm-${i}`, namespace: 'apps' }, data: { v: String(i) } });
  const conn = new ClusterConnection({ name: 'kept', kubeConfig: loadKubeconfig(sim.kubeconfig, { cluster: 'kept' }), listLimiter });
  t.after(() => conn.close());
  const first = await listOnce(conn);
  const second = await listOnce(conn);
  assert.equal(sim.counters.openConnections, 1, 'both LISTs went over the one kept-alive connection');
  assert.ok(await collected(first), 'the socket keeps the LIST result of the request that opened it');
  assert.ok(await collected(second), 'the socket keeps the LIST result of a later request');
  assert.equal(sim.counters.openConnections, 1, 'the connection is still open');
}

describe('what a connection keeps', () => {
  it('keeps no LIST result alive through its HTTP/1.1 keep-alive socket', async (t) => { await check(t, false); });
  it('keeps no LIST result alive through its HTTP/2 session', async (t) => { await check(t, true); });
});
