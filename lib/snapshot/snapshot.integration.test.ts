// Fleet snapshots against real kube-apiservers (two clusters): bootstrap held until both are
// listed, a 5,000-write burst coalesced into a bounded number of snapshots that end equal to the
// servers' state, own writes visible in the next snapshot (with the watch held back by a relay,
// so only the accumulator's write overlay can put them there), and a cluster whose kubeconfig
// Secret is deleted leaving the snapshots, then followed again once the Secret is back.
import assert from 'node:assert/strict';
import { createServer, request as httpsRequest, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe, it, type TestContext } from 'node:test';
import { SIM_CERT_PEM, simKeyPem } from '../../fixtures/sim/cert.ts';
import { eventually, useClusters, type TestCluster } from '../../e2e/harness/index.ts';
import { CoreV1SecretReader, SecretProvider, StaticProvider, type ClusterRef } from '../cluster/index.ts';
import type { Registry } from '../registry/index.ts';
import type { KubeObject } from '../transport/index.ts';
import { FleetAccumulator, registrySource, snapshotQuery, type FleetSnapshot, type QuerySet, type SnapshotQuery } from './index.ts';
import { registryWithKeeper } from '../registry/testing.ts';
import { ensureNamespace, putKubeconfigSecret } from '../../fixtures/support/index.ts';
import { CM, east, SECRET, west, type ConfigMap } from './objects.test-util.ts';

const NS = 'snap';

const fixture = useClusters(2, { namePrefix: 'snapshot' });

async function create(cluster: TestCluster, plural: string, name: string, data: Record<string, string> = {}): Promise<void> {
  const res = await cluster.request('POST', `/api/v1/namespaces/${NS}/${plural}`, { metadata: { name, namespace: NS }, data });
  assert.equal(res.statusCode, 201, JSON.stringify(res.body));
}

/** name → resourceVersion of what the server holds now. */
async function serverState(cluster: TestCluster, plural: string): Promise<Map<string, string>> {
  const res = await cluster.request('GET', `/api/v1/namespaces/${NS}/${plural}`);
  assert.equal(res.statusCode, 200);
  const items = (res.body as { items: KubeObject[] }).items;
  return new Map(items.map((o) => [o.metadata?.name ?? '', o.metadata?.resourceVersion ?? '']));
}

function stateOf(objs: readonly KubeObject[]): Map<string, string> {
  return new Map(objs.map((o) => [o.metadata?.name ?? '', o.metadata?.resourceVersion ?? '']));
}

/** Whether `promise` has settled after the event loop had a few turns. */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  void promise.then(() => { done = true; }, () => { done = true; });
  for (let i = 0; i < 10; i++) await new Promise<void>((resolve) => { setImmediate(resolve); });
  return done;
}

function pair(): readonly [TestCluster, TestCluster] {
  const [a, b] = fixture.clusters;
  return [a, b];
}

/**
 * An HTTPS relay in front of one real apiserver that can hold back the bytes of WATCH responses
 * (headers pass, events wait) while every other request passes: the events a write causes then
 * reach the registry's cache only when the test releases them, whatever the timing. HTTP/1.1 only
 * (no ALPN h2), so each watch is a response of its own. Served with the simulated API server's
 * self-signed certificate; forwards the client's bearer token upstream.
 */
class WatchRelay {
  readonly #upstream: TestCluster;
  readonly #server: Server;
  /** Body chunks of held watch responses (undefined: the end), in order, with the response each belongs to. */
  #held: { readonly res: ServerResponse; readonly chunk: Buffer | undefined }[] | undefined;

  constructor(upstream: TestCluster) {
    this.#upstream = upstream;
    this.#server = createServer({ cert: SIM_CERT_PEM, key: simKeyPem() }, (req, res) => { this.#forward(req, res); });
  }

