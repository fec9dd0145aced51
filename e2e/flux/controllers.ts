// Real Flux in a test cluster: Flux's own source-controller and kustomize-controller (built from
// their Go modules, see e2e/build-binaries.sh) run as processes on loopback against one cluster of
// the harness, the way `flux install` runs them in a cluster — all namespaces, no leader election.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { freePort, type TestCluster } from '../harness/index.ts';
import { ManagedProcess } from '../harness/process.ts';
import { resolveFluxAssets, type FluxAssets } from './assets.ts';

/** One cluster's pair of Flux controllers. Stop it where you start it. */
export interface FluxControllers {
  readonly cluster: string;
  /** Recent output of both controllers (JSON logs), for failure messages. */
  logs(lines?: number): string;
  /** Resident memory of both controllers, in bytes. */
  rssBytes(): number;
  /** Process ids of the controllers still running. */
  pids(): number[];
  /** Stops both controllers and removes their files. Idempotent. */
  stop(): Promise<void>;
}

/** Options of {@link startFluxControllers}. */
export interface StartFluxOptions {
  /** How long to wait for each controller's /readyz. Default 60 000 ms. */
  readonly readyTimeoutMs?: number;
  /** Start kustomize-controller too (false: source-controller alone, for a stand-in). Default true. */
  readonly kustomizeController?: boolean;
}

async function waitReady(proc: ManagedProcess, healthUrl: string, deadline: number): Promise<void> {
  for (;;) {
    if (proc.hasExited) throw new Error(`flux: ${proc.name} exited before it was ready\n${proc.tail(40)}`);
    const ok = await fetch(`${healthUrl}/readyz`, { signal: AbortSignal.timeout(2000) }).then((r) => r.ok, () => false);
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`flux: ${proc.name} not ready at ${healthUrl}/readyz in time\n${proc.tail(40)}`);
    await delay(100);
  }
}

/**
 * Installs Flux's CRDs (from the same modules as the binaries) in `cluster` and starts
 * source-controller (artifact server on loopback) and kustomize-controller against it, each
 * waited for until /readyz answers. Both die with the test process (parent-death signal).
 */
export async function startFluxControllers(cluster: TestCluster, options: StartFluxOptions = {}): Promise<FluxControllers> {
  const assets = resolveFluxAssets();
  await cluster.installCRDs(assets.crds);
  // A port picked free may be taken before the controller binds it (an outgoing connection's
  // ephemeral port): the harness's race, not the test's failure; start again on new ports.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startControllers(cluster, assets, options);
    } catch (err) {
      if (attempt >= PORT_RACE_ATTEMPTS || !(err as Error).message.includes('address already in use')) throw err;
    }
  }
}

/** Starts tried when a port picked free was taken before a controller bound it. */
const PORT_RACE_ATTEMPTS = 3;

async function startControllers(cluster: TestCluster, assets: FluxAssets, options: StartFluxOptions): Promise<FluxControllers> {
  const dir = await mkdtemp(join(tmpdir(), `fleetcache-flux-${cluster.name}-`));
  const kubeconfig = join(dir, 'kubeconfig');
  await writeFile(kubeconfig, cluster.adminKubeconfig, { mode: 0o600 });
  await mkdir(join(dir, 'artifacts')); // source-controller does not create its storage path
  await mkdir(join(dir, 'tmp'));
  // A temp dir of its own: kustomize-controller removes every kustomization-* dir in TMPDIR when it
  // starts, which would pull the build out from under another cluster's controller.
  const env = { KUBECONFIG: kubeconfig, TMPDIR: join(dir, 'tmp') };
  const common = ['--watch-all-namespaces=true', '--enable-leader-election=false', '--log-level=info', '--events-addr='];
  const procs: ManagedProcess[] = [];
  const stopAll = async (): Promise<void> => {
    await Promise.all(procs.map((p) => p.stop(5000)));
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const deadline = Date.now() + (options.readyTimeoutMs ?? 60_000);
    const [sourceMetrics, sourceHealth, storage] = [await freePort(), await freePort(), await freePort()];
    const source = new ManagedProcess(`${cluster.name}/source-controller`, assets.sourceController, [
      ...common,
      `--metrics-addr=127.0.0.1:${sourceMetrics}`,
      `--health-addr=127.0.0.1:${sourceHealth}`,
      `--storage-path=${join(dir, 'artifacts')}`,
      `--storage-addr=127.0.0.1:${storage}`,
      // kustomize-controller downloads artifacts from this address: loopback, as it runs here.
      `--storage-adv-addr=127.0.0.1:${storage}`,
    ], 400, env);
    procs.push(source);
    await waitReady(source, `http://127.0.0.1:${sourceHealth}`, deadline);
    if (options.kustomizeController ?? true) {
      const [kustomizeMetrics, kustomizeHealth] = [await freePort(), await freePort()];
      const kustomize = new ManagedProcess(`${cluster.name}/kustomize-controller`, assets.kustomizeController, [
        ...common,
        `--metrics-addr=127.0.0.1:${kustomizeMetrics}`,
        `--health-addr=127.0.0.1:${kustomizeHealth}`,
        '--no-remote-bases=true',
      ], 400, env);
      procs.push(kustomize);
      await waitReady(kustomize, `http://127.0.0.1:${kustomizeHealth}`, deadline);
    }
  } catch (err) {
    await stopAll();
    throw err;
  }
  let stopped: Promise<void> | undefined;
  return {
    cluster: cluster.name,
    logs(lines = 60) {
      return procs.map((p) => `--- ${p.name} ---\n${p.tail(lines)}`).join('\n');
    },
    rssBytes() {
      return procs.reduce((sum, p) => sum + p.rssBytes(), 0);
    },
    pids() {
      return procs.filter((p) => !p.hasExited).map((p) => p.pid).filter((pid) => pid !== undefined);
    },
    stop() {
      stopped ??= stopAll();
      return stopped;
    },
  };
}
