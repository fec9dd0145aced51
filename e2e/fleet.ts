// A promotion fleet on three clusters, shared by `make demo` and the end-to-end scenarios:
// "management" (which is also the dev environment), "staging" and "prod". The management cluster
// holds the Pipeline and the kubeconfig Secrets of the other two; each cluster runs the podinfo
// HelmRelease in namespace `apps`.
import { helmReleaseCrd, kustomizationCrd } from '../fixtures/crds/index.ts';
import { FluxStandIn, HELM_RELEASE, type FluxStandInOptions } from './flux/standin.ts';
import type { TestCluster } from './harness/index.ts';
import { ensureNamespace, eventually, must, putKubeconfigSecret } from '../fixtures/support/index.ts';
import { pipelineCrd } from '../lib/pipeline/index.ts';

export const APP_NAMESPACE = 'apps';
export const PIPELINE_NAMESPACE = 'delivery';
/**
 * The fleet's Pipeline (in `delivery`) reaches its management-cluster target in `apps`: a platform
 * team's pipeline, which needs the service's opt-out from tenant confinement.
 */
export const FLEET_SERVICE_ARGS: readonly string[] = ['--allow-cross-namespace-targets'];
export const PIPELINE_NAME = 'podinfo';
export const APP_NAME = 'podinfo';
export const ENVIRONMENTS = ['dev', 'staging', 'prod'] as const;

/** The three clusters of a fleet, in environment order. */
export interface Fleet {
  readonly management: TestCluster;
  readonly staging: TestCluster;
  readonly prod: TestCluster;
}

function helmRelease(version: string): object {
  return {
    apiVersion: 'helm.toolkit.fluxcd.io/v2',
    kind: 'HelmRelease',
    metadata: { name: APP_NAME, namespace: APP_NAMESPACE },
    spec: { interval: '1m', chart: { spec: { chart: 'podinfo', version, sourceRef: { kind: 'HelmRepository', name: 'podinfo' } } } },
  };
}

