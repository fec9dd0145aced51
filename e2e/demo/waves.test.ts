import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { waveAwaited, waveChanges, waveSummary, type WaveStatusView } from './waves.ts';

const waves = (canaryRevision: string, restRevision: string, restReady: number): NonNullable<WaveStatusView['environments']> => [{
  name: 'prod',
  waves: [
    { name: 'canary', ready: true, revision: canaryRevision, total: 1, readyTargets: 1, soakSeconds: 5 },
    { name: 'rest', ready: restReady === 3, revision: restRevision, total: 3, readyTargets: restReady },
  ],
}];
const record = (wave: string, state: string, startedAt: string, readyAt?: string): NonNullable<WaveStatusView['promotions']>[number] => ({
  environment: 'prod', wave, revision: '1.1.0', state, startedAt, ...(readyAt === undefined ? {} : { readyAt }),
});

describe('waveChanges', () => {
  it('tells each wave starting, then ready with the soak before the next, once each and in order', () => {
    const told = new Map<string, 'started' | 'ready' | 'failed'>();
    assert.deepEqual(waveChanges(told, { environments: waves('1.0.0', '1.0.0', 3), promotions: [] }, 'prod', '1.1.0'), []);
    const canaryOn = { environments: waves('1.0.0', '1.0.0', 3), promotions: [record('canary', 'Committed', '2026-01-01T00:00:02Z')] };
    assert.deepEqual(waveChanges(told, canaryOn, 'prod', '1.1.0'), ['wave canary starts: 1.1.0 patched into its 1 cluster (promotion Committed)']);
    assert.deepEqual(waveChanges(told, canaryOn, 'prod', '1.1.0'), [], 'told once');
    const canaryReady = { environments: waves('1.1.0', '1.0.0', 3), promotions: [record('canary', 'Succeeded', '2026-01-01T00:00:02Z', '2026-01-01T00:00:03Z')] };
    assert.deepEqual(waveChanges(told, canaryReady, 'prod', '1.1.0'), ['wave canary ready at 1.1.0 (1 of 1 cluster ready); soaking 5 s before wave rest starts']);
    // The rest started and became ready between two polls: both told, in order.
    const done = { environments: waves('1.1.0', '1.1.0', 3), promotions: [...canaryReady.promotions, record('rest', 'Succeeded', '2026-01-01T00:00:08Z', '2026-01-01T00:00:09Z')] };
    assert.deepEqual(waveChanges(told, done, 'prod', '1.1.0'), ['wave rest starts: 1.1.0 patched into its 3 clusters (promotion Succeeded)', 'wave rest ready at 1.1.0 (3 of 3 clusters ready)']);
    assert.deepEqual(waveSummary(done, 'prod', '1.1.0', Date.parse('2026-01-01T00:00:00Z'), (w) => (w === 'canary' ? ['prod-1'] : ['prod-2', 'prod-3'])).map((l) => l.replace(/ +/g, ' ')), [
      'wave canary prod-1 started 2.0 s, ready 3.0 s (Succeeded)',
      'wave rest prod-2, prod-3 started 8.0 s, ready 9.0 s, 5.0 s after the previous wave was ready (Succeeded)',
    ]);
  });

  it('tells a failed wave with its record\'s message', () => {
    const told = new Map<string, 'started' | 'ready' | 'failed'>();
    const status = { environments: waves('1.1.0', '1.0.0', 1), promotions: [{ ...record('rest', 'Failed', '2026-01-01T00:00:08Z'), message: 'not ready within 15 s' }] };
    assert.deepEqual(waveChanges(told, status, 'prod', '1.1.0'), ['wave rest starts: 1.1.0 patched into its 3 clusters (promotion Failed)', 'wave rest failed: not ready within 15 s']);
  });
});

describe('waveAwaited', () => {
  it('names the wave not yet ready, or the soak before the next', () => {
    assert.equal(waveAwaited({ environments: waves('1.0.0', '1.0.0', 3), promotions: [] }, 'prod', '1.1.0'), undefined);
    assert.equal(waveAwaited({ environments: waves('1.0.0', '1.0.0', 3), promotions: [record('canary', 'Committed', 'x')] }, 'prod', '1.1.0'), 'wave canary to be ready at 1.1.0 (0 of 1 clusters so far; promotion Committed)');
    assert.equal(waveAwaited({ environments: waves('1.1.0', '1.0.0', 3), promotions: [record('canary', 'Succeeded', 'x')] }, 'prod', '1.1.0'), 'wave rest to start once wave canary has soaked (5 s soak after it was ready)');
    assert.equal(waveAwaited({ environments: waves('1.1.0', '1.1.0', 2), promotions: [record('canary', 'Succeeded', 'x'), record('rest', 'Committed', 'y')] }, 'prod', '1.1.0'), 'wave rest to be ready at 1.1.0 (2 of 3 clusters so far; promotion Committed)');
  });
});
