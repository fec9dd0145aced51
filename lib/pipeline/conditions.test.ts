import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { displayEnvironments, driftedCondition, promotingCondition, READY, readyCondition, sameStatus, setCondition } from './conditions.ts';
import type { Condition, EnvironmentStatus, PipelineStatus, PromotionRecord } from './types.ts';

const ready: Condition = { type: 'Ready', status: 'True', reason: 'Reconciled', message: 'm', lastTransitionTime: '2025-01-01T00:00:00Z', observedGeneration: 1 };

describe('conditions', () => {
  it('keeps lastTransitionTime unless the status changes', () => {
    const same = setCondition([ready], { type: 'Ready', status: 'True', reason: 'Other', message: 'n', observedGeneration: 2 }, '2025-02-02T00:00:00Z');
    const [first] = same;
    assert.ok(first !== undefined);
    assert.equal(first.lastTransitionTime, '2025-01-01T00:00:00Z');
    assert.equal(first.observedGeneration, 2);
    const flipped = setCondition([ready], { type: 'Ready', status: 'False', reason: 'InvalidSpec', message: 'x', observedGeneration: 2 }, '2025-02-02T00:00:00Z');
    assert.equal(flipped[0]?.lastTransitionTime, '2025-02-02T00:00:00Z');
    const added = setCondition([ready], { type: 'Promoting', status: 'False', reason: 'Idle', message: '', observedGeneration: 2 }, '2025-02-02T00:00:00Z');
    assert.deepEqual(added.map((c) => c.type), ['Ready', 'Promoting']);
  });

  it('caps long messages', () => {
    const [c] = setCondition([], { type: 'Ready', status: 'False', reason: 'R', message: 'x'.repeat(10_000), observedGeneration: 1 }, 'now');
    assert.ok(c !== undefined && c.message.length <= 2_000);
  });

  const target = { cluster: 'secret:team-a/prod', namespace: 'apps', ready: false };
  const envs = (readable: boolean | undefined, error?: string): EnvironmentStatus[] => [
    { name: 'dev', ready: true, revision: '1', targets: [{ cluster: 'local', namespace: 'apps', readable: true, ready: true, revision: '1' }] },
    { name: 'prod', ready: false, targets: [{ ...target, ...(readable === undefined ? {} : { readable }), ...(error === undefined ? {} : { error }) }] },
  ];

  it('says TargetNotReadable with the cluster\'s error, Unknown while loading, True otherwise', () => {
    const broken = readyCondition(envs(false, 'cluster secret:team-a/prod: HTTP 403 Forbidden'), 3);
    assert.equal(broken.status, 'False');
    assert.equal(broken.reason, 'TargetNotReadable');
    assert.match(broken.message, /prod: secret:team-a\/prod namespace apps: cluster secret:team-a\/prod: HTTP 403 Forbidden/);
    assert.equal(readyCondition(envs(undefined), 3).status, 'Unknown');
    const ok = readyCondition(envs(true), 3);
    assert.equal(ok.status, 'True');
    assert.equal(ok.message, 'dev: 1 (ready), prod: no single revision (not ready)');
  });

  it('reports the newest promotion on the Promoting condition', () => {
    const base = { revision: '2', strategy: 'patch' as const, attempts: 1, startedAt: 's' };
    assert.equal(promotingCondition([], 1).reason, 'Idle');
    assert.equal(promotingCondition([{ ...base, environment: 'staging', state: 'Pending' }], 1).status, 'True');
    const failed = promotingCondition([{ ...base, environment: 'staging', state: 'Failed', message: 'HTTP 500' }], 1);
    assert.deepEqual([failed.status, failed.reason], ['False', 'PromotionFailed']);
    assert.match(failed.message, /HTTP 500/);
  });

  it('compares statuses ignoring key order and transition times, but nothing else', () => {
    const a: PipelineStatus = { observedGeneration: 1, conditions: [ready], environments: [], promotions: [] };
    const reordered = JSON.parse('{"promotions":[],"environments":[],"conditions":[{"observedGeneration":1,"message":"m","reason":"Reconciled","status":"True","type":"Ready","lastTransitionTime":"2030-01-01T00:00:00Z"}],"observedGeneration":1}') as PipelineStatus;
    assert.ok(sameStatus(a, reordered));
    assert.ok(!sameStatus(a, { ...a, observedGeneration: 2 }));
    assert.ok(!sameStatus(a, { ...a, conditions: [{ ...ready, message: 'other' }] }));
    assert.ok(!sameStatus(undefined, a));
  });
});

