// The acting side of a wave: only the wave's clusters are touched (patch), one webhook call carries
// the wave and its clusters, and a fleet is carried out once enough of it took the revision.
import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { ClusterConnection, RequestOptions, ResourceInfo } from '../transport/index.ts';
import type { ClusterRef } from '../cluster/index.ts';
import { GitPromoter } from '../gitops/index.ts';
import type { OwnerRef, Registry } from '../registry/index.ts';
import { FakeClock, noopLogger } from '../util/index.ts';
import { PromotionActor, type PromotionRequest } from './act.ts';
import { lateJoinCandidates } from './late-join.ts';
import type { EnvironmentStatus, PromotionRecord } from './types.ts';
import { assignWaves } from './fleet-members.ts';
import { ProgressingGrace } from './grace.ts';
import { TargetObserver } from './target-observer.ts';
import type { ResolvedEnvironment, ResolvedPromotion, ResolvedWave, ValidPipelineSpec } from './validate.ts';

const gvk = { group: 'helm.toolkit.fluxcd.io', version: 'v2', kind: 'HelmRelease' };
const owner: OwnerRef = { namespace: 'team-a', name: 'shop' };

/** Per cluster name: the chart version of its one HelmRelease, or 'down' (every request fails). */
function clusters(versions: Record<string, string>, webhookUrl = ''): { registry: Pick<Registry, 'connectionFor'>; versions: Record<string, string> } {
  const connectionFor = (ref: ClusterRef): Promise<ClusterConnection> => {
    const name = ref.kind === 'local' ? 'local' : ref.name;
    const connection = {
      name,
      resolve: (): Promise<ResourceInfo> => Promise.resolve({ gvk, resource: 'helmreleases', namespaced: true, verbs: [] }),
      request: (options: RequestOptions): Promise<unknown> => {
        if (name === 'local') return Promise.resolve({ data: { url: Buffer.from(webhookUrl).toString('base64') } });
        if (versions[name] === 'down') return Promise.reject(new Error('connect ECONNREFUSED'));
        if (options.method === 'PATCH') versions[name] = String((options.body as { value: unknown }[])[1]?.value);
        return Promise.resolve({ metadata: { name: 'podinfo', namespace: 'app', resourceVersion: '1', generation: 1 }, spec: { chart: { spec: { version: versions[name] } } } });
      },
    };
    return Promise.resolve(connection as unknown as ClusterConnection);
  };
  return { registry: { connectionFor }, versions };
}

const wave = (name: string, by: ResolvedWave['by'], readiness: ResolvedWave['readiness'] = { policy: 'All' }): ResolvedWave => ({ name, by, readiness, soakSeconds: 0, requireApproval: false });

function spec(promotion: ResolvedPromotion, readiness: ResolvedWave['readiness'] = { policy: 'All' }): ValidPipelineSpec {
  const waves = [wave('canary', { kind: 'count', count: 1 }), wave('rest', { kind: 'count', count: 1 }, readiness)];
  const members = ['c1', 'c2', 'c3'].map((name) => ({ target: { cluster: { kind: 'static' as const, name }, clusterKey: `static:${name}`, namespace: 'app' }, labels: {} }));
  const prod: ResolvedEnvironment = {
    name: 'prod', requireApproval: false, targets: members.map((m) => m.target), waveOf: assignWaves(members, waves),
    fleet: { namespace: 'app', selector: undefined, clusters: [], readiness, waves },
  };
  return { app: { gvk, name: 'podinfo' }, environments: [{ name: 'dev', targets: [], requireApproval: false }, prod], promotion, revisionPath: undefined, serviceAccountName: undefined };
}

function actor(registry: Pick<Registry, 'connectionFor'>, versions: Record<string, string> = {}): PromotionActor {
  const clock = new FakeClock(0);
  // The caches: each cluster's HelmRelease as `versions` holds it now.
  const watchTargetAndGetReader = (ref: ClusterRef): Promise<unknown> => {
    const name = ref.kind === 'local' ? 'local' : ref.name;
    return Promise.resolve({ lastError: undefined, synced: true, get: () => ({ metadata: { name: 'podinfo', namespace: 'app' }, spec: { chart: { spec: { version: versions[name] } } } }) });
  };
  const observer = new TargetObserver({ registry: { watchTargetAndGetReader } as unknown as Pick<Registry, 'watchTargetAndGetReader'>, clock, grace: new ProgressingGrace(), patched: new Map() });
  return new PromotionActor({ registry, clock, webhookTimeoutMs: 5_000, allowPrivateWebhooks: true, git: new GitPromoter({ clock }), patched: new Map(), observer });
}

