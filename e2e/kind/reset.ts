// Between two scenario files of `make e2e-kind`: puts the shared clusters back to what a scenario
// finds on fresh local apiservers. The scenarios reuse fixed names (the fleet's HelmRelease
// apps/podinfo, the Pipeline delivery/podinfo, the leader Lease default/fleetcache-leader…) and
// create them tolerating "already exists", so without this one scenario starts from what the
// previous left: `promotion` waited for 1.0.0 forever after `git-promotion` left 1.1.0.
//
// What it removes: a fleetcache Deployment left in the management cluster (by the deploy step of an
// earlier run with KEEP_CLUSTERS=1, it would act on the scenarios' Pipelines too); the CRDs the
// scenarios install (fleetcache.dev, Flux's *.toolkit.fluxcd.io), and with them every object of
// theirs; and in every namespace but the system ones, the objects scenarios create (Secrets,
// ConfigMaps, ServiceAccounts, Roles, RoleBindings, Leases, Events), except what Kubernetes itself
// keeps there (kube-root-ca.crt, the default ServiceAccount). Namespaces stay: their deletion needs
// the namespace controller, which the local stand-in apiservers do not run, and an empty namespace
// is what a scenario's ensureNamespace accepts.
import { fileURLToPath } from 'node:url';
import type { TestCluster } from '../harness/index.ts';
import { externalClustersFromEnv } from '../harness/index.ts';

/** Namespaces the cluster itself runs in: never touched. */
const SYSTEM_NAMESPACES: ReadonlySet<string> = new Set(['kube-system', 'kube-public', 'kube-node-lease', 'local-path-storage']);
/** CRD groups the scenarios install. */
const isScenarioGroup = (group: string): boolean => group === 'fleetcache.dev' || group.endsWith('.toolkit.fluxcd.io');
/** Namespaced kinds the scenarios create, as collection paths under a namespace, with what to keep. */
const COLLECTIONS: readonly { readonly prefix: string; readonly plural: string; readonly keep?: string }[] = [
  { prefix: '/api/v1', plural: 'secrets' },
  { prefix: '/api/v1', plural: 'configmaps', keep: 'kube-root-ca.crt' },
  { prefix: '/api/v1', plural: 'serviceaccounts', keep: 'default' },
  { prefix: '/api/v1', plural: 'events' },
  { prefix: '/apis/rbac.authorization.k8s.io/v1', plural: 'roles' },
  { prefix: '/apis/rbac.authorization.k8s.io/v1', plural: 'rolebindings' },
  { prefix: '/apis/coordination.k8s.io/v1', plural: 'leases' },
];

/** What {@link resetCluster} removed. */
export interface ResetReport {
  readonly crds: readonly string[];
  readonly namespaces: number;
  readonly deployment: boolean;
}

type Requests = Pick<TestCluster, 'request'>;

interface Crd { readonly metadata: { readonly name: string }; readonly spec: { readonly group: string; readonly names: { readonly plural: string }; readonly versions: readonly { readonly name: string; readonly served: boolean }[] } }

/**
 * Clears the finalizers of every object of `crd`: Flux's controllers put theirs on the objects
 * they reconcile and are gone by now (stopped with their scenario), so without this the objects,
 * and with them the CRD, would never go.
 */
async function dropFinalizers(cluster: Requests, crd: Crd): Promise<void> {
  const version = crd.spec.versions.find((v) => v.served)?.name;
  if (version === undefined) return;
  const base = `/apis/${crd.spec.group}/${version}`;
  const list = await cluster.request('GET', `${base}/${crd.spec.names.plural}`);
  if (list.statusCode !== 200) return; // being deleted already, or not served yet
  const { apiVersion, kind } = list.body as { apiVersion?: string; kind?: string };
  for (const item of (list.body as { items?: { metadata: { name: string; namespace?: string; finalizers?: string[] } }[] }).items ?? []) {
    if ((item.metadata.finalizers ?? []).length === 0) continue;
    const at = item.metadata.namespace === undefined ? `${base}/${crd.spec.names.plural}/${item.metadata.name}` : `${base}/namespaces/${item.metadata.namespace}/${crd.spec.names.plural}/${item.metadata.name}`;
    // An update, not a patch (the harness speaks JSON only); a conflict is retried by the caller's next pass.
    const res = await cluster.request('PUT', at, { ...item, apiVersion, kind: kind?.replace(/List$/, ''), metadata: { ...item.metadata, finalizers: [] } });
    if (res.statusCode !== 200 && res.statusCode !== 404 && res.statusCode !== 409) throw new Error(`reset: clearing the finalizers of ${at}: HTTP ${res.statusCode} ${JSON.stringify(res.body)}`);
  }
}

async function ok(cluster: Requests, method: string, path: string, also: readonly number[] = []): Promise<unknown> {
  const res = await cluster.request(method, path);
  if ((res.statusCode < 200 || res.statusCode >= 300) && !also.includes(res.statusCode)) throw new Error(`reset: ${method} ${path}: HTTP ${res.statusCode} ${JSON.stringify(res.body)}`);
  return res.body;
}

/** Puts one cluster back as described above; waits until the CRDs are gone (their objects with them). */
export async function resetCluster(cluster: Requests, timeoutMs = 120_000): Promise<ResetReport> {
  const deleted = await cluster.request('DELETE', '/apis/apps/v1/namespaces/fleetcache-system/deployments/fleetcache');
  const deployment = deleted.statusCode >= 200 && deleted.statusCode < 300;

  const crdList = await ok(cluster, 'GET', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions') as { items: Crd[] };
  const scenarioCrds = crdList.items.filter((c) => isScenarioGroup(c.spec.group));
  const crds = scenarioCrds.map((c) => c.metadata.name).sort();
  for (const crd of scenarioCrds) {
    await dropFinalizers(cluster, crd);
    await ok(cluster, 'DELETE', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd.metadata.name}`, [404]);
  }

  const namespaces = (await ok(cluster, 'GET', '/api/v1/namespaces') as { items: { metadata: { name: string } }[] }).items.map((n) => n.metadata.name).filter((n) => !SYSTEM_NAMESPACES.has(n));
  for (const ns of namespaces) {
    for (const c of COLLECTIONS) {
      const selector = c.keep === undefined ? '' : `?fieldSelector=${encodeURIComponent(`metadata.name!=${c.keep}`)}`;
      await ok(cluster, 'DELETE', `${c.prefix}/namespaces/${ns}/${c.plural}${selector}`, [404]);
    }
  }

  const deadline = Date.now() + timeoutMs;
  for (const crd of scenarioCrds) {
    while ((await cluster.request('GET', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd.metadata.name}`)).statusCode !== 404) {
      if (Date.now() > deadline) throw new Error(`reset: CRD ${crd.metadata.name} still there after ${timeoutMs} ms`);
      await dropFinalizers(cluster, crd); // one written since (a controller still running)
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
  return { crds, namespaces: namespaces.length, deployment };
}

// `node e2e/kind/reset.ts`: every cluster FLEETCACHE_KUBECONFIGS names, as run.sh calls it.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const clusters = externalClustersFromEnv();
  if (clusters === undefined) {
    process.stderr.write('reset: FLEETCACHE_KUBECONFIGS is not set\n');
    process.exit(2);
  }
  for (const cluster of clusters) {
    const report = await resetCluster(cluster);
    process.stdout.write(`e2e-kind: reset ${cluster.name}: ${report.crds.length} CRDs removed${report.deployment ? ', the deployed fleetcache removed' : ''}, ${report.namespaces} namespaces emptied\n`);
  }
}
