// The Pipeline controller against three real clusters: "mgmt" (the management cluster, which is
// also the dev environment), "staging" and "prod" (reached through kubeconfig Secrets on mgmt).
// A Flux stand-in (e2e/flux) marks every HelmRelease Ready at its spec's chart version.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { helmReleaseCrd } from '../../fixtures/crds/index.ts';
import { HOSTILE_INTERNAL_SECRET, HostileWebhookReceiver } from '../../fixtures/index.ts';
import { useClusters, type TestCluster } from '../../e2e/harness/index.ts';
import { CompositeProvider, CoreV1SecretReader, LocalProvider, SecretProvider } from '../cluster/index.ts';
import type { Registry } from '../registry/index.ts';
import { abortReason } from '../util/index.ts';
import { PipelineController, pipelineCrd, type Pipeline, type PipelineControllerOptions, type PromotionRecord, type PromotionRequest } from './index.ts';
import { eventually } from '../../e2e/harness/index.ts';
import { startFlux } from '../../e2e/fleet.ts';
import { registryWithKeeper } from '../registry/testing.ts';
import { ensureNamespace, must, putKubeconfigSecret, putSecret, RecordingLogger } from '../../fixtures/support/index.ts';

const NS = 'team-a';
const HR = '/apis/helm.toolkit.fluxcd.io/v2';
const PIPELINES = `/apis/fleetcache.dev/v1alpha1/namespaces/${NS}/pipelines`;

interface HelmRelease {
  metadata: { name: string; namespace: string; generation: number; resourceVersion: string };
  spec: { chart: { spec: { chart: string; version: string } } };
  status?: { observedGeneration?: number; history?: { chartVersion: string }[] };
}

