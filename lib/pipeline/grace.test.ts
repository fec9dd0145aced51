import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decidePromotion } from './decide.ts';
import { ProgressingGrace, type ObservedEnvironment } from './grace.ts';
import { environmentStatusOf } from './observe.ts';
import type { EnvironmentStatus, PromotionRecord, TargetStatus } from './types.ts';

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

describe('a pull request waiting for its merge, while Flux reconciles its source', () => {
  const dev = (t: TargetStatus): TargetStatus => ({ ...t, namespace: 'dev' });
  const stagingAt = (revision: string): TargetStatus => ({ ...readyAt(revision), namespace: 'staging' });
  const pending: PromotionRecord = { environment: 'staging', revision: '1.1.0', strategy: 'git', state: 'Pending', attempts: 1, startedAt: new Date(T0).toISOString(), pullRequest: { number: 7, url: 'https://git.example/pull/7' } };
  const before = [environmentStatusOf('dev', [dev(readyAt('1.1.0'))]), environmentStatusOf('staging', [stagingAt('1.0.0')])];

  function decideAt(grace: ProgressingGrace, now: number): string {
    const held = grace.hold('p', [{ name: 'dev', targets: [dev(progressingAt('1.1.0'))] }, { name: 'staging', targets: [stagingAt('1.0.0')] }], before, now);
    const environments = held.environments.map((e) => environmentStatusOf(e.name, e.targets));
    return decidePromotion(environments, [pending], now).action;
  }

  it('is taken up again, not superseded, within the window; superseded only past it', () => {
    const grace = new ProgressingGrace({ windowMs: 30_000 });
    assert.equal(decideAt(grace, T0), 'promote', 'the poll of the open request goes on');
    assert.equal(decideAt(grace, T0 + 29_999), 'promote');
    assert.equal(decideAt(grace, T0 + 30_000), 'supersede', 'stuck Progressing: no longer ready');
  });

  it('was superseded at the first no-op reconcile without the grace (the bug of issue 22)', () => {
    assert.equal(decideAt(new ProgressingGrace({ windowMs: 0 }), T0), 'supersede');
  });
});
