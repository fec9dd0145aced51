import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { CacheInfo } from '../../lib/registry/index.ts';
import type { KubeObject } from '../../lib/transport/index.ts';
import { KubeconfigSecretNotFoundError } from '../../lib/cluster/index.ts';
import { rendezvousOwner, type ShardStatus } from '../../lib/manager/index.ts';
import { KubeApiError, TransportError } from '../../lib/util/index.ts';
import { AssignmentMemo, MAX_SHARD_KEYS, type ShardView } from './shards.ts';
import { buildState, clusterOfConnection, errorReason, MAX_FIELD_TEXT, MAX_HISTORY, MAX_OMITTED_NAMES, MAX_WAVES, MIN_DOCUMENT_BYTES, pipelineView, type DashboardState, type RequestCounts } from './model.ts';
import { unreachablePipeline } from './fleet.test-util.ts';

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
    assert.equal(state.clusters[0]?.lastError, 'Error', 'a cluster\'s error is its type, never the text');
  });

  it('keeps at most the newest history records', () => {
    const promotions = Array.from({ length: MAX_HISTORY + 7 }, (_, i) => ({ environment: 'prod', revision: `1.${i}.0`, strategy: 'patch', state: 'Succeeded', attempts: 1, startedAt: new Date(NOW + i * 1000).toISOString() }));
    const view = pipelineView(pipeline({ promotions }));
    assert.equal(view.history.length, MAX_HISTORY);
    assert.equal(view.history[0]?.revision, `1.${MAX_HISTORY + 6}.0`);
  });

  it('sums caches per cluster (every identity on the management cluster is `local`) and tells reachability from the last request', () => {
    const requests = new Map<string, RequestCounts>([
      ['local', { requests: 40, failed: 2, lastCode: '200' }],
      ['secret:delivery/prod-kubeconfig', { requests: 5, failed: 5, lastCode: '<error>' }],
      ['secret:delivery/staging-kubeconfig', { requests: 9, failed: 1, lastCode: '403' }],
    ]);
    const state = buildState({
      now: NOW,
      pipelines: [],
      pipelinesSynced: false,
      caches: [
        cache({ cluster: 'local', objects: 3, relists: 1, watchErrors: 0, owners: 1, retainedBytes: 5_000, compressed: 2 }),
        cache({ cluster: 'local[as=system:serviceaccount:team-a:deployer]', namespace: 'team-a', objects: 2, retainedBytes: 2_048, synced: false, watchErrors: 4, ageMs: 5_000, lastError: new KubeApiError({ cluster: 'local', gvk: deployments, statusCode: 403, status: { reason: 'Forbidden', message: 'no' } }) }),
        cache({ cluster: 'secret:delivery/staging-kubeconfig', objects: 1, relists: 2, ageMs: 61_400, nextGcCheckInMs: 4_000 }),
      ],
      requests,
    });
    assert.deepEqual(state.clusters.map((c) => [c.name, c.reachable, c.requests, c.failedRequests, c.caches, c.syncedCaches, c.objects, c.heldBytes, c.relists, c.watchErrors]), [
      ['local', true, 40, 2, 2, 1, 5, 7_168, 1, 4],
      ['secret:delivery/prod-kubeconfig', false, 5, 5, 0, 0, 0, 0, 0, 0],
      ['secret:delivery/staging-kubeconfig', true, 9, 1, 1, 1, 1, 0, 2, 0],
    ]);
    // Bytes held per cache (cluster × kind), to the KiB above: 5,000 B is 5 KiB, 2,048 B stays 2 KiB; unknown is 0.
    assert.deepEqual(state.caches.map((c) => [c.cluster, c.heldBytes]), [['local', 5_120], ['local[as=system:serviceaccount:team-a:deployer]', 2_048], ['secret:delivery/staging-kubeconfig', 0]]);
    assert.deepEqual(state.caches.map((c) => c.packed), [2, undefined, undefined], 'objects held packed, absent when none');
    assert.equal(state.clusters[0]?.lastError, 'ERR_KUBE_API HTTP 403 Forbidden', 'the typed reason, not the peer\'s message');
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

  it('shows a cluster\'s last error by its typed reason only, never a peer\'s text', () => {
    const peer = new KubeApiError({ cluster: 'secret:team-b/prod', statusCode: 500, status: { reason: 'InternalError', message: 'team-b secret: hunter2 at https://10.0.0.1' } });
    assert.equal(errorReason(peer), 'ERR_KUBE_API HTTP 500 InternalError');
    assert.equal(errorReason(new KubeApiError({ cluster: 'local', statusCode: 502 })), 'ERR_KUBE_API HTTP 502');
    assert.equal(errorReason(new TransportError({ cluster: 'local' }, 'connect ECONNREFUSED 10.0.0.1:6443')), 'ERR_TRANSPORT');
    assert.equal(errorReason(Object.assign(new Error('x'), { code: 'not a code: peer text' })), 'Error', 'a code that is not ours is not shown');
    const state = buildState({ now: NOW, pipelines: [], pipelinesSynced: true, caches: [cache({ cluster: 'secret:team-b/prod', lastError: peer })], requests: new Map() });
    assert.equal(state.clusters[0]?.lastError, 'ERR_KUBE_API HTTP 500 InternalError');
    assert.ok(!JSON.stringify(state.clusters).includes('hunter2'));
  });

  it('lists the clusters whose kubeconfig Secret is missing or lacks its key, from the Pipelines naming them, without the Secret\'s key names', () => {
    // The messages the controller writes into a target's status: those of the provider's typed error.
    const gone = new KubeconfigSecretNotFoundError({ cluster: 'secret:delivery/prod-kubeconfig', namespace: 'delivery', name: 'prod-kubeconfig', keys: ['value', 'kubeconfig'], availableKeys: undefined });
    const keyless = new KubeconfigSecretNotFoundError({ cluster: 'cluster-api:delivery/edge', namespace: 'delivery', name: 'edge-kubeconfig', keys: ['value'], availableKeys: ['private-token-name'] });
    const target = (cluster: string, error: string): unknown => ({ cluster, namespace: 'apps', readable: false, ready: false, error });
    const status = {
      environments: [
        { name: 'staging', ready: false, targets: [target('secret:delivery/prod-kubeconfig', gone.message), target('cluster-api:delivery/edge', keyless.message)] },
        // Not about credentials: an unreachable cluster, and a text that only looks alike from another cluster.
        { name: 'prod', ready: false, targets: [target('secret:delivery/far', 'cluster secret:delivery/far: connect ECONNREFUSED'), target('secret:delivery/other', gone.message)] },
      ],
    };
    const state = buildState({ now: NOW, pipelines: [pipeline(status)], pipelinesSynced: true, caches: [], requests: new Map([['secret:delivery/prod-kubeconfig', { requests: 1, failed: 1, lastCode: '<error>' }]]) });
    assert.deepEqual(state.clusters.map((c) => [c.name, c.credentialsMissing, c.requests]), [
      ['cluster-api:delivery/edge', 'KeyNotFound', 0],
      ['secret:delivery/prod-kubeconfig', 'SecretNotFound', 1],
    ]);
    assert.ok(!JSON.stringify(state.clusters).includes('private-token-name'));
  });

  describe('a fleet environment with waves', () => {
    const readyAt = '2026-11-23T08:40:00Z';
    const wave = (name: string, extra: Record<string, unknown>): Record<string, unknown> => ({ name, ready: false, total: 4, readyTargets: 0, required: 4, ...extra });
    const record = (extra: Record<string, unknown>): Record<string, unknown> => ({ environment: 'prod', revision: '1.1.0', strategy: 'patch', attempts: 1, startedAt: '2026-11-23T08:30:00Z', ...extra });
    const fleetStatus = (promotions: unknown[], waves: unknown[] = [
      wave('canary', { ready: true, revision: '1.1.0', total: 2, readyTargets: 2, required: 2, soakSeconds: 1800 }),
      wave('early', { revision: '1.0.0', total: 5, readyTargets: 5, required: 5, requireApproval: true }),
      wave('rest', { revision: '1.0.0', total: 13, readyTargets: 10, required: 12 }),
    ]): unknown => ({
      observedGeneration: 3,
      environments: [
        { name: 'staging', ready: true, revision: '1.1.0', targets: [{ cluster: 'local', namespace: 'apps', readable: true, ready: true, revision: '1.1.0' }] },
        {
          name: 'prod', ready: false, revision: '1.0.0', reason: 'Progressing',
          fleet: { policy: 'Percent 90', total: 20, readyTargets: 12, required: 18, readable: 19, notReady: { Progressing: 5, Unreadable: 1, OtherRevision: 2, '<b>Bogus</b>': 3, Missing: 'many' } },
          waves,
          targets: [
            { cluster: 'secret:delivery/prod-03', namespace: 'apps', readable: true, exists: true, ready: false, revision: '1.0.0', reason: 'Progressing' },
            { cluster: 'secret:delivery/prod-07', namespace: 'apps', readable: true, exists: true, ready: false, reason: '<script>x</script>' },
          ],
        },
      ],
      promotions,
    });

    it('shows the readiness policy and counts by reason, the first not-ready targets with their reasons, and each wave of the newest rollout in order', () => {
      const view = pipelineView(pipeline(fleetStatus([
        record({ wave: 'canary', revision: '1.0.0', state: 'Succeeded', readyAt: '2026-11-22T08:00:00Z' }),
        record({ wave: 'early', revision: '1.0.0', state: 'Failed', message: 'an older rollout' }),
        record({ environment: 'staging', state: 'Succeeded' }),
        record({ wave: 'canary', state: 'Succeeded', readyAt, message: 'carried out; wave canary of prod is ready' }),
        record({ wave: 'early', state: 'AwaitingApproval', attempts: 0 }),
      ])));
      const prod = view.environments[1];
      assert.deepEqual(prod?.fleet, { policy: 'Percent 90', total: 20, readyTargets: 12, required: 18, readable: 19, notReady: [{ reason: 'Progressing', count: 5 }, { reason: 'Unreadable', count: 1 }, { reason: 'OtherRevision', count: 2 }] }, 'only the fixed vocabulary and whole counts');
      assert.equal(prod.reason, 'Progressing');
      assert.deepEqual(prod.targets.map((t) => [t.cluster, t.reason]), [['secret:delivery/prod-03', 'Progressing'], ['secret:delivery/prod-07', undefined]], 'a reason outside the vocabulary is never echoed');
      assert.deepEqual(prod.waves?.map((w) => [w.name, w.state, w.revision, w.ready, w.readyTargets, w.total, w.required]), [
        ['canary', 'Ready', '1.1.0', true, 2, 2, 2],
        ['early', 'AwaitingApproval', '1.1.0', false, 5, 5, 5],
        ['rest', 'NotStarted', '1.1.0', false, 10, 13, 12],
      ]);
      assert.equal(prod.waves[0]?.soakUntil, Date.parse(readyAt) + 1_800_000, 'the soak ends soakSeconds after the wave was first ready');
      assert.equal(prod.waves[1]?.soakUntil, undefined);
      assert.equal(prod.waves[1]?.requireApproval, true);
      assert.equal(view.environments[0]?.fleet, undefined, 'a plain environment has no fleet view');
      assert.equal(view.environments[0]?.waves, undefined);
      assert.deepEqual(view.inFlight.map((p) => [p.environment, p.wave, p.state]), [['prod', 'early', 'AwaitingApproval']], 'the wave awaiting approval is in flight, with its wave (approved as prod/early)');
    });

    it('says which wave is being carried out, carried out and not ready yet, or failed (with why), and caps the waves', () => {
      const states = (promotions: unknown[]): unknown => pipelineView(pipeline(fleetStatus(promotions))).environments[1]?.waves?.map((w) => w.state);
      assert.deepEqual(states([]), ['NotStarted', 'NotStarted', 'NotStarted'], 'no rollout yet');
      assert.deepEqual(states([record({ wave: 'canary', state: 'Pending' })]), ['Pending', 'NotStarted', 'NotStarted']);
      assert.deepEqual(states([record({ wave: 'canary', state: 'Committed' })]), ['CarriedOut', 'NotStarted', 'NotStarted']);
      const failed = pipelineView(pipeline(fleetStatus([
        record({ wave: 'canary', state: 'Succeeded', readyAt }),
        record({ wave: 'early', state: 'Succeeded', readyAt }),
        record({ wave: 'rest', state: 'Failed', message: 'wave rest of prod was not ready at 1.1.0 within 600 s: the rollout stops at this wave' }),
      ]))).environments[1]?.waves;
      assert.deepEqual(failed?.map((w) => w.state), ['Ready', 'Ready', 'Failed']);
      assert.match(failed[2]?.message ?? '', /the rollout stops at this wave/);
      assert.equal(failed[1]?.soakUntil, undefined, 'no soak without soakSeconds');

      const many = Array.from({ length: MAX_WAVES + 5 }, (_, i) => wave(i === 0 ? '<img src=x onerror=alert(1)>\u202e' : `w${i}`, {}));
      const capped = pipelineView(pipeline(fleetStatus([], many))).environments[1]?.waves;
      assert.equal(capped?.length, MAX_WAVES);
      assert.equal(capped[0]?.name, '<img src=x onerror=alert(1)>\\u202e', 'sanitized as every text (the page adds it as text)');
      for (const odd of [{ waves: 'no' }, { waves: [null, 7, { name: ['x'], total: -1, readyTargets: 1.5 }] }, { fleet: 'x' }, { fleet: { notReady: [1] } }]) {
        const env = pipelineView(pipeline({ environments: [{ name: 'prod', ready: false, targets: [], ...odd }] })).environments[0];
        JSON.stringify(env);
        for (const w of env?.waves ?? []) assert.deepEqual([w.name, w.total, w.readyTargets, w.state], ['', 0, 0, 'NotStarted']);
      }
    });
  });

  describe('within a byte bound', () => {
    const MAX = 512 * 1024;
    /** `count` Pipelines of `targets` unreachable targets in each of two environments, and some history. */
    function fleet(count: number, targets: number, name = 'app'): KubeObject[] {
      return Array.from({ length: count }, (_, p) => {
        const pipeline = unreachablePipeline(p, targets, name);
        return {
          ...pipeline,
          status: {
            ...pipeline.status,
            promotions: Array.from({ length: 10 }, (_, i) => ({ environment: 'prod', revision: `1.${i}.0`, strategy: 'patch', state: 'Failed', attempts: 1, startedAt: new Date(NOW + i * 1000).toISOString() })),
          },
        };
      });
    }
    const size = (state: DashboardState): number => Buffer.byteLength(JSON.stringify(state));

    it('leaves a document that fits as it is, with no marker', () => {
      const state = buildState({ now: NOW, pipelines: fleet(2, 10), pipelinesSynced: true, caches: [], requests: new Map(), maxBytes: MAX });
      assert.equal(state.truncated, undefined);
      assert.equal(state.pipelines[0]?.environments[0]?.targets.length, 10);
      assert.ok(!JSON.stringify(state).includes('omitted'), 'no count of anything left out');
    });

    it('cuts the same number of targets from every environment when there are too many, and says how many (6 Pipelines × 1,000 unreachable targets)', () => {
      const sources = { now: NOW, pipelines: fleet(6, 1_000), pipelinesSynced: true, caches: [], requests: new Map<string, RequestCounts>() };
      assert.ok(size(buildState(sources)) > 1024 * 1024, 'over 1 MiB unbounded');
      const state = buildState({ ...sources, maxBytes: MAX });
      assert.ok(size(state) <= MAX, `${size(state)} bytes`);
      assert.ok(size(state) > MAX * 0.9, 'the room is used');
      assert.equal(state.pipelines.length, 6, 'every Pipeline shown');
      const shown = state.pipelines[0]?.environments[0]?.targets.length ?? 0;
      assert.ok(shown > 100 && shown < 1_000, `${shown} targets shown per environment`);
      for (const p of state.pipelines) {
        for (const env of p.environments) {
          assert.equal(env.targets.length, shown);
          assert.equal((env.omittedTargets ?? 0) + env.targets.length, 1_000);
        }
        assert.equal(p.history.length, 10, 'history kept while cutting targets is enough');
      }
      assert.deepEqual(state.truncated, { maxBytes: MAX, targets: 12_000 - 12 * shown, history: 0, pipelines: 0, pipelineNames: [], caches: 0, clusters: 0 });
      assert.equal(state.pipelines[0]?.environments[0]?.targets[0]?.cluster, 'secret:team-0/cluster-0', 'the first ones, in status order');
    });

    it('then leaves out history, then whole Pipelines (naming them), when even no targets do not fit', () => {
      const state = buildState({ now: NOW, pipelines: fleet(200, 5, 'a'.repeat(240)), pipelinesSynced: true, caches: [], requests: new Map(), maxBytes: MIN_DOCUMENT_BYTES });
      assert.ok(size(state) <= MIN_DOCUMENT_BYTES, `${size(state)} bytes`);
      const marker = state.truncated;
      assert.ok(marker !== undefined);
      assert.ok(marker.pipelines > 0 && state.pipelines.length > 0, `${state.pipelines.length} shown, ${marker.pipelines} left out`);
      assert.equal(state.pipelines.length + marker.pipelines, 200);
      assert.equal(marker.pipelineNames.length, MAX_OMITTED_NAMES);
      assert.ok(!state.pipelines.some((p) => marker.pipelineNames.includes(`${p.namespace}/${p.name}`)), 'the names are of Pipelines not shown');
      for (const p of state.pipelines) {
        assert.deepEqual(p.environments.map((e) => [e.targets.length, e.omittedTargets]), [[0, 5], [0, 5]]);
        assert.deepEqual([p.history.length, p.omittedHistory], [0, 10]);
      }
      assert.equal(marker.history, 10 * state.pipelines.length);
    });

    it('refuses a bound too small to hold the marker', () => {
      assert.throws(() => buildState({ now: NOW, pipelines: [], pipelinesSynced: true, caches: [], requests: new Map(), maxBytes: 1_000 }), /maxBytes must be an integer of at least 65536, got 1000/);
    });
  });
});

