// Informer fault behaviour against the simulated API server, which can do on demand what a real
// one cannot: 410 mid-watch, 429 with Retry-After, a stalled or cut stream, a malformed line.
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { SimulatedCluster } from '../../fixtures/index.ts';
import { ClusterConnection, type KubeObject } from '../transport/index.ts';
import { KubeApiError, WatchDecodeError } from '../util/index.ts';
import { ResourceInformer, type InformerOptions } from './index.ts';
import { eventually } from '../../e2e/harness/index.ts';
import { kubeConfigFrom } from '../../fixtures/support/index.ts';

const configMaps = { group: '', version: 'v1', kind: 'ConfigMap' };

interface Seen {
  readonly kind: 'add' | 'update' | 'delete';
  readonly name: string;
  readonly value?: string | undefined;
  readonly finalStateUnknown?: boolean;
}

function valueOf(obj: KubeObject): string | undefined {
  return (obj.data as Record<string, string> | undefined)?.v;
}

async function setup(t: TestContext, options: Partial<InformerOptions> = {}): Promise<{ sim: SimulatedCluster; informer: ResourceInformer; seen: Seen[] }> {
  const sim = await SimulatedCluster.start({ namespaces: ['apps'], bookmarkIntervalMs: 60_000 });
  t.after(() => sim.close());
  for (const name of ['a', 'b']) sim.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: 'apps' }, data: { v: '0' } });
  const kubeConfig = kubeConfigFrom(sim.kubeconfig);
  const connection = new ClusterConnection({ name: sim.name, kubeConfig });
  t.after(() => connection.close());
  const informer = new ResourceInformer({
    connection,
    gvk: configMaps,
    namespace: 'apps',
    backoff: { initialMs: 20, maxMs: 200, jitter: 0 },
    ...options,
  });
  t.after(() => informer.stop());
  const seen: Seen[] = [];
  informer.addHandler({
    add: (obj) => { seen.push({ kind: 'add', name: obj.metadata?.name ?? '', value: valueOf(obj) }); },
    update: (_old, obj) => { seen.push({ kind: 'update', name: obj.metadata?.name ?? '', value: valueOf(obj) }); },
    delete: (obj, finalStateUnknown) => { seen.push({ kind: 'delete', name: obj.metadata?.name ?? '', finalStateUnknown }); },
  });
  informer.start();
  await informer.waitForSync(AbortSignal.timeout(10_000));
  await sim.waitFor((c) => c.openWatches === 1, { timeoutMs: 10_000 });
  seen.length = 0;
  return { sim, informer, seen };
}

function update(sim: SimulatedCluster, name: string, value: string): void {
  const current = sim.store.get({ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'apps', name });
  assert.ok(current !== undefined);
  sim.store.update({ ...current, data: { v: value } });
}

