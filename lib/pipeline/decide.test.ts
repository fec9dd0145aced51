import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decidePromotion, retryDueAt, settleCommitted, withRecord } from './decide.ts';
import { MAX_PROMOTIONS_PER_ENVIRONMENT, type EnvironmentStatus, type PromotionRecord } from './types.ts';

const policy = { initialMs: 1_000, maxMs: 8_000 };
const T0 = Date.parse('2025-01-01T00:00:00Z');

/** An environment: revision per target, all ready unless told; `null` revision = none. */
function env(name: string, revisions: readonly (string | null)[], options: { ready?: boolean; readable?: boolean } = {}): EnvironmentStatus {
  const targets = revisions.map((r) => ({
    cluster: 'local',
    namespace: `${name}-${r ?? 'none'}`,
    ready: options.ready ?? true,
    ...(options.readable === undefined ? { readable: true } : { readable: options.readable }),
    ...(r === null ? {} : { revision: r }),
  }));
  const first = targets[0]?.revision;
  const revision = first !== undefined && targets.every((x) => x.revision === first) ? first : undefined;
  return { name, ready: revision !== undefined && targets.every((x) => x.ready && x.readable), ...(revision === undefined ? {} : { revision }), targets };
}

function record(environment: string, revision: string, state: PromotionRecord['state'], attempts = 1, finishedAt?: number): PromotionRecord {
  return {
    environment,
    revision,
    strategy: 'patch',
    state,
    attempts,
    startedAt: new Date(T0).toISOString(),
    ...(finishedAt === undefined ? {} : { finishedAt: new Date(finishedAt).toISOString() }),
  };
}

describe('decidePromotion', () => {
  it('promotes a revision ready everywhere in dev to staging', () => {
    const d = decidePromotion([env('dev', ['2', '2']), env('staging', ['1']), env('prod', ['1'])], [], T0, policy);
    assert.deepEqual(d, { action: 'promote', from: 'dev', to: 'staging', revision: '2', attempt: 1, resumed: false, startedAt: undefined });
  });

  it('never promotes a revision that is not ready everywhere in the source', () => {
    assert.deepEqual(decidePromotion([env('dev', ['2', '1']), env('staging', ['1'])], [], T0, policy), { action: 'none' }, 'targets disagree');
    assert.deepEqual(decidePromotion([env('dev', ['2'], { ready: false }), env('staging', ['1'])], [], T0, policy), { action: 'none' }, 'not ready');
    assert.deepEqual(decidePromotion([env('dev', ['2'], { readable: false }), env('staging', ['1'])], [], T0, policy), { action: 'none' }, 'unreadable');
  });

  it('never skips an environment: prod only ever gets what staging is ready at', () => {
    const d = decidePromotion([env('dev', ['3']), env('staging', ['3'], { ready: false }), env('prod', ['1'])], [record('staging', '3', 'Succeeded')], T0, policy);
    assert.deepEqual(d, { action: 'none' });
    const next = decidePromotion([env('dev', ['3']), env('staging', ['3']), env('prod', ['1'])], [record('staging', '3', 'Succeeded')], T0, policy);
    assert.equal(next.action === 'promote' && `${next.from}->${next.to}@${next.revision}`, 'staging->prod@3');
  });

  it('does nothing when the next environment is already at the revision', () => {
    assert.deepEqual(decidePromotion([env('dev', ['2']), env('staging', ['2'], { ready: false })], [], T0, policy), { action: 'none' });
  });

  it('promotes at most once per revision and environment', () => {
    // staging was promoted to 2, then rolled back by hand to 1: no second promotion of 2.
    assert.deepEqual(decidePromotion([env('dev', ['2']), env('staging', ['1'])], [record('staging', '2', 'Succeeded')], T0, policy), { action: 'none' });
  });

  it('waits while the next environment cannot be read', () => {
    assert.deepEqual(decidePromotion([env('dev', ['2']), env('staging', ['1'], { readable: false })], [], T0, policy), { action: 'none' });
    const loading = { ...env('staging', ['1']), targets: [{ cluster: 'local', namespace: 's', ready: false }] };
    assert.deepEqual(decidePromotion([env('dev', ['2']), loading], [], T0, policy), { action: 'none' });
  });

  it('resumes a Pending promotion (a restart mid-promotion) instead of starting another', () => {
    const pending = record('staging', '2', 'Pending', 1);
    const d = decidePromotion([env('dev', ['2']), env('staging', ['1'])], [pending], T0, policy);
    assert.deepEqual(d, { action: 'promote', from: 'dev', to: 'staging', revision: '2', attempt: 2, resumed: true, startedAt: pending.startedAt });
  });

  it('resumes a Pending promotion even when its target already shows the revision (it may be half done)', () => {
    const d = decidePromotion([env('dev', ['2']), env('staging', ['2', '1'])], [record('staging', '2', 'Pending')], T0, policy);
    assert.equal(d.action, 'promote');
  });

  it('supersedes a Pending promotion whose source moved on, rather than promote a revision no longer ready', () => {
    const pending = record('staging', '2', 'Pending');
    const d = decidePromotion([env('dev', ['3']), env('staging', ['1'])], [pending], T0, policy);
    assert.deepEqual(d, { action: 'supersede', record: pending, reason: 'environment dev is no longer ready at 2' });
    const gone = decidePromotion([env('dev', ['3'])], [pending], T0, policy);
    assert.equal(gone.action, 'supersede');
    const first = decidePromotion([env('staging', ['3'])], [pending], T0, policy);
    assert.equal(first.action, 'supersede', 'the first environment is never promoted into');
  });

  it('retries a failed promotion with backoff, and reports when it falls due', () => {
    const failed = record('staging', '2', 'Failed', 2, T0);
    assert.equal(retryDueAt(failed, policy), T0 + 2_000);
    const envs = [env('dev', ['2']), env('staging', ['1'])];
    assert.deepEqual(decidePromotion(envs, [failed], T0 + 500, policy), { action: 'none', retryInMs: 1_500 });
    const d = decidePromotion(envs, [failed], T0 + 2_000, policy);
    assert.equal(d.action === 'promote' && d.attempt, 3);
    assert.equal(retryDueAt(record('staging', '2', 'Failed', 30, T0), policy), T0 + 8_000, 'capped');
  });

  it('lets a later pair proceed while an earlier one waits for its retry', () => {
    const envs = [env('dev', ['3']), env('staging', ['2']), env('prod', ['1'])];
    const d = decidePromotion(envs, [record('staging', '3', 'Failed', 1, T0), record('staging', '2', 'Succeeded')], T0, policy);
    assert.equal(d.action === 'promote' && `${d.to}@${d.revision}`, 'prod@2');
  });
});

