import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { getEventListeners } from 'node:events';
import { childController, isAbortError, onAbort, raceAbort, sleep } from './abort.ts';
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

describe('onAbort', () => {
  it('keeps one listener on a signal however many children and racers use it, and none once all have ended', async () => {
    const parent = new AbortController();
    const children = Array.from({ length: 1_000 }, () => childController(parent.signal));
    const races = Array.from({ length: 1_000 }, () => raceAbort(new Promise<void>(() => undefined), parent.signal));
    assert.equal(getEventListeners(parent.signal, 'abort').length, 1);
    for (const child of children.slice(0, 500)) child.dispose();
    assert.equal(getEventListeners(parent.signal, 'abort').length, 1);
    parent.abort(new Error('closing'));
    assert.equal(getEventListeners(parent.signal, 'abort').length, 0);
    // Disposed children were detached and stay open; the others followed the parent.
    assert.equal(children.filter(({ controller }) => controller.signal.aborted).length, 500);
    const settled = await Promise.allSettled(races);
    assert.ok(settled.every((r) => r.status === 'rejected' && String(r.reason).includes('closing')));
  });

  it('removes its listener when the last callback detaches, so a long-lived signal does not accumulate them', async () => {
    const root = new AbortController();
    for (let round = 0; round < 50; round += 1) {
      const { dispose } = childController(root.signal);
      await raceAbort(Promise.resolve(round), root.signal);
      await sleep(0, root.signal);
      dispose();
    }
    assert.equal(getEventListeners(root.signal, 'abort').length, 0);
  });

  it('runs callbacks once, in order, and lets one detach another while they run', () => {
    const controller = new AbortController();
    const ran: string[] = [];
    let detachSecond = (): void => undefined;
    const detachFirst = onAbort(controller.signal, () => { ran.push('first'); detachSecond(); });
    detachSecond = onAbort(controller.signal, () => { ran.push('second'); });
    onAbort(controller.signal, () => { ran.push('third'); });
    controller.abort();
    controller.abort();
    detachFirst();
    assert.deepEqual(ran, ['first', 'third']);
    // An aborted signal runs a new callback at once.
    onAbort(controller.signal, () => { ran.push('late'); });
    assert.deepEqual(ran, ['first', 'third', 'late']);
  });

  it('attaches the same function twice, detached once each; a second detach changes nothing', () => {
    const controller = new AbortController();
    let runs = 0;
    const count = (): void => { runs += 1; };
    const first = onAbort(controller.signal, count);
    const second = onAbort(controller.signal, count);
    first();
    const third = onAbort(controller.signal, count);
    first();
    second();
    second();
    const fourth = onAbort(controller.signal, count);
    controller.abort();
    assert.equal(runs, 2, 'the third and fourth attachments were left');
    third();
    fourth();
    assert.equal(getEventListeners(controller.signal, 'abort').length, 0);
  });
});
