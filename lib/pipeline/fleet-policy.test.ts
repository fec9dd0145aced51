import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { displayEnvironments, promotingCondition, readyCondition } from './conditions.ts';
import { decidePromotion, settleCommitted } from './decide.ts';
import { assignWaves } from './fleet-members.ts';
import { requiredReady, setReadiness } from './fleet-policy.ts';
import { fleetEnvironmentStatusOf, isEnvironmentKnown } from './observe.ts';
import { MAX_FLEET_TARGETS_SHOWN, type TargetStatus } from './types.ts';
import type { ResolvedEnvironment, ResolvedWave } from './validate.ts';

function target(i: number, revision: string | undefined, state: 'ready' | 'not-ready' | 'unreadable' = 'ready'): TargetStatus {
  const cluster = `secret:fleet/c${String(i).padStart(4, '0')}`;
  if (state === 'unreadable') return { cluster, namespace: 'app', readable: false, ready: false, error: 'connection refused' };
  return { cluster, namespace: 'app', readable: true, exists: true, ready: state === 'ready', ...(state === 'ready' ? {} : { reason: 'NotReady' as const }), ...(revision === undefined ? {} : { revision }) };
}

const wave = (name: string, by: ResolvedWave['by'], extra: Partial<ResolvedWave> = {}): ResolvedWave => ({ name, by, readiness: { policy: 'All' }, soakSeconds: 0, requireApproval: false, ...extra });

describe('readiness policies', () => {
  it('counts what All, Quorum and Percent need', () => {
    assert.equal(requiredReady({ policy: 'All' }, 6), 6);
    assert.equal(requiredReady({ policy: 'Quorum', count: 5 }, 6), 5);
    assert.equal(requiredReady({ policy: 'Quorum', count: 9 }, 6), 6, 'a quorum larger than the fleet is all of it');
    assert.equal(requiredReady({ policy: 'Percent', percent: 70 }, 10), 7, 'exact, not 7.000…1 rounded up');
    assert.equal(requiredReady({ policy: 'Percent', percent: 50 }, 5), 3, 'rounded up');
    assert.equal(requiredReady({ policy: 'Percent', percent: 1 }, 5), 1);
    assert.equal(requiredReady({ policy: 'All' }, 0), 0);
  });

  it('a quorum is met with one cluster down; All is not', () => {
    const targets = [0, 1, 2, 3, 4].map((i) => target(i, '2')).concat(target(5, undefined, 'unreadable'));
    assert.deepEqual(setReadiness(targets, { policy: 'Quorum', count: 5 }), {
      ready: true, revision: '2', counts: { total: 6, readyTargets: 5, required: 5, readable: 5, notReady: { Unreadable: 1 } },
    });
    assert.equal(setReadiness(targets, { policy: 'All' }).ready, false);
    assert.equal(setReadiness([], { policy: 'All' }).ready, false, 'an empty set is never ready');
  });

  it('stands at the revision most targets are ready at, counting the others by reason', () => {
    const targets = [target(0, '2'), target(1, '2'), target(2, '1'), target(3, '2', 'not-ready'), target(4, '1', 'not-ready')];
    const r = setReadiness(targets, { policy: 'Percent', percent: 40 });
    assert.equal(r.revision, '2');
    assert.equal(r.ready, true);
    assert.deepEqual(r.counts.notReady, { OtherRevision: 1, NotReady: 2 });
  });
});

