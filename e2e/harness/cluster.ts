import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import type { KubeConfig } from '@kubernetes/client-node';
import { kubeconfigJson, kubeConfigFrom } from '../../fixtures/support/kubeconfig.ts';
import { resolveAssets } from './assets.ts';
import { adminApi, rawRequest, type AdminApi } from './api.ts';
import { ManagedProcess } from './process.ts';
import { freePort } from './wait.ts';

/** Options of {@link startCluster}. */
export interface StartClusterOptions {
  /** Name in logs and in the kubeconfig's cluster/context names. Default `cluster-N`. */
  readonly name?: string;
  /**
   * Extra kube-apiserver flags, appended after the harness's own (a later flag wins), e.g.
   * `['--watch-cache=false']`. Default none.
   */
  readonly apiserverFlags?: readonly string[];
  /** How long to wait for etcd and then the apiserver to become ready. Default 120 000 ms. */
  readonly readyTimeoutMs?: number;
  /**
   * Where the cluster's directory (etcd data, certificates) is made. Default `/dev/shm`, or the
   * temp dir without it. Stale directories there are swept before the first start of a process.
   */
  readonly baseDir?: string;
}

/** How long each part of a start took, in milliseconds. */
export interface StartTimings {
  readonly etcdMs: number;
  readonly apiserverMs: number;
}

/**
 * One real Kubernetes control plane on loopback: its own etcd (data on tmpfs) and kube-apiserver
 * (self-signed serving certificate, token authentication, RBAC). Stop it where you start it.
 */
export interface TestCluster extends AdminApi {
  readonly name: string;
  /** `https://127.0.0.1:<port>`. */
  readonly server: string;
  /** `http://127.0.0.1:<port>`: etcd's client URL (for tests that compact or inspect storage). */
  readonly etcdEndpoint: string;
  /** Kubeconfig YAML with the serving CA and the bearer token of a `system:masters` user. */
  readonly adminKubeconfig: string;
  /** PEM of the CA that signed the apiserver's serving certificate. */
  readonly caData: string;
  readonly timings: StartTimings;
  /** A new client-node KubeConfig loaded from {@link adminKubeconfig}. */
  kubeConfig(): KubeConfig;
  /** Stops the apiserver only; etcd and its data stay. */
  stopApiserver(): Promise<void>;
  /** Starts the apiserver again on the same port against the same etcd; resolves when ready. */
  startApiserver(): Promise<void>;
  /** Recent output of etcd and the apiserver. */
  logs(lines?: number): string;
  /** Process ids of the running etcd and apiserver (empty for clusters the harness did not start). */
  pids(): number[];
  /** Resident memory of etcd + apiserver, in bytes. */
  rssBytes(): number;
  /** Stops both processes and removes their files. Idempotent. */
  stop(): Promise<void>;
}

let counter = 0;

function failure(message: string, procs: readonly ManagedProcess[]): Error {
  const logs = procs.map((p) => `--- ${p.name} (last lines) ---\n${p.tail(40)}`).join('\n');
  return new Error(`${message}\n${logs}`);
}

