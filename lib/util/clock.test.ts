import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from './clock.ts';

describe('FakeClock', () => {
  it('fires due timers in order, ties in creation order, and only when advanced far enough', () => {
    const clock = new FakeClock(1000);
    const fired: string[] = [];
    clock.setTimer(20, () => fired.push('b'));
    clock.setTimer(10, () => fired.push('a'));
    clock.setTimer(20, () => fired.push('c'));
    clock.advance(15);
    assert.deepEqual(fired, ['a']);
    assert.equal(clock.now(), 1015);
    clock.advance(5);
    assert.deepEqual(fired, ['a', 'b', 'c']);
    assert.equal(clock.pendingTimers, 0);
  });

  it('fires a timer set by a firing callback within the same advance when due, at its own time', () => {
    const clock = new FakeClock();
    const seen: number[] = [];
    clock.setTimer(10, () => clock.setTimer(5, () => seen.push(clock.now())));
    clock.advance(100);
    assert.deepEqual(seen, [15]);
    assert.equal(clock.now(), 100);
  });

  it('never fires a cancelled timer, and reports the next due time', () => {
    const clock = new FakeClock();
    let fired = false;
    const timer = clock.setTimer(10, () => { fired = true; });
    clock.setTimer(30, () => undefined);
    assert.equal(clock.nextTimerIn, 10);
    timer.cancel();
    timer.cancel();
    assert.equal(clock.nextTimerIn, 30);
    clock.advance(50);
    assert.equal(fired, false);
    assert.equal(clock.nextTimerIn, undefined);
  });
});
