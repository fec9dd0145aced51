import { setTimeout as delay } from 'node:timers/promises';
import { SimulatedCluster } from '../../fixtures/index.ts';
import { RawClient } from '../../fixtures/sim/raw-client.ts';
import type { TestCluster } from '../harness/index.ts';
import { kubeConfigFrom } from '../../fixtures/support/index.ts';

/** The custom resource every conformance case uses: namespaced, status subresource, a selectable field. */
export const WIDGET = { group: 'conformance.fleetcache.dev', version: 'v1', kind: 'Widget', plural: 'widgets' } as const;

const WIDGET_CRD = {
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: `${WIDGET.plural}.${WIDGET.group}` },
  spec: {
    group: WIDGET.group,
    scope: 'Namespaced',
    names: { plural: WIDGET.plural, singular: 'widget', kind: WIDGET.kind, listKind: 'WidgetList', shortNames: ['wd'], categories: ['fleetcache'] },
    versions: [{
      name: WIDGET.version,
      served: true,
      storage: true,
      subresources: { status: {} },
      selectableFields: [{ jsonPath: '.spec.color' }],
      schema: {
        openAPIV3Schema: {
          type: 'object',
          properties: {
            spec: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true, properties: { color: { type: 'string' } } },
            status: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
          },
        },
      },
    }],
  },
};

/** One API server the conformance cases run against, reached through the same raw client either way. */
export interface Target {
  readonly name: 'real' | 'simulated';
  /** Admin client. Replaced after {@link compact} on the real server (its connections die with the restart). */
  readonly client: RawClient;
  /** Makes every resourceVersion older than now answer 410 Expired. */
  compact(): Promise<void>;
  close(): Promise<void>;
}

function clientFor(kubeconfig: string): RawClient {
  const kc = kubeConfigFrom(kubeconfig);
  const cluster = kc.getCurrentCluster();
  const user = kc.getCurrentUser();
  if (cluster === null || user?.token === undefined) throw new Error('conformance: the kubeconfig lacks a cluster or a token');
  const caPem = cluster.caData === undefined ? undefined : Buffer.from(cluster.caData, 'base64').toString('utf8');
  return new RawClient({ server: cluster.server, caPem, token: user.token });
}

async function etcd(endpoint: string, path: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(`${endpoint}${path}`, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  const json = await res.json() as Record<string, unknown>;
  if (!res.ok) throw new Error(`conformance: etcd ${path} → HTTP ${res.status}: ${JSON.stringify(json)}`);
  return json;
}

/**
 * The real kube-apiserver. "Compaction" there is what makes old resourceVersions expire in
 * production: etcd compacts its history (done here through its HTTP gateway, at the current
 * revision) and the apiserver's watch cache no longer holds it (done by restarting the apiserver,
 * which rebuilds every watch cache at the current revision). Compacting etcd alone is not enough:
 * the watch cache keeps serving watches and continue tokens from its own history.
 */
export async function realTarget(cluster: TestCluster): Promise<Target> {
  await cluster.installCRDs([WIDGET_CRD]);
  let client = clientFor(cluster.adminKubeconfig);
  const target: Target = {
    name: 'real',
    get client() { return client; },
    async compact() {
      const range = await etcd(cluster.etcdEndpoint, '/v3/kv/range', { key: Buffer.from('/').toString('base64') });
      const revision = (range.header as { revision: string }).revision;
      await etcd(cluster.etcdEndpoint, '/v3/kv/compaction', { revision, physical: true });
      client.close();
      await cluster.stopApiserver();
      await cluster.startApiserver();
      client = clientFor(cluster.adminKubeconfig);
      // Watch caches initialize after /readyz; until then watches answer 429. Wait for both kinds.
      const deadline = Date.now() + 60_000;
      for (const path of ['/api/v1/configmaps', `/apis/${WIDGET.group}/${WIDGET.version}/${WIDGET.plural}`]) {
        for (;;) {
          const w = await client.watch(`${path}?resourceVersion=0&timeoutSeconds=1`);
          w.close();
          if (w.status === 200) break;
          if (Date.now() > deadline) throw new Error(`conformance: ${path} watch still answers ${w.status} after the restart`);
          await delay(200);
        }
      }
    },
    close() {
      client.close();
      return Promise.resolve();
    },
  };
  return target;
}

/** The simulated server, with the same kind registered the way the CRD declares it. */
export async function simulatedTarget(): Promise<Target> {
  const sim = await SimulatedCluster.start({
    name: 'conformance-sim',
    kinds: [{ ...WIDGET, namespaced: true, status: true, singular: 'widget', listKind: 'WidgetList', shortNames: ['wd'], categories: ['fleetcache'], selectableFields: ['spec.color'] }],
  });
  const client = clientFor(sim.kubeconfig);
  return {
    name: 'simulated',
    client,
    compact() {
      sim.faults.compact();
      return Promise.resolve();
    },
    async close() {
      client.close();
      await sim.close();
    },
  };
}
