import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '../../lib/util/index.ts';
import { Narrator, type NarratorOutput } from './narrator.ts';

class Screen implements NarratorOutput {
  readonly isTTY: boolean;
  readonly columns: number | undefined;
  written = '';
  constructor(isTTY: boolean, columns?: number) {
    this.isTTY = isTTY;
    this.columns = columns;
  }
  write(text: string): boolean {
    this.written += text;
    return true;
  }
  /** What has been written since the last call. */
  take(): string {
    const text = this.written;
    this.written = '';
    return text;
  }
}

function deferred(): { promise: Promise<string>; resolve: (value: string) => void; reject: (err: Error) => void } {
  let resolve!: (value: string) => void;
  let reject!: (err: Error) => void;
  const promise = new Promise<string>((res, rej) => { resolve = res; reject = rej; });
  return { promise, resolve, reject };
}

const erase = '\r\u001b[K';

/**
 * Waits, through the narrator, on work that ends when the test settles `work`; `label` renames what
 * is awaited (a no-op until the narrator has started the work, as the optional call it replaces was).
 */
function waitOnDeferred(narrator: Narrator, what: string): { work: ReturnType<typeof deferred>; waiting: Promise<string>; label: (what: string) => void } {
  const work = deferred();
  let update: ((what: string) => void) | undefined;
  const waiting = narrator.wait(what, async (wait) => {
    update = (next) => { wait.update(next); };
    return work.promise;
  });
  return { work, waiting, label: (next) => { update?.(next); } };
}

describe('Narrator off a terminal (CI logs)', () => {
  it('writes a "still waiting" line with the elapsed time once per interval, and nothing once done', async () => {
    const clock = new FakeClock(1_000_000);
    const screen = new Screen(false);
    const narrator = new Narrator({ out: screen, clock, lineIntervalMs: 5000 });
    const { work, waiting, label } = waitOnDeferred(narrator, 'the apiserver to start');
    assert.equal(screen.take(), '', 'the step line already says what starts; nothing more at once');
    clock.advance(4999);
    assert.equal(screen.take(), '');
    clock.advance(1);
    assert.equal(screen.take(), '  … still waiting for the apiserver to start (5 s)\n');
    clock.advance(2500);
    narrator.line('management   etcd ready');
    assert.equal(screen.take(), 'management   etcd ready\n');
    label('caches to sync');
    assert.equal(screen.take(), '', 'a new phase waits for the next line');
    clock.advance(2500);
    assert.equal(screen.take(), '  … still waiting for caches to sync (10 s)\n');
    clock.advance(15_000);
    assert.equal(screen.take().split('\n').filter((l) => l !== '').length, 3);
    work.resolve('up');
    assert.equal(await waiting, 'up');
    assert.equal(clock.pendingTimers, 0, 'no timer outlives the wait');
    clock.advance(60_000);
    assert.equal(screen.take(), '');
  });

  it('passes a failure through and stops its timer', async () => {
    const clock = new FakeClock();
    const narrator = new Narrator({ out: new Screen(false), clock });
    const work = deferred();
    const waiting = narrator.wait('prod', () => work.promise);
    work.reject(new Error('timed out'));
    await assert.rejects(waiting, /timed out/);
    assert.equal(clock.pendingTimers, 0);
  });
});

describe('Narrator on a terminal', () => {
  it('draws a spinner with the elapsed time in place, keeps it under narration and erases it when done', async () => {
    const clock = new FakeClock();
    const screen = new Screen(true, 200);
    const narrator = new Narrator({ out: screen, clock, frameIntervalMs: 100 });
    const { work, waiting, label } = waitOnDeferred(narrator, 'prod to reach 1.1.0');
    assert.equal(screen.take(), `${erase}⠋ waiting for prod to reach 1.1.0 (0.0 s)`, 'drawn at once');
    clock.advance(100);
    assert.equal(screen.take(), `${erase}⠙ waiting for prod to reach 1.1.0 (0.1 s)`);
    clock.advance(1900);
    const frames = screen.take().split(erase).filter((f) => f !== '');
    assert.equal(frames.length, 19);
    assert.equal(frames.at(-1), '⠋ waiting for prod to reach 1.1.0 (2.0 s)', 'ten frames, round and round');
    narrator.line('pipeline     dev 1.1.0 ✓');
    assert.equal(screen.take(), `${erase}pipeline     dev 1.1.0 ✓\n${erase}⠋ waiting for prod to reach 1.1.0 (2.0 s)`, 'the line goes above the spinner');
    label('staging to be promoted');
    assert.equal(screen.take(), `${erase}⠋ waiting for staging to be promoted (2.0 s)`);
    work.resolve('done');
    assert.equal(await waiting, 'done');
    assert.equal(screen.take(), erase, 'the spinner line is erased');
    assert.equal(clock.pendingTimers, 0);
    narrator.line('✔ promoted');
    assert.equal(screen.take(), '✔ promoted\n');
  });

  it('cuts the spinner line to the terminal width, so that it redraws in place', () => {
    const clock = new FakeClock();
    const screen = new Screen(true, 20);
    const narrator = new Narrator({ out: screen, clock });
    const work = deferred();
    void narrator.wait('a very long description of what is awaited', () => work.promise);
    assert.equal(screen.take(), `${erase}⠋ waiting for a ve…`);
    work.resolve('');
  });

  it('shows the innermost of nested waits, then the outer one again', async () => {
    const clock = new FakeClock();
    const screen = new Screen(true);
    const narrator = new Narrator({ out: screen, clock });
    const outer = deferred();
    const outerWait = narrator.wait('the fleet', () => outer.promise);
    clock.advance(1000);
    const inner = deferred();
    const innerWait = narrator.wait('staging', () => inner.promise);
    clock.advance(500);
    assert.match(screen.take(), /waiting for staging \(0\.5 s\)$/);
    inner.resolve('');
    await innerWait;
    assert.equal(screen.take(), `${erase}${erase}⠴ waiting for the fleet (1.5 s)`);
    outer.resolve('');
    await outerWait;
    assert.equal(clock.pendingTimers, 0);
  });
});

describe('Narrator options', () => {
  it('rejects intervals that are not positive, naming the option', () => {
    assert.throws(() => new Narrator({ out: new Screen(false), lineIntervalMs: 0 }), { name: 'TypeError', message: /lineIntervalMs must be a positive number of milliseconds, got 0/ });
    assert.throws(() => new Narrator({ out: new Screen(false), frameIntervalMs: Number.NaN }), { name: 'TypeError', message: /frameIntervalMs/ });
  });
});
