import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { CommitStatus, CommitStatusRequest } from '../gitops/index.ts';
import { FakeClock } from '../util/index.ts';
import { CommitStatusGates, type GateReconcile } from './commit-status-gate.ts';
import { commitStatusProblems, decideCommitStatusGate, formatDuration, parseDuration, validateCommitStatuses } from './commit-status.ts';
import { decidePromotion, settleCommitted, withRecord, type SettledPromotion } from './decide.ts';
import type { CommittedPromotion, EnvironmentStatus, PromotionRecord, TargetStatus, WaveStatus } from './types.ts';
import { validatePipelineSpec, type ValidPipelineSpec } from './validate.ts';

const ok = (context: string, source: CommitStatus['source'] = 'status'): CommitStatus => ({ context, outcome: 'success', state: 'success', source });
const waiting = (context: string): CommitStatus => ({ context, outcome: 'pending', state: 'pending', source: 'status' });
const bad = (context: string, state: CommitStatus['state'] = 'failure'): CommitStatus => ({ context, outcome: 'failure', state, source: 'status' });
const T = { now: 1_000, deadline: 10_000, timeoutMs: 1_800_000 };

describe('decideCommitStatusGate', () => {
  it('passes once every required context is success, whatever else is reported', () => {
    const d = decideCommitStatusGate({ ...T, statuses: [ok('ci/build'), ok('ci/e2e'), bad('optional')], contexts: ['ci/build', 'ci/e2e'] });
    assert.equal(d.verdict, 'passed');
    assert.equal(d.reason, 'commit statuses passed: "ci/build", "ci/e2e"');
  });

  it('waits for a required context that is pending or not reported, saying which', () => {
    const d = decideCommitStatusGate({ ...T, statuses: [ok('ci/build'), waiting('ci/e2e')], contexts: ['ci/build', 'ci/e2e', 'ci/lint'] });
    assert.equal(d.verdict, 'pending');
    assert.equal(d.reason, 'waiting for commit statuses: "ci/e2e" pending, "ci/lint" not reported (1 of 3 passed)');
  });

  it('fails on a required context that failed, naming it and its state, even before the deadline', () => {
    const d = decideCommitStatusGate({ ...T, statuses: [ok('ci/build'), bad('ci/e2e', 'error'), waiting('ci/lint')], contexts: ['ci/build', 'ci/e2e', 'ci/lint'] });
    assert.deepEqual(d, { verdict: 'failed', reason: 'commit status "ci/e2e" is error', context: 'ci/e2e' });
  });

  it('with no contexts listed: every reported status counts, and at least one must be reported', () => {
    assert.equal(decideCommitStatusGate({ ...T, statuses: [], contexts: [] }).reason, 'waiting for commit statuses: none reported');
    assert.equal(decideCommitStatusGate({ ...T, statuses: [ok('a'), waiting('b')], contexts: [] }).verdict, 'pending');
    assert.deepEqual(decideCommitStatusGate({ ...T, statuses: [ok('a'), ok('b', 'check-run')], contexts: [] }), { verdict: 'passed', reason: 'all 2 commit status(es) passed' });
    assert.equal(decideCommitStatusGate({ ...T, statuses: [ok('a'), bad('b')], contexts: [] }).context, 'b');
  });

  it('a context reported by both APIs passes only when both pass, and fails when either fails', () => {
    assert.equal(decideCommitStatusGate({ ...T, statuses: [ok('ci'), { ...waiting('ci'), source: 'check-run' }], contexts: ['ci'] }).verdict, 'pending');
    assert.equal(decideCommitStatusGate({ ...T, statuses: [ok('ci'), { ...bad('ci'), source: 'check-run' }], contexts: ['ci'] }).verdict, 'failed');
  });

  it('fails at the deadline with what never passed, or that nothing was reported, or why reading failed', () => {
    const late = { ...T, now: T.deadline };
    assert.deepEqual(decideCommitStatusGate({ ...late, statuses: [], contexts: [] }), { verdict: 'failed', reason: 'commit statuses did not pass within 30m: none reported' });
    assert.equal(decideCommitStatusGate({ ...late, statuses: [waiting('ci/e2e')], contexts: ['ci/e2e'] }).reason, 'commit statuses did not pass within 30m: "ci/e2e" pending (0 of 1 passed)');
    assert.equal(decideCommitStatusGate({ ...late, statuses: undefined, contexts: ['x'], readError: 'ProviderError: GitHub answered HTTP 503 to listing commit statuses' }).reason,
      'commit statuses did not pass within 30m: could not be read (ProviderError: GitHub answered HTTP 503 to listing commit statuses)');
    // A failure says so rather than "timed out".
    assert.equal(decideCommitStatusGate({ ...late, statuses: [bad('ci/e2e')], contexts: [] }).reason, 'commit status "ci/e2e" is failure');
  });

  it('never echoes a peer\'s context name raw: control and bidi characters escaped, length bounded', () => {
    const hostile = `evil\n\u202eWarning: approved${'x'.repeat(500)}`;
    const d = decideCommitStatusGate({ ...T, statuses: [bad(hostile)], contexts: [] });
    assert.equal(d.verdict, 'failed');
    assert.doesNotMatch(d.reason, /[\n\u202e]/);
    assert.ok(d.reason.length < 160, d.reason);
    assert.equal(d.context, hostile, 'the name itself is kept for a caller to compare');
  });

  it('lists at most three names and counts the rest', () => {
    const d = decideCommitStatusGate({ ...T, statuses: [], contexts: ['a', 'b', 'c', 'd', 'e'] });
    assert.equal(d.reason, 'waiting for commit statuses: "a" not reported, "b" not reported, "c" not reported and 2 more (0 of 5 passed)');
  });
});

