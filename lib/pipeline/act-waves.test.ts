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
import { FakeClock } from '../util/index.ts';
import { PromotionActor, type PromotionRequest } from './act.ts';
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

function actor(registry: Pick<Registry, 'connectionFor'>): PromotionActor {
  const clock = new FakeClock(0);
  const observer = new TargetObserver({ registry: { watchTargetAndGetReader: () => Promise.reject(new Error('unused')) }, clock, grace: new ProgressingGrace(), patched: new Map() });
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
});
