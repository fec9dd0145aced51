import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock, KubeApiError } from '../util/index.ts';
import { LeaderElector, type ElectionOutcome, type LeaseClient, type LeaseRecord, type LeaderElectorOptions, type StoredLease } from './leader.ts';
import { settle } from '../../fixtures/support/index.ts';

/** One Lease in memory with the API server's optimistic concurrency; `failing` makes every call reject. */
class FakeLeases implements LeaseClient {
  readonly description = 'ns/lease';
  stored: StoredLease | undefined;
  failing = false;
  writes = 0;
  #rv = 0;

  #check(): void {
    if (this.failing) throw new KubeApiError({ cluster: 'local', statusCode: 503, status: { reason: 'ServiceUnavailable' } });
  }

  get(): Promise<StoredLease | undefined> {
    this.#check();
    return Promise.resolve(this.stored);
  }

  create(record: LeaseRecord): Promise<StoredLease> {
    this.#check();
    if (this.stored !== undefined) throw new KubeApiError({ cluster: 'local', statusCode: 409, status: { reason: 'AlreadyExists' } });
    return Promise.resolve(this.#write(record));
  }

  update(record: LeaseRecord, resourceVersion: string): Promise<StoredLease> {
    this.#check();
    if (this.stored?.resourceVersion !== resourceVersion) throw new KubeApiError({ cluster: 'local', statusCode: 409, status: { reason: 'Conflict' } });
    return Promise.resolve(this.#write(record));
  }

  #write(record: LeaseRecord): StoredLease {
    this.writes += 1;
    this.stored = { resourceVersion: String(++this.#rv), record: { ...record } };
    return this.stored;
  }
}

/** Moves the fake clock in small steps, letting the loops run between them. */
async function advance(clock: FakeClock, ms: number, step = 100): Promise<void> {
  for (let t = 0; t < ms; t += step) {
    clock.advance(Math.min(step, ms - t));
    await settle(5);
  }
}

interface Candidate {
  readonly elector: LeaderElector;
  readonly stop: () => void;
  readonly outcome: Promise<ElectionOutcome>;
  /** How `run` ended, once it has; lets a test assert it ended without awaiting (and hanging). */
  readonly settled: () => ElectionOutcome | undefined;
  readonly events: string[];
}

function candidate(identity: string, leases: FakeLeases, clock: FakeClock, options: Partial<LeaderElectorOptions> = {}): Candidate {
  const elector = new LeaderElector({ leases, identity, clock, random: () => 0, ...options });
  const controller = new AbortController();
  const events: string[] = [];
  const outcome = elector.run(controller.signal, {
    onStartedLeading: () => events.push('started'),
    onStoppedLeading: () => events.push('stopped'),
    onNewLeader: (id) => events.push(`leader=${id}`),
  });
  let settled: ElectionOutcome | undefined;
  void outcome.then((o) => { settled = o; });
  return { elector, stop: () => { controller.abort(); }, outcome, settled: () => settled, events };
}

describe('LeaderElector', () => {
  it('creates a missing lease, renews it every retry period, and releases it on shutdown', async () => {
    const clock = new FakeClock(1_700_000_000_000);
    const leases = new FakeLeases();
    const a = candidate('a', leases, clock);
    assert.equal(a.elector.state, 'unknown');
    await settle(5);
    assert.equal(a.elector.isLeader, true);
    assert.deepEqual(a.events, ['leader=a', 'started']);
    assert.equal(leases.stored?.record.holderIdentity, 'a');
    assert.equal(leases.stored.record.leaseDurationSeconds, 30);
    assert.equal(leases.stored.record.renewTime, '2023-11-14T22:13:20.000000Z', 'MicroTime has six fractional digits');
    const writes = leases.writes;
    await advance(clock, 10_000);
    assert.equal(leases.writes - writes, 5, 'one renewal per 2 s');
    assert.equal(leases.stored.record.renewTime, '2023-11-14T22:13:30.000000Z');
    assert.equal(leases.stored.record.acquireTime, '2023-11-14T22:13:20.000000Z', 'renewals keep the acquire time');

    a.stop();
    assert.equal(await a.outcome, 'released');
    assert.equal(leases.stored.record.holderIdentity, '');
    assert.equal(leases.stored.record.leaseTransitions, 0);
    assert.equal(a.elector.isLeader, false);
    assert.deepEqual(a.events.slice(-1), ['stopped']);
    assert.equal(clock.pendingTimers, 0, 'no timer left behind');
  });

  it('lets only one of two candidates lead, and hands over within a retry period of a release', async () => {
    const clock = new FakeClock();
    const leases = new FakeLeases();
    const a = candidate('a', leases, clock);
    await settle(5);
    const b = candidate('b', leases, clock);
    await advance(clock, 20_000);
    assert.equal(a.elector.isLeader, true);
    assert.equal(b.elector.isLeader, false);
    assert.equal(b.elector.state, 'following', 'the follower knows where it stands');
    assert.equal(b.elector.holder, 'a');

    a.stop();
    assert.equal(await a.outcome, 'released');
    await advance(clock, 2_000);
    assert.equal(b.elector.isLeader, true, 'b took the released lease at its next attempt');
    assert.equal(leases.stored?.record.leaseTransitions, 1);
    b.stop();
    await b.outcome;
  });

  it('takes over from a candidate that died without releasing only after the lease duration', async () => {
    const clock = new FakeClock();
    const leases = new FakeLeases();
    const a = candidate('a', leases, clock, { releaseOnCancel: false });
    await settle(5);
    const b = candidate('b', leases, clock);
    await advance(clock, 4_000);
    a.stop(); // a "dies": its lease stays as last renewed
    assert.equal(await a.outcome, 'released');
    assert.equal(leases.stored?.record.holderIdentity, 'a');
    await advance(clock, 29_000);
    assert.equal(b.elector.isLeader, false, 'the lease is still valid');
    await advance(clock, 3_000);
    assert.equal(b.elector.isLeader, true);
    assert.equal(leases.stored.record.holderIdentity, 'b');
    assert.equal(leases.stored.record.leaseTransitions, 1);
    b.stop();
    await b.outcome;
  });

  it('honours the lease duration its holder recorded, not its own, measured from when it saw the record change', async () => {
    const clock = new FakeClock();
    const leases = new FakeLeases();
    // Someone else (another program, a longer setting) holds the lease for an hour and stopped renewing.
    leases.stored = { resourceVersion: 'x1', record: { holderIdentity: 'other', leaseDurationSeconds: 3_600, acquireTime: undefined, renewTime: undefined, leaseTransitions: 7 } };
    const b = candidate('b', leases, clock, { leaseDurationMs: 4_000, renewDeadlineMs: 3_000, retryPeriodMs: 1_000 });
    await advance(clock, 3_590_000, 10_000);
    assert.equal(b.elector.isLeader, false, 'not taken after its own 4 s, nor after 59 min 50 s');
    assert.equal(leases.stored.record.holderIdentity, 'other');
    assert.equal(leases.writes, 0);
    // The holder renews (the record changes): the hour counts again from this sighting.
    leases.stored = { resourceVersion: 'x2', record: { ...leases.stored.record, leaseDurationSeconds: 60 } };
    await advance(clock, 50_000, 1_000);
    assert.equal(b.elector.isLeader, false, 'the renewed record, now for 60 s, is 50 s old');
    await advance(clock, 12_000, 1_000);
    assert.equal(b.elector.isLeader, true, '60 s after it saw the last change');
    assert.equal(leases.stored.record.holderIdentity, 'b');
    assert.equal(leases.stored.record.leaseDurationSeconds, 4, 'the new holder records its own duration');
    assert.equal(leases.stored.record.leaseTransitions, 8);
    b.stop();
    await b.outcome;
  });

  it('falls back to its own duration when the record has none', async () => {
    const clock = new FakeClock();
    const leases = new FakeLeases();
    leases.stored = { resourceVersion: 'x1', record: { holderIdentity: 'other', leaseDurationSeconds: 0, acquireTime: undefined, renewTime: undefined, leaseTransitions: 0 } };
    const b = candidate('b', leases, clock);
    await advance(clock, 29_000);
    assert.equal(b.elector.isLeader, false, 'a record without a duration is not taken at once');
    await advance(clock, 3_000);
    assert.equal(b.elector.isLeader, true, 'but after our own 30 s');
    b.stop();
    await b.outcome;
  });

  it('wraps leaseTransitions at the int32 limit instead of writing a value the API server refuses', async () => {
    for (const [before, after] of [[2_147_483_646, 2_147_483_647], [2_147_483_647, 0], [-5, 1], [2 ** 40, 1]] as const) {
      const clock = new FakeClock();
      const leases = new FakeLeases();
      leases.stored = { resourceVersion: 'x1', record: { holderIdentity: '', leaseDurationSeconds: 1, acquireTime: undefined, renewTime: undefined, leaseTransitions: before } };
      const b = candidate('b', leases, clock);
      await settle(5);
      assert.equal(b.elector.isLeader, true);
      assert.equal(leases.stored.record.leaseTransitions, after, `${before} + 1`);
      b.stop();
      await b.outcome;
      assert.ok(leases.stored.record.leaseTransitions >= 0 && leases.stored.record.leaseTransitions <= 2_147_483_647, 'the release writes a valid count too');
    }
  });

  it('gives leadership up when renewals fail past the renew deadline, not before', async () => {
    const clock = new FakeClock();
    const leases = new FakeLeases();
    const a = candidate('a', leases, clock);
    await settle(5);
    leases.failing = true;
    await advance(clock, 7_000);
    assert.equal(a.elector.isLeader, true, 'still within the renew deadline');
    leases.failing = false;
    await advance(clock, 2_000);
    assert.equal(a.elector.isLeader, true, 'a late renewal succeeded');
    leases.failing = true;
    await advance(clock, 8_000);
    assert.equal(a.elector.isLeader, true, 'the deadline counts from the last renewal (at 8 s)');
    await advance(clock, 4_000);
    // Asserted on what has happened by now, not awaited: a renew deadline that never fires must
    // fail here, not hang until the test runner's timeout.
    assert.equal(a.settled(), 'lost', 'run() ended \'lost\' once renewals had failed for the 10 s renew deadline');
    assert.equal(a.elector.isLeader, false);
    assert.deepEqual(a.events, ['leader=a', 'started', 'stopped']);
    assert.equal(clock.pendingTimers, 0);
  });

  it('stays unknown while the API cannot be read, and stops campaigning on abort', async () => {
    const clock = new FakeClock();
    const leases = new FakeLeases();
    leases.failing = true;
    const a = candidate('a', leases, clock);
    await advance(clock, 10_000);
    assert.equal(a.elector.state, 'unknown');
    a.stop();
    assert.equal(await a.outcome, 'stopped');
    assert.deepEqual(a.events, []);
    assert.equal(clock.pendingTimers, 0);
  });

  it('validates its options with client-go rules', () => {
    const leases = new FakeLeases();
    assert.throws(() => new LeaderElector({ leases, identity: '' }), /identity/);
    assert.throws(() => new LeaderElector({ leases, identity: 'a', leaseDurationMs: 10_000 }), /leaseDurationMs \(10000\) must be greater than renewDeadlineMs/);
    assert.throws(() => new LeaderElector({ leases, identity: 'a', renewDeadlineMs: 2_000 }), /renewDeadlineMs \(2000\) must be greater than 1.2/);
    assert.throws(() => new LeaderElector({ leases, identity: 'a', leaseDurationMs: 30_500 }), /whole number of seconds/);
    assert.throws(() => new LeaderElector({ leases, identity: 'a', retryPeriodMs: -1 }), TypeError);
  });
});
