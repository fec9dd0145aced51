import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setImmediate as tick } from 'node:timers/promises';
import { FakeClock } from '../util/index.ts';
import { ItemExponentialRateLimiter } from './rate-limiters.ts';
import { RateLimitingWorkQueue } from './rate-limiting.ts';
import { runWorkers } from './workers.ts';
import { RecordingLogger, settle } from '../../fixtures/support/index.ts';

/** A promise the test settles by hand. */
function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve = (): void => undefined;
  const promise = new Promise<void>((r) => { resolve = r; });
  return { promise, resolve };
}

// Unhandled rejections would fail the process late and blame the wrong test: record them instead.
const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown): void => { unhandled.push(reason); };
before(() => { process.on('unhandledRejection', onUnhandled); });
after(() => { process.off('unhandledRejection', onUnhandled); });

/**
 * Runs workers whose handler always fails ("cluster unreachable") on one item, team-a/pipeline-1, for
 * 40 rounds of the clock, each to the next timer; returns the time of each attempt and the worker run.
 */
async function failFor40Rounds(queue: RateLimitingWorkQueue<string>, clock: FakeClock, options: { maxRetries?: number } = {}): Promise<{ logger: RecordingLogger; controller: AbortController; attempts: number[]; run: Promise<void> }> {
  const logger = new RecordingLogger();
  const controller = new AbortController();
  const attempts: number[] = [];
  const run = runWorkers(queue, {
    signal: controller.signal,
    logger,
    ...options,
    handler: () => {
      attempts.push(clock.now());
      return Promise.reject(new Error('cluster unreachable'));
    },
  });
  queue.add('team-a/pipeline-1');
  for (let i = 0; i < 40; i++) {
    await settle(2);
    clock.advance(clock.nextTimerIn ?? 1_000);
  }
  return { logger, controller, attempts, run };
}

