import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '../util/index.ts';
import { ItemExponentialRateLimiter } from './rate-limiters.ts';
import { RateLimitingWorkQueue } from './rate-limiting.ts';

describe('RateLimitingWorkQueue', () => {
  it('re-adds an item after the delay its rate limiter gives, growing per failure', async () => {
    const clock = new FakeClock();
    const queue = new RateLimitingWorkQueue<string>({ clock, rateLimiter: new ItemExponentialRateLimiter({ baseDelayMs: 100 }) });
    queue.addRateLimited('a');
    assert.equal(clock.nextTimerIn, 100);
    clock.advance(100);
    const first = await queue.get();
    assert.deepEqual(first, { item: 'a' });
    queue.done('a');
    queue.addRateLimited('a');
    assert.equal(clock.nextTimerIn, 200);
    assert.equal(queue.numRequeues('a'), 2);
    assert.equal(queue.stats().retries, 2);
    queue.forget('a');
    assert.equal(queue.numRequeues('a'), 0);
    assert.equal(queue.stats().delayed, 1, 'forget does not remove the item from the queue');
    queue.shutDown();
    assert.equal(clock.pendingTimers, 0);
  });

  it('uses controller-runtime defaults on the queue clock', () => {
    const clock = new FakeClock();
    const queue = new RateLimitingWorkQueue<string>({ clock });
    queue.addRateLimited('a');
    assert.equal(clock.nextTimerIn, 5);
    queue.addRateLimited('a');
    queue.addRateLimited('a');
    clock.advance(5);
    assert.equal(queue.len, 1, 'moved earlier, then later attempts were ignored while it waited');
    assert.equal(queue.numRequeues('a'), 3);
    queue.shutDown();
  });

  it('ignores addRateLimited once shutting down, without counting a failure', () => {
    const clock = new FakeClock();
    const queue = new RateLimitingWorkQueue<string>({ clock });
    queue.shutDown();
    queue.addRateLimited('a');
    assert.equal(queue.numRequeues('a'), 0);
    assert.equal(clock.pendingTimers, 0);
  });

  it('rejects a rate limiter that is not one', () => {
    assert.throws(() => new RateLimitingWorkQueue({ rateLimiter: {} as ItemExponentialRateLimiter<string> }), /RateLimitingWorkQueue option rateLimiter must be a RateLimiter/);
  });
});