describe('fleet environment status', () => {
  const fleetEnv = (waves: readonly ResolvedWave[], members: number): ResolvedEnvironment => {
    const env: ResolvedEnvironment = {
      name: 'prod',
      targets: [],
      requireApproval: false,
      fleet: { namespace: 'app', selector: undefined, clusters: [], readiness: { policy: 'Quorum', count: members - 1 }, waves },
    };
    const list = Array.from({ length: members }, (_, i) => ({ target: { cluster: { kind: 'secret' as const, name: `c${i}` }, clusterKey: target(i, undefined).cluster, namespace: 'app' }, labels: { wave: i < 2 ? 'canary' : 'main' } }));
    return { ...env, targets: list.map((m) => m.target), waveOf: assignWaves(list, waves) };
  };

  it('judges each wave by its own policy and the environment by its own', () => {
    const env = fleetEnv([wave('canary', { kind: 'selector', labelSelector: 'wave=canary' }, { soakSeconds: 60 }), wave('rest', { kind: 'count', count: 1 })], 6);
    // The canary wave (c0, c1) runs 2; the rest still 1.
    const status = fleetEnvironmentStatusOf(env, [target(0, '2'), target(1, '2'), target(2, '1'), target(3, '1'), target(4, '1'), target(5, '1')]);
    assert.equal(status.ready, false, 'Quorum 5: 4 ready at 1 is not enough');
    assert.equal(status.revision, '1');
    assert.deepEqual(status.waves, [
      { name: 'canary', ready: true, revision: '2', total: 2, readyTargets: 2, required: 2, soakSeconds: 60 },
      { name: 'rest', ready: true, revision: '1', total: 4, readyTargets: 4, required: 4 },
    ]);
    assert.deepEqual(status.fleet, { policy: 'Quorum 5', total: 6, readyTargets: 4, required: 5, readable: 6, notReady: { OtherRevision: 2 } });
    assert.equal(isEnvironmentKnown(status), true);
  });

  it('is known with one cluster down when the rest can meet the policy, and not with two', () => {
    const env = fleetEnv([], 6);
    const one = fleetEnvironmentStatusOf(env, [0, 1, 2, 3, 4].map((i) => target(i, '2')).concat(target(5, undefined, 'unreadable')));
    assert.equal(isEnvironmentKnown(one), true);
    assert.equal(one.ready, true);
    const two = fleetEnvironmentStatusOf(env, [0, 1, 2, 3].map((i) => target(i, '2')).concat(target(4, undefined, 'unreadable'), target(5, undefined, 'unreadable')));
    assert.equal(isEnvironmentKnown(two), false);
    assert.equal(isEnvironmentKnown(fleetEnvironmentStatusOf(env, [target(0, '2')], { error: 'forbidden' })), false, 'members not readable');
  });

  it('while the member list loads: Ready and Promoting say FleetMembershipLoading, nothing is decided or timed out', () => {
    const env = { ...fleetEnv([wave('canary', { kind: 'count', count: 1 }), wave('rest', { kind: 'count', count: 1 })], 0), targets: [], waveOf: new Map<string, string>() };
    const loading = fleetEnvironmentStatusOf(env, [], { loading: true });
    assert.equal(loading.ready, false);
    assert.equal(loading.fleet?.membership, 'Loading');
    assert.equal(isEnvironmentKnown(loading), false);
    const dev = { name: 'dev', ready: true, revision: '2', targets: [{ cluster: 'local', namespace: 'app', readable: true, exists: true, ready: true, revision: '2' }] };
    const ready = readyCondition([dev, loading], 3);
    assert.deepEqual([ready.status, ready.reason], ['Unknown', 'FleetMembershipLoading']);
    assert.match(ready.message, /fleet membership of prod/);
    assert.doesNotMatch(ready.message, /0 of 0/);
    // A wave carried out long ago is not failed on "0 of 0 ready" while the list loads.
    const committed = { environment: 'prod', wave: 'canary', revision: '2', strategy: 'patch' as const, state: 'Committed' as const, attempts: 1, startedAt: '2026-01-01T00:00:00Z', committedAt: '2026-01-01T00:00:00Z' };
    const now = Date.parse('2026-01-02T00:00:00Z');
    assert.deepEqual(settleCommitted([dev, loading], [committed], now, '2026-01-02T00:00:00Z'), []);
    assert.deepEqual(decidePromotion([dev, loading], [], now), { action: 'none' });
    const promoting = promotingCondition([committed], 3, [dev, loading]);
    assert.deepEqual([promoting.status, promoting.reason], ['Unknown', 'FleetMembershipLoading']);
    assert.match(promoting.message, /fleet membership of prod.*carried out, waiting for the wave/);
    // Once known, the conditions are the usual ones.
    const known = fleetEnvironmentStatusOf(fleetEnv([], 2), [target(0, '2'), target(1, '2')]);
    assert.equal(readyCondition([dev, known], 3).reason, 'Reconciled');
    assert.equal(promotingCondition([committed], 3, [dev, known]).reason, 'WaitingForApply');
  });

  it(`shows a thousand-cluster fleet as counts and the first ${MAX_FLEET_TARGETS_SHOWN} not ready`, () => {
    const env = fleetEnv([], 1_000);
    const targets = Array.from({ length: 1_000 }, (_, i) => target(i, '2', i % 10 === 0 ? 'not-ready' : 'ready'));
    const [shown] = displayEnvironments([fleetEnvironmentStatusOf(env, targets)]);
    assert.ok(shown !== undefined);
    assert.equal(shown.targets.length, MAX_FLEET_TARGETS_SHOWN);
    assert.ok(shown.targets.every((t) => !t.ready));
    assert.deepEqual(shown.fleet?.notReady, { NotReady: 100 });
    assert.ok(JSON.stringify(shown).length < 4_000, `status of the environment: ${JSON.stringify(shown).length} bytes`);
    // A plain environment keeps every target.
    const plain = displayEnvironments([{ name: 'dev', ready: true, revision: '2', targets: targets.slice(0, 3) }]);
    assert.equal(plain[0]?.targets.length, 3);
  });
});

describe('assignWaves', () => {
  const members = ['d', 'a', 'c', 'b', 'e', 'f'].map((n) => ({ target: { cluster: { kind: 'secret' as const, name: n }, clusterKey: `secret:ns/${n}`, namespace: 'app' }, labels: n === 'e' ? { ring: '0' } : {} }));

  it('takes selector matches, then counts and percentages in name order, and the rest into the last wave', () => {
    const waveOf = assignWaves(members, [
      wave('canary', { kind: 'selector', labelSelector: 'ring=0' }),
      wave('one', { kind: 'count', count: 1 }),
      wave('third', { kind: 'percent', percent: 33 }),
      wave('rest', { kind: 'count', count: 1 }),
    ]);
    assert.deepEqual(Object.fromEntries([...waveOf].map(([k, w]) => [k.slice('secret:ns/'.length), w])), { e: 'canary', a: 'one', b: 'third', c: 'third', d: 'rest', f: 'rest' });
  });
});
