// The socket budget on its own: FIFO waiters, abort, release, idle reclaim, turns and EMFILE as
// "wait", on a fake clock (no real sleeps, no timing asserts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '../util/index.ts';
import { defaultMaxSockets, SocketBudget, SocketReclaimedError, type SlotHolder, type SocketSlot } from './budget.ts';
import { RecordingLogger, settle } from '../../fixtures/support/index.ts';

function emfile(): NodeJS.ErrnoException {
  return Object.assign(new Error('connect EMFILE 127.0.0.1:443 - Local (undefined:undefined)'), { code: 'EMFILE', errno: -24, syscall: 'connect' });
}

/** A holder whose state the test sets; `reclaimed` records the reasons it was asked to close. */
class TestHolder implements SlotHolder {
  busy = true;
  long = false;
  readonly reclaimed: Error[] = [];
  idle(): boolean { return !this.busy; }
  yieldable(): boolean { return !this.busy || this.long; }
  reclaim(reason: Error): void { this.reclaimed.push(reason); }
}

describe('SocketBudget', () => {
  it('serves waiters in order of arrival, one per released slot', async () => {
    const budget = new SocketBudget({ maxSockets: 2, clock: new FakeClock() });
    const never = new AbortController().signal;
    const first = await budget.acquire(never);
    const second = await budget.acquire(never);
    const order: number[] = [];
    const waiting = [1, 2, 3].map((n) => budget.acquire(never).then((slot) => { order.push(n); return slot; }));
    await settle(5);
    assert.deepEqual([budget.inUse, budget.waiting, order], [2, 3, []]);
    first.release();
    first.release(); // idempotent: frees one place, not two
    await settle(5);
    assert.deepEqual(order, [1]);
    second.release();
    await settle(5);
    assert.deepEqual(order, [1, 2]);
    const [one] = await Promise.all(waiting.slice(0, 1));
    one?.release();
    const all = await Promise.all(waiting);
    assert.deepEqual(order, [1, 2, 3]);
    for (const slot of all) slot.release();
    assert.deepEqual([budget.inUse, budget.waiting], [0, 0]);
  });

  it('a waiter that aborts leaves the line and its place goes to the next', async () => {
    const budget = new SocketBudget({ maxSockets: 1, clock: new FakeClock() });
    const never = new AbortController().signal;
    const held = await budget.acquire(never);
    const leaving = new AbortController();
    const aborted = budget.acquire(leaving.signal);
    let next: SocketSlot | undefined;
    const later = budget.acquire(never).then((slot) => { next = slot; });
    await settle(5);
    assert.equal(budget.waiting, 2);
    leaving.abort(new Error('caller left'));
    await assert.rejects(aborted, /caller left/);
    assert.equal(budget.waiting, 1);
    held.release();
    await later;
    assert.ok(next !== undefined, 'the next waiter got the slot the aborted one would have had');
    assert.equal(budget.inUse, 1);
    next.release();
    assert.equal(budget.inUse, 0);
  });

  it('closes an idle socket at once for a waiter, never a busy one', async () => {
    const budget = new SocketBudget({ maxSockets: 2, clock: new FakeClock() });
    const never = new AbortController().signal;
    const busy = new TestHolder();
    const idle = new TestHolder();
    idle.busy = false;
    (await budget.acquire(never)).hold(busy);
    const idleSlot = await budget.acquire(never);
    idleSlot.hold(idle);
    const waiting = budget.acquire(never);
    await settle(5);
    assert.equal(idle.reclaimed.length, 1);
    assert.ok(idle.reclaimed[0] instanceof SocketReclaimedError);
    assert.equal(busy.reclaimed.length, 0);
    idleSlot.release(); // what its socket's 'close' does
    (await waiting).release();
  });

  it('hold() of an idle socket closes it at once for a waiter already queued, without waiting for a turn', async () => {
    const clock = new FakeClock();
    const budget = new SocketBudget({ maxSockets: 1, turnMs: 1000, clock });
    const never = new AbortController().signal;
    // The slot is granted, its socket still connecting: nothing to reclaim when the waiter arrives.
    const slot = await budget.acquire(never);
    let got = false;
    const waiting = budget.acquire(never).then((s) => { got = true; return s; });
    await settle(5);
    assert.equal(budget.waiting, 1);
    const idle = new TestHolder();
    idle.busy = false;
    slot.hold(idle); // the socket is open, and idle: it goes for the waiter now, not at the turn
    assert.equal(idle.reclaimed.length, 1, 'reclaimed on hold(), with the clock still at 0');
    assert.ok(idle.reclaimed[0] instanceof SocketReclaimedError);
    assert.equal(clock.now(), 0);
    assert.equal(got, false, 'the slot is handed on when the socket has closed');
    slot.release(); // what its socket's 'close' does
    (await waiting).release();
    assert.deepEqual([budget.inUse, budget.waiting], [0, 0]);
  });

  it('hold() of a busy socket reclaims nothing for a waiter already queued', async () => {
    const budget = new SocketBudget({ maxSockets: 1, turnMs: 1000, clock: new FakeClock() });
    const never = new AbortController().signal;
    const slot = await budget.acquire(never);
    const aborting = new AbortController();
    const waiting = budget.acquire(aborting.signal);
    await settle(5);
    const busy = new TestHolder();
    slot.hold(busy);
    assert.equal(busy.reclaimed.length, 0);
    aborting.abort(new Error('gave up'));
    await assert.rejects(waiting, /gave up/);
    slot.release();
  });

  it('after turnMs closes the longest-held socket that carries only watches, so the waiter gets its turn', async () => {
    const clock = new FakeClock();
    const budget = new SocketBudget({ maxSockets: 2, turnMs: 1000, clock });
    const never = new AbortController().signal;
    const listing = new TestHolder(); // a LIST in flight: never cut
    const watching = new TestHolder();
    watching.long = true;
    (await budget.acquire(never)).hold(listing);
    const watchSlot = await budget.acquire(never);
    watchSlot.hold(watching);
    let got = false;
    const waiting = budget.acquire(never).then((slot) => { got = true; return slot; });
    clock.advance(999);
    await settle(5);
    assert.deepEqual([watching.reclaimed.length, listing.reclaimed.length], [0, 0], 'not before the turn');
    clock.advance(1);
    await settle(5);
    assert.deepEqual([watching.reclaimed.length, listing.reclaimed.length], [1, 0]);
    assert.equal(got, false, 'the slot is handed on when the socket has closed');
    watchSlot.release();
    (await waiting).release();
  });

  it('every waiter due gets its turn in the same round; a socket held less than turnMs is left alone', async () => {
    const clock = new FakeClock();
    const budget = new SocketBudget({ maxSockets: 3, turnMs: 1000, clock });
    const never = new AbortController().signal;
    const watching = (): TestHolder => Object.assign(new TestHolder(), { long: true });
    const [a, b, c] = [watching(), new TestHolder(), watching()]; // b: a LIST in flight
    const slots = [await budget.acquire(never), await budget.acquire(never), await budget.acquire(never)];
    slots[0]?.hold(a);
    slots[1]?.hold(b);
    slots[2]?.hold(c);
    const waiting = [budget.acquire(never), budget.acquire(never), budget.acquire(never)];
    await settle(5);
    clock.advance(600);
    slots[2]?.release(); // c's socket closed on its own: the first waiter gets it
    const first = await waiting[0];
    const d = watching();
    first?.hold(d);
    clock.advance(400);
    await settle(5);
    assert.deepEqual([a, b, c, d].map((h) => h.reclaimed.length), [1, 0, 0, 0], 'two waiters due: a yields; b is busy; d, fresh, keeps its turn');
    const e = watching();
    slots[0]?.release();
    const second = await waiting[1];
    second?.hold(e);
    clock.advance(1000);
    await settle(5);
    assert.deepEqual([d, e].map((h) => h.reclaimed.length), [1, 0], 'next round: d has had its turn, e has not');
    first?.release();
    const last = await waiting[2];
    for (const slot of [slots[1], second, last]) slot?.release();
    assert.deepEqual([budget.inUse, budget.waiting], [0, 0]);
  });

  it('EMFILE on connect is a wait: the budget shrinks to what is open, the connect retries when a slot frees, logged once', async () => {
    const clock = new FakeClock();
    const logger = new RecordingLogger();
    const warnings = (): string[] => logger.messages('warn');
    const budget = new SocketBudget({ maxSockets: 10, recoverMs: 5000, clock, logger });
    const never = new AbortController().signal;
    const open = await budget.acquire(never); // one socket of ours is open
    let attempts = 0;
    const connected = budget.open(never, (slot) => {
      attempts += 1;
      if (attempts <= 3) return Promise.reject(emfile());
      return Promise.resolve(slot);
    });
    await settle(5);
    assert.equal(attempts, 1);
    assert.deepEqual([budget.limit, budget.inUse, budget.waiting], [1, 1, 1], 'held to the one socket open');
    open.release(); // a descriptor came back: the connect is tried again, fails twice more, waits
    await settle(5);
    assert.equal(attempts, 2);
    assert.equal(budget.limit, 0);
    assert.equal(warnings().length, 1, `one warning for the episode, got ${JSON.stringify(warnings())}`);
    clock.advance(5000); // the episode ends: the whole budget again; the third try fails: a new episode
    await settle(5);
    assert.deepEqual([attempts, budget.limit, budget.waiting], [3, 0, 1]);
    clock.advance(5000);
    const slot = await connected;
    assert.equal(attempts, 4);
    assert.equal(budget.limit, 10);
    assert.equal(warnings().length, 2, `one warning per episode, got ${JSON.stringify(warnings())}`);
    slot.release();
    assert.equal(budget.inUse, 0);
  });

  it('any other connect failure is the caller\'s error, and frees the slot', async () => {
    const budget = new SocketBudget({ maxSockets: 1, clock: new FakeClock() });
    const refused = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    await assert.rejects(budget.open(new AbortController().signal, () => Promise.reject(refused)), /ECONNREFUSED/);
    assert.deepEqual([budget.inUse, budget.limit], [0, 1]);
  });

  it('sizes the default from the soft descriptor limit, with a reserve', () => {
    const limits = 'Limit                     Soft Limit           Hard Limit           Units\nMax open files            1024                 1048576              files\n';
    assert.equal(defaultMaxSockets(limits), 960);
    assert.equal(defaultMaxSockets(limits.replace('1024 ', '65536')), 65536 - 4096);
    assert.equal(defaultMaxSockets('nothing here'), 960);
    assert.ok(defaultMaxSockets() >= 1);
    assert.throws(() => new SocketBudget({ maxSockets: 0 }), /maxSockets/);
    assert.throws(() => new SocketBudget({ turnMs: 1.5 }), /turnMs/);
  });
});
