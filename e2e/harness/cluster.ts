import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { KubeConfig } from '@kubernetes/client-node';
import { resolveAssets } from './assets.ts';
import { ManagedProcess } from './process.ts';

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
}

/** How long each part of a start took, in milliseconds. */
export interface StartTimings {
  readonly etcdMs: number;
  readonly apiserverMs: number;
}

/** An HTTP answer from {@link TestCluster.request}. */
export interface AdminResponse {
  readonly statusCode: number;
  readonly body: unknown;
}

/**
 * One real Kubernetes control plane on loopback: its own etcd (data on tmpfs) and kube-apiserver
 * (self-signed serving certificate, token authentication, RBAC). Stop it where you start it.
 */
export interface TestCluster {
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
  /** An admin request (JSON in, JSON out) that never throws on HTTP status. */
  request(method: string, path: string, body?: unknown): Promise<AdminResponse>;
  /**
   * A kubeconfig for a ServiceAccount (namespace and account created when missing) with a token
   * from the TokenRequest API. No RBAC is granted: tests grant what they need.
   */
  restrictedKubeconfig(subject: { readonly namespace: string; readonly serviceAccount: string }): Promise<string>;
  /** Creates or updates CustomResourceDefinitions and waits until each is Established and discoverable. */
  installCRDs(crds: readonly object[]): Promise<void>;
  /** Stops the apiserver only; etcd and its data stay. */
  stopApiserver(): Promise<void>;
  /** Starts the apiserver again on the same port against the same etcd; resolves when ready. */
  startApiserver(): Promise<void>;
  /** Recent output of etcd and the apiserver. */
  logs(lines?: number): string;
  /** Resident memory of etcd + apiserver, in bytes. */
  rssBytes(): number;
  /** Stops both processes and removes their files. Idempotent. */
  stop(): Promise<void>;
}

let counter = 0;

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => { resolve(port); });
    });
  });
}

interface RawResponse { readonly statusCode: number; readonly text: string }

function rawRequest(url: string, init: { method?: string; headers?: Record<string, string>; body?: string; ca?: string; insecure?: boolean; timeoutMs?: number }): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
    const req = send(target, {
      method: init.method ?? 'GET',
      headers: init.headers,
      ...(target.protocol === 'https:' ? { ca: init.ca, rejectUnauthorized: init.insecure !== true } : {}),
      timeout: init.timeoutMs ?? 30_000,
    }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => { resolve({ statusCode: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }); });
      res.on('error', reject);
    });
    req.on('timeout', () => { req.destroy(new Error(`timeout: ${init.method ?? 'GET'} ${url}`)); });
    req.on('error', reject);
    req.end(init.body);
  });
}

function kubeconfigYaml(name: string, server: string, caData: string, user: string, token: string): string {
  // JSON is valid YAML; client-node and kubectl both read it.
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name, cluster: { server, 'certificate-authority-data': Buffer.from(caData).toString('base64') } }],
    users: [{ name: user, user: { token } }],
    contexts: [{ name, context: { cluster: name, user } }],
    'current-context': name,
  }, null, 2);
}

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

/** Starts one cluster: etcd, then kube-apiserver, waiting for each to be ready. */
export async function startCluster(options: StartClusterOptions = {}): Promise<TestCluster> {
  const assets = resolveAssets();
  counter += 1;
  const name = options.name ?? `cluster-${counter}`;
  const readyTimeoutMs = options.readyTimeoutMs ?? 120_000;
  // tmpfs when there is one: etcd writes constantly, and --unsafe-no-fsync alone still pays for the page cache.
  const base = existsSync('/dev/shm') ? '/dev/shm' : tmpdir();
  const dir = await mkdtemp(join(base, `fleetcache-${name}-`));
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
    const adminKubeconfig = kubeconfigYaml(name, server, caData, 'fleetcache-admin', adminToken);

    const request = async (method: string, path: string, body?: unknown): Promise<AdminResponse> => {
      const res = await rawRequest(`${server}${path}`, {
        method,
        headers: { authorization: `Bearer ${adminToken}`, accept: 'application/json', 'content-type': 'application/json' },
        ca: caData,
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      let parsed: unknown = res.text;
      try { parsed = JSON.parse(res.text); } catch { /* keep the text */ }
      return { statusCode: res.statusCode, body: parsed };
    };
    const must = async (method: string, path: string, body: unknown, ok: readonly number[]): Promise<AdminResponse> => {
      const res = await request(method, path, body);
      if (!ok.includes(res.statusCode)) throw new Error(`harness: ${method} ${path} → HTTP ${res.statusCode}: ${JSON.stringify(res.body)}`);
      return res;
    };

    let stopped: Promise<void> | undefined;
    const cluster: TestCluster = {
      name,
      server,
      etcdEndpoint,
      adminKubeconfig,
      caData,
      timings: { etcdMs, apiserverMs },
      kubeConfig() {
        const kc = new KubeConfig();
        kc.loadFromString(adminKubeconfig);
        return kc;
      },
      request,
      async restrictedKubeconfig({ namespace, serviceAccount }) {
        await must('POST', '/api/v1/namespaces', { metadata: { name: namespace } }, [201, 409]);
        await must('POST', `/api/v1/namespaces/${namespace}/serviceaccounts`, { metadata: { name: serviceAccount } }, [201, 409]);
        const res = await must('POST', `/api/v1/namespaces/${namespace}/serviceaccounts/${serviceAccount}/token`,
          { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 86_400 } }, [201]);
        const token = (res.body as { status?: { token?: string } }).status?.token;
        if (token === undefined) throw new Error('harness: TokenRequest returned no token');
        return kubeconfigYaml(name, server, caData, `system:serviceaccount:${namespace}:${serviceAccount}`, token);
      },
      async installCRDs(crds) {
        for (const crd of crds) {
          const crdName = (crd as { metadata?: { name?: string } }).metadata?.name;
          if (crdName === undefined) throw new TypeError('harness: a CRD without metadata.name');
          const path = `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crdName}`;
          const created = await request('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd);
          if (created.statusCode === 409) {
            const current = await must('GET', path, undefined, [200]);
            const rv = (current.body as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
            await must('PUT', path, { ...crd, metadata: { ...(crd as { metadata: object }).metadata, resourceVersion: rv } }, [200]);
          } else if (created.statusCode !== 201) {
            throw new Error(`harness: creating CRD ${crdName} → HTTP ${created.statusCode}: ${JSON.stringify(created.body)}`);
          }
        }
        const deadline = Date.now() + 60_000;
        for (const crd of crds as readonly { metadata: { name: string }; spec: { group: string; names: { plural: string }; versions: readonly { name: string; served: boolean }[] } }[]) {
          for (;;) {
            const res = await must('GET', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd.metadata.name}`, undefined, [200]);
            const conditions = (res.body as { status?: { conditions?: readonly { type: string; status: string }[] } }).status?.conditions ?? [];
            const established = conditions.some((c) => c.type === 'Established' && c.status === 'True');
            let discoverable = established;
            for (const version of crd.spec.versions.filter((v) => v.served)) {
              if (!discoverable) break;
              const disc = await request('GET', `/apis/${crd.spec.group}/${version.name}`);
              const resources = (disc.body as { resources?: readonly { name: string }[] }).resources ?? [];
              discoverable = disc.statusCode === 200 && resources.some((r) => r.name === crd.spec.names.plural);
            }
            if (discoverable) break;
            if (Date.now() > deadline) throw new Error(`harness: CRD ${crd.metadata.name} not established within 60 s`);
            await delay(100);
          }
        }
      },
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