describe('the dashboard state of a sharded service (--shard)', () => {
  const keys = Array.from({ length: 60 }, (_, i) => `team-${i % 6}/app-${i}`);
  const peers = [
    { identity: 'replica-a', weight: 1, live: true, self: true },
    { identity: 'replica-b', weight: 2, live: true, self: false },
    { identity: 'replica-c', weight: 1, live: false, self: false },
  ];
  const live = peers.filter((p) => p.live);
  const assignedTo = (identity: string): string[] => keys.filter((k) => rendezvousOwner(k, live) === identity).sort();
  const status = (overrides: Partial<ShardStatus> = {}): ShardStatus => ({
    identity: 'replica-a',
    joined: true,
    peers,
    owned: assignedTo('replica-a').slice(1),
    handoff: assignedTo('replica-a').slice(0, 1),
    unowned: [{ key: 'team-0/app-0', forMs: 45_400 }, { key: 'team-1/app-1', forMs: 3_000 }],
    boundMs: 34_000,
    orphaned: ['team-0/app-0'],
    ...overrides,
  });

  it('shows each peer, its weight and liveness, and its share of the keys as this replica computes it; its own fences as facts', () => {
    const state = buildState({ now: NOW, pipelines: [], pipelinesSynced: true, caches: [], requests: new Map(), shards: { status: status(), keys: [...keys].reverse() } });
    const view = state.shards;
    assert.ok(view !== undefined);
    assert.equal(view.identity, 'replica-a');
    assert.equal(view.keys, 60);
    assert.equal(view.boundMs, 34_000);
    assert.deepEqual(view.peers.map((p) => [p.identity, p.weight, p.live, p.self, p.assigned.count, p.acting]), [
      ['replica-a', 1, true, true, assignedTo('replica-a').length, assignedTo('replica-a').length - 1],
      ['replica-b', 2, true, false, assignedTo('replica-b').length, undefined],
      ['replica-c', 1, false, false, 0, undefined],
    ]);
    assert.equal(view.peers[0]!.assigned.count + view.peers[1]!.assigned.count, 60, 'every key assigned to a live peer');
    assert.deepEqual(view.peers[1]?.assigned.keys, assignedTo('replica-b'), 'the same owners every replica computes (rendezvous over the live peers)');
    assert.ok(view.peers[1].assigned.count > (view.peers[0]?.assigned.count ?? 0), 'weight 2 gets the larger share');
    assert.deepEqual(view.handoff, { count: 1, keys: assignedTo('replica-a').slice(0, 1) });
    assert.deepEqual(view.unowned, { count: 2, keys: [{ key: 'team-0/app-0', since: NOW - 45_000 }, { key: 'team-1/app-1', since: NOW - 3_000 }] });
    assert.deepEqual(view.orphaned, { count: 1, keys: ['team-0/app-0'] });
  });

  it('is the same JSON a moment later (unowned times to the second), and has no shard view without --shard', () => {
    const at = (now: number, s: ShardStatus): string => JSON.stringify(buildState({ now, pipelines: [], pipelinesSynced: true, caches: [], requests: new Map(), shards: { status: s, keys } }));
    const later = status({ unowned: status().unowned.map((u) => ({ ...u, forMs: u.forMs + 40 })) });
    assert.equal(at(NOW, status()), at(NOW + 40, later));
    const plain = buildState({ now: NOW, pipelines: [pipeline(promoting)], pipelinesSynced: true, caches: [], requests: new Map() });
    assert.equal('shards' in plain, false);
    assert.ok(!JSON.stringify(plain).includes('shard'));
  });

  it('hashes an unchanged group once: the same view from a remembered assignment, computed again when a peer or a key changes', () => {
    const memo = new AssignmentMemo();
    const at = (s: ShardStatus, k: readonly string[]): string => JSON.stringify(buildState({ now: NOW, pipelines: [], pipelinesSynced: true, caches: [], requests: new Map(), shards: { status: s, keys: k, memo } }).shards);
    const fresh = (s: ShardStatus, k: readonly string[]): string => JSON.stringify(buildState({ now: NOW, pipelines: [], pipelinesSynced: true, caches: [], requests: new Map(), shards: { status: s, keys: k } }).shards);
    assert.equal(at(status(), keys), fresh(status(), keys));
    assert.equal(at(status(), [...keys].reverse()), fresh(status(), keys), 'the keys in any order');
    const bLost = status({ peers: peers.map((p) => (p.identity === 'replica-b' ? { ...p, live: false } : p)) });
    assert.equal(at(bLost, keys), fresh(bLost, keys));
    assert.equal((JSON.parse(at(bLost, keys)) as ShardView).peers[0]?.assigned.count, 60, 'replica-b gone: every key to replica-a');
    assert.equal(at(bLost, keys.slice(1)), fresh(bLost, keys.slice(1)));
    // Remembered: the very same assignment while nothing changed; a new one once something did.
    const sorted = [...keys].sort();
    const once = memo.owners(sorted, live);
    assert.equal(memo.owners(sorted, live.map((p) => ({ ...p }))), once);
    assert.notEqual(memo.owners(sorted, [{ identity: 'replica-a', weight: 1 }, { identity: 'replica-b', weight: 3 }]), once, 'a weight changed');
    assert.notEqual(memo.owners(sorted.slice(1), live), memo.owners(sorted, live), 'a key gone');
  });

  it('escapes and bounds identities and keys, and caps the lists (counts kept)', () => {
    const many = Array.from({ length: MAX_SHARD_KEYS + 50 }, (_, i) => `ns/p-${String(i).padStart(4, '0')}`);
    const view = buildState({
      now: NOW, pipelines: [], pipelinesSynced: true, caches: [], requests: new Map(),
      shards: { status: status({ identity: 'evil\u202e\n', peers: [{ identity: 'evil\u202e\n', weight: 1, live: true, self: true }], owned: [], handoff: many, unowned: [], orphaned: [] }), keys: many },
    }).shards;
    assert.equal(view?.identity, 'evil\\u202e\\n');
    assert.equal(view.peers[0]?.identity, 'evil\\u202e\\n');
    assert.deepEqual([view.handoff.count, view.handoff.keys.length], [MAX_SHARD_KEYS + 50, MAX_SHARD_KEYS]);
    assert.deepEqual([view.peers[0].assigned.count, view.peers[0].assigned.keys.length], [MAX_SHARD_KEYS + 50, MAX_SHARD_KEYS]);
  });

  it('cuts the shard key lists first when the document is over its bound, saying how many keys it left out', () => {
    const long = (i: number): string => `${'n'.repeat(60)}/${'p'.repeat(200)}-${i}`;
    const many = Array.from({ length: 1_000 }, (_, i) => long(i));
    const wide = [1, 2, 3, 4].map((i) => ({ identity: `replica-${i}`, weight: 1, live: true, self: i === 1 }));
    const sources = {
      now: NOW, pipelines: [pipeline(promoting)], pipelinesSynced: true, caches: [], requests: new Map<string, RequestCounts>(),
      shards: { status: status({ identity: 'replica-1', peers: wide, owned: [], handoff: many, unowned: many.map((key) => ({ key, forMs: 1_000 })), orphaned: many }), keys: many },
    };
    const full = buildState(sources);
    assert.ok(Buffer.byteLength(JSON.stringify(full)) > MIN_DOCUMENT_BYTES);
    const state = buildState({ ...sources, maxBytes: MIN_DOCUMENT_BYTES });
    assert.ok(Buffer.byteLength(JSON.stringify(state)) <= MIN_DOCUMENT_BYTES);
    const view = state.shards;
    assert.ok(view !== undefined);
    const shown = view.handoff.keys.length;
    assert.ok(shown > 0 && shown < MAX_SHARD_KEYS, `${shown} keys per list`);
    assert.deepEqual([view.handoff.count, view.orphaned.count, view.unowned.count, view.keys], [1_000, 1_000, 1_000, 1_000], 'counts whole');
    assert.equal(view.orphaned.keys.length, shown);
    const before = [...full.shards!.peers.map((p) => p.assigned.keys.length), MAX_SHARD_KEYS * 3].reduce((a, b) => a + b, 0);
    const after = [...view.peers.map((p) => p.assigned.keys.length), shown * 3].reduce((a, b) => a + b, 0);
    assert.equal(state.truncated?.shardKeys, before - after);
    assert.deepEqual([state.truncated.targets, state.truncated.history, state.truncated.pipelines], [0, 0, 0], 'the Pipelines untouched');
    assert.equal(state.pipelines[0]?.history.length, 3);
  });
});
