import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ProgressingGrace, type ObservedEnvironment } from './grace.ts';
import type { EnvironmentStatus, TargetStatus } from './types.ts';

const T0 = Date.parse('2026-01-01T00:00:00Z');
const readyAt = (revision: string): TargetStatus => ({ cluster: 'local', namespace: 'apps', readable: true, exists: true, ready: true, revision });
const progressingAt = (revision: string): TargetStatus => ({ cluster: 'local', namespace: 'apps', readable: true, exists: true, ready: false, reason: 'Progressing', revision });
const observed = (t: TargetStatus): ObservedEnvironment[] => [{ name: 'staging', targets: [t] }];
const previous = (t: TargetStatus): EnvironmentStatus[] => [{ name: 'staging', ready: t.ready, ...(t.revision === undefined ? {} : { revision: t.revision }), targets: [t] }];

describe('ProgressingGrace', () => {
  it('keeps a target ready at R while Flux reconciles it at R, for the window, then lets it go', () => {
    const grace = new ProgressingGrace({ windowMs: 30_000 });
    const first = grace.hold('p', observed(progressingAt('1.0.0')), previous(readyAt('1.0.0')), T0);
    assert.deepEqual(first.environments[0]?.targets[0], readyAt('1.0.0'), 'no flicker: status says what it said');
    assert.equal(first.recheckInMs, 30_000);
    const later = grace.hold('p', observed(progressingAt('1.0.0')), previous(readyAt('1.0.0')), T0 + 29_000);
    assert.equal(later.environments[0]?.targets[0]?.ready, true, 'counted from when it was first seen Progressing');
    assert.equal(later.recheckInMs, 1_000);
    const past = grace.hold('p', observed(progressingAt('1.0.0')), previous(readyAt('1.0.0')), T0 + 30_000);
    assert.deepEqual(past.environments[0]?.targets[0], progressingAt('1.0.0'), 'past the window: not ready, reason Progressing');
    assert.equal(past.recheckInMs, undefined);
  });

  it('starts a new window for the next reconcile once the target was seen ready again', () => {
    const grace = new ProgressingGrace({ windowMs: 30_000 });
    grace.hold('p', observed(progressingAt('1.0.0')), previous(readyAt('1.0.0')), T0);
    grace.hold('p', observed(readyAt('1.0.0')), previous(readyAt('1.0.0')), T0 + 1_000);
    assert.equal(grace.size, 0, 'nothing is remembered of a target that is not Progressing');
    const next = grace.hold('p', observed(progressingAt('1.0.0')), previous(readyAt('1.0.0')), T0 + 60_000);
    assert.equal(next.environments[0]?.targets[0]?.ready, true);
  });

  it('holds nothing that was not ready at the same revision before', () => {
    const grace = new ProgressingGrace({ windowMs: 30_000 });
    assert.equal(grace.hold('a', observed(progressingAt('1.1.0')), previous(readyAt('1.0.0')), T0).environments[0]?.targets[0]?.ready, false, 'another revision');
    assert.equal(grace.hold('b', observed(progressingAt('1.0.0')), previous({ ...readyAt('1.0.0'), ready: false }), T0).environments[0]?.targets[0]?.ready, false, 'not ready before');
    assert.equal(grace.hold('c', observed(progressingAt('1.0.0')), undefined, T0).environments[0]?.targets[0]?.ready, false, 'no previous status');
    const suspended: TargetStatus = { ...progressingAt('1.0.0'), reason: 'Suspended' };
    assert.equal(grace.hold('d', observed(suspended), previous(readyAt('1.0.0')), T0).environments[0]?.targets[0]?.ready, false, 'only Progressing is held');
  });

  it('is off with a window of 0, refuses a bad window, and forgets a Pipeline', () => {
    assert.equal(new ProgressingGrace({ windowMs: 0 }).hold('p', observed(progressingAt('1.0.0')), previous(readyAt('1.0.0')), T0).environments[0]?.targets[0]?.ready, false);
    assert.throws(() => new ProgressingGrace({ windowMs: -1 }), /option windowMs must be a non-negative number/);
    const grace = new ProgressingGrace();
    grace.hold('p', observed(progressingAt('1.0.0')), previous(readyAt('1.0.0')), T0);
    assert.equal(grace.size, 1);
    grace.forget('p');
    assert.equal(grace.size, 0);
  });
});
