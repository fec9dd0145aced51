import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { CacheInfo } from '../../lib/registry/index.ts';
import type { KubeObject } from '../../lib/transport/index.ts';
import { KubeApiError } from '../../lib/util/index.ts';
import { buildState, clusterOfConnection, MAX_FIELD_TEXT, MAX_HISTORY, pipelineView, type RequestCounts } from './model.ts';

const NOW = Date.UTC(2026, 10, 23, 9, 0, 0);

function pipeline(status: unknown, extra: Record<string, unknown> = {}): KubeObject {
  return {
    apiVersion: 'fleetcache.dev/v1alpha1',
    kind: 'Pipeline',
    metadata: { namespace: 'delivery', name: 'podinfo', generation: 3, ...extra },
    spec: {
      appRef: { apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease', name: 'podinfo' },
      promotion: { strategy: 'git', git: { url: 'https://git.example/acme/fleet', secretRef: { name: 'fleet-git-credentials' } } },
    },
    status,
  };
}

const promoting = {
  observedGeneration: 3,
  conditions: [
    { type: 'Ready', status: 'True', reason: 'Promoting', message: 'promoting 1.1.0 to staging', lastTransitionTime: '2026-11-23T08:59:00Z', observedGeneration: 3 },
    { type: 'Promoting', status: 'True', reason: 'Pending', message: '', lastTransitionTime: '2026-11-23T08:59:00Z', observedGeneration: 3 },
  ],
  environments: [
    { name: 'dev', ready: true, revision: '1.1.0', targets: [{ cluster: 'local', namespace: 'apps', readable: true, exists: true, ready: true, revision: '1.1.0' }] },
    { name: 'staging', ready: true, revision: '1.0.0', targets: [{ cluster: 'secret:delivery/staging-kubeconfig', namespace: 'apps', readable: true, ready: true, revision: '1.0.0' }] },
    { name: 'prod', ready: false, targets: [{ cluster: 'secret:delivery/prod-kubeconfig', namespace: 'apps', readable: false, ready: false, error: 'cluster secret:delivery/prod-kubeconfig: HTTP 403' }] },
  ],
  promotions: [
    { environment: 'staging', revision: '1.0.0', strategy: 'patch', state: 'Succeeded', attempts: 1, startedAt: '2026-11-23T08:00:00Z', finishedAt: '2026-11-23T08:00:02Z' },
    { environment: 'prod', revision: '1.0.0', strategy: 'patch', state: 'Failed', attempts: 3, message: 'HTTP 403', startedAt: '2026-11-23T08:01:00Z', finishedAt: '2026-11-23T08:03:00Z' },
    { environment: 'staging', revision: '1.1.0', strategy: 'patch', state: 'Pending', attempts: 1, startedAt: '2026-11-23T08:59:00Z' },
  ],
};

const deployments = { group: 'apps', version: 'v1', kind: 'Deployment' };
function cache(overrides: Partial<CacheInfo>): CacheInfo {
  return { cluster: 'local', gvk: deployments, synced: true, objects: 0, owners: 0, ageMs: 0, lastError: undefined, nextGcCheckInMs: undefined, relists: 0, watchErrors: 0, ...overrides };
}

describe('the dashboard state', () => {
  it('shows each environment\'s revision and readiness, the promotion in flight and the history newest first', () => {
    const view = pipelineView(pipeline(promoting));
    assert.equal(view.namespace, 'delivery');
    assert.equal(view.name, 'podinfo');
    assert.deepEqual(view.ready, { status: 'True', reason: 'Promoting', message: 'promoting 1.1.0 to staging' });
    assert.equal(view.stale, false);
    assert.deepEqual(view.environments.map((e) => [e.name, e.revision, e.ready]), [['dev', '1.1.0', true], ['staging', '1.0.0', true], ['prod', undefined, false]]);
    assert.deepEqual(view.environments[2]?.targets[0], { cluster: 'secret:delivery/prod-kubeconfig', namespace: 'apps', readable: false, ready: false, error: 'cluster secret:delivery/prod-kubeconfig: HTTP 403' });
    assert.deepEqual(view.inFlight.map((p) => [p.environment, p.revision, p.state]), [['staging', '1.1.0', 'Pending']]);
    const committed = pipelineView(pipeline({ ...promoting, promotions: [{ environment: 'staging', revision: '1.1.0', strategy: 'git', state: 'Committed', attempts: 1, startedAt: '2025-01-01T00:00:00Z' }] }));
    assert.deepEqual(committed.inFlight.map((p) => p.state), ['Committed'], 'a commit not yet applied is in flight');
    assert.deepEqual(view.history.map((p) => [p.environment, p.revision, p.state]), [['staging', '1.1.0', 'Pending'], ['prod', '1.0.0', 'Failed'], ['staging', '1.0.0', 'Succeeded']]);
    assert.equal(view.history[1]?.message, 'HTTP 403');
  });

  it('carries names and status only, never the spec (URLs, Secret names)', () => {
    const json = JSON.stringify(buildState({ now: NOW, pipelines: [pipeline(promoting)], pipelinesSynced: true, caches: [], requests: new Map() }));
    assert.ok(!json.includes('git.example'), json);
    assert.ok(!json.includes('fleet-git-credentials'), json);
    assert.ok(!json.includes('HelmRelease'), json);
  });

  it('marks a Pipeline whose spec changed since the status was written', () => {
    assert.equal(pipelineView(pipeline(promoting, { generation: 4 })).stale, true);
    assert.equal(pipelineView(pipeline(undefined)).stale, true, 'never reconciled');
  });

  it('reads a status of any shape without throwing: wrong types are left out', () => {
    for (const status of [undefined, null, 'text', 42, [], { environments: 'no', promotions: { a: 1 }, conditions: [null, 1, 'x'] },
      { environments: [{ name: 7, ready: 'yes', targets: [{ cluster: ['x'] }, null] }], promotions: [{ attempts: 'many', state: {} }] }]) {
      const view = pipelineView(pipeline(status));
      assert.ok(Array.isArray(view.environments));
      JSON.stringify(view);
    }
    const odd = pipelineView(pipeline({ environments: [{ name: 7, ready: 'yes', targets: [{ cluster: ['x'] }] }], promotions: [{ attempts: 'many', state: {} }] }));
    assert.deepEqual(odd.environments, [{ name: '', ready: false, targets: [{ cluster: '', namespace: '', ready: false }] }]);
    assert.deepEqual(odd.history, [{ environment: '', revision: '', strategy: '', state: '', attempts: 0, startedAt: '' }]);
    assert.deepEqual(pipelineView({ metadata: undefined } as unknown as KubeObject).name, '');
  });

  it('escapes control and bidi characters and bounds every text from an object or a peer', () => {
    const hostile = '<img src=x onerror=alert(1)>\u001b[31m\u202eevil\nforged: line';
    const view = pipelineView(pipeline({
      conditions: [{ type: 'Ready', status: 'False', reason: 'Failed', message: hostile }],
      environments: [{ name: 'dev', ready: false, revision: 'x'.repeat(5_000), targets: [] }],
    }));
    assert.equal(view.ready?.message, '<img src=x onerror=alert(1)>\\x1b[31m\\u202eevil\\nforged: line', 'markup stays text (the page uses textContent); controls are escaped');
    assert.ok((view.environments[0]?.revision?.length ?? 0) <= MAX_FIELD_TEXT);
    const state = buildState({
      now: NOW,
      pipelines: [],
      pipelinesSynced: true,
      caches: [cache({ cluster: 'secret:team-a/prod', lastError: new Error('401 for Authorization: Bearer abc.def.ghi\u2028next') })],
      requests: new Map(),
    });
    assert.equal(state.caches[0]?.lastError, '401 for Authorization: Bearer [REDACTED]\\u2028next', 'credentials scrubbed as in logs');
    assert.equal(state.clusters[0]?.lastError, '401 for Authorization: Bearer [REDACTED]\\u2028next');
  });

  it('keeps at most the newest history records', () => {
    const promotions = Array.from({ length: MAX_HISTORY + 7 }, (_, i) => ({ environment: 'prod', revision: `1.${i}.0`, strategy: 'patch', state: 'Succeeded', attempts: 1, startedAt: new Date(NOW + i * 1000).toISOString() }));
    const view = pipelineView(pipeline({ promotions }));
    assert.equal(view.history.length, MAX_HISTORY);
    assert.equal(view.history[0]?.revision, `1.${MAX_HISTORY + 6}.0`);
  });

  it('sums caches per cluster (every identity on the management cluster is `local`) and tells reachability from the last request', () => {
    const requests = new Map<string, RequestCounts>([
      ['local', { requests: 40, failed: 2, lastCode: '2xx' }],
      ['secret:delivery/prod-kubeconfig', { requests: 5, failed: 5, lastCode: '<error>' }],
      ['secret:delivery/staging-kubeconfig', { requests: 9, failed: 1, lastCode: '403' }],
    ]);
    const state = buildState({
      now: NOW,
      pipelines: [],
      pipelinesSynced: false,
      caches: [
        cache({ cluster: 'local', objects: 3, relists: 1, watchErrors: 0, owners: 1 }),
        cache({ cluster: 'local[as=system:serviceaccount:team-a:deployer]', namespace: 'team-a', objects: 2, synced: false, watchErrors: 4, ageMs: 5_000, lastError: new KubeApiError({ cluster: 'local', gvk: deployments, statusCode: 403, status: { reason: 'Forbidden', message: 'no' } }) }),
        cache({ cluster: 'secret:delivery/staging-kubeconfig', objects: 1, relists: 2, ageMs: 61_400, nextGcCheckInMs: 4_000 }),
      ],
      requests,
    });
    assert.deepEqual(state.clusters.map((c) => [c.name, c.reachable, c.requests, c.failedRequests, c.caches, c.syncedCaches, c.objects, c.relists, c.watchErrors]), [
      ['local', true, 40, 2, 2, 1, 5, 1, 4],
      ['secret:delivery/prod-kubeconfig', false, 5, 5, 0, 0, 0, 0, 0],
      ['secret:delivery/staging-kubeconfig', true, 9, 1, 1, 1, 1, 2, 0],
    ]);
    assert.match(state.clusters[0]?.lastError ?? '', /403/);
    assert.equal(state.pipelinesSynced, false);
    const staging = state.caches.find((c) => c.cluster === 'secret:delivery/staging-kubeconfig');
    assert.deepEqual(staging && { createdAt: staging.createdAt, nextGcAt: staging.nextGcAt, kind: staging.kind, group: staging.group }, { createdAt: NOW - 61_000, nextGcAt: NOW + 4_000, kind: 'Deployment', group: 'apps' });
    assert.equal(state.caches.find((c) => c.namespace === 'team-a')?.synced, false);
    assert.equal(clusterOfConnection('local[as=system:serviceaccount:a:b]'), 'local');
    assert.equal(clusterOfConnection('secret:ns/name#key'), 'secret:ns/name#key');
  });

  it('is the same JSON for the same fleet, whatever the order of its inputs (so an unchanged state is not sent)', () => {
    const other = pipeline(promoting, { namespace: 'alpha', name: 'web' });
    const caches = [cache({ cluster: 'b', ageMs: 1_000 }), cache({ cluster: 'a', ageMs: 2_000 })];
    const one = buildState({ now: NOW, pipelines: [pipeline(promoting), other], pipelinesSynced: true, caches, requests: new Map() });
    const two = buildState({ now: NOW + 300, pipelines: [other, pipeline(promoting)], pipelinesSynced: true, caches: [...caches].reverse().map((c) => ({ ...c, ageMs: c.ageMs + 300 })), requests: new Map() });
    assert.equal(JSON.stringify(one), JSON.stringify(two));
    assert.deepEqual(one.pipelines.map((p) => p.namespace), ['alpha', 'delivery']);
  });
});
