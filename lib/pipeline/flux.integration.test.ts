// The Pipeline controller against Flux-shaped Kustomizations on a real apiserver. No Flux runs
// here: the test plays kustomize-controller by writing the status Flux writes (observedGeneration,
// Ready, lastAppliedRevision as a commit reference), including what it does while suspended.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { before, describe, it } from 'node:test';
import { kustomizationCrd } from '../../fixtures/crds/index.ts';
import { eventually, useClusters, type TestCluster } from '../../e2e/harness/index.ts';
import { CompositeProvider, LocalProvider } from '../cluster/index.ts';
import type { Registry } from '../registry/index.ts';
import { registryWithKeeper } from '../registry/testing.ts';
import { PipelineController, pipelineCrd, type Pipeline, type PipelineControllerOptions } from './index.ts';
import { ensureNamespace, must } from '../../fixtures/support/index.ts';

const NS = 'team-flux';
const KS = '/apis/kustomize.toolkit.fluxcd.io/v1';
const PIPELINES = `/apis/fleetcache.dev/v1alpha1/namespaces/${NS}/pipelines`;
const VERSION = '/spec/postBuild/substitute/version';
const FLUX_LABEL = 'kustomize.toolkit.fluxcd.io/name';

interface Kustomization {
  metadata: { name: string; namespace: string; generation: number; labels?: Record<string, string> };
  spec: { suspend?: boolean; postBuild: { substitute: { version: string } } };
  status?: Record<string, unknown>;
}

const ksPath = (namespace: string, sub = ''): string => `${KS}/namespaces/${namespace}/kustomizations/podinfo${sub}`;

async function getKs(cluster: TestCluster, namespace: string): Promise<Kustomization> {
  return (await must(cluster, 'GET', ksPath(namespace))) as Kustomization;
}

/** Read-modify-write of a Kustomization (spec or, with `/status`, status), retried on conflicts. */
async function update(cluster: TestCluster, namespace: string, change: (ks: Kustomization) => void, sub = ''): Promise<void> {
  for (;;) {
    const ks = await getKs(cluster, namespace);
    change(ks);
    const res = await cluster.request('PUT', ksPath(namespace, sub), ks);
    if (res.statusCode === 200) return;
    assert.equal(res.statusCode, 409, JSON.stringify(res.body));
  }
}

/**
 * What kustomize-controller leaves after a reconcile: observedGeneration current, Ready with the
 * given status, lastAppliedRevision the commit (a fresh one each time, as after any commit). It
 * does this while suspended too, without applying anything.
 */