const request = (wave: string | undefined): PromotionRequest => ({ pipeline: { namespace: 'team-a', name: 'shop', uid: 'u-1' }, from: 'dev', to: 'prod', revision: '2.0.0', strategy: 'patch', attempt: 1, resumed: false, ...(wave === undefined ? {} : { wave }) });

describe('acting on a wave', () => {
  const received: { headers: IncomingHttpHeaders; body: unknown }[] = [];
  const server = createServer((req, res) => {
    let text = '';
    req.on('data', (chunk: Buffer) => { text += chunk.toString(); });
    req.on('end', () => { received.push({ headers: req.headers, body: JSON.parse(text) as unknown }); res.end('{}'); });
  });
  let url = '';
  before(async () => {
    await new Promise<void>((resolve) => { server.listen(0, '127.0.0.1', resolve); });
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  });
  after(() => new Promise<void>((resolve) => { server.close(() => { resolve(); }); }));

  it('patches only the clusters of the wave', async () => {
    const { registry, versions } = clusters({ c1: '1.0.0', c2: '1.0.0', c3: '1.0.0' });
    const outcome = await actor(registry).carryOut(owner, spec({ strategy: 'patch', path: '/spec/chart/spec/version' }), request('rest'), 'team-a/shop');
    assert.deepEqual(outcome, { ok: true, message: 'set /spec/chart/spec/version to 2.0.0 in 2 target(s)' });
    assert.deepEqual(versions, { c1: '1.0.0', c2: '2.0.0', c3: '2.0.0' });
  });

  it('a wave is carried out without a cluster that is down when its policy allows it, and fails when not', async () => {
    const quorum = clusters({ c1: '1.0.0', c2: '1.0.0', c3: 'down' });
    const ok = await actor(quorum.registry).carryOut(owner, spec({ strategy: 'patch', path: '/spec/chart/spec/version' }, { policy: 'Quorum', count: 1 }), request('rest'), 'k');
    assert.equal(ok.ok, true);
    assert.match(ok.message, /in 1 target\(s\); not on 1 \(enough without them for 1 of 2\): static:c3 namespace app: connect ECONNREFUSED/);
    const all = clusters({ c1: '1.0.0', c2: '1.0.0', c3: 'down' });
    const failed = await actor(all.registry).carryOut(owner, spec({ strategy: 'patch', path: '/spec/chart/spec/version' }), request('rest'), 'k');
    assert.deepEqual([failed.ok, failed.message], [false, 'static:c3 namespace app: connect ECONNREFUSED']);
  });

  it('calls the webhook once per wave, with the wave, its clusters, and a per-wave Idempotency-Key', async () => {
    const { registry } = clusters({ c1: '1.0.0', c2: '1.0.0', c3: '1.0.0' }, url);
    const outcome = await actor(registry).carryOut(owner, spec({ strategy: 'webhook', secretName: 'hook', secretKey: 'url' }), request('rest'), 'k');
    assert.equal(outcome.ok, true, outcome.message);
    assert.equal(received.length, 1);
    const body = received[0]?.body as { environment: string; wave: string; targets: unknown };
    assert.deepEqual([body.environment, body.wave, body.targets], ['prod', 'rest', [{ cluster: 'static:c2', namespace: 'app' }, { cluster: 'static:c3', namespace: 'app' }]]);
    assert.equal(received[0]?.headers['idempotency-key'], 'u-1/prod/rest/2.0.0');
    // A person's retry of the stopped wave is a new delivery on purpose: its own key, marked in the body.
    const retried = await actor(registry).carryOut(owner, spec({ strategy: 'webhook', secretName: 'hook', secretKey: 'url' }), { ...request('rest'), attempt: 2, retry: 1 }, 'k');
    assert.equal(retried.ok, true, retried.message);
    const second = received[1];
    assert.ok(second !== undefined);
    assert.equal(second.headers['idempotency-key'], 'u-1/prod/rest/2.0.0/retry-1');
    assert.equal((second.body as { retry?: boolean }).retry, true);
  });

  it('webhook: a cluster that joined the wave after its delivery gets a call of its own; after a restart (nothing remembered) none', async () => {
    const { registry } = clusters({ c1: '1.0.0', c2: '1.0.0', c3: '1.0.0' }, url);
    const hook = spec({ strategy: 'webhook', secretName: 'hook', secretKey: 'url' });
    const a = actor(registry);
    received.length = 0;
    assert.equal((await a.carryOut(owner, hook, request('rest'), 'k')).ok, true);
    const joiner = { cluster: { kind: 'static' as const, name: 'c9' }, clusterKey: 'static:c9', namespace: 'app' };
    const record = { environment: 'prod', wave: 'rest', revision: '2.0.0', strategy: 'webhook' as const, state: 'Committed' as const, attempts: 1, startedAt: '2026-01-01T00:00:00Z' };
    const candidate = { environment: 'prod', wave: 'rest', revision: '2.0.0', record, room: 20, targets: [...(hook.environments[1]?.targets.slice(1) ?? []), joiner] };
    const joiners = await a.lateJoiners(owner, hook, candidate, 'k', AbortSignal.timeout(5_000));
    assert.deepEqual(joiners.map((t) => t.clusterKey), ['static:c9'], 'c2 and c3 were in the delivery');
    assert.equal((await a.carryOutJoin(owner, hook, request('rest'), joiners, 'k')).ok, true);
    const call = received[1];
    assert.ok(call !== undefined);
    assert.equal(call.headers['idempotency-key'], 'u-1/prod/rest/2.0.0/static:c9');
    assert.deepEqual((call.body as { targets: unknown; joined: boolean }).targets, [{ cluster: 'static:c9', namespace: 'app' }]);
    assert.deepEqual(await actor(registry).lateJoiners(owner, hook, candidate, 'k', AbortSignal.timeout(5_000)), []);
    a.forget('k');
    assert.deepEqual(await a.lateJoiners(owner, hook, candidate, 'k', AbortSignal.timeout(5_000)), []);
  });
});

