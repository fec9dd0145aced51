// Fleet environments on real clusters: "mgmt" (the management cluster and the dev environment) and
// six target clusters, each its own etcd + kube-apiserver, reached through six kubeconfig Secrets
// on mgmt labelled `fleet=prod` (c1 also `wave=canary`). A Flux stand-in (e2e/flux) marks every
// HelmRelease Ready at its spec's chart version. Waves by key order: canary = c1 (by label),
// second = c2, c3 (count 2), rest = c4, c5, c6 (the last wave takes the rest).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { helmReleaseCrd } from '../../fixtures/crds/index.ts';
import { eventually, useClusters, type TestCluster } from '../../e2e/harness/index.ts';
import { startFlux } from '../../e2e/fleet.ts';
import { ensureNamespace, must } from '../../fixtures/support/index.ts';
import { CompositeProvider, CoreV1SecretReader, LocalProvider, SecretProvider } from '../cluster/index.ts';
import { registryWithKeeper } from '../registry/testing.ts';
import { PipelineController, pipelineCrd, type Pipeline, type PromotionRecord } from './index.ts';

const NS = 'team-a';
const HR = '/apis/helm.toolkit.fluxcd.io/v2';
const PIPELINES = `/apis/fleetcache.dev/v1alpha1/namespaces/${NS}/pipelines`;
/** The apply timeout of this test's controller: how long a wave has to become ready. */
const APPLY_TIMEOUT_MS = 15_000;

interface HelmRelease {
  metadata: { name: string; namespace: string; generation: number };
  spec: { suspend?: boolean; chart: { spec: { chart: string; version: string } } };
  status?: { observedGeneration?: number; history?: { chartVersion: string }[] };
}

async function getRelease(cluster: TestCluster, namespace: string): Promise<HelmRelease> {
  return (await must(cluster, 'GET', `${HR}/namespaces/${namespace}/helmreleases/podinfo`)) as HelmRelease;
}