/** Creates the HelmRelease and waits until Flux (the test's loop) has it Ready at `version`. */
async function createRelease(cluster: TestCluster, namespace: string, version: string): Promise<void> {
  await ensureNamespace(cluster, namespace);
  await must(cluster, 'POST', `${HR}/namespaces/${namespace}/helmreleases`, { apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease', metadata: { name: 'podinfo', namespace }, spec: { chart: { spec: { chart: 'podinfo', version } } } });
  await eventually(`${cluster.name} ${namespace}/podinfo is ready at ${version}`, async () => {
    const hr = await getRelease(cluster, namespace);
    return hr.status?.observedGeneration === hr.metadata.generation && hr.status.history?.[0]?.chartVersion === version;
  }, 40_000);
}

async function getRelease(cluster: TestCluster, namespace: string): Promise<HelmRelease> {
  return (await must(cluster, 'GET', `${HR}/namespaces/${namespace}/helmreleases/podinfo`)) as HelmRelease;
}

async function setVersion(cluster: TestCluster, namespace: string, version: string): Promise<void> {
  // Read-modify-write, retried when Flux (the test's loop) writes status in between.
  for (;;) {
    const hr = await getRelease(cluster, namespace);
    hr.spec.chart.spec.version = version;
    const res = await cluster.request('PUT', `${HR}/namespaces/${namespace}/helmreleases/podinfo`, hr);
    if (res.statusCode === 200) return;
    assert.equal(res.statusCode, 409, JSON.stringify(res.body));
  }
}

async function getPipeline(cluster: TestCluster, name: string): Promise<Pipeline> {
  return (await must(cluster, 'GET', `${PIPELINES}/${name}`)) as Pipeline;
}

function condition(pipeline: Pipeline, type: string): { status: string; reason: string; message: string } | undefined {
  return pipeline.status?.conditions?.find((c) => c.type === type);
}

async function eventsOf(cluster: TestCluster, pipeline: string): Promise<{ reason: string; message: string; type: string }[]> {
  const body = (await must(cluster, 'GET', `/api/v1/namespaces/${NS}/events?fieldSelector=involvedObject.name%3D${pipeline}`)) as { items: { reason: string; message: string; type: string; involvedObject: { kind: string } }[] };
  return body.items.filter((e) => e.involvedObject.kind === 'Pipeline');
}

/** The controller has nothing waiting, running or scheduled: whatever it was going to do, it did. */
function idle(registry: Registry): boolean {
  const s = registry.queue.stats();
  return s.depth === 0 && s.processing === 0 && s.delayed === 0;
}

/**
 * PUTs on pipelines/status the apiserver has answered so far, from its own `apiserver_request_total`:
 * a write of an unchanged status leaves the object (and its resourceVersion) as it was, but is
 * counted here.
 */
async function statusWrites(cluster: TestCluster): Promise<number> {
  const res = await cluster.request('GET', '/metrics');
  assert.equal(res.statusCode, 200);
  const wanted = ['resource="pipelines"', 'subresource="status"', 'verb="PUT"'];
  return String(res.body).split('\n')
    .filter((line) => line.startsWith('apiserver_request_total{') && wanted.every((label) => line.includes(label)))
    .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
}

function patchPipeline(name: string, envs: readonly (readonly [env: string, cluster: string | undefined])[], namespace: string): object {
  return {
    apiVersion: 'fleetcache.dev/v1alpha1',
    kind: 'Pipeline',
    metadata: { name, namespace: NS },
    spec: {
      appRef: { apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease', name: 'podinfo' },
      environments: envs.map(([env, secret]) => ({ name: env, targets: [{ namespace, ...(secret === undefined ? {} : { clusterRef: { kind: 'Secret', name: secret } }) }] })),
      promotion: { strategy: 'patch', patch: { path: '/spec/chart/spec/version' } },
    },
  };
}

describe('PipelineController on real clusters', () => {
  const env = useClusters(3, { namePrefix: 'pipeline' });
  let mgmt: TestCluster;
  let staging: TestCluster;
  let prod: TestCluster;
  let stopFlux: (() => Promise<void>) | undefined;

  before(async () => {
    [mgmt, staging, prod] = env.clusters as [TestCluster, TestCluster, TestCluster];
    await Promise.all([mgmt.installCRDs([pipelineCrd, helmReleaseCrd]), staging.installCRDs([helmReleaseCrd]), prod.installCRDs([helmReleaseCrd])]);
    await ensureNamespace(mgmt, NS);
    await putKubeconfigSecret(mgmt, NS, 'staging-kubeconfig', staging.adminKubeconfig);
    await putKubeconfigSecret(mgmt, NS, 'prod-kubeconfig', prod.adminKubeconfig);
    stopFlux = await startFlux([mgmt, staging, prod]); // plays Flux: HelmReleases become Ready at their chart version
  });

  after(async () => {
    await stopFlux?.();
  });

  /** A registry and a running controller; `stop()` stops both and waits. */
  function startController(extra: Partial<PipelineControllerOptions> = {}, shared?: Registry): { readonly controller: PipelineController; readonly registry: Registry; stop(): Promise<void>; readonly done: Promise<void> } {
    const kubeConfig = mgmt.kubeConfig();
    const registry = shared ?? registryWithKeeper({
      provider: new CompositeProvider({ byKind: { local: new LocalProvider({ kubeConfig }), secret: new SecretProvider({ secrets: new CoreV1SecretReader({ kubeConfig: mgmt.kubeConfig() }) }) } }),
    });
    // These Pipelines (in team-a) reach their dev targets in other namespaces of mgmt: the
    // opt-out from confinement (e2e/tenancy tests the default).
    const controller = new PipelineController({ registry, workers: 2, allowCrossNamespaceTargets: true, ...extra });
    const stopper = new AbortController();
    const done = controller.run(stopper.signal);
    return {
      controller,
      registry,
      done,
      async stop() {
        stopper.abort();
        await done;
        if (shared === undefined) await registry.close();
      },
    };
  }

  it('promotes dev → staging → prod one step at a time with the patch strategy, and writes status only on change', async () => {
    for (const c of [mgmt, staging, prod]) await createRelease(c, 'shop', '1.0.0');
    const running = startController();
    try {
      await must(mgmt, 'POST', PIPELINES, patchPipeline('shop', [['dev', undefined], ['staging', 'staging-kubeconfig'], ['prod', 'prod-kubeconfig']], 'shop'));
      const settled = await eventually('the pipeline reports all three environments ready at 1.0.0', async () => {
        const p = await getPipeline(mgmt, 'shop');
        return condition(p, 'Ready')?.status === 'True' && p.status?.environments?.every((e) => e.ready && e.revision === '1.0.0') === true && p;
      }, 40_000);
      assert.equal(settled.status?.observedGeneration, settled.metadata?.generation);
      assert.deepEqual(settled.status?.environments?.map((e) => e.targets.map((t) => t.cluster)), [['local'], [`secret:${NS}/staging-kubeconfig`], [`secret:${NS}/prod-kubeconfig`]]);
      assert.deepEqual(settled.status.promotions ?? [], [], 'nothing to promote while all environments agree');

      await setVersion(mgmt, 'shop', '1.1.0');
      // The first step: staging is patched while prod still runs 1.0.0.
      await eventually('staging is asked for 1.1.0', async () => (await getRelease(staging, 'shop')).spec.chart.spec.version === '1.1.0', 40_000);
      await eventually('prod is asked for 1.1.0 once staging is ready at it', async () => (await getRelease(prod, 'shop')).spec.chart.spec.version === '1.1.0', 40_000);
      const done = await eventually('both promotions are recorded as succeeded and every environment is ready at 1.1.0', async () => {
        const p = await getPipeline(mgmt, 'shop');
        const records = p.status?.promotions ?? [];
        return records.length === 2 && records.every((r) => r.state === 'Succeeded') && p.status?.environments?.every((e) => e.ready && e.revision === '1.1.0') === true && p;
      }, 40_000);
      const records = done.status?.promotions ?? [];
      assert.deepEqual(records.map((r: PromotionRecord) => [r.environment, r.revision, r.strategy, r.attempts]), [['staging', '1.1.0', 'patch', 1], ['prod', '1.1.0', 'patch', 1]]);
      assert.match(records[0]?.message ?? '', /set \/spec\/chart\/spec\/version to 1\.1\.0 in 1 target/);
      // Never skipping: prod's promotion began only after staging's had finished (and staging was ready).
      assert.ok((records[1]?.startedAt ?? '') >= (records[0]?.finishedAt ?? 'z'), JSON.stringify(records));
      // The Event follows the status record that says Succeeded: wait for it, then check it exactly.
      const promoted = await eventually('both Promoted events are recorded', async () => {
        const events = (await eventsOf(mgmt, 'shop')).filter((e) => e.reason === 'Promoted');
        return events.length >= 2 && events;
      }, 10_000);
      assert.equal(promoted.length, 2);
      assert.ok(promoted.some((e) => e.message.includes('from dev to staging')) && promoted.some((e) => e.message.includes('from staging to prod')));
      assert.deepEqual(running.controller.stats().promotions, { succeeded: 2, failed: 0 });

      // Level-triggered but quiet: a reconcile that finds nothing changed writes nothing. An edit
      // of metadata alone makes the controller look again; once it has, and has nothing left to
      // do, it has sent no status write and the Pipeline is still as the edit left it.
      await eventually('the controller is idle', () => idle(running.registry), 20_000);
      const writesBefore = await statusWrites(mgmt);
      assert.ok(writesBefore >= 2, `the apiserver counted the controller's status writes (${writesBefore})`);
      const addsBefore = running.registry.queue.stats().adds;
      let edited: Pipeline | undefined;
      while (edited === undefined) { // read-modify-write, again if the controller wrote in between
        const current = await getPipeline(mgmt, 'shop');
        const res = await mgmt.request('PUT', `${PIPELINES}/shop`, { ...current, metadata: { ...current.metadata, annotations: { touched: 'yes' } } });
        if (res.statusCode === 200) edited = res.body as Pipeline;
        else assert.equal(res.statusCode, 409, JSON.stringify(res.body));
      }
      await eventually('the controller reconciled the edited Pipeline and went idle', () => running.registry.queue.stats().adds > addsBefore && idle(running.registry), 20_000);
      assert.equal(await statusWrites(mgmt), writesBefore, 'status written without a change');
      assert.equal((await getPipeline(mgmt, 'shop')).metadata?.resourceVersion, edited.metadata?.resourceVersion, 'status rewritten without a change');
    } finally {
      await mgmt.request('DELETE', `${PIPELINES}/shop`);
      await running.stop();
    }
  });

  it('promotes through a webhook, recording a failed attempt and retrying with the same Idempotency-Key', async () => {
    // The receiver sits on loopback: this controller allows private networks. Its first answer
    // echoes secrets and control characters back; none of it may reach status or Events.
    const receiver = await HostileWebhookReceiver.start();
    receiver.answer({ kind: 'echo-secrets', status: 500 });
    const port = new URL(receiver.url).port;
    await putSecret(mgmt, NS, 'cart-hook', { data: { url: `http://hook-user:hook-pass@127.0.0.1:${port}/promote?token=tok-4b1d` } });
    for (const c of [mgmt, staging]) await createRelease(c, 'cart', '2.0.0');
    const logger = new RecordingLogger();
    const running = startController({ allowPrivateWebhooks: true, logger });
    try {
      const spec = patchPipeline('cart', [['dev', undefined], ['staging', 'staging-kubeconfig']], 'cart') as { spec: Record<string, unknown> };
      spec.spec.promotion = { strategy: 'webhook', webhook: { secretRef: { name: 'cart-hook' } } };
      const created = (await must(mgmt, 'POST', PIPELINES, spec)) as Pipeline;
      await eventually('the pipeline is ready', async () => condition(await getPipeline(mgmt, 'cart'), 'Ready')?.status === 'True', 40_000);
      await setVersion(mgmt, 'cart', '2.1.0');

      await eventually('the first attempt reached the receiver', () => receiver.received.length >= 1, 40_000);
      receiver.answer({ kind: 'plain', status: 200, body: '{}' });
      const failed = await eventually('the first attempt is recorded as failed', async () => {
        const records = (await getPipeline(mgmt, 'cart')).status?.promotions ?? [];
        return records.find((r) => r.state === 'Failed' || (r.state !== 'Pending' && r.attempts > 1));
      }, 40_000);
      if (failed.state === 'Failed') assert.equal(failed.message, `the webhook http://127.0.0.1:${port} answered HTTP 500`);
      const succeeded = await eventually('the retry succeeds', async () => (await getPipeline(mgmt, 'cart')).status?.promotions?.find((r) => r.state === 'Succeeded'), 40_000);
      assert.equal(succeeded.attempts, 2);
      const calls = receiver.received;
      assert.equal(calls.length, 2);
      const key = `${created.metadata?.uid ?? ''}/staging/2.1.0`;
      assert.deepEqual(calls.map((c) => c.headers['idempotency-key']), [key, key]);
      const [firstCall] = calls;
      assert.ok(firstCall !== undefined);
      const body = JSON.parse(firstCall.body) as Record<string, unknown>;
      assert.equal(firstCall.headers.authorization, `Basic ${Buffer.from('hook-user:hook-pass').toString('base64')}`);
      assert.equal(body.revision, '2.1.0');
      assert.equal(body.environment, 'staging');
      assert.equal(body.from, 'dev');
      assert.deepEqual(body.targets, [{ cluster: `secret:${NS}/staging-kubeconfig`, namespace: 'cart' }]);
      assert.equal((await getRelease(staging, 'cart')).spec.chart.spec.version, '2.0.0', 'the webhook strategy does not patch');
      // The Event follows the status record that says Succeeded: wait for it, then check them exactly.
      const events = await eventually('both outcome events are recorded', async () => {
        const all = await eventsOf(mgmt, 'cart');
        return all.length >= 2 && all;
      }, 10_000);
      assert.deepEqual(events.map((e) => e.reason).sort(), ['Promoted', 'PromotionFailed']);
      assert.deepEqual(running.controller.stats().promotions, { succeeded: 1, failed: 1 });
      // Nothing the receiver said, and no part of the URL but its scheme and host (an incoming
      // webhook's path is its credential), in status, Events or logs.
      const seen = JSON.stringify([(await getPipeline(mgmt, 'cart')).status, events]);
      for (const leak of [HOSTILE_INTERNAL_SECRET, 'hook-pass', 'hook-user', 'tok-4b1d', '/promote', 'leader election lost', '\\u001b', '\\u202e']) assert.ok(!seen.includes(leak), leak);
      assert.ok(logger.json().some((line) => line.includes('promotion failed')), 'the failure was logged');
      for (const leak of ['hook-pass', 'hook-user', 'tok-4b1d', '/promote']) assert.ok(!logger.json().some((line) => line.includes(leak)), `${leak} in the logs`);
    } finally {
      await mgmt.request('DELETE', `${PIPELINES}/cart`);
      await running.stop();
      await receiver.close();
    }
  });

  it('refuses a webhook on loopback by default: Failed with a fixed reason, nothing sent, other Pipelines carry on', async () => {
    const receiver = await HostileWebhookReceiver.start();
    receiver.answer({ kind: 'echo-secrets', status: 500 });
    // 127.1 is 127.0.0.1 to the URL parser; the tenant hopes for an internal-only answer.
    const port = new URL(receiver.url).port;
    await putSecret(mgmt, NS, 'inside-hook', { data: { url: `http://127.1:${port}/debug?token=tok-77` } });
    for (const c of [mgmt, staging]) for (const ns of ['inside', 'outside']) await createRelease(c, ns, '4.0.0');
    const logger = new RecordingLogger();
    const running = startController({ logger });
    try {
      const spec = patchPipeline('inside', [['dev', undefined], ['staging', 'staging-kubeconfig']], 'inside') as { spec: Record<string, unknown> };
      spec.spec.promotion = { strategy: 'webhook', webhook: { secretRef: { name: 'inside-hook' } } };
      await must(mgmt, 'POST', PIPELINES, spec);
      await must(mgmt, 'POST', PIPELINES, patchPipeline('outside', [['dev', undefined], ['staging', 'staging-kubeconfig']], 'outside'));
      await eventually('the pipelines are ready', async () => condition(await getPipeline(mgmt, 'inside'), 'Ready')?.status === 'True' && condition(await getPipeline(mgmt, 'outside'), 'Ready')?.status === 'True', 40_000);
      await setVersion(mgmt, 'inside', '4.1.0');
      await setVersion(mgmt, 'outside', '4.1.0');
      const failed = await eventually('the promotion is recorded as failed', async () => (await getPipeline(mgmt, 'inside')).status?.promotions?.find((r) => r.state === 'Failed'), 40_000);
      assert.equal(failed.message, `refused the webhook http://127.0.0.1:${port}: it resolves to a loopback address (private networks are allowed only with --allow-private-webhooks)`);
      const events = await eventually('the failure event is recorded', async () => { const all = await eventsOf(mgmt, 'inside'); return all.length > 0 && all; }, 10_000);
      const seen = JSON.stringify([(await getPipeline(mgmt, 'inside')).status, events, logger.json()]);
      for (const leak of ['/debug', 'tok-77']) assert.ok(!seen.includes(leak), `${leak} in status, Events or logs`);
      assert.equal(receiver.received.length, 0, 'nothing reached the receiver');
      // A patch Pipeline reconciled by the same controller went on promoting.
      await eventually('the other pipeline promoted staging', async () => (await getPipeline(mgmt, 'outside')).status?.promotions?.some((r) => r.state === 'Succeeded') === true, 40_000);
    } finally {
      await mgmt.request('DELETE', `${PIPELINES}/inside`);
      await mgmt.request('DELETE', `${PIPELINES}/outside`);
      await running.stop();
      await receiver.close();
    }
  });

  it('refuses what the CRD schema can, and reports what only code can as Ready=False InvalidSpec', async () => {
    const mismatched = patchPipeline('bad-strategy', [['dev', undefined]], 'bad') as { spec: Record<string, unknown> };
    mismatched.spec.promotion = { strategy: 'webhook', patch: { path: '/spec/x' } };
    const refused = await mgmt.request('POST', PIPELINES, mismatched);
    assert.equal(refused.statusCode, 422, JSON.stringify(refused.body));
    assert.match(JSON.stringify(refused.body), /set exactly the block the strategy names/);
    const duplicates = await mgmt.request('POST', PIPELINES, patchPipeline('dup-env', [['dev', undefined], ['dev', 'staging-kubeconfig']], 'bad'));
    assert.equal(duplicates.statusCode, 422);
    assert.match(JSON.stringify(duplicates.body), /environment names must be unique/);

    const running = startController();
    try {
      // The same target in two environments: valid for the schema, not for the controller.
      await must(mgmt, 'POST', PIPELINES, patchPipeline('twice', [['dev', undefined], ['prod', undefined]], 'bad'));
      const ready = await eventually('Ready=False InvalidSpec', async () => {
        const c = condition(await getPipeline(mgmt, 'twice'), 'Ready');
        return c?.reason === 'InvalidSpec' && c;
      }, 40_000);
      assert.equal(ready.status, 'False');
      assert.match(ready.message, /spec\.environments\[1\]\.targets\[0\]: the same target \(local namespace bad\)/);
      assert.equal(running.controller.stats().reconcileErrors, 0, 'an invalid spec is a status, not a failure');
    } finally {
      await mgmt.request('DELETE', `${PIPELINES}/twice`);
      await running.stop();
    }
  });

  it('reports an unreachable cluster as TargetNotReadable with the cluster\'s error, and keeps the others readable', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => { resolve(); }));
    const dead = staging.adminKubeconfig.replace(staging.server, `https://127.0.0.1:${port}`);
    assert.notEqual(dead, staging.adminKubeconfig);
    await putKubeconfigSecret(mgmt, NS, 'gone-kubeconfig', dead);
    await createRelease(mgmt, 'lost', '1.0.0');
    const running = startController();
    try {
      await must(mgmt, 'POST', PIPELINES, patchPipeline('lost', [['dev', undefined], ['prod', 'gone-kubeconfig']], 'lost'));
      const p = await eventually('Ready=False TargetNotReadable, with the reachable target read', async () => {
        const pipeline = await getPipeline(mgmt, 'lost');
        return condition(pipeline, 'Ready')?.reason === 'TargetNotReadable' && pipeline.status?.environments?.[0]?.targets[0]?.readable === true && pipeline;
      }, 40_000);
      const ready = condition(p, 'Ready');
      assert.equal(ready?.status, 'False');
      assert.match(ready.message, new RegExp(`prod: secret:${NS}/gone-kubeconfig namespace lost: .*127\\.0\\.0\\.1:${port}|prod: secret:${NS}/gone-kubeconfig namespace lost: .*ECONNREFUSED`));
      const [dev, prodEnv] = p.status?.environments ?? [];
      assert.equal(dev?.targets[0]?.exists, true, 'the reachable cluster is still read');
      assert.equal(prodEnv?.targets[0]?.readable, false);
      assert.ok((prodEnv.targets[0].error ?? '').length > 0);
      assert.equal(running.controller.stats().reconcileErrors, 0);
    } finally {
      await mgmt.request('DELETE', `${PIPELINES}/lost`);
      await running.stop();
    }
  });

  it('survives a restart between recording a promotion and acting on it, promoting exactly once', async () => {
    for (const c of [mgmt, staging]) await createRelease(c, 'pay', '3.0.0');
    // The first controller stops itself at the seam: after Pending is written, before acting.
    const seen: PromotionRequest[] = [];
    const kubeConfig = mgmt.kubeConfig();
    const registry = registryWithKeeper({
      provider: new CompositeProvider({ byKind: { local: new LocalProvider({ kubeConfig }), secret: new SecretProvider({ secrets: new CoreV1SecretReader({ kubeConfig: mgmt.kubeConfig() }) }) } }),
    });
    const stopFirst = new AbortController();
    const first = new PipelineController({
      registry,
      allowCrossNamespaceTargets: true,
      beforePromotion: (request, signal) => {
        seen.push(request);
        stopFirst.abort();
        return Promise.reject(abortReason(signal));
      },
    });
    const firstRun = first.run(stopFirst.signal);
    try {
      await must(mgmt, 'POST', PIPELINES, patchPipeline('pay', [['dev', undefined], ['staging', 'staging-kubeconfig']], 'pay'));
      await eventually('the pipeline is ready', async () => condition(await getPipeline(mgmt, 'pay'), 'Ready')?.status === 'True', 40_000);
      const generationBefore = (await getRelease(staging, 'pay')).metadata.generation;
      await setVersion(mgmt, 'pay', '3.1.0');
      await firstRun;
      assert.equal(seen.length, 1);
      assert.deepEqual({ ...seen[0], pipeline: undefined }, { pipeline: undefined, from: 'dev', to: 'staging', revision: '3.1.0', strategy: 'patch', attempt: 1, resumed: false });
      const pending = (await getPipeline(mgmt, 'pay')).status?.promotions ?? [];
      assert.deepEqual(pending.map((r) => [r.environment, r.revision, r.state, r.attempts]), [['staging', '3.1.0', 'Pending', 1]]);
      assert.equal((await getRelease(staging, 'pay')).spec.chart.spec.version, '3.0.0', 'stopped before acting');
      assert.equal(condition(await getPipeline(mgmt, 'pay'), 'Promoting')?.status, 'True');

      // A new controller (a restarted service) takes the Pending promotion up again.
      const second = startController({}, registry);
      try {
        const done = await eventually('the resumed promotion succeeds', async () => (await getPipeline(mgmt, 'pay')).status?.promotions?.find((r) => r.state === 'Succeeded'), 40_000);
        assert.equal(done.attempts, 2);
        assert.equal(done.startedAt, pending[0]?.startedAt, 'the same promotion, resumed');
        const release = await getRelease(staging, 'pay');
        assert.equal(release.spec.chart.spec.version, '3.1.0');
        assert.equal(release.metadata.generation, generationBefore + 1, 'staging was written exactly once');
        // Nothing more to come: staging reports 3.1.0 and the controller has nothing left to do.
        await eventually('staging is ready at 3.1.0 and the controller idle', async () => {
          const environments = (await getPipeline(mgmt, 'pay')).status?.environments ?? [];
          return environments.length === 2 && environments.every((e) => e.ready && e.revision === '3.1.0') && idle(registry);
        }, 40_000);
        const records = (await getPipeline(mgmt, 'pay')).status?.promotions ?? [];
        assert.equal(records.length, 1, 'one promotion record for (staging, 3.1.0)');
        assert.equal((await eventsOf(mgmt, 'pay')).filter((e) => e.reason === 'Promoted').length, 1);
        assert.equal((await getRelease(staging, 'pay')).metadata.generation, generationBefore + 1);
      } finally {
        await second.stop();
      }
    } finally {
      stopFirst.abort();
      await firstRun;
      await registry.close();
    }
  });
});
