import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { leaseTimings } from './lease-timings.ts';
import { LeaderElector, MemoryLeases, Sharder, type LeaseClient } from './index.ts';

describe('leaseTimings', () => {
  it('applies client-go\'s defaults: 30 s lease, 10 s renew deadline, 2 s retry', () => {
    assert.deepEqual(leaseTimings('X', {}), { leaseDurationMs: 30_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 });
    assert.deepEqual(leaseTimings('X', { leaseDurationMs: 2_000, renewDeadlineMs: 1_500, retryPeriodMs: 200 }), { leaseDurationMs: 2_000, renewDeadlineMs: 1_500, retryPeriodMs: 200 });
  });

  it('refuses each broken rule with a TypeError naming the component and the option', () => {
    const cases: [Parameters<typeof leaseTimings>[1], string][] = [
      [{ retryPeriodMs: 0 }, 'X option retryPeriodMs must be a positive number, got 0'],
      [{ renewDeadlineMs: Number.NaN }, 'X option renewDeadlineMs must be a positive number, got NaN'],
      [{ leaseDurationMs: -1 }, 'X option leaseDurationMs must be a positive number, got -1'],
      [{ leaseDurationMs: 30_500 }, 'X option leaseDurationMs must be a whole number of seconds (the Lease stores seconds), got 30500'],
      [{ leaseDurationMs: 500, renewDeadlineMs: 300, retryPeriodMs: 100 }, 'X option leaseDurationMs must be a whole number of seconds (the Lease stores seconds), got 500'],
      [{ leaseDurationMs: 10_000 }, 'X option leaseDurationMs (10000) must be greater than renewDeadlineMs (10000)'],
      // 1.2 × 2 000 = 2 400: the longest jittered wait must end before the renew deadline.
      [{ renewDeadlineMs: 2_400 }, 'X option renewDeadlineMs (2400) must be greater than 1.2 × retryPeriodMs (2000)'],
    ];
    for (const [options, message] of cases) assert.throws(() => leaseTimings('X', options), { name: 'TypeError', message }, JSON.stringify(options));
    assert.equal(leaseTimings('X', { renewDeadlineMs: 2_401 }).renewDeadlineMs, 2_401);
  });

  it('is what leader election and the sharder both check', () => {
    const unused = () => Promise.reject(new Error('no I/O in a constructor'));
    const lease: LeaseClient = { description: 'ops/l', get: unused, create: unused, update: unused };
    assert.throws(() => new LeaderElector({ leases: lease, identity: 'a', leaseDurationMs: 30_500 }), { message: /^LeaderElector option leaseDurationMs must be a whole number of seconds/ });
    const store = new MemoryLeases().client('a');
    assert.throws(() => new Sharder({ leases: store, group: 'g', identity: 'a', keys: () => [], leaseDurationMs: 30_500 }), { message: /^Sharder option leaseDurationMs must be a whole number of seconds/ });
  });
});