describe('informer faults (simulated API server)', () => {
  it('relists on a 410 mid-watch: updates what changed, deletes what vanished (final state unknown)', async (t) => {
    const { sim, informer, seen } = await setup(t);
    const { gones: gonesBefore, relists: relistsBefore } = informer.stats();
    // Lock the informer out of watching, change things behind its back, and compact the history
    // that would replay them: its next watch from the old resourceVersion gets 410.
    const lockout = sim.faults.failNext({ verb: 'watch', path: /\/configmaps$/, count: Infinity, status: 503 });
    sim.faults.cutWatches({ mode: 'end' });
    await eventually('the informer is locked out', () => lockout.hits >= 1);
    update(sim, 'a', 'changed');
    sim.store.delete({ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'apps', name: 'b' });
    sim.faults.compact();
    lockout.cancel();
    await eventually('the relist is applied', () => seen.length >= 2);
    assert.deepEqual(
      [...seen].sort((x, y) => x.name.localeCompare(y.name)),
      [{ kind: 'update', name: 'a', value: 'changed' }, { kind: 'delete', name: 'b', finalStateUnknown: true }],
    );
    assert.ok(informer.stats().gones > gonesBefore, 'the 410 was seen');
    assert.ok(informer.stats().relists > relistsBefore, 'and answered with a relist');
  });

  it('treats an ERROR 410 event on an open watch as Gone and relists', async (t) => {
    const { sim, informer, seen } = await setup(t);
    const gonesBefore = informer.stats().gones;
    assert.equal(sim.faults.expireWatches(), 1);
    await eventually('the informer relisted', () => informer.stats().gones > gonesBefore && sim.counters.openWatches === 1);
    update(sim, 'a', 'after-410');
    await eventually('the new watch delivers', () => seen.some((s) => s.value === 'after-410'));
    assert.equal(seen.filter((s) => s.kind === 'delete').length, 0, 'nothing vanished, nothing deleted');
  });

  it('honours Retry-After on a 429 and records the typed error meanwhile', async (t) => {
    const { sim, informer, seen } = await setup(t);
    const errors: Error[] = [];
    informer.on('error', (err) => { errors.push(err); });
    const handle = sim.faults.failNext({ verb: 'watch', path: /\/configmaps$/, count: 1, status: 429, retryAfterSeconds: 1 });
    sim.faults.cutWatches({ mode: 'end' });
    await eventually('the 429 was answered', () => handle.hits === 1);
    await eventually('and reported', () => errors.some((e) => e instanceof KubeApiError));
    const err = errors.find((e) => e instanceof KubeApiError);
    assert.ok(err instanceof KubeApiError && err.statusCode === 429 && err.retryAfterSeconds === 1, String(err));
    assert.equal(err.cluster, sim.name);
    update(sim, 'a', 'after-429');
    await eventually('watching again', () => seen.some((s) => s.value === 'after-429'));
    const watches = sim.recentRequests().filter((r) => r.verb === 'watch');
    const failed = watches.findIndex((r) => r.status === 429);
    const next = watches[failed + 1];
    assert.ok(next !== undefined && watches[failed] !== undefined);
    assert.ok(next.at - watches[failed].at >= 950, `retried ${next.at - watches[failed].at} ms after a Retry-After of 1 s`);
  });

  it('reconnects a stalled stream after the inactivity deadline, losing nothing', async (t) => {
    const { sim, informer, seen } = await setup(t, { watchInactivityTimeoutMs: 1_000 });
    const reconnects = informer.stats().reconnects;
    // Stalls the open watch and any opened in the next 2.5 s (the server holds their events).
    sim.faults.stallWatches(2_500);
    update(sim, 'a', 'during-stall');
    await eventually('the informer gave up on the silent stream', () => informer.stats().reconnects > reconnects);
    await eventually('the change arrives', () => seen.some((s) => s.value === 'during-stall'));
    // A later change on the same watch: a repeat of the first would be delivered before it.
    update(sim, 'b', 'after-stall');
    await eventually('the next change arrives', () => seen.some((s) => s.value === 'after-stall'));
    assert.deepEqual(seen.map((s) => s.value), ['during-stall', 'after-stall'], 'each change once, in order');
  });

  it('resumes after a cut stream (clean end, reset, and mid-event) without losing or repeating events', async (t) => {
    const { sim, seen } = await setup(t);
    let n = 0;
    for (const cut of [{ mode: 'end' as const }, { mode: 'reset' as const }, { mode: 'reset' as const, midEvent: true }]) {
      n += 1;
      assert.equal(sim.faults.cutWatches(cut), 1);
      update(sim, 'a', `after-cut-${n}`);
      await eventually(`event after cut ${n}`, () => seen.some((s) => s.value === `after-cut-${n}`));
      await sim.waitFor((c) => c.openWatches === 1, { timeoutMs: 10_000 });
    }
    assert.deepEqual(seen.map((s) => s.value), ['after-cut-1', 'after-cut-2', 'after-cut-3'], 'each change exactly once, in order');
  });

  it('reports a malformed watch line as a typed error and carries on', async (t) => {
    const { sim, informer, seen } = await setup(t);
    // Errors are caught as emitted: over HTTP/2 the next watch opens (and clears lastError) within
    // milliseconds, faster than a poll of stats() would see it.
    const errors: Error[] = [];
    informer.on('error', (e) => { errors.push(e); });
    assert.equal(sim.faults.injectMalformedLine('{"type":"MODIFIED","object":{"kind":'), 1);
    const err = await eventually('the decode error is recorded', () => errors.find((e): e is WatchDecodeError => e instanceof WatchDecodeError));
    assert.equal(err.cluster, sim.name);
    assert.equal(err.gvk?.kind, 'ConfigMap');
    update(sim, 'b', 'after-garbage');
    await eventually('events flow again', () => seen.some((s) => s.value === 'after-garbage'));
  });

  it('leaves no watch or connection open after stop()', async (t) => {
    const { sim, informer } = await setup(t);
    await informer.stop();
    await sim.waitFor((c) => c.openWatches === 0, { timeoutMs: 5_000 });
  });
});
