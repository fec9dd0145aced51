import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { FakeResourceClient } from '../transport/testing.ts';
import type { KubeObject } from '../transport/index.ts';
import { FakeClock, TransportError } from '../util/index.ts';
import { ResourceInformer, type InformerOptions } from './index.ts';
import { settle } from '../../fixtures/support/index.ts';

function cm(name: string, data: Record<string, string> = {}): KubeObject {
  return { metadata: { namespace: 'ns', name }, data };
}

const running: ResourceInformer[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((i) => i.stop()));
});

function setup(options: Partial<InformerOptions> = {}): { client: FakeResourceClient; clock: FakeClock; informer: ResourceInformer } {
  const client = new FakeResourceClient();
  const clock = new FakeClock(1_000_000);
  // random 0: the jittered interval is exactly 0.9 × resyncIntervalMs.
  const informer = new ResourceInformer({ client, clock, random: () => 0, resyncIntervalMs: 10_000, ...options });
  running.push(informer);
  return { client, clock, informer };
}

describe('ResourceInformer: resync (DeltaFIFO Sync semantics)', () => {
  it('a resync after an update carries the updated state, never the state of an earlier pass', async () => {
    const { client, clock, informer } = setup();
    client.upsert(cm('a', { v: '1' }), { quiet: true });
    const resynced: string[] = [];
    const updates: string[] = [];
    informer.addHandler({
      update: (_old, obj) => { updates.push(String((obj as { data?: { v?: string } }).data?.v)); },
      resync: (obj) => { resynced.push(String((obj as { data?: { v?: string } }).data?.v)); },
    });
    informer.start();
    await informer.waitForSync();
    await settle();
    clock.advance(9_000);
    assert.deepEqual(resynced, ['1']);
    client.upsert(cm('a', { v: '2' }));
    await settle();
    assert.deepEqual(updates, ['2']);
    clock.advance(9_000);
    assert.deepEqual(resynced, ['1', '2'], 'the second pass sends the newest state');
  });

  it('resync handlers receive objects whose resourceVersion did not change, at every pass; update handlers never do', async () => {
    const { client, clock, informer } = setup();
    client.upsert(cm('a'), { quiet: true });
    client.upsert(cm('b'), { quiet: true });
    const resynced: string[] = [];
    let updates = 0;
    informer.addHandler({ update: () => { updates++; }, resync: (obj) => { resynced.push(`${obj.metadata?.name}@${obj.metadata?.resourceVersion}`); } });
    informer.start();
    await informer.waitForSync();
    await settle();
    clock.advance(9_000);
    clock.advance(9_000);
    assert.deepEqual(resynced.sort(), ['a@101', 'a@101', 'b@102', 'b@102']);
    assert.equal(updates, 0);
  });

  it('an object deleted before a pass is not resynced, and one added is', async () => {
    const { client, clock, informer } = setup();
    client.upsert(cm('a'), { quiet: true });
    const resynced: string[] = [];
    informer.addHandler({ resync: (obj) => { resynced.push(obj.metadata?.name ?? ''); } });
    informer.start();
    await informer.waitForSync();
    await settle();
    client.remove('ns/a');
    client.upsert(cm('b'));
    await settle();
    clock.advance(9_000);
    assert.deepEqual(resynced, ['b']);
  });

  it('reports each pass with the resynced event, after every resync callback, and never before the first sync', async () => {
    const { client, clock, informer } = setup();
    client.upsert(cm('a'), { quiet: true });
    client.upsert(cm('b'), { quiet: true });
    const order: string[] = [];
    informer.addHandler({ resync: (obj) => { order.push(obj.metadata?.name ?? ''); } });
    informer.on('resynced', (objects) => { order.push(`pass:${objects}`); });
    client.failNext('list', new TransportError({ cluster: 'fake' }, 'not yet'));
    informer.start();
    await settle();
    assert.equal(informer.stats().synced, false);
    clock.advance(9_000);
    assert.deepEqual(order, [], 'no resync before the first complete LIST');
    while (!informer.synced) {
      clock.advance(1_000);
      await settle();
    }
    order.length = 0;
    await settle();
    clock.advance(9_000);
    assert.deepEqual(order.slice(-1), ['pass:2']);
    assert.deepEqual(order.slice(0, 2).sort(), ['a', 'b']);
  });

  it('a handler that stops the informer mid-pass ends the pass and leaves no timer', async () => {
    const { client, clock, informer } = setup();
    client.upsert(cm('a'), { quiet: true });
    client.upsert(cm('b'), { quiet: true });
    let resynced = 0;
    let stopping: Promise<void> | undefined;
    informer.addHandler({ resync: () => { resynced++; stopping ??= informer.stop(); } });
    let passes = 0;
    informer.on('resynced', () => { passes++; });
    informer.start();
    await informer.waitForSync();
    await settle();
    clock.advance(9_000);
    await stopping;
    assert.equal(resynced, 1);
    assert.equal(passes, 0);
    assert.equal(clock.pendingTimers, 0);
  });
});
