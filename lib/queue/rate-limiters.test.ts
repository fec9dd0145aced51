import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '../util/index.ts';
import {
  ItemExponentialRateLimiter,
  MaxOfRateLimiter,
  TokenBucketRateLimiter,
  defaultControllerRateLimiter,
  type RateLimiter,
} from './rate-limiters.ts';

function delays<T>(limiter: RateLimiter<T>, item: T, count: number): number[] {
  return Array.from({ length: count }, () => limiter.when(item));
}

describe('ItemExponentialRateLimiter', () => {
  it('waits 5, 10, 20, ... ms per item, capped at 1000 s', () => {
    const limiter = new ItemExponentialRateLimiter<string>();
    assert.deepEqual(delays(limiter, 'a', 5), [5, 10, 20, 40, 80]);
    assert.equal(limiter.numRequeues('a'), 5);
    assert.deepEqual(delays(limiter, 'b', 2), [5, 10], 'items back off independently');
    const long = delays(limiter, 'c', 2_000);
    assert.equal(long[17], 5 * 2 ** 17);
    assert.equal(long[18], 1_000_000, '5 ms * 2^18 exceeds 1000 s');
    assert.equal(long[1_999], 1_000_000, 'stays capped, even past where 2^n overflows');
  });

  it('starts over after forget', () => {
    const limiter = new ItemExponentialRateLimiter<string>({ baseDelayMs: 100, maxDelayMs: 250 });
    assert.deepEqual(delays(limiter, 'a', 3), [100, 200, 250]);
    limiter.forget('a');
    assert.equal(limiter.numRequeues('a'), 0);
    assert.equal(limiter.when('a'), 100);
  });

  it('validates its options', () => {
    assert.throws(() => new ItemExponentialRateLimiter({ baseDelayMs: 0 }), /baseDelayMs must be a finite number > 0, got 0/);
    assert.throws(() => new ItemExponentialRateLimiter({ baseDelayMs: 10, maxDelayMs: 5 }), /maxDelayMs must be >= baseDelayMs/);
  });
});

describe('TokenBucketRateLimiter', () => {
  it('lets a burst through at once, then spaces retries at the rate', () => {
    const clock = new FakeClock();
    const limiter = new TokenBucketRateLimiter<string>({ qps: 10, burst: 3, clock });
    assert.deepEqual(delays(limiter, 'x', 3), [0, 0, 0]);
    assert.deepEqual(delays(limiter, 'x', 3), [100, 200, 300], 'later callers queue behind earlier reservations');
    clock.advance(300);
    assert.equal(limiter.when('x'), 100, 'the reservations consumed the refill');
    clock.advance(10_000);
    assert.deepEqual(delays(limiter, 'x', 4), [0, 0, 0, 100], 'refills up to the burst, not beyond');
  });

  it('defaults to 10 qps with a burst of 100 and tracks no item', () => {
    const clock = new FakeClock();
    const limiter = new TokenBucketRateLimiter<string>({ clock });
    assert.ok(delays(limiter, 'x', 100).every((ms) => ms === 0));
    assert.equal(limiter.when('x'), 100);
    assert.equal(limiter.numRequeues('x'), 0);
    limiter.forget('x');
    assert.equal(limiter.when('y'), 200, 'the bucket is shared by all items');
  });

  it('validates its options', () => {
    assert.throws(() => new TokenBucketRateLimiter({ qps: -1 }), /qps must be a finite number > 0, got -1/);
    assert.throws(() => new TokenBucketRateLimiter({ burst: 0.5 }), /burst must be an integer >= 1, got 0.5/);
  });
});

describe('MaxOfRateLimiter', () => {
  it('waits the longest of its limiters, counts the highest requeues, forgets in all', () => {
    const clock = new FakeClock();
    const fast = new ItemExponentialRateLimiter<string>({ baseDelayMs: 1 });
    const slow = new ItemExponentialRateLimiter<string>({ baseDelayMs: 50 });
    const bucket = new TokenBucketRateLimiter<string>({ qps: 1, burst: 1, clock });
    const limiter = new MaxOfRateLimiter({ limiters: [fast, slow, bucket] });
    assert.deepEqual(delays(limiter, 'a', 3), [50, 1_000, 2_000]);
    assert.equal(limiter.numRequeues('a'), 3);
    limiter.forget('a');
    assert.equal(fast.numRequeues('a'), 0);
    assert.equal(slow.numRequeues('a'), 0);
  });

  it('needs at least one limiter', () => {
    assert.throws(() => new MaxOfRateLimiter<string>({ limiters: [] }), /limiters must be a non-empty array/);
  });
});

describe('defaultControllerRateLimiter', () => {
  it('backs off per item from 5 ms and limits all items to 10 per second after a burst of 100', () => {
    const clock = new FakeClock();
    const limiter = defaultControllerRateLimiter<string>({ clock });
    assert.deepEqual(delays(limiter, 'a', 4), [5, 10, 20, 40]);
    for (let i = 0; i < 96; i++) assert.equal(limiter.when(`k${i}`), 5);
    assert.equal(limiter.when('fresh'), 100, 'the 101st retry waits for the bucket');
    limiter.forget('a');
    assert.equal(limiter.numRequeues('a'), 0);
  });
});
