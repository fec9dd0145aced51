// The prod cluster's apiserver goes down in the middle of a release: the Pipeline's status says
// prod cannot be read, the release still reaches staging, and when prod comes back it gets the
// release too — once. Local apiservers only: it stops one (kind cannot), so it is not in scenarios/.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { appliedVersion, everyEnvironmentReady, FLEET_SERVICE_ARGS, readPipeline, releaseToDev, setUpFleet, startFlux, type Fleet } from './fleet.ts';
import { useClusters, type TestCluster } from './harness/index.ts';
import { startService, type ServiceProcess } from './service.ts';
import { eventually } from './harness/index.ts';

describe('a target cluster down mid-pipeline', () => {
  const env = useClusters(3, { namePrefix: 'outage' });
  let fleet: Fleet;
  let service: ServiceProcess | undefined;
  let stopFlux: (() => Promise<void>) | undefined;

  before(async () => {
    const [management, staging, prod] = env.clusters as [TestCluster, TestCluster, TestCluster];
    fleet = { management, staging, prod };
    await setUpFleet(fleet, '1.0.0');
    stopFlux = await startFlux(env.clusters);
    service = await startService('outage', management.adminKubeconfig, FLEET_SERVICE_ARGS);
  }, { timeout: 300_000 });

  after(async () => {
    await service?.stop();
    await stopFlux?.();
  });

  it('reports prod unreadable, keeps promoting to staging, and catches prod up when it returns', async () => {
    await everyEnvironmentReady(fleet, '1.0.0', 120_000);

    await fleet.prod.stopApiserver();
    await releaseToDev(fleet, '1.1.0');

    await eventually('the status says prod cannot be read', async () => {
      const status = (await readPipeline(fleet)).status;
      const prodTarget = status?.environments?.find((e) => e.name === 'prod')?.targets[0];
      const ready = status?.conditions?.find((c) => c.type === 'Ready');
      return prodTarget?.readable === false && prodTarget.error !== undefined && ready?.status === 'False' && ready.reason === 'TargetNotReadable';
    }, 120_000);
    await eventually('the release still reaches staging', async () => await appliedVersion(fleet.staging) === '1.1.0', 120_000);
    const prodTarget = (await readPipeline(fleet)).status?.environments?.find((e) => e.name === 'prod')?.targets[0];
    assert.match(prodTarget?.error ?? '', /secret:delivery\/prod-kubeconfig/, 'the error names the cluster');

    await fleet.prod.startApiserver();
    await eventually('prod catches up', async () => await appliedVersion(fleet.prod) === '1.1.0', 120_000);
    await eventually('the status recovers', async () => {
      const status = (await readPipeline(fleet)).status;
      return status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
    }, 120_000);
    const promotions = ((await readPipeline(fleet)).status?.promotions ?? []).filter((p) => p.revision === '1.1.0' && p.state === 'Succeeded');
    assert.deepEqual(promotions.map((p) => p.environment), ['staging', 'prod'], 'each environment promoted once');
  });
});