describe('commitStatuses in the spec', () => {
  const problems = (value: unknown): string[] => {
    const found: string[] = [];
    validateCommitStatuses(value, 'x', (path, message) => { found.push(`${path}: ${message}`); });
    return found;
  };

  it('applies defaults: every status, 30m, the pull request provider', () => {
    assert.deepEqual(validateCommitStatuses({}, 'x', () => { assert.fail(); }), { contexts: [], timeoutMs: 1_800_000, provider: undefined, apiUrl: undefined });
    assert.deepEqual(validateCommitStatuses({ contexts: ['ci/build', 'ci/build', 'e2e'], timeout: '1h30m', provider: 'gitlab', apiUrl: 'https://gitlab.example/api/v4' }, 'x', () => { assert.fail(); }),
      { contexts: ['ci/build', 'e2e'], timeoutMs: 5_400_000, provider: 'gitlab', apiUrl: 'https://gitlab.example/api/v4' });
  });

  it('refuses what the schema refuses, by field path', () => {
    assert.deepEqual(problems({ timeout: '0s' }), ['x.timeout: must be a duration from 1s to 24h such as "30m" or "1h30m"']);
    assert.deepEqual(problems({ timeout: '25h' }), ['x.timeout: must be a duration from 1s to 24h such as "30m" or "1h30m"']);
    assert.deepEqual(problems({ contexts: ['ok', 'line\nbreak', ''] }), ['x.contexts[1]: must be a name of 1 to 255 printable characters', 'x.contexts[2]: must be a name of 1 to 255 printable characters']);
    assert.deepEqual(problems({ provider: 'bitbucket' }), ['x.provider: must be "github" or "gitlab", got "bitbucket"']);
    assert.deepEqual(problems({ apiUrl: 'file:///etc' }), ['x.apiUrl: must be an https:// URL of at most 2048 characters']);
    assert.deepEqual(problems('yes'), ['x: must be an object']);
  });

  it('needs the git strategy and a provider', () => {
    const gate = { contexts: [], timeoutMs: 1_000, provider: undefined, apiUrl: undefined };
    assert.deepEqual(commitStatusProblems([{ name: 'a' }, { name: 'b', commitStatuses: gate }], { strategy: 'patch' }), ['spec.environments[1].commitStatuses: commit-status gates need the git strategy']);
    assert.deepEqual(commitStatusProblems([{ name: 'b', commitStatuses: gate }], { strategy: 'git', pullRequest: undefined }), ['spec.environments[0].commitStatuses.provider: required unless spec.promotion.git.pullRequest names the provider']);
    assert.deepEqual(commitStatusProblems([{ name: 'b', commitStatuses: gate }], { strategy: 'git', pullRequest: { provider: 'github' } }), []);
  });

  it('goes through validatePipelineSpec', () => {
    const spec = (promotion: unknown, commitStatuses: unknown): unknown => ({
      appRef: { apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease', name: 'web' },
      environments: [{ name: 'dev', targets: [{ namespace: 'ns' }] }, { name: 'prod', targets: [{ namespace: 'ns2', clusterRef: { kind: 'Secret', name: 'prod' } }], commitStatuses }],
      promotion,
    });
    const git = { strategy: 'git', git: { url: 'https://github.com/o/r.git' } };
    const valid = validatePipelineSpec(spec(git, { provider: 'github', contexts: ['ci'] }), 'ns');
    assert.ok(valid.valid);
    assert.deepEqual(valid.spec.environments[1]?.commitStatuses, { contexts: ['ci'], timeoutMs: 1_800_000, provider: 'github', apiUrl: undefined });
    assert.equal(valid.spec.environments[0]?.commitStatuses, undefined);
    const invalid = validatePipelineSpec(spec(git, { timeout: 'soon' }), 'ns');
    assert.ok(!invalid.valid);
    assert.ok(invalid.problems.includes('spec.environments[1].commitStatuses.timeout: must be a duration from 1s to 24h such as "30m" or "1h30m"'), invalid.problems.join('; '));
    const patch = validatePipelineSpec(spec({ strategy: 'patch', patch: { path: '/spec/version' } }, {}), 'ns');
    assert.ok(!patch.valid);
    assert.ok(patch.problems.includes('spec.environments[1].commitStatuses: commit-status gates need the git strategy'));
  });

  it('reads durations as Go does', () => {
    assert.equal(parseDuration('1h30m'), 5_400_000);
    assert.equal(parseDuration('1.5s'), 1_500);
    assert.equal(parseDuration('250ms'), 250);
    assert.equal(parseDuration('30'), undefined);
    assert.equal(parseDuration('-1s'), undefined);
    assert.equal(formatDuration(5_400_000), '1h30m');
    assert.equal(formatDuration(90_000), '1m30s');
  });
});

describe('CommitStatusGates', () => {
  const COMMIT = 'd'.repeat(40);
  const spec = (commitStatuses: ValidPipelineSpec['environments'][number]['commitStatuses']): ValidPipelineSpec => ({
    app: { gvk: { group: 'helm.toolkit.fluxcd.io', version: 'v2', kind: 'HelmRelease' }, name: 'web' },
    environments: [
      { name: 'dev', targets: [], requireApproval: false },
      { name: 'prod', targets: [], requireApproval: false, ...(commitStatuses === undefined ? {} : { commitStatuses }) },
    ],
    promotion: { strategy: 'git', url: 'https://github.com/o/r.git', branch: 'main', path: '.', secretName: 'git', pullRequest: { provider: 'github', apiUrl: 'https://ghe.example/api/v3' } },
    revisionPath: undefined,
    serviceAccountName: undefined,
  });
  const gate = { contexts: ['ci'], timeoutMs: 600_000, provider: undefined, apiUrl: undefined };
  const committed: PromotionRecord = { environment: 'prod', revision: '1.1.0', strategy: 'git', state: 'Committed', attempts: 1, startedAt: '2026-01-01T00:00:00Z', committedAt: '2026-01-01T00:00:00Z', commit: COMMIT, message: `committed ${COMMIT} to main` };
  const succeeded: SettledPromotion = { applied: true, record: { ...committed, state: 'Succeeded', finishedAt: '2026-01-01T00:01:00Z', message: `committed ${COMMIT} to main; prod runs 1.1.0` } };

  function setup(answers: (CommitStatus[] | Error)[]): { gates: CommitStatusGates; clock: FakeClock; reads: CommitStatusRequest[]; run: (records: readonly PromotionRecord[], settled: readonly SettledPromotion[], s?: ValidPipelineSpec) => ReturnType<CommitStatusGates['apply']> } {
    const clock = new FakeClock(Date.parse('2026-01-01T00:01:00Z'));
    const reads: CommitStatusRequest[] = [];
    const gates = new CommitStatusGates({
      clock,
      pollIntervalMs: 30_000,
      reader: {
        read: (request) => {
          reads.push(request);
          const answer = answers.shift() ?? [];
          return answer instanceof Error ? Promise.reject(answer) : Promise.resolve(answer);
        },
      },
    });
    const run = (records: readonly PromotionRecord[], settled: readonly SettledPromotion[], s = spec(gate)): ReturnType<CommitStatusGates['apply']> => {
      const input: GateReconcile = { pipeline: 'team/web', spec: s, records, settled, nowText: new Date(clock.now()).toISOString(), token: () => Promise.resolve('tok'), signal: new AbortController().signal };
      return gates.apply(input);
    };
    return { gates, clock, reads, run };
  }

  it('leaves environments without a gate alone, reading nothing', async () => {
    const { reads, run } = setup([]);
    const out = await run([committed], [succeeded], spec(undefined));
    assert.deepEqual(out.settled, [succeeded]);
    assert.equal(out.pollInMs, undefined);
    assert.equal(reads.length, 0);
  });

  it('holds a record the environment runs until its statuses pass; reads at most once per poll interval', async () => {
    const { reads, run, clock } = setup([[waiting('ci')], [ok('ci')]]);
    const first = await run([committed], [succeeded]);
    assert.deepEqual(first.settled.map((s) => [s.record.state, s.record.commitStatuses]), [['Committed', { state: 'Pending', message: 'waiting for commit statuses: "ci" pending (0 of 1 passed)' }]]);
    assert.equal(first.pollInMs, 30_000);
    assert.deepEqual(reads[0], { url: 'https://github.com/o/r.git', provider: 'github', apiUrl: 'https://ghe.example/api/v3', commit: COMMIT, token: 'tok', signal: reads[0]?.signal });
    const held = first.settled[0]?.record ?? committed;
    // A reconcile before the interval: the last read stands, nothing to write.
    clock.advance(10_000);
    assert.ok(held.commitStatuses !== undefined);
    const again = await run([held], [{ ...succeeded, record: { ...succeeded.record, commitStatuses: held.commitStatuses } }]);
    assert.deepEqual(again.settled, []);
    assert.equal(again.pollInMs, 20_000);
    assert.equal(reads.length, 1);
    clock.advance(20_000);
    const passed = await run([held], [succeeded]);
    assert.equal(reads.length, 2);
    assert.deepEqual(passed.settled.map((s) => [s.record.state, s.record.message, s.record.commitStatuses?.state]), [['Succeeded', `committed ${COMMIT} to main; prod runs 1.1.0; commit statuses passed: "ci"`, 'Passed']]);
    assert.equal(passed.pollInMs, undefined);
  });

  it('fails the record on a failing status, before the environment runs it, under its own Event reason', async () => {
    const { run } = setup([[bad('ci')]]);
    const out = await run([committed], []);
    assert.equal(out.settled.length, 1);
    const failed = out.settled[0];
    assert.ok(failed !== undefined);
    assert.equal(failed.event, 'CommitStatusFailed');
    assert.equal(failed.record.state, 'Failed');
    assert.equal(failed.record.message, `commit ${COMMIT.slice(0, 12)} was pushed, but commit status "ci" is failure`);
    assert.deepEqual(failed.record.commitStatuses, { state: 'Failed', message: 'commit status "ci" is failure' });
  });

  it('records a pass before the environment runs it, and reads no more', async () => {
    const { run, reads } = setup([[ok('ci')]]);
    const out = await run([committed], []);
    const passed = out.settled[0]?.record;
    assert.deepEqual([passed?.state, passed?.commitStatuses?.state], ['Committed', 'Passed']);
    assert.ok(passed?.commitStatuses !== undefined);
    const later = await run([passed], [{ ...succeeded, record: { ...succeeded.record, commitStatuses: passed.commitStatuses } }]);
    assert.equal(later.settled[0]?.record.state, 'Succeeded');
    assert.equal(reads.length, 1);
  });

  it('backs off after failed reads (doubling, capped) and fails at the timeout saying why', async () => {
    const boom = new Error('ProviderError: GitHub answered HTTP 503 to listing commit statuses');
    const { run, clock, reads } = setup([boom, boom, boom]);
    const first = await run([committed], [succeeded]);
    assert.equal(first.pollInMs, 60_000);
    assert.match(first.settled[0]?.record.commitStatuses?.message ?? '', /could not be read \(ProviderError: GitHub answered HTTP 503/);
    clock.advance(60_000);
    assert.equal((await run([committed], [succeeded])).pollInMs, 120_000);
    assert.equal(reads.length, 2);
    clock.advance(600_000);
    const late = await run([committed], [succeeded]);
    const [failed] = late.settled;
    assert.equal(failed?.record.state, 'Failed');
    assert.match(failed.record.message ?? '', /did not pass within 10m: could not be read/);
  });

  it('keeps a Failed settlement (apply timeout) as it is, and forgets a Pipeline\'s reads', async () => {
    const { run, gates, reads, clock } = setup([[waiting('ci')], [waiting('ci')]]);
    const timedOut: SettledPromotion = { applied: false, record: { ...committed, state: 'Failed', message: 'not applied' } };
    assert.deepEqual((await run([committed], [timedOut])).settled, [timedOut]);
    assert.equal(reads.length, 0);
    await run([committed], []);
    gates.forget('team/web');
    clock.advance(1_000);
    await run([committed], []);
    assert.equal(reads.length, 2, 'a forgotten Pipeline is read afresh');
  });
});

// A gate on a fleet environment with waves holds each wave's commit: the controller's reconcile
// order, played here step by step — settleCommitted, then the gates, then decidePromotion.
describe('a commit-status gate on a wave', () => {
  const CANARY_COMMIT = 'c'.repeat(40);
  const T0 = Date.parse('2026-01-01T00:00:00Z');
  const at = (ms: number): string => new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z');
  const gate = { contexts: ['ci'], timeoutMs: 600_000, provider: 'github' as const, apiUrl: 'https://ghe.example/api/v3' };
  const spec: ValidPipelineSpec = {
    app: { gvk: { group: 'kustomize.toolkit.fluxcd.io', version: 'v1', kind: 'Kustomization' }, name: 'web' },
    environments: [
      { name: 'dev', targets: [], requireApproval: false },
      { name: 'prod', targets: [], requireApproval: false, commitStatuses: gate },
      { name: 'global', targets: [], requireApproval: false },
    ],
    promotion: { strategy: 'git', url: 'https://github.com/o/r.git', branch: 'main', path: '.', secretName: 'git', pullRequest: undefined },
    revisionPath: '/spec/postBuild/substitute/version',
    serviceAccountName: undefined,
  };
  const single = (name: string, revision: string): EnvironmentStatus => ({ name, ready: true, revision, targets: [{ cluster: 'local', namespace: name, readable: true, ready: true, revision }] });
  /** prod, a fleet: the canary (soaked 5 s) and the rest, each at the revision given, ready. */
  const prod = (canary: string, rest: string): EnvironmentStatus => {
    const waves: WaveStatus[] = [{ name: 'canary', ready: true, revision: canary, total: 1, readyTargets: 1, required: 1, soakSeconds: 5 }, { name: 'rest', ready: true, revision: rest, total: 2, readyTargets: 2, required: 2 }];
    const targets: TargetStatus[] = [['c1', canary], ['c2', rest], ['c3', rest]].map(([c, revision]) => ({ cluster: `secret:fleet/${c ?? ''}`, namespace: 'app', readable: true, exists: true, ready: true, revision: revision ?? '' }));
    const everywhere = canary === rest;
    return { name: 'prod', ready: everywhere, ...(everywhere ? { revision: canary } : {}), targets, fleet: { policy: 'All', total: 3, readyTargets: everywhere ? 3 : 1, required: 3, readable: 3, notReady: everywhere ? {} : { OtherRevision: 2 } }, waves };
  };
  const canaryCommitted: PromotionRecord = { environment: 'prod', wave: 'canary', revision: '2', strategy: 'git', state: 'Committed', attempts: 1, startedAt: at(T0), committedAt: at(T0), commit: CANARY_COMMIT, message: `committed ${CANARY_COMMIT} to main` };
  const committed: CommittedPromotion[] = [{ environment: 'prod', wave: 'canary', revision: '2', at: at(T0), commit: CANARY_COMMIT }];

  function reconciler(answers: CommitStatus[][]): { reads: CommitStatusRequest[]; clock: FakeClock; reconcile: (environments: readonly EnvironmentStatus[], records: readonly PromotionRecord[]) => Promise<{ records: PromotionRecord[]; settled: readonly GatedSettlementView[]; decision: ReturnType<typeof decidePromotion> }> } {
    const clock = new FakeClock(T0 + 2_000);
    const reads: CommitStatusRequest[] = [];
    const gates = new CommitStatusGates({ clock, pollIntervalMs: 30_000, reader: { read: (request) => { reads.push(request); return Promise.resolve(answers.shift() ?? []); } } });
    return {
      reads,
      clock,
      reconcile: async (environments, records) => {
        const now = clock.now();
        const settled = settleCommitted(environments, records, now, at(now));
        const gated = await gates.apply({ pipeline: 'team/web', spec, records, settled, nowText: at(now), token: () => Promise.resolve('tok'), signal: new AbortController().signal });
        let next = [...records];
        for (const { record } of gated.settled) next = withRecord(next, record);
        return { records: next, settled: gated.settled, decision: decidePromotion(environments, next, now, undefined, { committed }) };
      },
    };
  }

  it('the next wave waits, past the canary\'s soak, until the canary\'s commit\'s statuses pass; then it starts after the soak', async () => {
    const { reads, clock, reconcile } = reconciler([[waiting('ci')], [ok('ci')]]);
    const canaryRuns = [single('dev', '2'), prod('2', '1'), single('global', '1')];
    // Flux runs the canary's commit, Ready; CI has not finished: held Committed, no next wave.
    const held = await reconcile(canaryRuns, [canaryCommitted]);
    assert.deepEqual(held.records.map((r) => [r.wave, r.state, r.commitStatuses?.state]), [['canary', 'Committed', 'Pending']]);
    assert.equal(reads[0]?.commit, CANARY_COMMIT, 'the wave\'s own commit is read');
    clock.advance(20_000);
    const still = await reconcile(canaryRuns, held.records);
    assert.equal(still.decision.action, 'none', 'well past the soak, the rest waits for the canary\'s statuses');
    assert.equal(reads.length, 1, 'read again only at the poll interval');
    // CI passes: the canary Succeeds now, and the soak counts from then.
    clock.advance(10_000);
    const passed = await reconcile(canaryRuns, still.records);
    const canary = passed.records.find((r) => r.wave === 'canary');
    assert.deepEqual([canary?.state, canary?.commitStatuses?.state, canary?.readyAt], ['Succeeded', 'Passed', at(clock.now())]);
    assert.match(canary?.message ?? '', /wave canary of prod is ready .*; commit statuses passed: "ci"$/);
    assert.deepEqual(passed.decision, { action: 'none', retryInMs: 5_000 }, 'soaking from when the gate passed');
    clock.advance(5_000);
    const after = await reconcile(canaryRuns, passed.records);
    assert.deepEqual(after.decision, { action: 'promote', from: 'dev', to: 'prod', revision: '2', wave: 'rest', attempt: 1, resumed: false, startedAt: undefined });
  });

  it('a failing context fails the wave at once, naming the context, under its own Event; the rollout stops there', async () => {
    const { reconcile, clock } = reconciler([[ok('build'), bad('ci')]]);
    const failed = await reconcile([single('dev', '2'), prod('2', '1'), single('global', '1')], [canaryCommitted]);
    assert.equal(failed.settled[0]?.event, 'CommitStatusFailed');
    const canary = failed.records.find((r) => r.wave === 'canary');
    assert.equal(canary?.state, 'Failed');
    assert.equal(canary.message, `commit ${CANARY_COMMIT.slice(0, 12)} was pushed, but commit status "ci" is failure`);
    assert.deepEqual(canary.commitStatuses, { state: 'Failed', message: 'commit status "ci" is failure' });
    clock.advance(3_600_000);
    assert.deepEqual((await reconcile([single('dev', '2'), prod('2', '1'), single('global', '1')], failed.records)).decision, { action: 'none' }, 'the rollout stops at the canary');
  });

  it('the environment after a fleet waits for the last wave\'s gate, and never takes a revision whose wave failed it', async () => {
    // Every prod cluster runs 2: prod is ready at it, but the rest's commit's statuses are pending, then fail.
    const { reconcile, clock } = reconciler([[waiting('ci')], [bad('ci')]]);
    const REST_COMMIT = 'e'.repeat(40);
    const records: PromotionRecord[] = [
      { ...canaryCommitted, state: 'Succeeded', readyAt: at(T0), commitStatuses: { state: 'Passed', message: 'commit statuses passed: "ci"' } },
      { ...canaryCommitted, wave: 'rest', commit: REST_COMMIT },
    ];
    const everywhere = [single('dev', '2'), prod('2', '2'), single('global', '1')];
    const held = await reconcile(everywhere, records);
    assert.deepEqual(held.records.map((r) => [r.wave, r.state]), [['canary', 'Succeeded'], ['rest', 'Committed']]);
    assert.deepEqual(held.decision, { action: 'none', retryInMs: 598_000 }, 'global waits for the rest\'s statuses (woken by the gate\'s poll before the apply timeout)');
    clock.advance(30_000);
    const failed = await reconcile(everywhere, held.records);
    assert.deepEqual(failed.records.map((r) => [r.wave, r.state, r.commitStatuses?.message]), [['canary', 'Succeeded', 'commit statuses passed: "ci"'], ['rest', 'Failed', 'commit status "ci" is failure']]);
    clock.advance(3_600_000);
    assert.deepEqual((await reconcile(everywhere, failed.records)).decision, { action: 'none' }, 'global never takes a revision a wave of prod failed the gate of');
  });
});

type GatedSettlementView = Awaited<ReturnType<CommitStatusGates['apply']>>['settled'][number];