/** Creates the HelmRelease and waits until Flux (the stand-in) has it Ready at `version`. */
async function createRelease(cluster: TestCluster, namespace: string, version: string): Promise<void> {
  await ensureNamespace(cluster, namespace);
  await must(cluster, 'POST', `${HR}/namespaces/${namespace}/helmreleases`, { apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease', metadata: { name: 'podinfo', namespace }, spec: { chart: { spec: { chart: 'podinfo', version } } } });
  await eventually(`${cluster.name} ${namespace}/podinfo is ready at ${version}`, async () => {
    const hr = await getRelease(cluster, namespace);
    return hr.status?.observedGeneration === hr.metadata.generation && hr.status.history?.[0]?.chartVersion === version;
  }, 60_000);
}

/** Read-modify-write of a HelmRelease, again when Flux wrote status in between. */
async function updateRelease(cluster: TestCluster, namespace: string, change: (hr: HelmRelease) => void): Promise<void> {
  for (;;) {
    const hr = await getRelease(cluster, namespace);
    change(hr);
    const res = await cluster.request('PUT', `${HR}/namespaces/${namespace}/helmreleases/podinfo`, hr);
    if (res.statusCode === 200) return;
    assert.equal(res.statusCode, 409, JSON.stringify(res.body));
  }
}

async function getPipeline(cluster: TestCluster, name: string): Promise<Pipeline> {
  return (await must(cluster, 'GET', `${PIPELINES}/${name}`)) as Pipeline;
}

/** A kubeconfig Secret with labels (the fleet's membership). */
async function putMemberSecret(mgmt: TestCluster, name: string, kubeconfig: string, labels: Record<string, string>): Promise<void> {
  await must(mgmt, 'POST', `/api/v1/namespaces/${NS}/secrets`, { metadata: { name, namespace: NS, labels }, data: { value: Buffer.from(kubeconfig).toString('base64') } });
}

async function relabel(mgmt: TestCluster, name: string, labels: Record<string, string>): Promise<void> {
  for (;;) {
    const secret = (await must(mgmt, 'GET', `/api/v1/namespaces/${NS}/secrets/${name}`)) as { metadata: Record<string, unknown> };
    const res = await mgmt.request('PUT', `/api/v1/namespaces/${NS}/secrets/${name}`, { ...secret, metadata: { ...secret.metadata, labels } });
    if (res.statusCode === 200) return;
    assert.equal(res.statusCode, 409, JSON.stringify(res.body));
  }
}

/** Writes an approval into status, as the service's approval endpoint does after its SubjectAccessReview. */
async function approve(mgmt: TestCluster, name: string, approval: object): Promise<void> {
  for (;;) {
    const p = await getPipeline(mgmt, name);
    const res = await mgmt.request('PUT', `${PIPELINES}/${name}/status`, { ...p, status: { ...p.status, approvals: [...(p.status?.approvals ?? []), approval] } });
    if (res.statusCode === 200) return;
    assert.equal(res.statusCode, 409, JSON.stringify(res.body));
  }
}

/** Writes a retry of a stopped wave into status, as the service's approve endpoint does (`"action": "retry"`) after its SubjectAccessReview. */
async function retryWave(mgmt: TestCluster, name: string, retry: object): Promise<void> {
  for (;;) {
    const p = await getPipeline(mgmt, name);
    const res = await mgmt.request('PUT', `${PIPELINES}/${name}/status`, { ...p, status: { ...p.status, retries: [...(p.status?.retries ?? []), retry] } });
    if (res.statusCode === 200) return;
    assert.equal(res.statusCode, 409, JSON.stringify(res.body));
  }
}

/** dev (on mgmt, namespace `<prefix>-dev`) → prod (the fleet, namespace `<prefix>`) [→ global (on mgmt)]. */
function fleetPipeline(name: string, prefix: string, fleet: Record<string, unknown>, global = false): object {
  return {
    apiVersion: 'fleetcache.dev/v1alpha1',
    kind: 'Pipeline',
    metadata: { name, namespace: NS },
    spec: {
      appRef: { apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease', name: 'podinfo' },
      environments: [
        { name: 'dev', targets: [{ namespace: `${prefix}-dev` }] },
        { name: 'prod', fleet: { namespace: prefix, clusterSelector: { matchLabels: { fleet: 'prod' } }, ...fleet } },
        ...(global ? [{ name: 'global', targets: [{ namespace: `${prefix}-global` }] }] : []),
      ],
      promotion: { strategy: 'patch', patch: { path: '/spec/chart/spec/version' } },
    },
  };
}

const WAVES = [
  { name: 'canary', selector: { matchLabels: { wave: 'canary' } }, soakSeconds: 3 },
  { name: 'second', count: 2 },
  { name: 'rest', count: 1 },
];

const waveRecords = (p: Pipeline, revision: string): PromotionRecord[] => (p.status?.promotions ?? []).filter((r) => r.environment === 'prod' && r.revision === revision);

describe('fleet environments on real clusters', () => {
  const env = useClusters(7, { namePrefix: 'fleet' });
  let mgmt: TestCluster;
  let fleet: TestCluster[];
  let stopFlux: (() => Promise<void>) | undefined;
  let controller: { stop(): Promise<void> } | undefined;

  before(async () => {
    [mgmt, ...fleet] = env.clusters;
    await Promise.all([mgmt.installCRDs([pipelineCrd, helmReleaseCrd]), ...fleet.map((c) => c.installCRDs([helmReleaseCrd]))]);
    await ensureNamespace(mgmt, NS);
    for (const [i, c] of fleet.entries()) await putMemberSecret(mgmt, `c${i + 1}`, c.adminKubeconfig, { fleet: 'prod', ...(i === 0 ? { wave: 'canary' } : {}) });
    stopFlux = await startFlux([mgmt, ...fleet]);
    const kubeConfig = mgmt.kubeConfig();
    const registry = registryWithKeeper({
      provider: new CompositeProvider({ byKind: { local: new LocalProvider({ kubeConfig }), secret: new SecretProvider({ secrets: new CoreV1SecretReader({ kubeConfig: mgmt.kubeConfig() }) }) } }),
    });
    // Admin credentials and no ServiceAccount: the selectors are read as the service (the opt-in;
    // the tenant path, an account with a namespaced Role, is e2e/tenancy/fleet-selector.integration.test.ts).
    const running = new PipelineController({ registry, workers: 2, allowCrossNamespaceTargets: true, applyTimeoutMs: APPLY_TIMEOUT_MS, allowFleetSelectorsAsService: true });
    const stopper = new AbortController();
    const done = running.run(stopper.signal);
    controller = { async stop() { stopper.abort(); await done; await registry.close(); } };
  }, { timeout: 300_000 });

  after(async () => {
    await controller?.stop();
    await stopFlux?.();
  });

  it('promotes wave after wave, each once the previous is ready and soaked, the last after its own approval, and follows the Secrets\' labels', async () => {
    await Promise.all([createRelease(mgmt, 'w1-dev', '1.0.0'), ...fleet.map((c) => createRelease(c, 'w1', '1.0.0'))]);
    // The last wave needs its own approval (`prod/rest`).
    await must(mgmt, 'POST', PIPELINES, fleetPipeline('waves', 'w1', { waves: WAVES.map((w) => (w.name === 'rest' ? { ...w, requireApproval: true } : w)) }));
    try {
      const ready = await eventually('prod is a fleet of 6 ready at 1.0.0', async () => {
        const prod = (await getPipeline(mgmt, 'waves')).status?.environments?.[1];
        return prod?.ready === true && prod.revision === '1.0.0' && prod.fleet?.total === 6 && prod;
      }, 60_000);
      assert.deepEqual(ready.targets, [], 'no target is listed while all are ready');
      assert.deepEqual(ready.waves?.map((w) => [w.name, w.total]), [['canary', 1], ['second', 2], ['rest', 3]]);

      await updateRelease(mgmt, 'w1-dev', (hr) => { hr.spec.chart.spec.version = '2.0.0'; });
      const awaiting = await eventually('the rest waits for its approval once second succeeded', async () => {
        const p = await getPipeline(mgmt, 'waves');
        return waveRecords(p, '2.0.0').find((r) => r.wave === 'rest')?.state === 'AwaitingApproval' && p;
      }, 120_000);
      assert.deepEqual(waveRecords(awaiting, '2.0.0').map((r) => [r.wave, r.state]), [['canary', 'Succeeded'], ['second', 'Succeeded'], ['rest', 'AwaitingApproval']]);
      assert.match(waveRecords(awaiting, '2.0.0')[2]?.message ?? '', /approves 2\.0\.0 for prod\/rest/);
      for (const c of fleet.slice(3)) assert.equal((await getRelease(c, 'w1')).spec.chart.spec.version, '1.0.0', 'the last wave waits');
      await approve(mgmt, 'waves', { environment: 'prod/rest', revision: '2.0.0', approver: { username: 'alice' }, approvedAt: new Date().toISOString().replace(/\.\d+Z$/, 'Z') });
      const done = await eventually('all three waves succeeded', async () => {
        const p = await getPipeline(mgmt, 'waves');
        const records = waveRecords(p, '2.0.0');
        return records.length === 3 && records.every((r) => r.state === 'Succeeded') && p;
      }, 120_000);
      const [canary, second, rest] = ['canary', 'second', 'rest'].map((w) => waveRecords(done, '2.0.0').find((r) => r.wave === w));
      assert.ok(canary?.readyAt !== undefined && second?.readyAt !== undefined && rest?.readyAt !== undefined, JSON.stringify(done.status?.promotions));
      // In order: each wave began only after the previous was ready, the canary's soak included.
      assert.ok(Date.parse(second.startedAt) >= Date.parse(canary.readyAt) + 3_000, `second began ${second.startedAt}, canary ready ${canary.readyAt}`);
      assert.ok(Date.parse(rest.startedAt) >= Date.parse(second.readyAt), `rest began ${rest.startedAt}, second ready ${second.readyAt}`);
      assert.match(canary.message ?? '', /in 1 target\(s\); wave canary of prod is ready \(1 of 1 clusters/);
      assert.match(rest.message ?? '', /in 3 target\(s\)/);
      assert.deepEqual([rest.approved, rest.approvedBy], [true, { username: 'alice' }]);
      for (const c of fleet) assert.equal((await getRelease(c, 'w1')).spec.chart.spec.version, '2.0.0');
      // Carried out once per wave.
      assert.deepEqual((done.status?.committed ?? []).filter((c) => c.environment === 'prod').map((c) => c.wave), ['canary', 'second', 'rest']);

      // Membership follows the labels, from the cache (no poll): c6 leaves, then comes back.
      await relabel(mgmt, 'c6', {});
      await eventually('c6 left the fleet', async () => (await getPipeline(mgmt, 'waves')).status?.environments?.[1]?.fleet?.total === 5, 30_000);
      // Meanwhile it is set back to 1.0.0: it comes back as a late joiner of the last wave.
      await updateRelease(fleet[5]!, 'w1', (hr) => { hr.spec.chart.spec.version = '1.0.0'; });
      await relabel(mgmt, 'c6', { fleet: 'prod' });
      await eventually('c6 is back', async () => (await getPipeline(mgmt, 'waves')).status?.environments?.[1]?.fleet?.total === 6, 30_000);
      const joined = await eventually('c6 is given the revision its wave carried out, once, and counted ready in it', async () => {
        const p = await getPipeline(mgmt, 'waves');
        const rest = p.status?.environments?.[1]?.waves?.find((w) => w.name === 'rest');
        return (await getRelease(fleet[5]!, 'w1')).spec.chart.spec.version === '2.0.0' && rest?.ready === true && rest.readyTargets === 3 && p;
      }, 60_000);
      assert.deepEqual(waveRecords(joined, '2.0.0').find((r) => r.wave === 'rest')?.joined, [`secret:${NS}/c6`]);
      assert.deepEqual((joined.status?.committed ?? []).filter((c) => c.environment === 'prod').map((c) => c.wave), ['canary', 'second', 'rest'], 'not a new promotion');
    } finally {
      await mgmt.request('DELETE', `${PIPELINES}/waves`);
    }
  });

  it('a Quorum 5 fleet with one cluster down is ready, and promotes on to the next environment', async () => {
    await Promise.all([createRelease(mgmt, 'q1-dev', '1.0.0'), createRelease(mgmt, 'q1-global', '1.0.0'), ...fleet.map((c) => createRelease(c, 'q1', '1.0.0'))]);
    await must(mgmt, 'POST', PIPELINES, fleetPipeline('quorum', 'q1', { readiness: { policy: 'Quorum', count: 5 } }, true));
    const down = fleet[5]!;
    try {
      await eventually('every environment is ready at 1.0.0', async () => (await getPipeline(mgmt, 'quorum')).status?.environments?.every((e) => e.ready && e.revision === '1.0.0') === true, 60_000);
      await down.stopApiserver();
      const unreadable = await eventually('prod sees c6 unreadable and stays ready', async () => {
        const prod = (await getPipeline(mgmt, 'quorum')).status?.environments?.[1];
        return prod?.fleet?.notReady.Unreadable === 1 && prod;
      }, 60_000);
      assert.equal(unreadable.ready, true);
      assert.deepEqual(unreadable.targets.map((t) => [t.cluster, t.readable]), [[`secret:${NS}/c6`, false]]);

      await updateRelease(mgmt, 'q1-dev', (hr) => { hr.spec.chart.spec.version = '2.0.0'; });
      await eventually('global is asked for 2.0.0: prod was ready at it by quorum', async () => (await getRelease(mgmt, 'q1-global')).spec.chart.spec.version === '2.0.0', 90_000);
      const p = await getPipeline(mgmt, 'quorum');
      const prodRecord = (p.status?.promotions ?? []).find((r) => r.environment === 'prod' && r.revision === '2.0.0');
      assert.equal(prodRecord?.state, 'Succeeded');
      assert.match(prodRecord.message ?? '', /in 5 target\(s\); not on 1 \(enough without them for 5 of 6\): secret:team-a\/c6/);
      const prod = p.status?.environments?.[1];
      assert.equal(prod?.revision, '2.0.0');
      assert.deepEqual({ ...prod.fleet }, { policy: 'Quorum 5', total: 6, readyTargets: 5, required: 5, readable: 5, notReady: { Unreadable: 1 } });
    } finally {
      await down.startApiserver();
      await mgmt.request('DELETE', `${PIPELINES}/quorum`);
    }
  });

  it('a wave not ready within the apply timeout stops the rollout and status says which wave and why', async () => {
    await Promise.all([createRelease(mgmt, 'f1-dev', '1.0.0'), ...fleet.map((c) => createRelease(c, 'f1', '1.0.0'))]);
    // c2 (wave second) is suspended: it takes the patch, and never counts as ready.
    await updateRelease(fleet[1]!, 'f1', (hr) => { hr.spec.suspend = true; });
    await must(mgmt, 'POST', PIPELINES, fleetPipeline('failing', 'f1', { waves: WAVES.map((w) => ({ ...w, soakSeconds: 0 })) }));
    try {
      await eventually('the fleet is observed', async () => (await getPipeline(mgmt, 'failing')).status?.environments?.[1]?.fleet?.total === 6, 60_000);
      await updateRelease(mgmt, 'f1-dev', (hr) => { hr.spec.chart.spec.version = '2.0.0'; });
      const failed = await eventually('wave second failed', async () => {
        const p = await getPipeline(mgmt, 'failing');
        return waveRecords(p, '2.0.0').find((r) => r.wave === 'second')?.state === 'Failed' && p;
      }, 120_000);
      const records = waveRecords(failed, '2.0.0');
      assert.deepEqual(records.map((r) => [r.wave, r.state]), [['canary', 'Succeeded'], ['second', 'Failed']]);
      assert.match(records[1]?.message ?? '', /wave second of prod was not ready at 2\.0\.0 within 15 s \(1 of 2 clusters ready at 2\.0\.0, 2 needed; environment not ready: .*Suspended 1.*\): the rollout stops at this wave/);
      const promoting = failed.status?.conditions?.find((c) => c.type === 'Promoting');
      assert.equal(promoting?.reason, 'PromotionFailed');
      assert.match(promoting.message, /promoting 2\.0\.0 to prod wave second failed/);
      // The rest never started, and does not start later.
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      assert.deepEqual(waveRecords(await getPipeline(mgmt, 'failing'), '2.0.0').map((r) => r.wave), ['canary', 'second']);
      for (const c of fleet.slice(3)) assert.equal((await getRelease(c, 'f1')).spec.chart.spec.version, '1.0.0');
      assert.match(promoting.message, /retries prod\/second at 2\.0\.0/, 'and says how to carry on');

      // The cause fixed, a person retries the wave (no new revision): it is carried out once more and the rollout goes on.
      await updateRelease(fleet[1]!, 'f1', (hr) => { hr.spec.suspend = false; });
      await retryWave(mgmt, 'failing', { environment: 'prod', wave: 'second', revision: '2.0.0', attempt: records[1]?.attempts, requestedBy: { username: 'alice' }, requestedAt: new Date().toISOString().replace(/\.\d+Z$/, 'Z') });
      const resumed = await eventually('second and rest succeeded after the retry', async () => {
        const p = await getPipeline(mgmt, 'failing');
        const waves = waveRecords(p, '2.0.0');
        return waves.length === 3 && waves.every((r) => r.state === 'Succeeded') && p;
      }, 120_000);
      const second = waveRecords(resumed, '2.0.0').find((r) => r.wave === 'second');
      assert.deepEqual([second?.attempts, second?.retry?.by, second?.retry?.of], [(records[1]?.attempts ?? 0) + 1, { username: 'alice' }, records[1]?.attempts]);
      for (const c of fleet) assert.equal((await getRelease(c, 'f1')).spec.chart.spec.version, '2.0.0');
    } finally {
      await mgmt.request('DELETE', `${PIPELINES}/failing`);
    }
  });
});