describe('Flux-related conditions', () => {
  const record = (state: PromotionRecord['state']): PromotionRecord => ({ environment: 'staging', revision: '1.1.0', strategy: 'git', state, attempts: 1, startedAt: '2025-01-01T00:00:00Z', commit: 'c'.repeat(40) });

  it('a committed promotion is still Promoting, waiting for its environment to run it', () => {
    const c = promotingCondition([record('Committed')], 2);
    assert.deepEqual([c.status, c.reason], ['True', 'WaitingForApply']);
    assert.match(c.message, /committed cccccccccccc promoting 1\.1\.0 to staging: waiting for staging to run it/);
  });

  it('a committed promotion held by its commit-status gate says what the gate waits for', () => {
    const c = promotingCondition([{ ...record('Committed'), commitStatuses: { state: 'Pending', message: 'waiting for commit statuses: "e2e" pending (0 of 1 passed)' } }], 2);
    assert.equal(c.reason, 'WaitingForApply');
    assert.match(c.message, /waiting for staging to run it; waiting for commit statuses: "e2e" pending \(0 of 1 passed\)$/);
  });

  it('Drifted is True naming each reverted target, False once it holds again, absent when it never drifted', () => {
    const env = (drifted: boolean): EnvironmentStatus => ({ name: 'staging', ready: true, revision: '1.0.0', targets: [{ cluster: 'local', namespace: 'apps', ready: true, revision: '1.0.0', ...(drifted ? { drifted: true } : {}) }] });
    const on = driftedCondition([env(true)], [], 1);
    assert.deepEqual([on?.type, on?.status, on?.reason], ['Drifted', 'True', 'RevertedByFlux']);
    assert.match(on?.message ?? '', /staging: local namespace apps.*git strategy/);
    assert.equal(driftedCondition([env(false)], [], 1), undefined);
    const held = { ...ready, type: 'Drifted', status: 'True' as const };
    assert.deepEqual([driftedCondition([env(false)], [held], 1)?.status, driftedCondition([env(false)], [held], 1)?.reason], ['False', 'InSync']);
  });

  it('the Ready summary says why an environment is not ready', () => {
    const env: EnvironmentStatus = { name: 'staging', ready: false, revision: '1.1.0', reason: 'Suspended', targets: [{ cluster: 'local', namespace: 'apps', readable: true, ready: false, reason: 'Suspended', revision: '1.1.0' }] };
    assert.match(readyCondition([env], 1).message, /staging: 1\.1\.0 \(not ready: Suspended\)/);
  });
});

describe('what reaches status from outside', () => {
  it('condition messages are bounded and have control and bidi characters escaped', () => {
    const hostile = `cluster prod: HTTP 500: \u202egnp.exe\n{"forged":true}\u001b[2J${'y'.repeat(50_000)}`;
    const [c] = setCondition([], { type: READY, status: 'False', reason: 'TargetNotReadable', message: hostile, observedGeneration: 1 }, '2026-01-01T00:00:00Z');
    assert.ok(c !== undefined);
    assert.ok(c.message.length <= 2_000, String(c.message.length));
    assert.match(c.message, /^cluster prod: HTTP 500: \\u202egnp\.exe\\n\{"forged":true\}\\x1b\[2Jy+…\[\+\d+ chars\]$/);
  });

  it('revisions read from tenant objects are escaped in status', () => {
    const [env] = displayEnvironments([{ name: 'prod', ready: true, revision: '1.0\u202e0.1', targets: [{ cluster: 'local', namespace: 'x', readable: true, exists: true, ready: true, revision: '1.0\u202e0.1' }] }]);
    assert.equal(env?.revision, '1.0\\u202e0.1');
    assert.equal(env.targets[0]?.revision, '1.0\\u202e0.1');
  });

  it('each target error is bounded and escaped, everything else kept', () => {
    const environments: EnvironmentStatus[] = [{ name: 'prod', ready: false, targets: [
      { cluster: 'secret:a/b', namespace: 'x', readable: false, ready: false, error: `line1\nline2\u2067${'e'.repeat(10_000)}` },
      { cluster: 'local', namespace: 'y', readable: true, exists: true, ready: true, revision: '1.0.0' },
    ] }];
    const [env] = displayEnvironments(environments);
    const [bad, good] = env?.targets ?? [];
    assert.ok(bad?.error !== undefined && bad.error.length <= 1_000);
    assert.match(bad.error, /^line1\\nline2\\u2067e+…\[\+\d+ chars\]$/);
    assert.deepEqual(good, environments[0]?.targets[1]);
  });
});
