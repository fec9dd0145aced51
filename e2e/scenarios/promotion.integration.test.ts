// Scenario: the fleetcache service (two replicas with leader election, as deployed) promotes a
// release dev → staging → prod across three clusters; only the leader acts, and killing it hands
// over; a Pipeline that drops an environment lets that cluster's cache be collected. Runs on local
// apiservers (make test) and on kind (make e2e-kind).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { appliedVersion, PIPELINE_NAME, PIPELINE_NAMESPACE, pipelineObject, readPipeline, releaseToDev, setUpFleet, startFlux, type Fleet } from '../fleet.ts';
import { useClusters, type TestCluster } from '../harness/index.ts';
import { startService, type ServiceProcess } from '../service.ts';
import { eventually } from '../harness/index.ts';

// Short leader election timings, so a hand-over fits in a test; the defaults are client-go's.
const replicaArgs = ['--leader-elect', '--leader-elect-lease-duration=4s', '--leader-elect-renew-deadline=3s', '--leader-elect-retry-period=500ms', '--cache-gc-grace-period=1s'];

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

  it('promotes a release dev → staging → prod, once per environment, with exactly one replica leading', async () => {
    await eventually('one replica leads', async () => (await leaders()).length === 1, 90_000);
    await eventually('every environment is ready at 1.0.0', async () => {
      const envs = (await readPipeline(fleet)).status?.environments ?? [];
      return envs.length === 3 && envs.every((e) => e.ready && e.revision === '1.0.0');
    }, 90_000);
    await releaseToDev(fleet, '1.1.0');
    await eventually('1.1.0 reaches prod', async () => await appliedVersion(fleet.prod) === '1.1.0', 90_000);
    assert.equal(await appliedVersion(fleet.staging), '1.1.0');
    assert.deepEqual((await promotionsOf('1.1.0')).map((p) => `${p.environment}:${p.state}`), ['staging:Succeeded', 'prod:Succeeded'], 'one promotion per environment, in order');
    assert.equal((await leaders()).length, 1, 'still exactly one leader');
  });

  it('hands over when the leader is killed, and the new leader finishes the next release', async () => {
    const [leader] = await leaders();
    assert.ok(leader !== undefined);
    await leader.kill(); // no lease released: the follower must wait for it to expire
    replicas.splice(replicas.indexOf(leader), 1);
    await releaseToDev(fleet, '1.2.0');
    await eventually('the follower takes over', async () => (await leaders()).length === 1, 90_000);
    await eventually('1.2.0 reaches prod', async () => await appliedVersion(fleet.prod) === '1.2.0', 90_000);
    assert.deepEqual((await promotionsOf('1.2.0')).map((p) => `${p.environment}:${p.state}`), ['staging:Succeeded', 'prod:Succeeded']);
  });

  it('collects the caches of an environment the Pipeline no longer names', async () => {
    const [leader] = await leaders();
    assert.ok(leader !== undefined);
    const prodCluster = `secret:${PIPELINE_NAMESPACE}/prod-kubeconfig`;
    assert.ok((await leader.caches()).some((c) => c.cluster === prodCluster), 'prod is watched while the Pipeline names it');

    const current = await fleet.management.request('GET', `/apis/fleetcache.dev/v1alpha1/namespaces/${PIPELINE_NAMESPACE}/pipelines/${PIPELINE_NAME}`);
    const edited = { ...(current.body as object), spec: (pipelineObject(['dev', 'staging']) as { spec: object }).spec };
    assert.equal((await fleet.management.request('PUT', `/apis/fleetcache.dev/v1alpha1/namespaces/${PIPELINE_NAMESPACE}/pipelines/${PIPELINE_NAME}`, edited)).statusCode, 200);

    await eventually('prod\'s cache is collected', async () => !(await leader.caches()).some((c) => c.cluster === prodCluster), 30_000);
    assert.ok((await leader.caches()).some((c) => c.cluster === `secret:${PIPELINE_NAMESPACE}/staging-kubeconfig`), 'staging is still watched');
    const envs = (await readPipeline(fleet)).status?.environments ?? [];
    assert.deepEqual(envs.map((e) => e.name), ['dev', 'staging']);
  });
});
