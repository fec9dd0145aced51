// What an operator reads of a wave's promotion (patch strategy): the service's log lines and the
// Pipeline's Events name the wave, on success and on failure. Simulated clusters: the management
// cluster (dev and the Pipeline) and two members by Secret label, waves canary (c1) and rest (c2).
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { SimulatedCluster, startSimulatedClusters, type KubeObject } from '../../fixtures/index.ts';
import { eventually } from '../../e2e/harness/index.ts';
import { kubeConfigFrom, PIPELINE_KIND, RecordingLogger } from '../../fixtures/support/index.ts';
import { CompositeProvider, CoreV1SecretReader, LocalProvider, SecretProvider } from '../cluster/index.ts';
import { registryWithKeeper } from '../registry/testing.ts';
import { PipelineController } from './controller.ts';

const NS = 'team-a';
const API = 'helm.toolkit.fluxcd.io/v2';
const HR = { group: 'helm.toolkit.fluxcd.io', version: 'v2', kind: 'HelmRelease', plural: 'helmreleases', namespaced: true, status: true };
const EVENT = { apiVersion: 'v1', kind: 'Event' } as const;

const release = (namespace: string, version: string): KubeObject => ({ apiVersion: API, kind: 'HelmRelease', metadata: { name: 'podinfo', namespace }, spec: { chart: { spec: { chart: 'podinfo', version } } } });

/** Plays Flux: the HelmRelease Ready at the version its spec asks for. */
function reconcile(sim: SimulatedCluster, namespace: string): void {
  const hr = sim.store.get({ apiVersion: API, kind: 'HelmRelease', namespace, name: 'podinfo' });
  const version = (hr?.spec as { chart?: { spec?: { version?: string } } } | undefined)?.chart?.spec?.version;
  if (hr === undefined || version === undefined) return;
  const history = (hr.status as { history?: { chartVersion: string }[] } | undefined)?.history;
  if (history?.[0]?.chartVersion === version) return;
  sim.store.updateStatus({ ...hr, status: { observedGeneration: hr.metadata?.generation, history: [{ chartVersion: version }], conditions: [{ type: 'Ready', status: 'True', reason: 'Succeeded', message: '' }] } });
}

interface Setup {
  readonly mgmt: SimulatedCluster;
  readonly members: readonly SimulatedCluster[];
  readonly log: RecordingLogger;
  /** Plays Flux in every cluster once. */
  readonly flux: () => void;
  readonly records: () => readonly { readonly wave?: string; readonly revision: string; readonly state: string }[];
}