describe('a git promotion is done when its environment runs it', () => {
  const committed = (environment: string, revision: string, at = T0): PromotionRecord => ({ ...record(environment, revision, 'Committed'), strategy: 'git', commit: 'c'.repeat(40), message: `committed ${'c'.repeat(40)} to main`, committedAt: new Date(at).toISOString() });
  const text = (ms: number): string => new Date(ms).toISOString();

  it('stays Committed until every target is ready at the revision, then Succeeded', () => {
    const c = committed('staging', '2');
    assert.deepEqual(settleCommitted([env('dev', ['2']), env('staging', ['1'])], [c], T0 + 1_000, text(T0 + 1_000)), [], 'pushed, not applied');
    assert.deepEqual(settleCommitted([env('dev', ['2']), env('staging', ['2'], { ready: false })], [c], T0 + 1_000, text(T0 + 1_000)), [], 'applied to the spec, not ready');
    const [done] = settleCommitted([env('dev', ['2']), env('staging', ['2'])], [c], T0 + 2_000, text(T0 + 2_000));
    assert.ok(done !== undefined);
    assert.equal(done.applied, true);
    assert.deepEqual([done.record.state, done.record.finishedAt], ['Succeeded', text(T0 + 2_000)]);
    assert.match(done.record.message ?? '', /^committed c{40} to main; staging runs 2$/);
  });

  it('fails past the apply timeout, saying why the environment is not ready', () => {
    const staging = { ...env('staging', ['2'], { ready: false }), reason: 'Suspended' as const };
    assert.deepEqual(settleCommitted([env('dev', ['2']), staging], [committed('staging', '2')], T0 + 599_999, text(T0), 600_000), []);
    const [late] = settleCommitted([env('dev', ['2']), staging], [committed('staging', '2')], T0 + 600_000, text(T0 + 600_000), 600_000);
    assert.ok(late !== undefined);
    assert.equal(late.applied, false);
    assert.equal(late.record.state, 'Failed');
    assert.match(late.record.message ?? '', /did not run 2 within 600 s \(Suspended\)/);
  });

  it('waits for a committed environment before promoting into it again, and says when it falls due', () => {
    const envs = [env('dev', ['3']), env('staging', ['1'], { ready: false })];
    assert.deepEqual(decidePromotion(envs, [committed('staging', '2')], T0 + 1_000, policy, { applyTimeoutMs: 10_000 }), { action: 'none', retryInMs: 9_000 });
  });

  it('passes nothing on from an environment whose own promotion is still Committed (a commit-status gate holds it) or failed its gate, and never asks for an immediate requeue past due', () => {
    // staging runs 2, but its promotion waits for its commit's statuses: prod does not take 2 yet.
    const envs = [env('dev', ['2']), env('staging', ['2']), env('prod', ['1'])];
    assert.deepEqual(decidePromotion(envs, [committed('staging', '2')], T0 + 700_000, policy, { applyTimeoutMs: 600_000 }), { action: 'none' });
    assert.equal(decidePromotion(envs, [{ ...committed('staging', '2'), state: 'Succeeded' }], T0 + 700_000, policy).action, 'promote', 'once Succeeded it moves on');
    const gateFailed: PromotionRecord = { ...committed('staging', '2'), state: 'Failed', commitStatuses: { state: 'Failed', message: 'commit status "ci" is failure' } };
    assert.deepEqual(decidePromotion(envs, [gateFailed], T0 + 700_000, policy), { action: 'none' }, 'a revision that failed its checks goes no further');
    assert.equal(decidePromotion(envs, [{ ...committed('staging', '2'), state: 'Failed' }], T0 + 700_000, policy).action, 'promote', 'an apply timeout, as before, does not hold a revision the environment runs now');
  });

  it('never promotes an ⟨environment, revision⟩ carried out already, not even to retry a failure', () => {
    const envs = [env('dev', ['2']), env('staging', ['1'])];
    const failed = record('staging', '2', 'Failed', 1, T0);
    const carried = [{ environment: 'staging', revision: '2', at: new Date(T0).toISOString() }];
    assert.deepEqual(decidePromotion(envs, [failed], T0 + 60_000, policy, { committed: carried }), { action: 'none' });
    assert.equal(decidePromotion(envs, [failed], T0 + 60_000, policy).action, 'promote', 'without the memory it would retry');
  });

  it('keeps a Committed record however many newer ones there are', () => {
    let records: PromotionRecord[] = [committed('prod', 'c')];
    for (let i = 0; i < MAX_PROMOTIONS_PER_ENVIRONMENT + 2; i++) records = withRecord(records, record('prod', String(i), 'Succeeded'));
    assert.ok(records.some((r) => r.state === 'Committed'));
  });
});

