import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '../util/index.ts';
import { DelayingWorkQueue } from './delaying.ts';

/** Everything ready right now, in hand-out order (each marked done). */
async function drainReady<T>(queue: DelayingWorkQueue<T>): Promise<T[]> {
  const items: T[] = [];
  while (queue.len > 0) {
    const next = await queue.get();
    assert.ok(next !== undefined);
    items.push(next.item);
    queue.done(next.item);
  }
  return items;
}

describe('DelayingWorkQueue', () => {
  it('adds items when their delay has passed, earliest first, ties in call order', async () => {
    const clock = new FakeClock();
    const queue = new DelayingWorkQueue<string>({ clock });
    queue.addAfter('c', 300);
    queue.addAfter('a', 100);
    queue.addAfter('b', 200);
    queue.addAfter('b2', 200);
    clock.advance(99);
    assert.deepEqual(await drainReady(queue), []);
    clock.advance(1);
    assert.deepEqual(await drainReady(queue), ['a']);
    clock.advance(100);
    assert.deepEqual(await drainReady(queue), ['b', 'b2']);
    clock.advance(100);
    assert.deepEqual(await drainReady(queue), ['c']);
    assert.equal(clock.pendingTimers, 0, 'no timer once the heap is empty');
  });

  it('hands out items that fall due together in readyAt order', async () => {
    const clock = new FakeClock();
    const queue = new DelayingWorkQueue<string>({ clock });
    for (const [key, ms] of [['e', 50], ['a', 10], ['d', 40], ['b', 20], ['c', 30], ['f', 60]] as const) queue.addAfter(key, ms);
    clock.advance(1_000);
    assert.deepEqual(await drainReady(queue), ['a', 'b', 'c', 'd', 'e', 'f']);
  });

  it('keeps heap order through many random adds and moves', async () => {
    const clock = new FakeClock();
    const queue = new DelayingWorkQueue<string>({ clock });
    let seed = 42;
    const random = (n: number): number => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed % n;
    };
    // The model: each item's earliest requested time, and the order in which that time was set.
    const model = new Map<string, { at: number; seq: number }>();
    for (let seq = 0; seq < 2_000; seq++) {
      const item = `ns/item-${random(300)}`;
      const at = 1 + random(10_000);
      const known = model.get(item);
      if (known === undefined || at < known.at) model.set(item, { at, seq });
      queue.addAfter(item, at);
    }
    const expected = [...model].sort(([, a], [, b]) => a.at - b.at || a.seq - b.seq).map(([item]) => item);
    clock.advance(5_000);
    const firstHalf = await drainReady(queue);
    clock.advance(5_000);
    assert.deepEqual([...firstHalf, ...(await drainReady(queue))], expected);
  });

  it('moves a waiting item earlier on an earlier addAfter, and ignores a later one', async () => {
    const clock = new FakeClock();
    const queue = new DelayingWorkQueue<string>({ clock });
    queue.addAfter('a', 1_000);
    queue.addAfter('a', 100);
    queue.addAfter('a', 5_000);
    assert.equal(queue.stats().delayed, 1, 'an item waits once');
    clock.advance(100);
    assert.deepEqual(await drainReady(queue), ['a']);
    clock.advance(10_000);
    assert.deepEqual(await drainReady(queue), [], 'the superseded times do not add it again');
  });

  it('keeps one timer for the whole heap, armed for the earliest item', () => {
    const clock = new FakeClock();
    const queue = new DelayingWorkQueue<string>({ clock });
    for (let i = 0; i < 100; i++) queue.addAfter(`ns/item-${i}`, 1_000 + i);
    assert.equal(clock.pendingTimers, 1);
    assert.equal(clock.nextTimerIn, 1_000);
    queue.addAfter('ns/urgent', 10);
    assert.equal(clock.pendingTimers, 1);
    assert.equal(clock.nextTimerIn, 10);
    clock.advance(10);
    assert.equal(queue.len, 1);
    assert.equal(clock.pendingTimers, 1);
    assert.equal(clock.nextTimerIn, 990);
  });

  it('adds at once for a delay <= 0, and leaves a pending addAfter in place on add()', async () => {
    const clock = new FakeClock();
    const queue = new DelayingWorkQueue<string>({ clock });
    queue.addAfter('now', 0);
    queue.addAfter('past', -5);
    assert.deepEqual(await drainReady(queue), ['now', 'past']);
    queue.addAfter('a', 100);
    queue.add('a');
    assert.deepEqual(await drainReady(queue), ['a']);
    clock.advance(100);
    assert.deepEqual(await drainReady(queue), ['a'], 'client-go semantics: the delayed add still happens');
  });

  it('re-arms across delays longer than a timer can hold', () => {
    const clock = new FakeClock();
    const queue = new DelayingWorkQueue<string>({ clock });
    const month = 30 * 24 * 3_600_000;
    queue.addAfter('a', month);
    assert.ok((clock.nextTimerIn ?? 0) < month);
    clock.advance(month - 1);
    assert.equal(queue.len, 0);
    clock.advance(1);
    assert.equal(queue.len, 1);
  });

  it('drops delayed items and cancels its timer on shutDown and on shutDownWithDrain', async () => {
    const clock = new FakeClock();
    const queue = new DelayingWorkQueue<string>({ clock });
    queue.addAfter('a', 100);
    queue.shutDown();
    assert.equal(clock.pendingTimers, 0);
    queue.addAfter('b', 100);
    assert.equal(clock.pendingTimers, 0, 'ignored once shut down');
    clock.advance(1_000);
    assert.equal(await queue.get(), undefined);

    const draining = new DelayingWorkQueue<string>({ clock });
    draining.addAfter('a', 100);
    await draining.shutDownWithDrain();
    assert.equal(clock.pendingTimers, 0);
  });

  it('counts accepted addAfter calls as retries', () => {
    const queue = new DelayingWorkQueue<string>({ clock: new FakeClock() });
    queue.addAfter('a', 10);
    queue.addAfter('a', 20);
    queue.addAfter('b', 0);
    const stats = queue.stats();
    assert.equal(stats.retries, 3);
    assert.equal(stats.delayed, 1);
    assert.equal(stats.depth, 1);
    queue.shutDown();
  });

  it('throws a TypeError for a delay that is not a finite number', () => {
    const queue = new DelayingWorkQueue<string>({ clock: new FakeClock() });
    assert.throws(() => { queue.addAfter('a', Number.NaN); }, TypeError);
    assert.throws(() => { queue.addAfter('a', Infinity); }, TypeError);
  });
});
