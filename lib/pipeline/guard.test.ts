import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { activeHalt, checkPromotion, DEFAULT_LOOP_POLICY, haltCondition, loopPolicy, PromotionRefusedError, withCommitted } from './guard.ts';
import { MAX_COMMITTED_PER_ENVIRONMENT, type CommittedPromotion } from './types.ts';

const T0 = Date.parse('2026-01-01T00:00:00Z');
const at = (ms: number): string => new Date(ms).toISOString();
const entry = (environment: string, revision: string, ms: number): CommittedPromotion => ({ environment, revision, at: at(ms) });

function refused(fn: () => void, reason: string, message: RegExp): void {
  assert.throws(fn, (err: unknown) => err instanceof PromotionRefusedError && err.reason === reason && message.test(err.message));
}

describe('the commit-rate guard', () => {
  it('never promotes a commit or artifact reference, on any attempt', () => {
    for (const isNew of [true, false]) {
      refused(() => { checkPromotion([], { environment: 'prod', revision: `main@sha1:${'a'.repeat(40)}`, isNew }, T0); }, 'CommitReference', /Git commit or artifact reference.*spec\.revisionPath/);
    }
    assert.doesNotThrow(() => { checkPromotion([], { environment: 'prod', revision: '1.2.3', isNew: true }, T0); });
  });

  it('refuses a second promotion of an ⟨environment, revision⟩ already carried out', () => {
    const committed = [{ ...entry('staging', '1.1.0', T0 - 3_600_000), commit: 'f'.repeat(40) }];
    refused(() => { checkPromotion(committed, { environment: 'staging', revision: '1.1.0', isNew: true }, T0); }, 'PromotionLoop', /second promotion of 1\.1\.0 to staging.*commit ffffffffffff/);
    assert.doesNotThrow(() => { checkPromotion(committed, { environment: 'prod', revision: '1.1.0', isNew: true }, T0); });
    assert.doesNotThrow(() => { checkPromotion(committed, { environment: 'staging', revision: '1.1.0', isNew: false }, T0); }, 'a resumed promotion is the same one');
  });

  it('stops an environment promoted again and again within the window', () => {
    const policy = { maxPerEnvironment: 3, windowMs: 60_000 };
    const committed = [entry('staging', 'r1', T0 - 50_000), entry('staging', 'r2', T0 - 30_000), entry('staging', 'r3', T0 - 10_000), entry('prod', 'r1', T0 - 1_000)];
    refused(() => { checkPromotion(committed, { environment: 'staging', revision: 'r4', isNew: true }, T0, policy); }, 'PromotionLoop', /staging was promoted 3 times within 60 s \(at most 3\).*loop/);
    assert.doesNotThrow(() => { checkPromotion(committed, { environment: 'prod', revision: 'r4', isNew: true }, T0, policy); }, 'per environment');
    assert.doesNotThrow(() => { checkPromotion(committed, { environment: 'staging', revision: 'r4', isNew: true }, T0 + 11_000, policy); }, 'the oldest left the window');
    assert.doesNotThrow(() => { checkPromotion(committed, { environment: 'staging', revision: 'r4', isNew: true, haltedAt: at(T0 - 20_000) }, T0, policy); }, 'a lifted halt restarts the count');
    refused(() => { checkPromotion(committed, { environment: 'staging', revision: 'r4', isNew: true, haltedAt: at(T0 - 60_000) }, T0, policy); }, 'PromotionLoop', /3 times/);
  });

  it('stops the 27-commits-in-71-s loop of issue 22 at the default policy', () => {
    let committed: CommittedPromotion[] = [];
    let stoppedAt: number | undefined;
    for (let i = 0; i < 27 && stoppedAt === undefined; i++) {
      const now = T0 + Math.round((i * 71_000) / 27);
      try {
        checkPromotion(committed, { environment: 'staging', revision: `1.0.${i}`, isNew: true }, now);
        committed = withCommitted(committed, entry('staging', `1.0.${i}`, now));
      } catch (err) {
        assert.ok(err instanceof PromotionRefusedError);
        stoppedAt = i;
      }
    }
    assert.equal(stoppedAt, DEFAULT_LOOP_POLICY.maxPerEnvironment);
  });

  it('keeps the newest entries per environment, one per pair', () => {
    let committed: CommittedPromotion[] = [];
    for (let i = 0; i < MAX_COMMITTED_PER_ENVIRONMENT + 5; i++) committed = withCommitted(committed, entry('staging', `r${i}`, T0 + i));
    committed = withCommitted(committed, entry('prod', 'r0', T0));
    committed = withCommitted(committed, entry('prod', 'r0', T0 + 9));
    assert.equal(committed.filter((c) => c.environment === 'staging').length, MAX_COMMITTED_PER_ENVIRONMENT);
    assert.equal(committed.find((c) => c.environment === 'staging')?.revision, 'r5', 'the oldest dropped');
    assert.deepEqual(committed.filter((c) => c.environment === 'prod'), [entry('prod', 'r0', T0 + 9)]);
  });

  it('a halt holds for its generation only, and says why on Promoting', () => {
    const halted = { reason: 'PromotionLoop' as const, message: 'why', generation: 3, at: at(T0) };
    assert.equal(activeHalt({ halted }, 3), halted);
    assert.equal(activeHalt({ halted }, 4), undefined, 'a spec change resumes');
    assert.deepEqual(haltCondition(halted, 3), { type: 'Promoting', status: 'False', reason: 'PromotionLoop', message: 'why', observedGeneration: 3 });
  });

  it('checks its options, naming them', () => {
    assert.deepEqual(loopPolicy('o', undefined), DEFAULT_LOOP_POLICY);
    assert.throws(() => loopPolicy('o', { maxPerEnvironment: MAX_COMMITTED_PER_ENVIRONMENT + 1 }), (err: unknown) => err instanceof TypeError && err.message.startsWith('o.maxPerEnvironment'));
    assert.throws(() => loopPolicy('o', { windowMs: 0 }), (err: unknown) => err instanceof TypeError && err.message.startsWith('o.windowMs'));
  });
});
