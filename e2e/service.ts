// Runs the fleetcache service as a real child process (`node cmd/fleetcache.ts`), the way it runs in
// production, for the end-to-end scenarios.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { freePort } from './harness/index.ts';

const entry = new URL('../cmd/fleetcache.ts', import.meta.url).pathname;

/** One running service process. */
export interface ServiceProcess {
  readonly name: string;
  /** `http://127.0.0.1:<port>`: /healthz, /readyz. */
  readonly probes: string;
  /** `http://127.0.0.1:<port>` (`https://` with `secureMetrics`): /metrics, /debug/caches, /dashboard/. */
  readonly metrics: string;
  readonly exited: Promise<number | null>;
  /** The value of a metric without labels (or the first series of it), from /metrics (plain metrics only). */
  metric(name: string): Promise<number | undefined>;
  /** GET /debug/caches (plain metrics only). */
  caches(): Promise<readonly { readonly cluster: string; readonly kind: string; readonly synced: boolean }[]>;
  /** Recent stderr lines (JSON logs). */
  logs(): string;
  /** SIGTERM and wait for the exit status. */
  stop(): Promise<number | null>;
  /** SIGKILL: a crash, no lease released. */
  kill(): Promise<void>;
  /** SIGSTOP: frozen in place (a long GC pause, a stalled node), sockets and all. */
  pause(): void;
  /** SIGCONT after {@link pause}. */
  resume(): void;
}

/** Options of {@link startService}. */
export interface StartServiceOptions {
  /**
   * Serve metrics (and the dashboard) as the service does by default: HTTPS with a self-signed
   * certificate, every request reviewed on the management cluster. Default false: plain HTTP to anyone.
   */
  readonly secureMetrics?: boolean;
}

/** Starts the service against the management cluster and waits until it answers /readyz. */
export async function startService(name: string, managementKubeconfig: string, extraArgs: readonly string[] = [], options: StartServiceOptions = {}): Promise<ServiceProcess> {
  const dir = await mkdtemp(join(tmpdir(), `fleetcache-${name}-`));
  const kubeconfig = join(dir, 'kubeconfig');
  await writeFile(kubeconfig, managementKubeconfig, { mode: 0o600 });
  const [probePort, metricsPort] = [await freePort(), await freePort()];
  const child: ChildProcess = spawn(process.execPath, [
    entry,
    `--kubeconfig=${kubeconfig}`,
    `--health-probe-bind-address=127.0.0.1:${probePort}`,
    `--metrics-bind-address=127.0.0.1:${metricsPort}`,
    // The scenarios read metrics without a token; the authenticated server has its own test (cmd/).
    ...(options.secureMetrics === true ? [] : ['--metrics-secure=false']),
    '--log-level=debug',
    ...extraArgs,
  ], { stdio: ['ignore', 'ignore', 'pipe'] });
  const lines: string[] = [];
  child.stderr?.on('data', (chunk: Buffer) => {
    lines.push(...chunk.toString().split('\n').filter((l) => l !== ''));
    if (lines.length > 400) lines.splice(0, lines.length - 400);
  });
  const exited = new Promise<number | null>((resolve) => { child.once('exit', (code) => { resolve(code); }); });
  void exited.then(() => rm(dir, { recursive: true, force: true }));
  const probes = `http://127.0.0.1:${probePort}`;
  const metrics = `${options.secureMetrics === true ? 'https' : 'http'}://127.0.0.1:${metricsPort}`;

  const service: ServiceProcess = {
    name,
    probes,
    metrics,
    exited,
    async metric(metricName) {
      const text = await (await fetch(`${metrics}/metrics`)).text();
      const line = text.split('\n').find((l) => l.startsWith(`${metricName} `) || l.startsWith(`${metricName}{`));
      return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
    },
    async caches() {
      const body = await (await fetch(`${metrics}/debug/caches`)).json() as { caches: { cluster: string; kind: string; synced: boolean }[] };
      return body.caches;
    },
    logs: () => lines.join('\n'),
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      return exited;
    },
    async kill() {
      if (child.exitCode === null) child.kill('SIGKILL');
      await exited;
    },
    pause() {
      if (child.exitCode === null) child.kill('SIGSTOP');
    },
    resume() {
      if (child.exitCode === null) child.kill('SIGCONT');
    },
  };
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`service ${name} exited with ${child.exitCode}:\n${service.logs()}`);
    if (await fetch(`${probes}/readyz`).then((r) => r.ok, () => false)) return service;
    if (Date.now() > deadline) {
      await service.kill();
      throw new Error(`service ${name} not ready within 60 s:\n${service.logs()}`);
    }
    await delay(100);
  }
}
