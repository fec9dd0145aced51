import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decidePromotion, settleCommitted, withRecord } from './decide.ts';
import { checkPromotion, PromotionRefusedError, withCommitted } from './guard.ts';
import { promotingCondition } from './conditions.ts';
import type { CommittedPromotion, EnvironmentStatus, PromotionRecord, TargetStatus, WaveRetry, WaveStatus } from './types.ts';

// Wave progression as a pure function of status and records: order, soak, failure, exactly-once.

const policy = { initialMs: 1_000, maxMs: 8_000 };
const T0 = Date.parse('2025-01-01T00:00:00Z');
const at = (ms: number): string => new Date(ms).toISOString();

const dev: EnvironmentStatus = { name: 'dev', ready: true, revision: '2', targets: [{ cluster: 'local', namespace: 'dev', readable: true, ready: true, revision: '2' }] };

/** A fleet `prod` whose waves stand at the revisions given (each wave: its revision, ready or not). */
function prod(waves: readonly { name: string; revision: string; ready: boolean; soakSeconds?: number; total?: number }[]): EnvironmentStatus {
  const targets: TargetStatus[] = waves.flatMap((w) => Array.from({ length: w.total ?? 2 }, (_, i) => ({ cluster: `secret:fleet/${w.name}-${i}`, namespace: 'app', readable: true, exists: true, ready: w.ready, revision: w.revision })));
  const statuses: WaveStatus[] = waves.map((w) => ({ name: w.name, ready: w.ready, revision: w.revision, total: w.total ?? 2, readyTargets: w.ready ? w.total ?? 2 : 0, required: w.total ?? 2, ...(w.soakSeconds === undefined ? {} : { soakSeconds: w.soakSeconds }) }));
  return { name: 'prod', ready: false, revision: '1', targets, fleet: { policy: 'All', total: targets.length, readyTargets: 0, required: targets.length, readable: targets.length, notReady: { OtherRevision: targets.length } }, waves: statuses };
}

function waveRecord(wave: string, state: PromotionRecord['state'], extra: Partial<PromotionRecord> = {}): PromotionRecord {
  return { environment: 'prod', wave, revision: '2', strategy: 'patch', state, attempts: 1, startedAt: at(T0), ...extra };
}

const carried = (wave: string): CommittedPromotion => ({ environment: 'prod', wave, revision: '2', at: at(T0) });