async function reconciled(cluster: TestCluster, namespace: string, ready: 'True' | 'Unknown' = 'True'): Promise<void> {
  await update(cluster, namespace, (ks) => {
    ks.status = {
      observedGeneration: ks.metadata.generation,
      lastAppliedRevision: `main@sha1:${randomBytes(20).toString('hex')}`,
      conditions: [{ type: 'Ready', status: ready, reason: ready === 'True' ? 'ReconciliationSucceeded' : 'Progressing', message: 'x', lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z') }],
    };
  }, '/status');
}

async function createKs(cluster: TestCluster, namespace: string, version: string, labels: Record<string, string> = {}): Promise<void> {
  await ensureNamespace(cluster, namespace);
  await must(cluster, 'POST', `${KS}/namespaces/${namespace}/kustomizations`, {
    apiVersion: 'kustomize.toolkit.fluxcd.io/v1',
    kind: 'Kustomization',
    metadata: { name: 'podinfo', namespace, labels },
    spec: { sourceRef: { kind: 'GitRepository', name: 'fleet' }, path: './apps', postBuild: { substitute: { version } } },
  });
  await reconciled(cluster, namespace);
}

/** Sets the version (as a commit applied by the parent Kustomization would) and reconciles it. */
async function release(cluster: TestCluster, namespace: string, version: string): Promise<void> {
  await update(cluster, namespace, (ks) => { ks.spec.postBuild.substitute.version = version; });
  await reconciled(cluster, namespace);
}

async function pipelineOf(cluster: TestCluster, name: string): Promise<Pipeline> {
  return (await must(cluster, 'GET', `${PIPELINES}/${name}`)) as Pipeline;
}

const promoting = (p: Pipeline): { reason: string; message: string } | undefined => p.status?.conditions?.find((c) => c.type === 'Promoting');

async function eventsOf(cluster: TestCluster, name: string): Promise<{ reason: string; message: string; type: string }[]> {
  return ((await must(cluster, 'GET', `/api/v1/namespaces/${NS}/events?fieldSelector=involvedObject.name%3D${name}`)) as { items: { reason: string; message: string; type: string }[] }).items;
}

function ksPipeline(name: string, environments: readonly string[], extra: Record<string, unknown> = {}): object {
  return {
    apiVersion: 'fleetcache.dev/v1alpha1',
    kind: 'Pipeline',
    metadata: { name, namespace: NS },
    spec: {
      appRef: { apiVersion: 'kustomize.toolkit.fluxcd.io/v1', kind: 'Kustomization', name: 'podinfo' },
      environments: environments.map((env) => ({ name: env, targets: [{ namespace: `${name}-${env}` }] })),
      promotion: { strategy: 'patch', patch: { path: VERSION } },
      revisionPath: VERSION,
      ...extra,
    },
  };
}

describe('PipelineController with Flux Kustomizations on a real apiserver', () => {
  const env = useClusters(1, { namePrefix: 'flux' });
  let mgmt: TestCluster;

  before(async () => {
    [mgmt] = env.clusters as [TestCluster];
    await mgmt.installCRDs([pipelineCrd, kustomizationCrd]);
    await must(mgmt, 'POST', '/api/v1/namespaces', { metadata: { name: NS } });
  });

  function startController(extra: Partial<PipelineControllerOptions> = {}): { readonly registry: Registry; stop(): Promise<void> } {
    const registry = registryWithKeeper({ provider: new CompositeProvider({ byKind: { local: new LocalProvider({ kubeConfig: mgmt.kubeConfig() }) } }) });
    const controller = new PipelineController({ registry, workers: 2, allowCrossNamespaceTargets: true, ...extra });
    const stopper = new AbortController();
    const done = controller.run(stopper.signal);
    return { registry, async stop() { stopper.abort(); await done; await registry.close(); } };
  }

  /** Nothing queued, running or scheduled soon: whatever the controller was going to do, it did. */
  const idle = (registry: Registry): boolean => {
    const s = registry.queue.stats();
    return s.depth === 0 && s.processing === 0;
  };

  it('a Kustomization promoted through git without revisionPath is InvalidSpec: its default revision is the commit', async (t) => {
    const c = startController();
    t.after(() => c.stop()); // every controller watches every Pipeline: one at a time
    await must(mgmt, 'POST', PIPELINES, ksPipeline('nopath', ['dev', 'staging'], { revisionPath: undefined, promotion: { strategy: 'git', git: { url: 'https://git.example/fleet.git' } } }));
    const p = await eventually('InvalidSpec', async () => {
      const x = await pipelineOf(mgmt, 'nopath');
      return x.status?.conditions?.find((k) => k.type === 'Ready')?.reason === 'InvalidSpec' && x;
    }, 30_000);
    assert.match(p.status?.conditions?.find((k) => k.type === 'Ready')?.message ?? '', /spec\.revisionPath: required for a Flux Kustomization.*\/spec\/postBuild\/substitute\/version/);
  });

  it('never promotes prod past a suspended staging, though Flux keeps it Ready at the current generation', async (t) => {
    for (const e of ['dev', 'staging', 'prod']) await createKs(mgmt, `susp-${e}`, '1.0.0');
    const c = startController();
    t.after(() => c.stop()); // every controller watches every Pipeline: one at a time
    await must(mgmt, 'POST', PIPELINES, ksPipeline('susp', ['dev', 'staging', 'prod']));
    await eventually('every environment ready at 1.0.0', async () => (await pipelineOf(mgmt, 'susp')).status?.environments?.every((e) => e.ready && e.revision === '1.0.0') === true, 30_000);

    await update(mgmt, 'susp-staging', (ks) => { ks.spec.suspend = true; });
    await reconciled(mgmt, 'susp-staging');
    await release(mgmt, 'susp-dev', '1.1.0');
    // fleetcache patches staging; suspended, Flux applies nothing but still reports it observed and Ready.
    await eventually('staging patched to 1.1.0', async () => (await getKs(mgmt, 'susp-staging')).spec.postBuild.substitute.version === '1.1.0', 30_000);
    await reconciled(mgmt, 'susp-staging');
    const seen = await eventually('staging shown not ready: Suspended', async () => {
      const p = await pipelineOf(mgmt, 'susp');
      const staging = p.status?.environments?.[1];
      return staging?.revision === '1.1.0' && !staging.ready && staging.reason === 'Suspended' && idle(c.registry) && p;
    }, 30_000);
    assert.equal(seen.status?.environments?.[1]?.targets[0]?.reason, 'Suspended');
    assert.match(seen.status.conditions?.find((k) => k.type === 'Ready')?.message ?? '', /staging: 1\.1\.0 \(not ready: Suspended\)/);
    assert.equal((await getKs(mgmt, 'susp-prod')).spec.postBuild.substitute.version, '1.0.0', 'prod not promoted past a suspended staging');
    assert.ok(!(seen.status.promotions ?? []).some((r) => r.environment === 'prod'));

    await update(mgmt, 'susp-staging', (ks) => { ks.spec.suspend = false; });
    await reconciled(mgmt, 'susp-staging');
    await eventually('resumed staging lets prod follow', async () => (await getKs(mgmt, 'susp-prod')).spec.postBuild.substitute.version === '1.1.0', 30_000);
  });

  it('reports a patched value that the Flux Kustomization managing the object put back: Drifted and an Event', async (t) => {
    await createKs(mgmt, 'drift-dev', '1.0.0');
    await createKs(mgmt, 'drift-staging', '1.0.0', { [FLUX_LABEL]: 'apps' });
    const c = startController();
    t.after(() => c.stop()); // every controller watches every Pipeline: one at a time
    await must(mgmt, 'POST', PIPELINES, ksPipeline('drift', ['dev', 'staging']));
    await eventually('both ready at 1.0.0', async () => (await pipelineOf(mgmt, 'drift')).status?.environments?.every((e) => e.ready && e.revision === '1.0.0') === true, 30_000);
    await release(mgmt, 'drift-dev', '1.1.0');
    await eventually('the patch Succeeded', async () => (await pipelineOf(mgmt, 'drift')).status?.promotions?.some((r) => r.environment === 'staging' && r.state === 'Succeeded') === true, 30_000);
    // The parent Kustomization applies Git's value again.
    await release(mgmt, 'drift-staging', '1.0.0');
    const drifted = await eventually('Drifted', async () => {
      const p = await pipelineOf(mgmt, 'drift');
      const d = p.status?.conditions?.find((k) => k.type === 'Drifted');
      return d?.status === 'True' && p;
    }, 30_000);
    assert.equal(drifted.status?.conditions?.find((k) => k.type === 'Drifted')?.reason, 'RevertedByFlux');
    assert.equal(drifted.status.environments?.[1]?.targets[0]?.drifted, true);
    const events = await eventually('the Drifted Event', async () => {
      const e = (await eventsOf(mgmt, 'drift')).filter((x) => x.reason === 'Drifted');
      return e.length > 0 && e;
    }, 10_000);
    const [event] = events;
    assert.ok(event !== undefined);
    assert.equal(event.type, 'Warning');
    assert.match(event.message, /git strategy/);
  });

  it('stops a loop: an environment promoted again and again halts with PromotionLoop until the spec changes', async (t) => {
    await createKs(mgmt, 'loop-dev', '1.0.0');
    await createKs(mgmt, 'loop-staging', '1.0.0');
    const c = startController({ promotionLoop: { maxPerEnvironment: 2, windowMs: 600_000 } });
    t.after(() => c.stop()); // every controller watches every Pipeline: one at a time
    await must(mgmt, 'POST', PIPELINES, ksPipeline('loop', ['dev', 'staging']));
    await eventually('both ready at 1.0.0', async () => (await pipelineOf(mgmt, 'loop')).status?.environments?.every((e) => e.ready && e.revision === '1.0.0') === true, 30_000);
    for (const v of ['1.1.0', '1.2.0']) {
      await release(mgmt, 'loop-dev', v);
      await eventually(`staging patched to ${v}`, async () => (await getKs(mgmt, 'loop-staging')).spec.postBuild.substitute.version === v, 30_000);
      await reconciled(mgmt, 'loop-staging');
    }
    await release(mgmt, 'loop-dev', '1.3.0');
    const halted = await eventually('PromotionLoop', async () => {
      const p = await pipelineOf(mgmt, 'loop');
      return promoting(p)?.reason === 'PromotionLoop' && p;
    }, 30_000);
    assert.match(promoting(halted)?.message ?? '', /staging was promoted 2 times within 600 s \(at most 2\)/);
    assert.equal(halted.status?.halted?.reason, 'PromotionLoop');
    assert.deepEqual((halted.status.committed ?? []).map((x) => `${x.environment}@${x.revision}`), ['staging@1.1.0', 'staging@1.2.0'], 'what was carried out is recorded');
    await eventually('the PromotionLoop Event', async () => (await eventsOf(mgmt, 'loop')).some((e) => e.reason === 'PromotionLoop' && e.type === 'Warning'), 10_000);
    assert.equal((await getKs(mgmt, 'loop-staging')).spec.postBuild.substitute.version, '1.2.0', 'nothing carried out once stopped');

    // A change of the spec (the fix) lifts the halt.
    for (;;) {
      const p = (await pipelineOf(mgmt, 'loop')) as Pipeline & { spec: { environments: { requireApproval?: boolean }[] } };
      const staging = p.spec.environments[1];
      assert.ok(staging !== undefined);
      staging.requireApproval = false;
      const res = await mgmt.request('PUT', `${PIPELINES}/loop`, p);
      if (res.statusCode === 200) break;
      assert.equal(res.statusCode, 409);
    }
    await eventually('staging promoted to 1.3.0 after the spec changed', async () => (await getKs(mgmt, 'loop-staging')).spec.postBuild.substitute.version === '1.3.0', 30_000);
  });

  it('counts a target Progressing at its revision as ready within the grace window, and looks again when it ends', async (t) => {
    await createKs(mgmt, 'grace-dev', '1.0.0');
    await createKs(mgmt, 'grace-staging', '1.0.0');
    const c = startController({ progressingGraceMs: 1_500 });
    t.after(() => c.stop()); // every controller watches every Pipeline: one at a time
    await must(mgmt, 'POST', PIPELINES, ksPipeline('grace', ['dev', 'staging']));
    await eventually('both ready at 1.0.0', async () => (await pipelineOf(mgmt, 'grace')).status?.environments?.every((e) => e.ready && e.revision === '1.0.0') === true, 30_000);
    // A reconcile that does not end: nothing changes after this write, so only the controller's own
    // recheck at the end of the window can turn dev not ready.
    await reconciled(mgmt, 'grace-dev', 'Unknown');
    const stuck = await eventually('past the window: not ready, Progressing', async () => {
      const p = await pipelineOf(mgmt, 'grace');
      const dev = p.status?.environments?.[0];
      return dev?.ready === false && dev.reason === 'Progressing' && p;
    }, 30_000);
    assert.equal(stuck.status?.environments?.[0]?.targets[0]?.reason, 'Progressing');
    await reconciled(mgmt, 'grace-dev');
    await eventually('ready again', async () => (await pipelineOf(mgmt, 'grace')).status?.environments?.[0]?.ready === true, 30_000);
  });

  it('refuses to write a commit reference into a manifest, even where the spec asks for it', async (t) => {
    await createKs(mgmt, 'sha-dev', '1.0.0');
    await createKs(mgmt, 'sha-staging', '1.0.0');
    const c = startController();
    t.after(() => c.stop()); // every controller watches every Pipeline: one at a time
    await must(mgmt, 'POST', PIPELINES, ksPipeline('sha', ['dev', 'staging'], { revisionPath: '/status/lastAppliedRevision' }));
    const halted = await eventually('CommitReference', async () => {
      const p = await pipelineOf(mgmt, 'sha');
      return promoting(p)?.reason === 'CommitReference' && p;
    }, 30_000);
    assert.match(promoting(halted)?.message ?? '', /refused to promote main@sha1:[0-9a-f]{40} to staging: it is a Git commit/);
    await eventually('the CommitReference Event', async () => (await eventsOf(mgmt, 'sha')).some((e) => e.reason === 'CommitReference'), 10_000);
    assert.equal((await getKs(mgmt, 'sha-staging')).spec.postBuild.substitute.version, '1.0.0', 'never patched');
    assert.ok(!(halted.status?.promotions ?? []).some((r) => r.state === 'Succeeded' || r.state === 'Pending'));
  });
});
