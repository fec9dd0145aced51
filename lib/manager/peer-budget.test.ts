import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '../util/index.ts';
import { PeerBudget, peerKey } from './peer-budget.ts';

describe('PeerBudget', () => {
  it('lets a peer spend its burst, then one attempt per refill period; refunds give attempts back', () => {
    const clock = new FakeClock();
    const budget = new PeerBudget({ burst: 3, perSecond: 0.5, clock });
    for (let i = 0; i < 3; i++) assert.equal(budget.take('10.0.0.1'), true);
    assert.equal(budget.take('10.0.0.1'), false);
    assert.equal(budget.retryAfterSeconds('10.0.0.1'), 2);
    assert.equal(budget.take('10.0.0.2'), true, 'another peer has its own budget');
    clock.advance(1_999);
    assert.equal(budget.take('10.0.0.1'), false);
    clock.advance(1);
    assert.equal(budget.take('10.0.0.1'), true);
    budget.refund('10.0.0.1');
    assert.equal(budget.take('10.0.0.1'), true, 'the refunded attempt');
    assert.equal(budget.take('10.0.0.1'), false);
    clock.advance(3_600_000);
    for (let i = 0; i < 3; i++) assert.equal(budget.take('10.0.0.1'), true, 'refilled up to the burst, no further');
    assert.equal(budget.take('10.0.0.1'), false);
  });

  it('remembers at most maxPeers, forgetting the least recently seen', () => {
    const budget = new PeerBudget({ burst: 1, maxPeers: 2, clock: new FakeClock() });
    assert.equal(budget.take('a'), true);
    assert.equal(budget.take('b'), true);
    assert.equal(budget.take('a'), false, 'a was seen last');
    assert.equal(budget.take('c'), true);
    assert.equal(budget.size, 2);
    assert.equal(budget.take('a'), false, 'a is still remembered');
    assert.equal(budget.take('b'), true, 'b was forgotten: a full bucket again');
  });

  it('keys IPv4 (mapped or not) by address and IPv6 by its /64', () => {
    assert.equal(peerKey('10.1.2.3'), '10.1.2.3');
    assert.equal(peerKey('::ffff:10.1.2.3'), '10.1.2.3');
    assert.equal(peerKey('2001:db8:1:2:aaaa::1'), '2001:db8:1:2::/64');
    assert.equal(peerKey('2001:db8:1:2::ffff'), '2001:db8:1:2::/64');
    assert.equal(peerKey('2001:db8::1'), '2001:db8:0:0::/64');
    assert.equal(peerKey('::1'), '0:0:0:0::/64');
    assert.equal(peerKey('fe80::1%eth0'), 'fe80:0:0:0::/64');
    assert.equal(peerKey(undefined), 'unknown');
  });

  it('validates its options', () => {
    assert.throws(() => new PeerBudget({ burst: 0 }), /option burst must be a positive integer/);
    assert.throws(() => new PeerBudget({ perSecond: -1 }), /option perSecond must be a positive number/);
    assert.throws(() => new PeerBudget({ maxPeers: 1.5 }), /option maxPeers/);
  });
});
