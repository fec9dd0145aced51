// One scenario's fleet under real Flux, as node:test hooks: three clusters, a Git server, Flux's
// controllers in each cluster, the fleetcache service; on a failed test, Flux's and the service's
// last log lines; everything stopped after the suite.
import { after, afterEach, before } from 'node:test';
import { everyEnvironmentReady, FLEET_SERVICE_ARGS, type Fleet } from '../fleet.ts';
import { GitServer } from '../git/server.ts';
import { useClusters, type TestCluster } from '../harness/index.ts';
import { startService, type ServiceProcess } from '../service.ts';
import type { FluxControllers } from './controllers.ts';
import { setUpFluxFleet, type FluxFleetOptions } from './fleet.ts';

/** What a scenario reads once its `before` hook ran. */
export interface FluxScenario {
  readonly fleet: Fleet;
  readonly server: GitServer;
  readonly service: ServiceProcess | undefined;
}

/** Options of {@link useFluxFleet}. */
export interface FluxScenarioOptions {
  /** Passed to {@link setUpFluxFleet}. Default: its defaults. */
  readonly fleet?: FluxFleetOptions;
  /**
   * Wait in `before` until the Pipeline sees every environment ready at 1.0.0 (a scenario that
   * checks the start itself says false). Default true.
   */
  readonly waitReady?: boolean;
  /**
   * Runs in `before` once the clusters and the Git server are up, before Flux, the Pipeline and the
   * service start: what the scenario's Pipeline needs to find (a provider stand-in, a Secret).
   */
  readonly prepare?: (scenario: { readonly fleet: Fleet; readonly server: GitServer }) => Promise<void>;
}

/**
 * Registers the hooks of a scenario under real Flux in the current `describe`: `namePrefix` names
 * its clusters and the service. The result's fields are set once `before` ran.
 */
export function useFluxFleet(namePrefix: string, options: FluxScenarioOptions = {}): FluxScenario {
  const env = useClusters(3, { namePrefix });
  let fleet: Fleet | undefined;
  let server: GitServer | undefined;
  let service: ServiceProcess | undefined;
  let flux: FluxControllers[] = [];

  before(async () => {
    const [management, staging, prod] = env.clusters as [TestCluster, TestCluster, TestCluster];
    const started = { management, staging, prod };
    fleet = started;
    server = await GitServer.start();
    await options.prepare?.({ fleet: started, server });
    flux = await setUpFluxFleet(started, server, '1.0.0', options.fleet);
    service = await startService(namePrefix, management.adminKubeconfig, [...FLEET_SERVICE_ARGS, '--allow-private-git-hosts', '--allow-insecure-git-http']);
    if (options.waitReady ?? true) {
      await everyEnvironmentReady(started, '1.0.0', 180_000);
    }
  }, { timeout: 600_000 });

  fluxSuiteHooks(() => ({ flux, service, server }));

  const started = <T>(value: T | undefined, what: string): T => {
    if (value === undefined) throw new Error(`useFluxFleet: ${what} is read before the suite's before hook ran`);
    return value;
  };
  return {
    get fleet() { return started(fleet, 'fleet'); },
    get server() { return started(server, 'server'); },
    get service() { return service; },
  };
}

/**
 * A real-Flux suite's hooks: after a failed test, every cluster's Flux log tail and the service's
 * log; after the suite, the service, the controllers and the Git server stopped. `parts` is read
 * when each hook runs (the suite's `before` starts them).
 */
export function fluxSuiteHooks(parts: () => { readonly flux: readonly FluxControllers[]; readonly service: ServiceProcess | undefined; readonly server: GitServer | undefined }): void {
  afterEach((t) => {
    if (!('passed' in t) || t.passed) return;
    const { flux, service } = parts();
    for (const f of flux) process.stderr.write(`\n=== Flux in ${f.cluster} after failed test "${t.name}" ===\n${f.logs(40)}\n`);
    process.stderr.write(`\n=== fleetcache service ===\n${service?.logs() ?? ''}\n`);
  });

  after(async () => {
    const { flux, service, server } = parts();
    await service?.stop();
    await Promise.all(flux.map((f) => f.stop()));
    await server?.close();
  });
}
