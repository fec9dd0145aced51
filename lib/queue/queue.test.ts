import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setImmediate as tick } from 'node:timers/promises';
import { FakeClock } from '../util/index.ts';
import type { QueueMetricsProvider, QueueStats } from './metrics.ts';
import { WorkQueue } from './queue.ts';

/** Takes the next item, failing the test if none is ready right now. */
async function take<T>(queue: WorkQueue<T>): Promise<T> {
  const next = await queue.get();
  assert.ok(next !== undefined, 'expected an item');
  return next.item;
}

/** Records every metrics call, as the service's Prometheus backing will receive them. */
class RecordingMetrics implements QueueMetricsProvider {
  readonly events: string[] = [];
  stats: (() => QueueStats) | undefined;
  register(name: string, stats: () => QueueStats): void {
    this.events.push(`register ${name}`);
    this.stats = stats;
  }
  added(name: string): void { this.events.push(`added ${name}`); }
  queued(name: string, seconds: number): void { this.events.push(`queued ${name} ${seconds}`); }
  worked(name: string, seconds: number): void { this.events.push(`worked ${name} ${seconds}`); }
  retried(name: string): void { this.events.push(`retried ${name}`); }
}

describe('WorkQueue', () => {
  it('hands out items in the order they were added', async () => {
    const queue = new WorkQueue<string>();
    for (const key of ['ns/c', 'ns/a', 'ns/b']) queue.add(key);
    assert.deepEqual([await take(queue), await take(queue), await take(queue)], ['ns/c', 'ns/a', 'ns/b']);
  });

  it('de-duplicates an item added again while it waits, keeping its place', async () => {
    const queue = new WorkQueue<string>();
    queue.add('a');
    queue.add('b');
    queue.add('a');
    queue.add('b');
    assert.equal(queue.len, 2);
    assert.equal(queue.stats().adds, 2);
    assert.deepEqual([await take(queue), await take(queue)], ['a', 'b']);
    assert.equal(queue.len, 0);
  });

  it('delivers an item re-added while processing only after done(), never concurrently', async () => {
    const queue = new WorkQueue<string>();
    queue.add('a');
    assert.equal(await take(queue), 'a');
    queue.add('a');
    queue.add('a');
    assert.equal(queue.len, 0, 'a processing item is not handed out again');
    let second: string | undefined;
    void queue.get().then((next) => { second = next?.item; });
    await tick();
    assert.equal(second, undefined, 'blocked while a is processing');
    queue.done('a');
    await tick();
    assert.equal(second, 'a', 'handed out once, after done');
    assert.equal(queue.len, 0);
    queue.done('a');
    assert.equal(queue.stats().processing, 0);
  });

  it('keeps FIFO order for an item re-queued by done() behind items added before', async () => {
    const queue = new WorkQueue<string>();
    queue.add('a');
    assert.equal(await take(queue), 'a');
    queue.add('b');
    queue.add('a');
    queue.done('a');
    assert.deepEqual([await take(queue), await take(queue)], ['b', 'a']);
  });

  it('keeps FIFO order across thousands of items taken and added in turns', async () => {
    const queue = new WorkQueue<string>();
    const expected: string[] = [];
    const taken: string[] = [];
    let next = 0;
    for (let round = 0; round < 10; round++) {
      for (let i = 0; i < 1_500; i++) {
        const key = `ns/item-${next++}`;
        queue.add(key);
        expected.push(key);
      }
      for (let i = 0; i < 1_000; i++) {
        const item = await take(queue);
        queue.done(item);
        taken.push(item);
      }
    }
    while (queue.len > 0) taken.push(await take(queue));
    assert.deepEqual(taken, expected);
  });

  it('compares items with Map semantics: equal objects are different items', () => {
    const queue = new WorkQueue<{ key: string }>();
    queue.add({ key: 'a' });
    queue.add({ key: 'a' });
    assert.equal(queue.len, 2);
  });

  it('blocks get() until an item is added, serving waiters oldest first', async () => {
    const queue = new WorkQueue<string>();
    const got: string[] = [];
    void queue.get().then((next) => { got.push(`first:${next?.item ?? 'none'}`); });
    void queue.get().then((next) => { got.push(`second:${next?.item ?? 'none'}`); });
    await tick();
    assert.deepEqual(got, []);
    queue.add('x');
    queue.add('y');
    await tick();
    assert.deepEqual(got, ['first:x', 'second:y']);
    assert.equal(queue.stats().processing, 2);
  });

  it('resolves pending and later get() with undefined on shutDown, dropping waiting items', async () => {
    const queue = new WorkQueue<string>();
    const pending = queue.get();
    await tick();
    queue.shutDown();
    assert.equal(await pending, undefined);
    queue.add('late');
    assert.equal(queue.len, 0, 'adds are ignored once shut down');
    assert.equal(await queue.get(), undefined);
    assert.equal(queue.shuttingDown, true);

    const other = new WorkQueue<string>();
    other.add('a');
    other.shutDown();
    assert.equal(await other.get(), undefined, 'shutDown drops what was waiting');
    queue.shutDown(); // twice is fine
  });

  it('rejects get() with the abort reason and never loses an item to an aborted get', async () => {
    const queue = new WorkQueue<string>();
    const controller = new AbortController();
    const aborted = queue.get(controller.signal);
    const later = queue.get();
    controller.abort(new Error('stop'));
    await assert.rejects(aborted, /stop/);
    queue.add('a');
    assert.deepEqual(await later, { item: 'a' });
    await assert.rejects(queue.get(controller.signal), /stop/, 'an aborted signal rejects at once');
  });

  it('shutDownWithDrain hands out what is queued, then waits for every item being processed', async () => {
    const queue = new WorkQueue<string>();
    queue.add('a');
    queue.add('b');
    assert.equal(await take(queue), 'a');
    queue.add('a'); // re-added while processing: comes back on done()
    let drained = false;
    const drain = queue.shutDownWithDrain().then(() => { drained = true; });
    assert.equal(queue.shuttingDown, true);
    queue.add('c');
    assert.equal(await take(queue), 'b', 'queued items are still handed out');
    queue.done('b');
    await tick();
    assert.equal(drained, false, 'a is still processing');
    const next = queue.get();
    queue.done('a');
    assert.deepEqual(await next, { item: 'a' }, 'the re-added item is handed out again');
    assert.equal(drained, false);
    const end = queue.get();
    queue.done('a');
    await drain;
    assert.equal(drained, true);
    assert.equal(await end, undefined);
  });

  it('shutDownWithDrain resolves at once when idle, and ends early with shutDown', async () => {
    const idle = new WorkQueue<string>();
    await idle.shutDownWithDrain();

    const queue = new WorkQueue<string>();
    queue.add('a');
    queue.add('b');
    assert.equal(await take(queue), 'a');
    const drain = queue.shutDownWithDrain();
    queue.shutDown();
    assert.equal(await queue.get(), undefined, 'shutDown drops b');
    queue.done('a');
    await drain;
  });

  it('shutDownWithDrain rejects when its signal aborts, shutting down at once', async () => {
    const queue = new WorkQueue<string>();
    queue.add('a');
    assert.equal(await take(queue), 'a');
    const controller = new AbortController();
    const drain = queue.shutDownWithDrain(controller.signal);
    controller.abort(new Error('deadline'));
    await assert.rejects(drain, /deadline/);
    assert.equal(await queue.get(), undefined);
  });

  it('ignores done() for an item that was not handed out', async () => {
    const queue = new WorkQueue<string>();
    queue.add('a');
    queue.done('a');
    assert.equal(queue.len, 1);
    assert.equal(await take(queue), 'a');
  });

  it('reports adds, queue and work durations to the metrics provider, and gauges through stats', async () => {
    const clock = new FakeClock(1_000);
    const metrics = new RecordingMetrics();
    const queue = new WorkQueue<string>({ name: 'owners', clock, metrics });
    queue.add('a');
    queue.add('a');
    queue.add('b');
    clock.advance(2_000);
    assert.equal(await take(queue), 'a');
    clock.advance(500);
    assert.equal(await take(queue), 'b');
    clock.advance(1_000);
    const stats = metrics.stats?.();
    assert.deepEqual(stats, {
      name: 'owners', depth: 0, adds: 2, retries: 0, processing: 2, delayed: 0,
      unfinishedWorkSeconds: 2.5, longestRunningProcessorSeconds: 1.5,
    });
    queue.done('a');
    assert.deepEqual(metrics.events, [
      'register owners', 'added owners', 'added owners', 'queued owners 2', 'queued owners 2.5', 'worked owners 1.5',
    ]);
  });

  it('validates its options with a TypeError naming option and value', () => {
    assert.throws(() => new WorkQueue({ metrics: new RecordingMetrics() }), /WorkQueue option name must be non-empty when metrics is set, got ""/);
    assert.throws(() => new WorkQueue({ clock: {} as FakeClock }), /WorkQueue option clock must be a Clock/);
    assert.throws(() => new WorkQueue({ name: 3 as unknown as string }), /option name must be a string, got 3/);
  });
});