describe('runWorkers', () => {
  it('runs items on N workers in parallel, never the same item twice at once', async () => {
    const clock = new FakeClock();
    const queue = new RateLimitingWorkQueue<string>({ clock });
    const controller = new AbortController();
    const active = new Set<string>();
    let maxActive = 0;
    const violations: string[] = [];
    const handled = new Map<string, number>();
    let readds = 0;
    const run = runWorkers(queue, {
      workers: 4,
      signal: controller.signal,
      handler: async (item) => {
        if (active.has(item)) violations.push(item);
        active.add(item);
        maxActive = Math.max(maxActive, active.size);
        handled.set(item, (handled.get(item) ?? 0) + 1);
        // Events for the item keep arriving while it is processed.
        if (readds < 200) {
          readds++;
          queue.add(item);
          queue.add(item);
        }
        await settle(1 + (item.length % 3));
        active.delete(item);
      },
    });
    for (let round = 0; round < 20; round++) {
      for (const key of ['ns/a', 'ns/bb', 'ns/ccc', 'ns/d', 'ns/ee', 'ns/fff']) queue.add(key);
      await settle(2);
    }
    while (queue.len > 0 || queue.stats().processing > 0) await settle(1);
    controller.abort();
    await run;
    assert.deepEqual(violations, []);
    assert.equal(maxActive, 4, 'four distinct items ran at once');
    assert.equal(handled.size, 6);
    assert.equal(readds, 200);
  });

  it('forgets an item on success, resetting its backoff', async () => {
    const clock = new FakeClock();
    const queue = new RateLimitingWorkQueue<string>({ clock, rateLimiter: new ItemExponentialRateLimiter({ baseDelayMs: 100 }) });
    const controller = new AbortController();
    let calls = 0;
    const run = runWorkers(queue, {
      signal: controller.signal,
      handler: () => {
        calls++;
        return calls === 1 ? Promise.reject(new Error('flaky')) : Promise.resolve();
      },
    });
    queue.add('a');
    await settle(5);
    assert.equal(queue.numRequeues('a'), 1);
    clock.advance(100);
    await settle(5);
    assert.equal(calls, 2);
    assert.equal(queue.numRequeues('a'), 0, 'forgotten after success');
    controller.abort();
    await run;
    queue.shutDown();
  });

  it('retries a failing item with capped backoff for as long as it fails, never dropping it (the default)', async () => {
    const clock = new FakeClock();
    // 5 ms doubling, capped at 1 s: 40 rounds reach the cap well past 15 retries.
    const queue = new RateLimitingWorkQueue<string>({ name: 'owners', clock, rateLimiter: new ItemExponentialRateLimiter({ baseDelayMs: 5, maxDelayMs: 1_000 }) });
    const { logger, controller, attempts, run } = await failFor40Rounds(queue, clock);
    await settle(2);
    assert.equal(attempts.length, 41, 'one attempt per round, well past 15 retries');
    const gaps = attempts.slice(1).map((at, i) => at - (attempts[i] ?? 0));
    assert.deepEqual(gaps.slice(0, 4), [5, 10, 20, 40], 'exponential backoff between attempts');
    assert.deepEqual(gaps.slice(-5), [1_000, 1_000, 1_000, 1_000, 1_000], 'capped by the rate limiter');
    assert.equal(logger.lines.filter((line) => line.level === 'warn').length, 0, 'never dropped');
    const errors = logger.lines.filter((line) => line.level === 'error');
    assert.equal(errors.length, 41, 'one error line per failed attempt, visible at the default level');
    const third = errors[2]!;
    assert.equal(third.message, 'Reconciler error for team-a/pipeline-1 (retries 2): cluster unreachable');
    const { reconcileID, ...fields } = third.fields;
    assert.equal(typeof reconcileID, 'string');
    assert.deepEqual(fields, { controller: 'owners', queue: 'owners', item: 'team-a/pipeline-1', retries: 2, error: 'cluster unreachable' });
    assert.equal(queue.numRequeues('team-a/pipeline-1'), 41, 'every failure counted, none forgotten');
    assert.equal(clock.pendingTimers, 1, 'the next retry is scheduled');
    controller.abort();
    await run;
    queue.shutDown();
  });

  it('with maxRetries: 15, retries a failing item 15 times with backoff, then drops it with a warning', async () => {
    const clock = new FakeClock();
    const queue = new RateLimitingWorkQueue<string>({ name: 'owners', clock });
    const { logger, controller, attempts, run } = await failFor40Rounds(queue, clock, { maxRetries: 15 });
    assert.equal(attempts.length, 16, 'one attempt plus 15 retries');
    const gaps = attempts.slice(1).map((at, i) => at - (attempts[i] ?? 0));
    assert.deepEqual(gaps.slice(0, 4), [5, 10, 20, 40], 'exponential backoff between attempts');
    assert.equal(logger.lines.filter((line) => line.level === 'error').length, 16, 'every failed attempt, the last included, logged at error');
    const drops = logger.lines.filter((line) => line.level === 'warn');
    assert.equal(drops.length, 1);
    const drop = drops[0]!;
    assert.match(drop.message, /team-a\/pipeline-1/);
    assert.match(drop.message, /cluster unreachable/);
    assert.match(drop.message, /15 retries/);
    const { reconcileID, ...fields } = drop.fields;
    assert.match(String(reconcileID), /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.deepEqual(fields, { controller: 'owners', queue: 'owners', item: 'team-a/pipeline-1', retries: 15, error: 'cluster unreachable' });
    assert.equal(queue.numRequeues('team-a/pipeline-1'), 0, 'forgotten when dropped');
    assert.equal(clock.pendingTimers, 0, 'nothing scheduled any more');
    controller.abort();
    await run;
  });

  it('hands each call a logger with the controller name and a fresh reconcileID, and reports each result', async () => {
    const clock = new FakeClock();
    const queue = new RateLimitingWorkQueue<string>({ name: 'owners', clock });
    const logger = new RecordingLogger();
    const controller = new AbortController();
    const seen: { controller: string; result: string; durationMs: number; reason?: string }[] = [];
    const outcomes = new Map<string, () => Promise<{ requeueAfterMs: number } | undefined>>([
      ['ok', () => { clock.advance(250); return Promise.resolve(undefined); }],
      ['later', () => Promise.resolve({ requeueAfterMs: 60_000 })],
      ['bad', () => Promise.reject(new Error('no'))],
    ]);
    const ids: string[] = [];
    const run = runWorkers(queue, {
      signal: controller.signal,
      name: 'pipeline',
      logger,
      clock,
      onReconcile: (o) => { seen.push({ ...o }); },
      handler: (item, _signal, context) => {
        ids.push(context.reconcileID);
        context.logger.info('reconciling', { item });
        return outcomes.get(item)!();
      },
    });
    for (const item of outcomes.keys()) queue.add(item);
    await settle(10);
    const lines = logger.lines.filter((l) => l.message === 'reconciling');
    assert.equal(lines.length, 3);
    for (const [i, line] of lines.entries()) {
      assert.equal(line.fields.controller, 'pipeline');
      assert.equal(line.fields.reconcileID, ids[i]);
    }
    assert.equal(new Set(ids).size, 3, 'one ID per reconcile');
    assert.deepEqual(seen, [
      { controller: 'pipeline', result: 'success', durationMs: 250 },
      { controller: 'pipeline', result: 'requeue_after', durationMs: 0 },
      { controller: 'pipeline', result: 'error', durationMs: 0, reason: 'other' },
    ]);
    controller.abort();
    await run;
    queue.shutDown();
  });

  it('honours maxRetries', async () => {
    const clock = new FakeClock();
    const queue = new RateLimitingWorkQueue<string>({ clock });
    const controller = new AbortController();
    let attempts = 0;
    const run = runWorkers(queue, {
      signal: controller.signal,
      maxRetries: 0,
      handler: () => { attempts++; return Promise.reject(new Error('no')); },
    });
    queue.add('a');
    await settle(5);
    clock.advance(10_000);
    await settle(5);
    assert.equal(attempts, 1);
    controller.abort();
    await run;
  });

  it('re-adds an item after requeueAfterMs, forgetting its failures', async () => {
    const clock = new FakeClock();
    const queue = new RateLimitingWorkQueue<string>({ clock });
    const controller = new AbortController();
    const seen: number[] = [];
    const run = runWorkers(queue, {
      signal: controller.signal,
      handler: (): Promise<{ requeueAfterMs: number } | undefined> => {
        seen.push(clock.now());
        return Promise.resolve(seen.length === 1 ? { requeueAfterMs: 30_000 } : undefined);
      },
    });
    queue.addRateLimited('a');
    clock.advance(5);
    await settle(5);
    assert.deepEqual(seen, [5]);
    assert.equal(queue.numRequeues('a'), 0);
    clock.advance(29_999);
    await settle(5);
    assert.deepEqual(seen, [5]);
    clock.advance(1);
    await settle(5);
    assert.deepEqual(seen, [5, 30_005]);
    controller.abort();
    await run;
  });

  it('on abort takes no new item, lets in-flight handlers finish with the signal, then resolves', async () => {
    const queue = new RateLimitingWorkQueue<string>({ clock: new FakeClock() });
    const controller = new AbortController();
    const release = deferred();
    const signals: AbortSignal[] = [];
    const started: string[] = [];
    const run = runWorkers(queue, {
      workers: 2,
      signal: controller.signal,
      handler: async (item, signal) => {
        started.push(item);
        signals.push(signal);
        await release.promise;
      },
    });
    let finished = false;
    void run.then(() => { finished = true; });
    queue.add('a');
    queue.add('b');
    queue.add('c');
    await settle(5);
    assert.deepEqual(started, ['a', 'b']);
    controller.abort();
    await settle(5);
    assert.equal(finished, false, 'waits for in-flight handlers');
    assert.ok(signals.every((signal) => signal.aborted), 'handlers see the abort');
    release.resolve();
    await run;
    assert.deepEqual(started, ['a', 'b'], 'c was not taken');
    assert.equal(queue.len, 1);
    assert.equal(queue.stats().processing, 0, 'a and b were marked done');
  });

  it('keeps an item whose handler failed because of the abort, without counting a retry', async () => {
    const queue = new RateLimitingWorkQueue<string>({ clock: new FakeClock() });
    const controller = new AbortController();
    const run = runWorkers(queue, {
      signal: controller.signal,
      handler: (_item, signal) => new Promise<void>((_resolve, reject) => {
        signal.addEventListener('abort', () => { reject(new DOMException('aborted', 'AbortError')); }, { once: true });
      }),
    });
    queue.add('a');
    await settle(5);
    controller.abort();
    await run;
    assert.equal(queue.numRequeues('a'), 0);
    assert.equal(queue.len, 1, 'a is queued for the next run');
  });

  it('contains handlers that throw synchronously or reject with non-errors', async () => {
    const clock = new FakeClock();
    const queue = new RateLimitingWorkQueue<string>({ clock });
    const logger = new RecordingLogger();
    const controller = new AbortController();
    const run = runWorkers(queue, {
      workers: 3,
      signal: controller.signal,
      maxRetries: 1,
      logger,
      handler: (item) => {
        if (item === 'sync') throw new Error('sync boom');
        if (item === 'string') return Promise.reject('a string'); // eslint-disable-line @typescript-eslint/prefer-promise-reject-errors
        return Promise.resolve({ requeueAfterMs: Number.NaN });
      },
    });
    for (const item of ['sync', 'string', 'bad-result']) queue.add(item);
    for (let i = 0; i < 5; i++) {
      await settle(5);
      clock.advance(1_000);
    }
    controller.abort();
    await run;
    assert.deepEqual(unhandled, []);
    const drops = logger.lines.filter((line) => line.level === 'warn').map((line) => line.message).sort();
    assert.equal(drops.length, 3);
    assert.match(drops[0] ?? '', /bad-result .*requeueAfterMs/);
    assert.match(drops[1] ?? '', /string .*a string/);
    assert.match(drops[2] ?? '', /sync .*sync boom/);
  });

  it('returns when the queue shuts down, leaving no timer behind', async () => {
    const clock = new FakeClock();
    const queue = new RateLimitingWorkQueue<string>({ clock });
    const controller = new AbortController();
    const run = runWorkers(queue, { workers: 2, signal: controller.signal, handler: () => Promise.reject(new Error('retry me')) });
    queue.add('a');
    queue.add('b');
    await settle(5);
    assert.equal(clock.pendingTimers, 1, 'retries wait on the single delay timer');
    queue.shutDown();
    await run;
    assert.equal(clock.pendingTimers, 0);
    assert.equal(controller.signal.aborted, false);
  });

  it('finishes queued work when the queue drains', async () => {
    const queue = new RateLimitingWorkQueue<string>({ clock: new FakeClock() });
    const controller = new AbortController();
    const handled: string[] = [];
    const run = runWorkers(queue, {
      signal: controller.signal,
      handler: async (item) => { await tick(); handled.push(item); },
    });
    for (const item of ['a', 'b', 'c']) queue.add(item);
    await queue.shutDownWithDrain();
    await run;
    assert.deepEqual(handled, ['a', 'b', 'c']);
  });

  it('resolves at once for an aborted signal, and validates its options', async () => {
    const queue = new RateLimitingWorkQueue<string>({ clock: new FakeClock() });
    queue.add('a');
    await runWorkers(queue, { signal: AbortSignal.abort(), handler: () => Promise.resolve() });
    assert.equal(queue.len, 1);
    const signal = new AbortController().signal;
    assert.throws(() => runWorkers(queue, { signal, workers: 0, handler: () => Promise.resolve() }), /runWorkers option workers must be an integer >= 1, got 0/);
    assert.throws(() => runWorkers(queue, { signal, maxRetries: -1, handler: () => Promise.resolve() }), /maxRetries must be an integer >= 0, got -1/);
    assert.throws(() => runWorkers(queue, { signal: undefined as unknown as AbortSignal, handler: () => Promise.resolve() }), /signal must be an AbortSignal/);
  });
});