async function waitFor(what: string, proc: ManagedProcess, deadline: number, probe: () => Promise<boolean>, others: readonly ManagedProcess[]): Promise<void> {
  for (;;) {
    if (proc.hasExited) throw failure(`harness: ${proc.name} exited before ${what}`, [proc, ...others]);
    if (await probe().catch(() => false)) return;
    if (Date.now() > deadline) throw failure(`harness: timed out waiting for ${what}`, [proc, ...others]);
    await delay(150);
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Removes cluster directories left by test processes that were killed outright (their etcd and
 * apiserver died with them; only files can outlive them). A directory is stale when the process
 * named in its `owner.pid` is gone. Returns what it removed.
 */
export async function sweepStaleClusterDirs(base = clusterBaseDir()): Promise<string[]> {
  const removed: string[] = [];
  for (const entry of await readdir(base).catch(() => [])) {
    if (!entry.startsWith('fleetcache-')) continue;
    const owner = Number(await readFile(join(base, entry, 'owner.pid'), 'utf8').catch(() => 'NaN'));
    if (!Number.isInteger(owner) || alive(owner)) continue;
    await rm(join(base, entry), { recursive: true, force: true });
    removed.push(entry);
  }
  return removed;
}

// tmpfs when there is one: etcd writes constantly, and --unsafe-no-fsync alone still pays for the page cache.
function clusterBaseDir(): string {
  return existsSync('/dev/shm') ? '/dev/shm' : tmpdir();
}

let swept: Promise<string[]> | undefined;

/** Starts one cluster: etcd, then kube-apiserver, waiting for each to be ready. */
export async function startCluster(options: StartClusterOptions = {}): Promise<TestCluster> {
  // A port is picked free and handed to etcd or the apiserver, which bind it a moment later: in
  // that moment another process (an outgoing connection's ephemeral port, another test run) may
  // take it. That is the harness's race, not the test's failure: pick new ports and start again.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startClusterOnce(options);
    } catch (err) {
      if (attempt >= PORT_RACE_ATTEMPTS || !(err as Error).message.includes('bind: address already in use')) throw err;
    }
  }
}

/** Starts of one cluster tried when a port picked free was taken before etcd or the apiserver bound it. */
const PORT_RACE_ATTEMPTS = 3;