  async start(): Promise<void> {
    await new Promise<void>((resolve) => { this.#server.listen(0, '127.0.0.1', resolve); });
  }

  /** The upstream's admin kubeconfig, pointed at the relay. */
  get kubeconfig(): string {
    const address = this.#server.address();
    assert.ok(typeof address === 'object' && address !== null);
    const config = JSON.parse(this.#upstream.adminKubeconfig) as { clusters: { cluster: Record<string, string> }[] };
    for (const { cluster } of config.clusters) {
      cluster.server = `https://127.0.0.1:${address.port}`;
      cluster['certificate-authority-data'] = Buffer.from(SIM_CERT_PEM).toString('base64');
    }
    return JSON.stringify(config);
  }

  /** From now on, watch events are held until {@link release}. */
  hold(): void {
    this.#held ??= [];
  }

  /** Delivers what was held, in order, and stops holding. */
  release(): void {
    const held = this.#held ?? [];
    this.#held = undefined;
    for (const { res, chunk } of held) {
      if (res.destroyed) continue;
      if (chunk === undefined) res.end();
      else res.write(chunk);
    }
  }

  /** Delivers the first held watch event (one JSON line) alone; returns it. */
  releaseOneEvent(): string {
    const held = this.#held ?? [];
    const first = held[0];
    if (first?.chunk === undefined) return '';
    const nl = first.chunk.indexOf(0x0a);
    if (nl < 0) return '';
    const line = first.chunk.subarray(0, nl + 1);
    first.res.write(line);
    const rest = first.chunk.subarray(nl + 1);
    if (rest.length === 0) held.shift();
    else held[0] = { res: first.res, chunk: rest };
    return line.toString();
  }

  /** Watch event bytes held now. */
  get heldBytes(): number {
    return (this.#held ?? []).reduce((n, { chunk }) => n + (chunk?.length ?? 0), 0);
  }

  async close(): Promise<void> {
    this.#held = undefined;
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => { this.#server.close(() => { resolve(); }); });
  }

  #forward(req: IncomingMessage, res: ServerResponse): void {
    const upstream = new URL(this.#upstream.server);
    const isWatch = ['true', '1'].includes(new URL(req.url ?? '/', upstream).searchParams.get('watch') ?? '');
    const out = httpsRequest({
      host: upstream.hostname,
      port: upstream.port,
      method: req.method,
      path: req.url,
      headers: { ...req.headers, host: upstream.host },
      ca: this.#upstream.caData,
      agent: false,
    }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      res.flushHeaders();
      answer.on('data', (chunk: Buffer) => {
        if (isWatch && this.#held !== undefined) this.#held.push({ res, chunk });
        else res.write(chunk);
      });
      answer.on('end', () => {
        // A watch that ends while held ends after what it held.
        if (isWatch && this.#held !== undefined) this.#held.push({ res, chunk: undefined });
        else res.end();
      });
      answer.on('error', () => { res.destroy(); });
    });
    out.on('error', () => { res.destroy(); });
    res.on('close', () => { out.destroy(); });
    req.pipe(out);
  }
}

function registryFor(clusters: readonly TestCluster[]): Registry {
  const [a, b] = clusters;
  assert.ok(a && b);
  return registryWithKeeper({
    provider: new StaticProvider({ clusters: { east: a.adminKubeconfig, west: b.adminKubeconfig } }),
    credentialCheckIntervalMs: 0,
    informer: { backoff: { initialMs: 200, maxMs: 1_000 } },
  });
}

/** ConfigMaps in NS on east that carry the label `labelSelector` names. */
interface RelayedQueries extends QuerySet {
  readonly maps: SnapshotQuery<ConfigMap>;
}

/**
 * An accumulator (closed after the test) of one query, {@link RelayedQueries}, on the first cluster
 * reached as east through a {@link WatchRelay} the test can hold.
 */
async function relayedAccumulator(t: TestContext, labelSelector: string): Promise<{ relay: WatchRelay; acc: FleetAccumulator<RelayedQueries> }> {
  const [a] = fixture.clusters;
  assert.ok(a);
  await ensureNamespace(a, NS);
  const relay = new WatchRelay(a);
  await relay.start();
  t.after(() => relay.close());
  const registry = registryWithKeeper({ provider: new StaticProvider({ clusters: { east: relay.kubeconfig } }), credentialCheckIntervalMs: 0 });
  t.after(() => registry.close());
  const queries: RelayedQueries = { maps: snapshotQuery<ConfigMap>({ cluster: east, gvk: CM, namespace: NS, labelSelector }) };
  const acc = new FleetAccumulator({ source: registrySource(registry), queries, minIntervalMs: 0 });
  t.after(() => acc.close());
  return { relay, acc };
}

describe('FleetAccumulator on real apiservers', () => {
  it('holds the first snapshot of two clusters × two kinds until both clusters are listed (one started late)', async (t) => {
    const [a, b] = pair();
    for (const c of [a, b]) await ensureNamespace(c, NS);
    await create(a, 'configmaps', 'boot-a');
    await create(a, 'secrets', 'boot-a');
    await create(b, 'configmaps', 'boot-b');
    await create(b, 'secrets', 'boot-b');
    await b.stopApiserver();
    let restarted = false;
    t.after(async () => { if (!restarted) await b.startApiserver(); });
    const registry = registryFor(fixture.clusters);
    t.after(() => registry.close());
    const acc = new FleetAccumulator({
      source: registrySource(registry),
      queries: {
        eastMaps: { cluster: east, gvk: CM, namespace: NS },
        eastSecrets: { cluster: east, gvk: SECRET, namespace: NS },
        westMaps: { cluster: west, gvk: CM, namespace: NS },
        westSecrets: { cluster: west, gvk: SECRET, namespace: NS },
      },
      openBackoff: { initialMs: 200, maxMs: 1_000 },
    });
    t.after(() => acc.close());
    const it = acc.snapshots()[Symbol.asyncIterator]();
    const first = it.next();
    await eventually('the east queries are listed', () => acc.status().queries.filter((q) => q.phase === 'synced').length === 2, 30_000);
    await eventually('the west queries say why they wait', () => acc.status().queries.filter((q) => q.name.startsWith('west') && q.lastError !== undefined).length === 2, 30_000);
    assert.deepEqual([...acc.status().waitingFor].sort(), ['westMaps', 'westSecrets']);
    assert.equal(await settled(first), false, 'no snapshot of half the fleet');
    await b.startApiserver();
    restarted = true;
    const snap = (await first).value;
    assert.ok(snap);
    assert.deepEqual(snap.objects.eastMaps.map((o) => o.metadata?.name).filter((n) => n === 'boot-a'), ['boot-a']);
    assert.deepEqual(snap.objects.eastSecrets.map((o) => o.metadata?.name), ['boot-a']);
    assert.deepEqual(snap.objects.westMaps.map((o) => o.metadata?.name).filter((n) => n === 'boot-b'), ['boot-b']);
    assert.deepEqual(snap.objects.westSecrets.map((o) => o.metadata?.name), ['boot-b']);
  });

  it('coalesces a burst of 5,000 writes into a bounded number of snapshots, the last equal to the servers\' state', async (t) => {
    const [a, b] = pair();
    for (const c of [a, b]) await ensureNamespace(c, NS);
    const registry = registryFor(fixture.clusters);
    t.after(() => registry.close());
    const minIntervalMs = 100;
    const acc = new FleetAccumulator({
      source: registrySource(registry),
      queries: { east: { cluster: east, gvk: CM, namespace: NS, labelSelector: 'burst' }, west: { cluster: west, gvk: CM, namespace: NS, labelSelector: 'burst' } },
      minIntervalMs,
    });
    t.after(() => acc.close());
    const controller = new AbortController();
    let notifications = 0;
    let latest: FleetSnapshot<QuerySet> | undefined;
    const consumer = (async () => {
      for await (const snap of acc.snapshots(controller.signal)) {
        notifications++;
        latest = snap;
      }
    })();
    await eventually('the first snapshot', () => latest !== undefined, 30_000);
    const before = notifications;
    const startedAt = Date.now();
    const writes: Promise<unknown>[] = [];
    const concurrency = 32;
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < 5_000) {
        const i = next++;
        const cluster = i % 2 === 0 ? a : b;
        const res = await cluster.request('POST', `/api/v1/namespaces/${NS}/configmaps`, { metadata: { name: `burst-${i}`, namespace: NS, labels: { burst: 'yes' } }, data: { i: String(i) } });
        assert.equal(res.statusCode, 201, JSON.stringify(res.body));
      }
    };
    for (let w = 0; w < concurrency; w++) writes.push(worker());
    await Promise.all(writes);
    const [eastServer, westServer] = await Promise.all([serverState(a, 'configmaps'), serverState(b, 'configmaps')]);
    const burstOnly = (m: Map<string, string>): Map<string, string> => new Map([...m].filter(([name]) => name.startsWith('burst-')));
    await eventually('a snapshot holds the whole burst', () => {
      const snap = latest;
      if (snap === undefined) return false;
      const e = stateOf(snap.objects.east ?? []);
      const w = stateOf(snap.objects.west ?? []);
      // Equal to the servers once the caches caught up (checked whole below).
      return e.size === 2_500 && w.size === 2_500;
    }, 120_000);
    const elapsed = Date.now() - startedAt;
    controller.abort();
    await consumer;
    const snap = latest;
    assert.ok(snap);
    assert.deepEqual(stateOf(snap.objects.east ?? []), burstOnly(eastServer), 'east: equal to the server, resourceVersions included');
    assert.deepEqual(stateOf(snap.objects.west ?? []), burstOnly(westServer), 'west: equal to the server, resourceVersions included');
    const during = notifications - before;
    // At most one per interval (plus the one that may be due at the start): the coalescing bound.
    assert.ok(during <= Math.ceil(elapsed / minIntervalMs) + 1, `${during} snapshots in ${elapsed} ms`);
    assert.ok(during < 5_000 / 10, `${during} snapshots for 5,000 writes`);
    t.diagnostic(`5,000 writes: ${during} snapshots in ${elapsed} ms`);
  });

  it('makes own writes visible in the next snapshot', async (t) => {
    // East through a relay that can hold the watch back: while it does, the cache cannot learn of
    // the writes, so a snapshot that shows them shows the accumulator's write overlay.
    const { relay, acc } = await relayedAccumulator(t, 'own');
    const it = acc.snapshots()[Symbol.asyncIterator]();
    // The next snapshot, which the write must already have made due: without the overlay nothing
    // changed while the watch is held, and this fails instead of waiting for the watch.
    const next = async (what: string): Promise<FleetSnapshot<RelayedQueries>> => {
      const pending = it.next();
      assert.equal(await settled(pending), true, `a snapshot is due after the ${what}, with the watch held`);
      const r = await pending;
      assert.ok(r.done !== true, 'the iterator ended');
      return r.value;
    };
    const own = (snap: { objects: { maps: readonly ConfigMap[] } }): ConfigMap | undefined => snap.objects.maps.find((o) => o.metadata?.name === 'own-1');
    await it.next(); // bootstrap, through the relay
    await eventually('the cache\'s watch is open', () => acc.status().queries[0]?.phase === 'synced', 20_000);
    relay.hold();

    const created = await acc.client.create('maps', { metadata: { name: 'own-1', labels: { own: 'yes' } }, data: { v: '1' } });
    assert.equal(own(await next('create'))?.metadata?.resourceVersion, created.metadata?.resourceVersion);
    const updated = await acc.client.update('maps', { ...created, data: { v: '2' } });
    const afterUpdate = own(await next('update'));
    assert.equal(afterUpdate?.data?.v, '2');
    assert.equal(afterUpdate.metadata?.resourceVersion, updated.metadata?.resourceVersion);
    const patched = await acc.client.patch('maps', { name: 'own-1' }, { data: { v: '3' } });
    assert.equal(own(await next('patch'))?.metadata?.resourceVersion, patched.metadata?.resourceVersion);
    await acc.client.delete('maps', { name: 'own-1' });
    assert.equal(own(await next('delete')), undefined);
    await eventually('the server\'s events for the writes reached the relay, and wait there', () => relay.heldBytes > 0, 20_000);

    // The watch delivers create, update and patch after the delete: none of them may bring own-1 back.
    relay.release();
    await eventually('the cache caught up with the writes', () => acc.status().queries[0]?.pendingWrites === 0, 20_000);
    await acc.client.create('maps', { metadata: { name: 'own-2', labels: { own: 'yes' } }, data: { v: '1' } });
    const last = await next('second create');
    assert.equal(own(last), undefined, 'the stale watch events did not roll the delete back');
    assert.deepEqual(last.objects.maps.map((o) => o.metadata?.name), ['own-2']);
  });

  it('never rolls an own delete back with a stale watch event of the object it deleted', async (t) => {
    const { relay, acc } = await relayedAccumulator(t, 'stale');
    const it = acc.snapshots()[Symbol.asyncIterator]();
    await it.next();
    relay.hold();
    // Created and deleted through the client while the cache has seen neither.
    const created = await acc.client.create('maps', { metadata: { name: 'gone-1', labels: { stale: 'yes' } }, data: { v: '1' } });
    await acc.client.delete('maps', { name: 'gone-1' });
    await eventually('both events wait in the relay', () => relay.heldBytes > 0, 20_000);
    // Only the ADDED: the cache now holds the object, at a resourceVersion older than the delete.
    const line = relay.releaseOneEvent();
    assert.ok(line.includes('"ADDED"') && line.includes(created.metadata?.resourceVersion ?? '?'), line);
    await eventually('the cache applied the ADDED', () => acc.status().queries[0]?.resourceVersion === created.metadata?.resourceVersion, 20_000);
    const pending = it.next();
    if (await settled(pending)) {
      const snap = (await pending).value;
      assert.ok(snap);
      assert.equal(snap.objects.maps.find((o) => o.metadata?.name === 'gone-1'), undefined, 'an own delete rolled back by a stale ADDED');
    }
    relay.release();
  });

  it('a cluster whose kubeconfig Secret is deleted leaves the snapshot (finalStateUnknown deletes, gone); recreated, it is followed again', async (t) => {
    // a holds the kubeconfig Secrets (the management cluster); b is the member that leaves.
    const [a, b] = pair();
    await ensureNamespace(a, NS);
    await ensureNamespace(b, NS);
    const ns = 'fleet-truth';
    await ensureNamespace(a, ns);
    await putKubeconfigSecret(a, ns, 'member', b.adminKubeconfig);
    for (const name of ['m1', 'm2']) await create(b, 'secrets', `leave-${name}`);
    const member: ClusterRef = { kind: 'secret', namespace: ns, name: 'member' };
    const registry = registryWithKeeper({ provider: new SecretProvider({ secrets: new CoreV1SecretReader({ kubeConfig: a.kubeConfig() }) }), credentialCheckIntervalMs: 0 });
    t.after(() => registry.close());
    const acc = new FleetAccumulator({
      source: registrySource(registry),
      queries: { member: { cluster: member, gvk: SECRET, namespace: NS, ownerNamespace: ns } },
      minIntervalMs: 0,
      checkIntervalMs: 100,
      openBackoff: { initialMs: 100, maxMs: 500 },
    });
    t.after(() => acc.close());
    const it = acc.snapshots()[Symbol.asyncIterator]();
    const next = async (): Promise<FleetSnapshot<{ member: SnapshotQuery }>> => {
      const r = await it.next();
      assert.ok(r.done !== true, 'the iterator ended');
      return r.value;
    };
    const names = (snap: FleetSnapshot<{ member: SnapshotQuery }>): string[] => snap.objects.member.map((o) => o.metadata?.name ?? '').filter((n) => n.startsWith('leave-')).sort();
    const first = await next();
    assert.deepEqual(names(first), ['leave-m1', 'leave-m2']);
    assert.equal(first.freshness.member.state, 'live');

    const deleted = await a.request('DELETE', `/api/v1/namespaces/${ns}/secrets/member`);
    assert.equal(deleted.statusCode, 200);
    await registry.checkCluster(member, ns);
    const gone = await next();
    assert.deepEqual(names(gone), []);
    const deletes = gone.deltas.filter((d) => d.object.metadata?.name?.startsWith('leave-') === true);
    assert.deepEqual(deletes.map((d) => `${d.type}:${d.object.metadata?.name}:${d.finalStateUnknown}`).sort(), ['delete:leave-m1:true', 'delete:leave-m2:true']);
    assert.equal(gone.freshness.member.state, 'gone');
    assert.equal(acc.status().queries[0]?.freshness.state, 'gone');
    await create(b, 'secrets', 'leave-m3');

    await putKubeconfigSecret(a, ns, 'member', b.adminKubeconfig);
    let back = gone;
    await eventually('followed again, with what it holds now', async () => {
      back = await next();
      return back.freshness.member.state === 'live' && names(back).length === 3;
    }, 60_000);
    assert.deepEqual(names(back), ['leave-m1', 'leave-m2', 'leave-m3']);
    await create(b, 'secrets', 'leave-m4');
    await eventually('its watch is followed again', async () => names(await next()).includes('leave-m4'), 30_000);
  });
});
