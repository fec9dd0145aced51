// A webhook delivery's deadline, at each stage, on a fake clock: the delivery is still pending one
// millisecond before `timeoutMs` and has failed the moment the clock reaches it. Nothing here
// waits for the deadline: a deadline that never fires fails these tests at once, not by hanging
// until the runner's per-test timeout.
import assert from 'node:assert/strict';
import { after, before, describe, it, type TestContext } from 'node:test';
import { eventually } from '../../e2e/harness/index.ts';
import { HostileWebhookReceiver } from '../../fixtures/index.ts';
import { FakeClock } from '../util/index.ts';
import { PromotionError } from './errors.ts';
import { deliverWebhook, type WebhookDelivery, type WebhookResolver } from './webhook.ts';

const TIMEOUT_MS = 5_000;

/** A delivery's outcome as it stands, without awaiting it. */
interface Watched {
  readonly settled: () => boolean;
  readonly error: () => Error | undefined;
}

function watch(promise: Promise<number>): Watched {
  let settled = false;
  let error: Error | undefined;
  promise.then(() => { settled = true; }, (e: unknown) => {
    settled = true;
    error = e instanceof Error ? e : new Error(String(e));
  });
  return { settled: () => settled, error: () => error };
}

/** Lets whatever the clock's timers started (a rejection and its handlers) run: no wall-clock wait. */
async function turn(): Promise<void> {
  await new Promise((resolve) => { setImmediate(resolve); });
}

describe('webhook delivery deadline', () => {
  let receiver: HostileWebhookReceiver;
  before(async () => { receiver = await HostileWebhookReceiver.start(); });
  after(() => receiver.close());

  /** Starts a delivery on `clock`, stopped (its socket let go) when the test ends, whatever happened. */
  const deliver = (t: TestContext, clock: FakeClock, options: Partial<WebhookDelivery> = {}): Watched => {
    const stop = new AbortController();
    t.after(() => { stop.abort(new Error('the test ended')); });
    return watch(deliverWebhook({
      url: `${receiver.url}/hook`,
      body: { revision: '1.2.0' },
      idempotencyKey: 'uid/staging/1.2.0',
      timeoutMs: TIMEOUT_MS,
      clock,
      allowPrivateNetworks: true,
      signal: stop.signal,
      ...options,
    }));
  };

  /** Moves `clock` to one millisecond before the deadline (still pending), then onto it (failed). */
  async function expireAt(clock: FakeClock, delivery: Watched, stage: RegExp): Promise<void> {
    clock.advance(TIMEOUT_MS - 1);
    await turn();
    assert.equal(delivery.settled(), false, 'settled before its deadline');
    clock.advance(1);
    await turn();
    assert.equal(delivery.settled(), true, `still pending once the clock reached timeoutMs (${TIMEOUT_MS} ms)`);
    const err = delivery.error();
    assert.ok(err instanceof PromotionError, `expected a PromotionError, got ${String(err)}`);
    assert.match(err.message, new RegExp(`did not finish within ${TIMEOUT_MS} ms \\(${stage.source}\\)$`));
  }

  it('fires while the name is still resolving', { timeout: 10_000 }, async (t) => {
    const clock = new FakeClock();
    let asked = 0;
    const never: WebhookResolver = () => { asked += 1; return new Promise(() => undefined); };
    const delivery = deliver(t, clock, { url: 'http://hooks.example.com/x', resolve: never });
    await eventually('the name is being resolved', () => asked > 0, 5_000);
    await expireAt(clock, delivery, /connecting/);
  });

  it('fires while the receiver, having read the request, never answers; and drops the connection', { timeout: 10_000 }, async (t) => {
    const clock = new FakeClock();
    receiver.answer({ kind: 'silent' });
    const [count, open] = [receiver.received.length, receiver.openAnswers];
    const delivery = deliver(t, clock);
    await eventually('the request arrived', () => receiver.received.length > count, 5_000);
    await expireAt(clock, delivery, /waiting for the answer/);
    await eventually('the silent connection is dropped', () => receiver.openAnswers === open, 5_000);
  });

  it('fires while the receiver, having sent 2xx headers, never ends its answer; and drops the connection', { timeout: 10_000 }, async (t) => {
    const clock = new FakeClock();
    receiver.answer({ kind: 'hang-after-headers', status: 200 });
    const [count, open] = [receiver.received.length, receiver.openAnswers];
    const delivery = deliver(t, clock);
    await eventually('the receiver sent its headers', () => receiver.received.length > count, 5_000);
    await expireAt(clock, delivery, /(reading|waiting for) the answer/);
    await eventually('the hanging connection is dropped', () => receiver.openAnswers === open, 5_000);
  });
});