async function startClusterOnce(options: StartClusterOptions): Promise<TestCluster> {
  const assets = resolveAssets();
  counter += 1;
  const name = options.name ?? `cluster-${counter}`;
  const readyTimeoutMs = options.readyTimeoutMs ?? 120_000;
  const base = options.baseDir ?? clusterBaseDir();
  swept ??= sweepStaleClusterDirs(base);
  await swept;
  const dir = await mkdtemp(join(base, `fleetcache-${name}-`));
  await writeFile(join(dir, 'owner.pid'), String(process.pid));
  const [etcdPort, peerPort, apiPort] = [await freePort(), await freePort(), await freePort()];
  const etcdEndpoint = `http://127.0.0.1:${etcdPort}`;
  const server = `https://127.0.0.1:${apiPort}`;
  const adminToken = randomBytes(24).toString('hex');

  const sa = generateKeyPairSync('rsa', { modulusLength: 2048 });
  await mkdir(join(dir, 'certs'));
  await writeFile(join(dir, 'sa.key'), sa.privateKey.export({ type: 'pkcs8', format: 'pem' }));
  await writeFile(join(dir, 'sa.pub'), sa.publicKey.export({ type: 'spki', format: 'pem' }));
  await writeFile(join(dir, 'tokens.csv'), `${adminToken},fleetcache-admin,fleetcache-admin,"system:masters"\n`, { mode: 0o600 });

  const started = Date.now();
  const etcd = new ManagedProcess(`${name}/etcd`, assets.etcd, [
    '--name=default',
    `--data-dir=${join(dir, 'etcd')}`,
    `--listen-client-urls=${etcdEndpoint}`,
    `--advertise-client-urls=${etcdEndpoint}`,
    `--listen-peer-urls=http://127.0.0.1:${peerPort}`,
    `--initial-advertise-peer-urls=http://127.0.0.1:${peerPort}`,
    `--initial-cluster=default=http://127.0.0.1:${peerPort}`,
    '--unsafe-no-fsync',
    '--log-level=warn',
  ]);
  let apiserver: ManagedProcess | undefined;
  const stopAll = async (): Promise<void> => {
    await apiserver?.stop();
    await etcd.stop();
    await rm(dir, { recursive: true, force: true });
  };

  try {
    await waitFor('etcd /health', etcd, started + readyTimeoutMs, async () => {
      const res = await rawRequest(`${etcdEndpoint}/health`, { timeoutMs: 2000 });
      return res.statusCode === 200 && res.text.includes('"health":"true"');
    }, []);
    const etcdMs = Date.now() - started;

    const apiserverArgs = [
      `--etcd-servers=${etcdEndpoint}`,
      '--bind-address=127.0.0.1',
      '--advertise-address=127.0.0.1',
      `--secure-port=${apiPort}`,
      `--cert-dir=${join(dir, 'certs')}`,
      `--token-auth-file=${join(dir, 'tokens.csv')}`,
      '--authorization-mode=RBAC',
      '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
      `--service-account-key-file=${join(dir, 'sa.pub')}`,
      `--service-account-signing-key-file=${join(dir, 'sa.key')}`,
      '--service-cluster-ip-range=10.0.0.0/24',
      '--endpoint-reconciler-type=none',
      '--allow-privileged=true',
      '--profiling=false',
      ...(options.apiserverFlags ?? []),
    ];
    const startApiserverProcess = async (): Promise<void> => {
      const deadline = Date.now() + readyTimeoutMs;
      apiserver = new ManagedProcess(`${name}/kube-apiserver`, assets.kubeApiserver, apiserverArgs);
      await waitFor('kube-apiserver /readyz', apiserver, deadline, async () => {
        const res = await rawRequest(`${server}/readyz`, { headers: { authorization: `Bearer ${adminToken}` }, insecure: true, timeoutMs: 5000 });
        return res.statusCode === 200;
      }, [etcd]);
    };
    const apiStarted = Date.now();
    await startApiserverProcess();
    const apiserverMs = Date.now() - apiStarted;

    // The apiserver wrote its self-signed serving certificate followed by the CA that signed it.
    const caData = await readFile(join(dir, 'certs', 'apiserver.crt'), 'utf8');
    const adminKubeconfig = kubeconfigJson({ name, server, caPem: caData, user: 'fleetcache-admin', token: adminToken });

    const api = adminApi(name, server, caData, async (method, path, body) => {
      return rawRequest(`${server}${path}`, {
        method,
        headers: { authorization: `Bearer ${adminToken}`, accept: 'application/json', 'content-type': 'application/json' },
        ca: caData,
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    });

    let stopped: Promise<void> | undefined;
    const cluster: TestCluster = {
      name,
      server,
      etcdEndpoint,
      adminKubeconfig,
      caData,
      timings: { etcdMs, apiserverMs },
      kubeConfig() {
        return kubeConfigFrom(adminKubeconfig);
      },
      ...api,
      async stopApiserver() {
        await apiserver?.stop();
      },
      async startApiserver() {
        if (apiserver !== undefined && !apiserver.hasExited) return;
        await startApiserverProcess();
      },
      logs(lines = 60) {
        return [etcd, apiserver].filter((p) => p !== undefined).map((p) => `--- ${p.name} ---\n${p.tail(lines)}`).join('\n');
      },
      pids() {
        return [etcd, apiserver].filter((p) => p !== undefined && !p.hasExited).map((p) => p?.pid).filter((pid) => pid !== undefined);
      },
      rssBytes() {
        return etcd.rssBytes() + (apiserver?.rssBytes() ?? 0);
      },
      stop() {
        stopped ??= stopAll();
        return stopped;
      },
    };
    return cluster;
  } catch (err) {
    await stopAll();
    throw err;
  }
}

/** Starts `count` clusters one after another (starting them at once only competes for the CPU). */
export async function startClusters(count: number, options: Omit<StartClusterOptions, 'name'> & { readonly namePrefix?: string } = {}): Promise<TestCluster[]> {
  const clusters: TestCluster[] = [];
  try {
    for (let i = 0; i < count; i++) {
      clusters.push(await startCluster({ ...options, name: `${options.namePrefix ?? 'cluster'}-${i + 1}` }));
    }
    return clusters;
  } catch (err) {
    await Promise.all(clusters.map((c) => c.stop()));
    throw err;
  }
}
