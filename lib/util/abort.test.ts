import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { childController, isAbortError, raceAbort, sleep } from './abort.ts';
import { FakeClock } from './clock.ts';

describe('sleep', () => {
  it('resolves when the clock reaches the delay', async () => {
    const clock = new FakeClock();
    let done = false;
    const slept = sleep(100, undefined, clock).then(() => { done = true; });
    clock.advance(99);
    await Promise.resolve();
    assert.equal(done, false);
    clock.advance(1);
    await slept;
    assert.equal(done, true);
  });

  it('rejects with the abort reason and releases its timer', async () => {
    const clock = new FakeClock();
    const controller = new AbortController();
    const slept = sleep(100, controller.signal, clock);
    controller.abort(new Error('stopping'));
    await assert.rejects(slept, /stopping/);
    assert.equal(clock.pendingTimers, 0);
  });

  it('rejects at once on an aborted signal, as an AbortError when no reason was given', async () => {
    const clock = new FakeClock();
    const controller = new AbortController();
    controller.abort();
    await assert.rejects(sleep(100, controller.signal, clock), (err: unknown) => isAbortError(err));
    assert.equal(clock.pendingTimers, 0);
  });
});

describe('childController', () => {
  it('aborts with its parent, and stops listening once disposed', () => {
    const parent = new AbortController();
    const a = childController(parent.signal);
    const b = childController(parent.signal);
    b.dispose();
    parent.abort(new Error('bye'));
    assert.equal(a.controller.signal.aborted, true);
    assert.match(String(a.controller.signal.reason), /bye/);
    assert.equal(b.controller.signal.aborted, false, 'disposed children are detached');
  });

  it('starts aborted under an aborted parent', () => {
    const parent = new AbortController();
    parent.abort();
    assert.equal(childController(parent.signal).controller.signal.aborted, true);
  });
});

describe('raceAbort', () => {
  it('passes the value through, or rejects on abort without leaving the loser unhandled', async () => {
    assert.equal(await raceAbort(Promise.resolve(7), new AbortController().signal), 7);
    const controller = new AbortController();
    let rejectLater: (err: Error) => void = () => undefined;
    const pending = new Promise<number>((_, reject) => { rejectLater = reject; });
    const raced = raceAbort(pending, controller.signal);
    controller.abort(new Error('gone'));
    await assert.rejects(raced, /gone/);
    rejectLater(new Error('late failure')); // must not surface as an unhandled rejection
    await new Promise((resolve) => setImmediate(resolve));
  });
});