/** The Pipeline the fleet runs: dev (local) → staging → prod (kubeconfig Secrets), patch strategy. */
export function pipelineObject(environments: readonly string[] = ENVIRONMENTS): object {
  return fleetPipeline({
    appRef: { apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease', name: APP_NAME },
    promotion: { strategy: 'patch', patch: { path: '/spec/chart/spec/version' } },
  }, environments);
}

/**
 * A Pipeline over the fleet's environments — dev on the management cluster, the others through
 * their kubeconfig Secrets — with `spec` (app, promotion, …) completing it.
 */
export function fleetPipeline(spec: Readonly<Record<string, unknown>>, environments: readonly string[] = ENVIRONMENTS): object {
  const target = (env: string): object => (env === 'dev'
    ? { namespace: APP_NAMESPACE }
    : { namespace: APP_NAMESPACE, clusterRef: { kind: 'Secret', name: `${env}-kubeconfig` } });
  return {
    apiVersion: 'fleetcache.dev/v1alpha1',
    kind: 'Pipeline',
    metadata: { name: PIPELINE_NAME, namespace: PIPELINE_NAMESPACE },
    spec: { ...spec, environments: environments.map((env) => ({ name: env, targets: [target(env)] })) },
  };
}

/**
 * Installs the CRDs, the app (HelmRelease `podinfo` at `initialVersion` in every cluster), the
 * kubeconfig Secrets of staging and prod in the management cluster, and the Pipeline.
 */
export async function setUpFleet(fleet: Fleet, initialVersion: string): Promise<void> {
  await fleet.management.installCRDs([pipelineCrd, helmReleaseCrd, kustomizationCrd]);
  for (const cluster of [fleet.staging, fleet.prod]) await cluster.installCRDs([helmReleaseCrd, kustomizationCrd]);
  for (const cluster of [fleet.management, fleet.staging, fleet.prod]) {
    await ensureNamespace(cluster, APP_NAMESPACE);
    await must(cluster, 'POST', `/apis/helm.toolkit.fluxcd.io/v2/namespaces/${APP_NAMESPACE}/helmreleases`, helmRelease(initialVersion), [409]);
  }
  await putKubeconfigSecrets(fleet);
  await must(fleet.management, 'POST', `/apis/fleetcache.dev/v1alpha1/namespaces/${PIPELINE_NAMESPACE}/pipelines`, pipelineObject(), [409]);
}

/** Namespace `delivery` in the management cluster, and in it the kubeconfig Secrets of staging and prod that the Pipeline names. */
export async function putKubeconfigSecrets(fleet: Fleet): Promise<void> {
  await ensureNamespace(fleet.management, PIPELINE_NAMESPACE);
  for (const [env, cluster] of [['staging', fleet.staging], ['prod', fleet.prod]] as const) {
    await putKubeconfigSecret(fleet.management, PIPELINE_NAMESPACE, `${env}-kubeconfig`, cluster.adminKubeconfig);
  }
}

/**
 * Reads the object at `path` and PUTs back `edit(object)`, reading again on 409 Conflict: the
 * service and the Flux stand-in write these objects' status meanwhile, and every such write
 * changes the resourceVersion the PUT carries.
 */
export async function updateObject(cluster: TestCluster, path: string, edit: (current: object) => object): Promise<void> {
  const attempts = 20;
  for (let attempt = 1; ; attempt++) {
    const current = await must(cluster, 'GET', path) as object;
    const res = await cluster.request('PUT', path, edit(current));
    if (res.statusCode === 200) return;
    if (res.statusCode !== 409 || attempt >= attempts) throw new Error(`${cluster.name}: PUT ${path} → HTTP ${res.statusCode} (attempt ${attempt}): ${JSON.stringify(res.body)}`);
  }
}

interface HelmReleaseView { readonly spec: { readonly chart: { readonly spec: Readonly<Record<string, unknown>> } } }

/** Asks dev for a new chart version: the start of a release. */
export async function releaseToDev(fleet: Fleet, version: string): Promise<void> {
  await updateObject(fleet.management, `/apis/helm.toolkit.fluxcd.io/v2/namespaces/${APP_NAMESPACE}/helmreleases/${APP_NAME}`, (object) => {
    const current = object as HelmReleaseView;
    return { ...current, spec: { ...current.spec, chart: { ...current.spec.chart, spec: { ...current.spec.chart.spec, version } } } };
  });
}

/** The Pipeline as the API server has it now. */
export async function readPipeline(fleet: Fleet): Promise<{ metadata: { generation?: number }; status?: PipelineStatusView }> {
  return await must(fleet.management, 'GET', `/apis/fleetcache.dev/v1alpha1/namespaces/${PIPELINE_NAMESPACE}/pipelines/${PIPELINE_NAME}`) as { metadata: { generation?: number }; status?: PipelineStatusView };
}

/** Waits until the Pipeline sees every environment ready at `version`; fails after `timeoutMs`. */
export async function everyEnvironmentReady(fleet: Fleet, version: string, timeoutMs: number): Promise<void> {
  await eventually(`every environment is ready at ${version}`, async () => {
    const envs = (await readPipeline(fleet)).status?.environments ?? [];
    return envs.length === ENVIRONMENTS.length && envs.every((e) => e.ready && e.revision === version);
  }, timeoutMs);
}

/** The parts of the Pipeline status the demo and the scenarios read. */
export interface PipelineStatusView {
  readonly conditions?: readonly { readonly type: string; readonly status: string; readonly reason: string; readonly message: string }[];
  readonly environments?: readonly {
    readonly name: string;
    readonly ready: boolean;
    readonly revision?: string;
    readonly targets: readonly { readonly cluster: string; readonly readable?: boolean; readonly ready: boolean; readonly revision?: string; readonly error?: string }[];
  }[];
  readonly promotions?: readonly { readonly environment: string; readonly revision: string; readonly state: string; readonly attempts: number; readonly message?: string }[];
}

/** The chart version a cluster's HelmRelease reports as applied (status.history[0]). */
export async function appliedVersion(cluster: TestCluster): Promise<string | undefined> {
  const res = await cluster.request('GET', `/apis/helm.toolkit.fluxcd.io/v2/namespaces/${APP_NAMESPACE}/helmreleases/${APP_NAME}`);
  return (res.body as { status?: { history?: { chartVersion?: string }[] } }).status?.history?.[0]?.chartVersion;
}

/**
 * Starts a Flux stand-in for HelmReleases in each cluster (synced before it returns); the result
 * stops them all.
 */
export async function startFlux(clusters: readonly TestCluster[], options: Pick<FluxStandInOptions, 'applyDelayMs' | 'onReconciled'> = {}): Promise<() => Promise<void>> {
  const fluxes: FluxStandIn[] = [];
  const stop = async (): Promise<void> => { await Promise.all(fluxes.map((f) => f.stop())); };
  try {
    for (const cluster of clusters) {
      const flux = new FluxStandIn({ ...options, name: cluster.name, kubeconfig: cluster.adminKubeconfig, kinds: [HELM_RELEASE] });
      fluxes.push(flux);
      await flux.start();
    }
  } catch (err) {
    await stop();
    throw err;
  }
  return stop;
}