describe('withRecord', () => {
  it('replaces the newest record of the same promotion, or appends', () => {
    const a = record('staging', '1', 'Succeeded');
    const b = record('staging', '2', 'Pending');
    assert.deepEqual(withRecord([a, b], { ...b, state: 'Succeeded' }), [a, { ...b, state: 'Succeeded' }]);
    assert.deepEqual(withRecord([a], b), [a, b]);
  });

  it('keeps the newest records per environment, never dropping a Pending one', () => {
    let records: PromotionRecord[] = [record('prod', 'p', 'Pending'), record('dev', 'x', 'Succeeded')];
    for (let i = 0; i < MAX_PROMOTIONS_PER_ENVIRONMENT + 5; i++) records = withRecord(records, record('prod', String(i), 'Succeeded'));
    const prod = records.filter((r) => r.environment === 'prod');
    assert.equal(prod.filter((r) => r.state === 'Succeeded').length, MAX_PROMOTIONS_PER_ENVIRONMENT);
    assert.ok(prod.some((r) => r.state === 'Pending'));
    assert.equal(prod.at(-1)?.revision, String(MAX_PROMOTIONS_PER_ENVIRONMENT + 4), 'order kept, newest last');
    assert.ok(records.some((r) => r.environment === 'dev'), 'other environments untouched');
  });
});
