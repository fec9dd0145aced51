import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Backoff } from './backoff.ts';
import { FakeClock } from './clock.ts';

describe('Backoff', () => {
  it('doubles from the initial delay up to the ceiling', () => {
    const backoff = new Backoff(new FakeClock(), { initialMs: 800, maxMs: 30_000, jitter: 0 });
    const delays = Array.from({ length: 8 }, () => backoff.next());
    assert.deepEqual(delays, [800, 1600, 3200, 6400, 12_800, 25_600, 30_000, 30_000]);
  });

  it('adds jitter within [delay, delay × (1 + jitter))', () => {
    let r = 0;
    const backoff = new Backoff(new FakeClock(), { initialMs: 100, jitter: 0.5, random: () => r });
    assert.equal(backoff.next(), 100);
    r = 0.999;
    const second = backoff.next();
    assert.ok(second >= 200 && second < 300, String(second));
  });

  it('starts over after a quiet period longer than resetAfterMs, and on reset()', () => {
    const clock = new FakeClock();
    const backoff = new Backoff(clock, { initialMs: 100, jitter: 0, resetAfterMs: 1000 });
    backoff.next();
    backoff.next();
    assert.equal(backoff.next(), 400);
    clock.advance(1001);
    assert.equal(backoff.next(), 100, 'stable for longer than resetAfterMs');
    backoff.next();
    backoff.reset();
    assert.equal(backoff.next(), 100);
  });

  it('rejects invalid options with a TypeError naming the option', () => {
    assert.throws(() => new Backoff(new FakeClock(), { initialMs: -1 }), { name: 'TypeError', message: /initialMs.*-1/ });
    assert.throws(() => new Backoff(new FakeClock(), { factor: 0.5 }), { name: 'TypeError', message: /factor/ });
    assert.throws(() => new Backoff(new FakeClock(), { maxMs: Number.NaN }), { name: 'TypeError', message: /maxMs/ });
  });
});