describe('late joiners', () => {
  const patch: ResolvedPromotion = { strategy: 'patch', path: '/spec/chart/spec/version' };
  const at = '2026-01-01T00:00:00Z';
  const record = (wave: string, state: PromotionRecord['state'], extra: Partial<PromotionRecord> = {}): PromotionRecord => ({ environment: 'prod', wave, revision: '2.0.0', strategy: 'patch', state, attempts: 1, startedAt: at, ...extra });
  /** prod as observed: each cluster at the revision its Flux applied. */
  const observed = (applied: Record<string, string>, extra: Partial<EnvironmentStatus> = {}): EnvironmentStatus[] => [
    { name: 'dev', ready: true, revision: '2.0.0', targets: [] },
    { name: 'prod', ready: false, targets: Object.entries(applied).map(([c, revision]) => ({ cluster: `static:${c}`, namespace: 'app', readable: true, exists: true, ready: true, revision })), fleet: { policy: 'All', total: 3, readyTargets: 0, required: 3, readable: 3, notReady: {} }, ...extra },
  ];

  it('are the members of a carried-out wave not at its revision, not given it already; none for git, a loading fleet, or a wave not carried out', () => {
    const s = spec(patch);
    // canary = c1, rest = c2 + c3; rest carried out at 2.0.0, c3 not at it.
    const envs = observed({ c1: '2.0.0', c2: '2.0.0', c3: '1.0.0' });
    const [found, ...more] = lateJoinCandidates(s, envs, [record('canary', 'Succeeded'), record('rest', 'Succeeded')]);
    assert.deepEqual([found?.wave, found?.targets.map((t) => t.clusterKey), found?.room, more.length], ['rest', ['static:c3'], 20, 0]);
    assert.deepEqual(lateJoinCandidates(s, envs, [record('rest', 'Succeeded', { joined: ['static:c3'] })]), [], 'given it once already');
    assert.deepEqual(lateJoinCandidates(s, envs, [record('rest', 'Failed', { committedAt: at })]), [], 'a stopped wave is the retry\'s');
    assert.deepEqual(lateJoinCandidates(s, envs, [record('rest', 'Succeeded'), { ...record('rest', 'Pending'), revision: '3.0.0' }]), [], 'a newer rollout of the wave is under way');
    assert.deepEqual(lateJoinCandidates(s, observed({ c3: '1.0.0' }, { fleet: { policy: 'All', total: 0, readyTargets: 0, required: 0, readable: 0, notReady: {}, membership: 'Loading' } }), [record('rest', 'Succeeded')]), []);
    assert.deepEqual(lateJoinCandidates({ ...s, promotion: { strategy: 'git', url: 'https://g/x.git', branch: 'main', path: '.', secretName: undefined, pullRequest: undefined } }, envs, [record('rest', 'Succeeded')]), [], 'git: Flux in the new cluster reads the wave\'s path by itself');
    const full = record('rest', 'Succeeded', { joined: Array.from({ length: 20 }, (_, i) => `static:x${i}`) });
    assert.deepEqual(lateJoinCandidates(s, envs, [full]), [], 'bounded: 20 joiners per wave rollout');
  });

  it('patch: only a member whose object does not hold the revision is a joiner, and it is patched; the others are waiting to apply', async () => {
    const { registry, versions } = clusters({ c1: '2.0.0', c2: '2.0.0', c3: '1.0.0' });
    const a = actor(registry, versions);
    const s = spec(patch);
    // c2 was patched with the wave and has not applied it (status still 1.0.0); c3 joined later.
    const [candidate] = lateJoinCandidates(s, observed({ c1: '2.0.0', c2: '1.0.0', c3: '1.0.0' }), [record('rest', 'Committed', { committedAt: at })]);
    assert.ok(candidate !== undefined);
    assert.deepEqual(candidate.targets.map((t) => t.clusterKey), ['static:c2', 'static:c3']);
    const joiners = await a.lateJoiners(owner, s, candidate, 'k', AbortSignal.timeout(5_000));
    assert.deepEqual(joiners.map((t) => t.clusterKey), ['static:c3']);
    const outcome = await a.carryOutJoin(owner, s, request('rest'), joiners, 'k');
    assert.deepEqual(outcome, { ok: true, message: 'set /spec/chart/spec/version to 2.0.0 in 1 target(s)' });
    assert.deepEqual(versions, { c1: '2.0.0', c2: '2.0.0', c3: '2.0.0' });
    assert.deepEqual(await a.lateJoiners(owner, s, candidate, 'k', AbortSignal.timeout(5_000)), [], 'patched: not a joiner again');
  });

  it('after a wave\'s commit asks Flux to reconcile only the wave\'s clusters (the commit changed no other cluster\'s files)', async () => {
    const kustomization = { group: 'kustomize.toolkit.fluxcd.io', version: 'v1', kind: 'Kustomization' };
    const asked: string[] = [];
    const connectionFor = (ref: ClusterRef): Promise<ClusterConnection> => {
      const name = ref.kind === 'local' ? 'local' : ref.name;
      return Promise.resolve({
        name,
        resolve: (): Promise<ResourceInfo> => Promise.resolve({ gvk: kustomization, resource: 'kustomizations', namespaced: true, verbs: [] }),
        request: (options: RequestOptions): Promise<unknown> => {
          if (options.method === 'PATCH') asked.push(`${name} ${options.path}`);
          return Promise.resolve({});
        },
      } as unknown as ClusterConnection);
    };
    const fleet = spec({ strategy: 'git', url: 'https://git.example/fleet.git', branch: 'main', path: '.', secretName: undefined, pullRequest: undefined });
    const flux = { ...fleet, app: { gvk: kustomization, name: 'podinfo' } };
    await actor({ connectionFor }).requestFluxReconcile(owner, flux, 'prod', noopLogger, new AbortController().signal, 'rest');
    assert.deepEqual(asked.sort(), ['c2 /apis/kustomize.toolkit.fluxcd.io/v1/namespaces/app/kustomizations/podinfo', 'c3 /apis/kustomize.toolkit.fluxcd.io/v1/namespaces/app/kustomizations/podinfo']);
    asked.length = 0;
    await actor({ connectionFor }).requestFluxReconcile(owner, flux, 'prod', noopLogger, new AbortController().signal, 'canary');
    assert.deepEqual(asked, ['c1 /apis/kustomize.toolkit.fluxcd.io/v1/namespaces/app/kustomizations/podinfo']);
  });
});