describe('waves', () => {
  it('start with the first wave', () => {
    const d = decidePromotion([dev, prod([{ name: 'canary', revision: '1', ready: true }, { name: 'rest', revision: '1', ready: true }])], [], T0, policy);
    assert.deepEqual(d, { action: 'promote', from: 'dev', to: 'prod', revision: '2', wave: 'canary', attempt: 1, resumed: false, startedAt: undefined });
  });

  it('pass over an empty wave', () => {
    const d = decidePromotion([dev, prod([{ name: 'canary', revision: '1', ready: true, total: 0 }, { name: 'rest', revision: '1', ready: true }])], [], T0, policy);
    assert.equal(d.action === 'promote' ? d.wave : undefined, 'rest');
  });

  it('wait while a wave is carried out and not ready yet, until the apply timeout', () => {
    const envs = [dev, prod([{ name: 'canary', revision: '1', ready: false }, { name: 'rest', revision: '1', ready: true }])];
    const records = [waveRecord('canary', 'Committed', { committedAt: at(T0) })];
    assert.deepEqual(decidePromotion(envs, records, T0 + 1_000, policy, { committed: [carried('canary')], applyTimeoutMs: 60_000 }), { action: 'none', retryInMs: 59_000 });
    assert.deepEqual(settleCommitted(envs, records, T0 + 1_000, at(T0 + 1_000), 60_000), []);
  });

  it('a wave ready at the revision succeeds with readyAt; the next one waits for the soak, then starts', () => {
    const ready = [dev, prod([{ name: 'canary', revision: '2', ready: true, soakSeconds: 60 }, { name: 'rest', revision: '1', ready: true }])];
    const [settled] = settleCommitted(ready, [waveRecord('canary', 'Committed', { committedAt: at(T0) })], T0 + 5_000, at(T0 + 5_000));
    assert.equal(settled?.record.state, 'Succeeded');
    assert.equal(settled.record.readyAt, at(T0 + 5_000));
    assert.match(settled.record.message ?? '', /wave canary of prod is ready \(2 of 2 clusters ready at 2, 2 needed\)/);
    const records = [settled.record];
    const ctx = { committed: [carried('canary')] };
    assert.deepEqual(decidePromotion(ready, records, T0 + 20_000, policy, ctx), { action: 'none', retryInMs: 45_000 }, 'soaking: 60 s from readyAt');
    assert.deepEqual(decidePromotion(ready, records, T0 + 65_000, policy, ctx), { action: 'promote', from: 'dev', to: 'prod', revision: '2', wave: 'rest', attempt: 1, resumed: false, startedAt: undefined });
  });

  it('the next wave waits while the previous one is not ready at the revision (any more)', () => {
    const flapping = [dev, prod([{ name: 'canary', revision: '2', ready: false }, { name: 'rest', revision: '1', ready: true }])];
    const records = [waveRecord('canary', 'Succeeded', { readyAt: at(T0) })];
    assert.deepEqual(decidePromotion(flapping, records, T0 + 600_000, policy, { committed: [carried('canary')] }), { action: 'none' });
  });

  it('a wave not ready within the apply timeout fails, says which wave and why, and stops the rollout', () => {
    const stuck = [dev, prod([{ name: 'canary', revision: '2', ready: true }, { name: 'mid', revision: '1', ready: false }, { name: 'rest', revision: '1', ready: true }])];
    const records = [waveRecord('canary', 'Succeeded', { readyAt: at(T0) }), waveRecord('mid', 'Committed', { committedAt: at(T0) })];
    const [failed] = settleCommitted(stuck, records, T0 + 600_000, at(T0 + 600_000));
    assert.equal(failed?.record.state, 'Failed');
    assert.match(failed.record.message ?? '', /wave mid of prod was not ready at 2 within 600 s \(0 of 2 clusters ready at 1, 2 needed; environment not ready: OtherRevision 6\): the rollout stops at this wave/);
    const after = withRecord(records, failed.record);
    const committed = [carried('canary'), carried('mid')];
    // Never retried, never the next wave: not even much later.
    assert.deepEqual(decidePromotion(stuck, after, T0 + 3_600_000, policy, { committed }), { action: 'none' });
    // A new revision starts over from the first wave.
    const three = { ...dev, revision: '3', targets: [{ cluster: 'local', namespace: 'dev', readable: true, ready: true, revision: '3' }] };
    const d = decidePromotion([three, stuck[1]!], after, T0 + 3_600_000, policy, { committed });
    assert.equal(d.action === 'promote' ? `${d.revision}/${d.wave ?? ''}` : d.action, '3/canary');
  });

  it('a stopped wave is carried out again once when a person retries its failed attempt, and the rollout goes on from there', () => {
    const stuck = [dev, prod([{ name: 'canary', revision: '2', ready: true }, { name: 'mid', revision: '1', ready: false }, { name: 'rest', revision: '1', ready: true }])];
    const failed = waveRecord('mid', 'Failed', { committedAt: at(T0), finishedAt: at(T0 + 600_000), message: 'wave mid of prod was not ready' });
    const records = [waveRecord('canary', 'Succeeded', { readyAt: at(T0) }), failed];
    const committed = [carried('canary'), carried('mid')];
    const promoting = promotingCondition(records, 1);
    assert.match(promoting.message, /failed \(to carry it out again, .*retries prod\/mid at 2 .*"action": "retry"\)/, 'Promoting=False says how to carry on');
    const by = { username: 'alice' };
    const retry: WaveRetry = { environment: 'prod', wave: 'mid', revision: '2', attempt: 1, requestedBy: by, requestedAt: at(T0 + 700_000) };
    assert.deepEqual(decidePromotion(stuck, records, T0 + 700_000, policy, { committed, retries: [{ ...retry, wave: 'rest' }, { ...retry, revision: '3' }] }), { action: 'none' }, 'another wave\'s or revision\'s retry does nothing');
    const d = decidePromotion(stuck, records, T0 + 700_000, policy, { committed, retries: [retry] });
    assert.deepEqual(d, { action: 'promote', from: 'dev', to: 'prod', revision: '2', wave: 'mid', attempt: 2, resumed: false, startedAt: at(T0), retry: { by, at: at(T0 + 700_000), of: 1 } });
    // The guard lets attempt 2 through: it is not a second promotion of the pair, and resuming keeps the mark.
    checkPromotion(committed, { environment: 'prod', wave: 'mid', revision: '2', isNew: false }, T0 + 700_000);
    const pending = waveRecord('mid', 'Pending', { attempts: 2, retry: { by, at: at(T0 + 700_000), of: 1 } });
    const resumed = decidePromotion(stuck, withRecord(records, pending), T0 + 700_000, policy, { committed, retries: [retry] });
    assert.equal(resumed.action === 'promote' ? resumed.retry?.of : undefined, 1);
    // Carried out again and not ready in time again: the same retry does not fire twice (no loop); a new one would.
    const again = withRecord(records, { ...pending, state: 'Failed', committedAt: at(T0 + 701_000), finishedAt: at(T0 + 1_301_000) });
    assert.deepEqual(decidePromotion(stuck, again, T0 + 2_000_000, policy, { committed, retries: [retry] }), { action: 'none' });
    assert.equal(decidePromotion(stuck, again, T0 + 2_000_000, policy, { committed, retries: [retry, { ...retry, attempt: 2 }] }).action, 'promote');
    // Ready this time: it succeeds, and the next wave starts.
    const ready = [dev, prod([{ name: 'canary', revision: '2', ready: true }, { name: 'mid', revision: '2', ready: true }, { name: 'rest', revision: '1', ready: true }])];
    const [settled] = settleCommitted(ready, withRecord(records, { ...pending, state: 'Committed', committedAt: at(T0 + 701_000) }), T0 + 710_000, at(T0 + 710_000));
    assert.equal(settled?.record.state, 'Succeeded');
    const next = decidePromotion(ready, withRecord(records, settled.record), T0 + 710_000, policy, { committed, retries: [retry] });
    assert.equal(next.action === 'promote' ? next.wave : next.action, 'rest');
  });

  it('a retried wave whose action fails is tried again with backoff, still as the retry', () => {
    const envs = [dev, prod([{ name: 'canary', revision: '2', ready: true }, { name: 'mid', revision: '1', ready: false }])];
    const mark = { by: { username: 'alice' }, at: at(T0), of: 1 };
    const records = [waveRecord('canary', 'Succeeded', { readyAt: at(T0) }), waveRecord('mid', 'Failed', { attempts: 2, finishedAt: at(T0), retry: mark })];
    const ctx = { committed: [carried('canary'), carried('mid')] };
    assert.deepEqual(decidePromotion(envs, records, T0 + 1_000, policy, ctx), { action: 'none', retryInMs: 1_000 });
    const d = decidePromotion(envs, records, T0 + 2_000, policy, ctx);
    assert.deepEqual(d.action === 'promote' ? [d.wave, d.attempt, d.retry] : d, ['mid', 3, mark]);
  });

  it('a wave whose action failed is retried with backoff', () => {
    const envs = [dev, prod([{ name: 'canary', revision: '1', ready: true }])];
    const records = [waveRecord('canary', 'Failed', { finishedAt: at(T0) })];
    assert.deepEqual(decidePromotion(envs, records, T0 + 500, policy), { action: 'none', retryInMs: 500 });
    assert.deepEqual(decidePromotion(envs, records, T0 + 1_000, policy), { action: 'promote', from: 'dev', to: 'prod', revision: '2', wave: 'canary', attempt: 2, resumed: false, startedAt: at(T0) });
  });

  it('a Pending wave is resumed (after a restart or a shard handoff), its wave kept', () => {
    const envs = [dev, prod([{ name: 'canary', revision: '1', ready: true }])];
    assert.deepEqual(decidePromotion(envs, [waveRecord('canary', 'Pending')], T0, policy), { action: 'promote', from: 'dev', to: 'prod', revision: '2', wave: 'canary', attempt: 2, resumed: true, startedAt: at(T0) });
  });

  it('the soak survives a restart: it counts from the readyAt in status, not from when the controller started', () => {
    const envs = [dev, prod([{ name: 'canary', revision: '2', ready: true, soakSeconds: 300 }, { name: 'rest', revision: '1', ready: true }])];
    const records = [waveRecord('canary', 'Succeeded', { readyAt: at(T0) })];
    assert.deepEqual(decidePromotion(envs, records, T0 + 299_000, policy, { committed: [carried('canary')] }), { action: 'none', retryInMs: 1_000 });
  });

  it('a fleet already running the revision everywhere has nothing to do', () => {
    assert.deepEqual(decidePromotion([dev, prod([{ name: 'canary', revision: '2', ready: true }, { name: 'rest', revision: '2', ready: true }])], [], T0, policy), { action: 'none' });
  });
});

