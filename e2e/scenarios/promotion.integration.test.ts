// Scenario: the fleetcache service (two replicas with leader election, as deployed) promotes a
// release dev → staging → prod across three clusters; only the leader acts, and killing it hands
// over; a Pipeline that drops an environment lets that cluster's cache be collected. Runs on local
// apiservers (make test) and on kind (make e2e-kind).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { appliedVersion, everyEnvironmentReady, FLEET_SERVICE_ARGS, PIPELINE_NAME, PIPELINE_NAMESPACE, pipelineObject, readPipeline, releaseToDev, setUpFleet, startFlux, updateObject, type Fleet } from '../fleet.ts';
import { useClusters, type TestCluster } from '../harness/index.ts';
import { startService, type ServiceProcess } from '../service.ts';
import { eventually } from '../harness/index.ts';

// A lease short enough that the hand-over after a kill fits in a test, with a renew deadline long
// enough (half again controller-runtime's 10 s) that a leader on a loaded machine keeps its lease.
const replicaArgs = [...FLEET_SERVICE_ARGS, '--leader-elect', '--leader-elect-lease-duration=20s', '--leader-elect-renew-deadline=15s', '--leader-elect-retry-period=2s', '--cache-gc-grace-period=1s'];
// The replicas' Lease: the default --leader-election-id, in "default" (no pod namespace here).
const leasePath = '/apis/coordination.k8s.io/v1/namespaces/default/leases/fleetcache-leader';

describe('scenario: pipeline promotion across clusters', () => {
  const env = useClusters(3, { namePrefix: 'fleet' });
  let fleet: Fleet;
  const replicas: ServiceProcess[] = [];
  let stopFlux: (() => Promise<void>) | undefined;

  before(async () => {
    const [management, staging, prod] = env.clusters as [TestCluster, TestCluster, TestCluster];
    fleet = { management, staging, prod };
    await setUpFleet(fleet, '1.0.0');
    stopFlux = await startFlux(env.clusters);
    for (const name of ['replica-a', 'replica-b']) replicas.push(await startService(name, management.adminKubeconfig, replicaArgs));
  }, { timeout: 300_000 });

  after(async () => {
    await Promise.all(replicas.map((r) => r.stop()));
    await stopFlux?.();
  });

  async function leaders(): Promise<ServiceProcess[]> {
    // Killed replicas are removed from `replicas`.
    const flags = await Promise.all(replicas.map((r) => r.metric('fleetcache_leader').catch(() => undefined)));
    return replicas.filter((_, i) => flags[i] === 1);
  }

  async function promotionsOf(revision: string): Promise<{ environment: string; state: string }[]> {
    return ((await readPipeline(fleet)).status?.promotions ?? []).filter((p) => p.revision === revision);
  }

  async function lease(): Promise<{ holderIdentity: string | undefined; leaseTransitions: number | undefined }> {
    const res = await fleet.management.request('GET', leasePath);
    assert.equal(res.statusCode, 200, JSON.stringify(res.body));
    const { holderIdentity, leaseTransitions } = (res.body as { spec: { holderIdentity?: string; leaseTransitions?: number } }).spec;
    return { holderIdentity, leaseTransitions };
  }

  it('promotes a release dev → staging → prod, once per environment, with exactly one replica leading', async () => {
    const [first] = await eventually('one replica leads', async () => { const l = await leaders(); return l.length === 1 ? l : undefined; }, 90_000);
    const before = await lease();
    await everyEnvironmentReady(fleet, '1.0.0', 90_000);
    await releaseToDev(fleet, '1.1.0');
    await eventually('1.1.0 reaches prod', async () => await appliedVersion(fleet.prod) === '1.1.0', 90_000);
    assert.equal(await appliedVersion(fleet.staging), '1.1.0');
    // The version is applied before the outcome is recorded: wait for prod's record to leave Pending.
    const recorded110 = await eventually('1.1.0\'s promotion to prod is recorded', async () => {
      const promotions = await promotionsOf('1.1.0');
      return promotions.some((p) => p.environment === 'prod' && p.state !== 'Pending') ? promotions : undefined;
    }, 30_000);
    assert.deepEqual(recorded110.map((p) => `${p.environment}:${p.state}`), ['staging:Succeeded', 'prod:Succeeded'], 'one promotion per environment, in order');
    // Not a sample of the moment: the same replica led throughout (the Lease never changed hands).
    const now = await leaders();
    assert.ok(now.length === 1 && now[0] === first, `the replica that led at the start still leads, alone (leaders: ${now.map((r) => r.name).join(', ')})`);
    assert.deepEqual(await lease(), before, 'the Lease did not change hands during the release');
  });

  it('hands over when the leader is killed, and the new leader finishes the next release', async () => {
    const [leader] = await leaders();
    assert.ok(leader !== undefined);
    await leader.kill(); // no lease released: the follower must wait for it to expire
    replicas.splice(replicas.indexOf(leader), 1);
    await releaseToDev(fleet, '1.2.0');
    await eventually('the follower takes over', async () => (await leaders()).length === 1, 90_000);
    await eventually('1.2.0 reaches prod', async () => await appliedVersion(fleet.prod) === '1.2.0', 90_000);
    // The version is applied before the outcome is recorded: wait for prod's record to leave Pending.
    const recorded120 = await eventually('1.2.0\'s promotion to prod is recorded', async () => {
      const promotions = await promotionsOf('1.2.0');
      return promotions.some((p) => p.environment === 'prod' && p.state !== 'Pending') ? promotions : undefined;
    }, 30_000);
    assert.deepEqual(recorded120.map((p) => `${p.environment}:${p.state}`), ['staging:Succeeded', 'prod:Succeeded']);
  });

  it('collects the caches of an environment the Pipeline no longer names', async () => {
    const [leader] = await leaders();
    assert.ok(leader !== undefined);
    const prodCluster = `secret:${PIPELINE_NAMESPACE}/prod-kubeconfig`;
    assert.ok((await leader.caches()).some((c) => c.cluster === prodCluster), 'prod is watched while the Pipeline names it');

    // The leader writes the Pipeline's status meanwhile: updateObject reads again on a conflict.
    const spec = (pipelineObject(['dev', 'staging']) as { spec: object }).spec;
    await updateObject(fleet.management, `/apis/fleetcache.dev/v1alpha1/namespaces/${PIPELINE_NAMESPACE}/pipelines/${PIPELINE_NAME}`, (current) => ({ ...current, spec }));

    await eventually('prod\'s cache is collected', async () => !(await leader.caches()).some((c) => c.cluster === prodCluster), 30_000);
    assert.ok((await leader.caches()).some((c) => c.cluster === `secret:${PIPELINE_NAMESPACE}/staging-kubeconfig`), 'staging is still watched');
    const envs = (await readPipeline(fleet)).status?.environments ?? [];
    assert.deepEqual(envs.map((e) => e.name), ['dev', 'staging']);
  });
});
