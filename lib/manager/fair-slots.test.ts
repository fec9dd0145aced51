import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FairSlots, SlotQueueFullError, type ReleaseSlot } from './fair-slots.ts';
import { settle } from '../../fixtures/support/index.ts';

describe('FairSlots', () => {
  it('hands freed slots round-robin across keys, FIFO within one key', async () => {
    const slots = new FairSlots({ maxConcurrent: 1, maxWaitingPerKey: 100 });
    const order: string[] = [];
    const first = await slots.acquire('flood');
    const waiters: Promise<void>[] = [];
    const take = (key: string, label: string): void => {
      waiters.push(slots.acquire(key).then((release) => { order.push(label); release(); }));
    };
    for (let i = 0; i < 5; i++) take('flood', `flood-${i}`);
    take('good', 'good');
    take('other', 'other');
    assert.equal(slots.waiting, 7);
    first();
    await Promise.all(waiters);
    assert.deepEqual(order, ['flood-0', 'good', 'other', 'flood-1', 'flood-2', 'flood-3', 'flood-4']);
    assert.equal(slots.held, 0);
    assert.equal(slots.waiting, 0);
  });

  it('never holds more than maxConcurrent, and a release called twice frees one slot', async () => {
    const slots = new FairSlots({ maxConcurrent: 2 });
    const a = await slots.acquire('k');
    const b = await slots.acquire('k');
    const got: ReleaseSlot[] = [];
    void slots.acquire('k').then((release) => { got.push(release); });
    await settle(3);
    assert.equal(slots.held, 2);
    assert.equal(got.length, 0);
    a();
    a();
    await settle(3);
    assert.equal(got.length, 1);
    assert.equal(slots.held, 2, 'the slot passed straight to the waiter');
    b();
    got[0]?.();
    assert.equal(slots.held, 0);
  });

  it('refuses at once past maxWaitingPerKey and maxWaiting, naming the limit', async () => {
    const slots = new FairSlots({ maxConcurrent: 1, maxWaitingPerKey: 2, maxWaiting: 3 });
    await slots.acquire('a');
    void slots.acquire('a');
    void slots.acquire('a');
    await assert.rejects(slots.acquire('a'), (err: unknown) => err instanceof SlotQueueFullError && err.limit === 'maxWaitingPerKey' && err.max === 2);
    void slots.acquire('b');
    await assert.rejects(slots.acquire('c'), (err: unknown) => err instanceof SlotQueueFullError && err.limit === 'maxWaiting' && err.message.includes('maxWaiting 3'));
  });

  it('validates its options', () => {
    for (const bad of [0, -1, 1.5, Number.NaN]) {
      assert.throws(() => new FairSlots({ maxConcurrent: bad }), (err: unknown) => err instanceof TypeError && err.message.includes('maxConcurrent'));
    }
  });
});