describe('exactly once per wave', () => {
  it('records are kept per wave', () => {
    const records = withRecord(withRecord([], waveRecord('canary', 'Succeeded')), waveRecord('rest', 'Pending'));
    assert.deepEqual(records.map((r) => `${r.wave ?? ''}:${r.state}`), ['canary:Succeeded', 'rest:Pending']);
    assert.deepEqual(withRecord(records, waveRecord('rest', 'Committed')).map((r) => `${r.wave ?? ''}:${r.state}`), ['canary:Succeeded', 'rest:Committed']);
  });

  it('the guard refuses a wave carried out twice, not the next wave, and counts a rollout as one promotion', () => {
    const committed = [carried('canary')];
    assert.throws(() => { checkPromotion(committed, { environment: 'prod', wave: 'canary', revision: '2', isNew: true }, T0); }, PromotionRefusedError);
    checkPromotion(committed, { environment: 'prod', wave: 'rest', revision: '2', isNew: true }, T0);
    // Ten waves of one revision are one promotion of the environment for the loop count.
    let many: CommittedPromotion[] = [];
    for (let i = 0; i < 10; i++) many = withCommitted(many, { environment: 'prod', wave: `w${i}`, revision: '2', at: at(T0) });
    assert.equal(many.length, 10);
    checkPromotion(many, { environment: 'prod', wave: 'w0', revision: '3', isNew: true }, T0 + 1_000);
  });

  it('the loop guard never stops a rollout half-way: the revision being rolled out does not count against itself', () => {
    // Five revisions rolled out within the window, the sixth's first wave carried out: its second wave goes on.
    let committed: CommittedPromotion[] = [];
    for (let r = 1; r <= 5; r++) for (const wave of ['canary', 'rest']) committed = withCommitted(committed, { environment: 'prod', wave, revision: `${r}`, at: at(T0 + r) });
    committed = withCommitted(committed, { environment: 'prod', wave: 'canary', revision: '6', at: at(T0 + 6) });
    checkPromotion(committed, { environment: 'prod', wave: 'rest', revision: '6', isNew: true }, T0 + 10);
    // A seventh revision is the loop the guard is for.
    committed = withCommitted(committed, { environment: 'prod', wave: 'rest', revision: '6', at: at(T0 + 7) });
    assert.throws(() => { checkPromotion(committed, { environment: 'prod', wave: 'canary', revision: '7', isNew: true }, T0 + 10); }, /promoted 6 times/);
  });

  it('a fleet of ten waves keeps as many revisions for the guard as a plain environment, older rollouts folded into one entry each', () => {
    let committed: CommittedPromotion[] = [];
    for (let r = 1; r <= 25; r++) for (let w = 0; w < 10; w++) committed = withCommitted(committed, { environment: 'prod', wave: `w${w}`, revision: `${r}`, at: at(T0 + r * 10 + w) });
    const revisions = new Set(committed.map((c) => c.revision));
    assert.equal(revisions.size, 20, 'the newest 20 revisions');
    assert.equal(committed.length, 10 + 19, 'the newest rollout per wave, each older one as one entry');
    assert.deepEqual(committed.filter((c) => c.revision === '25').map((c) => c.wave), ['w0', 'w1', 'w2', 'w3', 'w4', 'w5', 'w6', 'w7', 'w8', 'w9']);
    // An older rollout, folded, is carried out at every wave: never promoted again, at any wave.
    for (const wave of ['w0', 'w9']) assert.throws(() => { checkPromotion(committed, { environment: 'prod', wave, revision: '20', isNew: true }, T0 + 1_000); }, /carried out already/);
    // And the loop guard still sees six rollouts within the window.
    assert.throws(() => { checkPromotion(committed, { environment: 'prod', wave: 'w0', revision: '26', isNew: true }, T0 + 1_000); }, /promoted 20 times/);
  });
});