/** dev runs 1.1.0, the fleet 1.0.0: the controller's next step is the canary wave of 1.1.0. */
async function start(t: TestContext): Promise<Setup> {
  const mgmt = await SimulatedCluster.start({ name: 'mgmt', namespaces: [NS, 'dev'], kinds: [PIPELINE_KIND, HR, { group: '', version: 'v1', kind: 'Event', plural: 'events', namespaced: true }] });
  t.after(() => mgmt.close());
  const members = await startSimulatedClusters(2, { namePrefix: 'member', namespaces: ['app'], kinds: [HR] });
  t.after(() => Promise.all(members.map((m) => m.close())));
  for (const [i, sim] of members.entries()) {
    sim.store.create(release('app', '1.0.0'));
    reconcile(sim, 'app');
    mgmt.store.create({ apiVersion: 'v1', kind: 'Secret', metadata: { name: `c${i + 1}`, namespace: NS, labels: { fleet: 'prod' } }, data: { value: Buffer.from(sim.kubeconfig).toString('base64') } });
  }
  mgmt.store.create(release('dev', '1.1.0'));
  reconcile(mgmt, 'dev');
  const kubeConfig = kubeConfigFrom(mgmt.kubeconfig);
  const registry = registryWithKeeper({
    provider: new CompositeProvider({ byKind: { local: new LocalProvider({ kubeConfig }), secret: new SecretProvider({ secrets: new CoreV1SecretReader({ kubeConfig: kubeConfigFrom(mgmt.kubeconfig) }) }) } }),
    credentialCheckIntervalMs: 0,
  });
  t.after(() => registry.close());
  const log = new RecordingLogger();
  const controller = new PipelineController({ registry, workers: 1, allowCrossNamespaceTargets: true, allowFleetSelectorsAsService: true, logger: log }); // admin credentials: the opt-in
  const stop = new AbortController();
  const running = controller.run(stop.signal);
  t.after(async () => { stop.abort(); await running; });
  mgmt.store.create({ apiVersion: 'fleetcache.dev/v1alpha1', kind: 'Pipeline', metadata: { name: 'podinfo', namespace: NS }, spec: {
    appRef: { apiVersion: API, kind: 'HelmRelease', name: 'podinfo' },
    environments: [
      { name: 'dev', targets: [{ namespace: 'dev' }] },
      { name: 'prod', fleet: { namespace: 'app', clusterSelector: { matchLabels: { fleet: 'prod' } }, waves: [{ name: 'canary', count: 1 }, { name: 'rest', count: 1 }] } },
    ],
    promotion: { strategy: 'patch', patch: { path: '/spec/chart/spec/version' } },
  } });
  return {
    mgmt,
    members,
    log,
    flux: () => { for (const m of members) reconcile(m, 'app'); },
    records: () => ((mgmt.store.get({ apiVersion: 'fleetcache.dev/v1alpha1', kind: 'Pipeline', namespace: NS, name: 'podinfo' })?.status as { promotions?: { wave?: string; revision: string; state: string }[] } | undefined)?.promotions ?? []),
  };
}

const events = (mgmt: SimulatedCluster, reason: string): string[] => mgmt.store.list(EVENT, { namespace: NS }).filter((e) => (e as { reason?: string }).reason === reason).map((e) => (e as { message?: string }).message ?? '');

describe('a wave\'s promotion, as the log and the Events tell it (patch strategy)', () => {
  it('each wave\'s `promoted` line carries its wave, and its Promoted Event names it', async (t) => {
    const { mgmt, log, flux, records } = await start(t);
    await eventually('both waves of 1.1.0 Succeeded', () => {
      flux();
      const prod = records().filter((r) => r.revision === '1.1.0');
      return prod.length === 2 && prod.every((r) => r.state === 'Succeeded');
    }, 30_000);
    const promoted = log.lines.filter((l) => l.message === 'promoted');
    assert.deepEqual(promoted.map((l) => [l.level, l.fields.environment, l.fields.wave, l.fields.revision]), [['info', 'prod', 'canary', '1.1.0'], ['info', 'prod', 'rest', '1.1.0']]);
    const messages = await eventually('two Promoted Events', () => { const m = events(mgmt, 'Promoted'); return m.length === 2 && m; });
    assert.deepEqual(messages.map((m) => /to prod wave (\w+):/.exec(m)?.[1]).sort(), ['canary', 'rest']);
  });

  it('a wave whose patch failed says which wave, in the log line and the Event', async (t) => {
    const { mgmt, members, log, flux } = await start(t);
    members[0]?.faults.failNext({ method: 'PATCH', path: /\/helmreleases\/podinfo$/, count: Infinity, status: 500 });
    const failed = await eventually('the canary wave\'s promotion failed', () => { flux(); return log.lines.find((l) => l.message === 'promotion failed'); }, 30_000);
    assert.deepEqual([failed.level, failed.fields.environment, failed.fields.wave, failed.fields.revision], ['warn', 'prod', 'canary', '1.1.0']);
    const [message] = await eventually('a PromotionFailed Event', () => { const m = events(mgmt, 'PromotionFailed'); return m.length > 0 && m; });
    assert.match(message ?? '', /^promoting 1\.1\.0 from dev to prod wave canary failed \(attempt 1\): /);
  });
});
