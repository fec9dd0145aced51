// A promotion fleet reconciled by real Flux: each cluster runs source-controller and
// kustomize-controller (see controllers.ts) against one Git repository (git http-backend on
// loopback) with a folder per environment. The layout is the one that promotes under Flux:
//
//   clusters/<env>/podinfo.yaml   a child Kustomization `apps/podinfo` whose
//                                 spec.postBuild.substitute.version carries the promotion marker
//   apps/podinfo/configmap.yaml   what the child applies: ConfigMap `apps/podinfo`, data.version ${version}
//
// and in each cluster a GitRepository `flux-system/fleet` plus a parent Kustomization
// `flux-system/fleet` applying ./clusters/<env>. The Pipeline targets the child with
// `revisionPath: /spec/postBuild/substitute/version`.
import { pipelineCrd } from '../../lib/pipeline/index.ts';
import { APP_NAMESPACE, ENVIRONMENTS, fleetPipeline, PIPELINE_NAME, PIPELINE_NAMESPACE, putKubeconfigSecrets, type Fleet } from '../fleet.ts';
import type { GitServer } from '../git/server.ts';
import { type TestCluster } from '../harness/index.ts';
import { startFluxControllers, type FluxControllers } from './controllers.ts';
import { ensureNamespace, must } from '../../fixtures/support/index.ts';

export const FLUX_NAMESPACE = 'flux-system';
export const FLUX_REPOSITORY = 'acme/fleet';
export const KUSTOMIZATIONS = '/apis/kustomize.toolkit.fluxcd.io/v1';
export const GIT_REPOSITORIES = '/apis/source.toolkit.fluxcd.io/v1';
/** Where the Pipeline reads (and Git carries) the version of a child Kustomization. */
export const VERSION_PATH = '/spec/postBuild/substitute/version';

/**
 * The child Kustomization of `env`, as committed to `clusters/<env>/podinfo.yaml`; its version line
 * is marked for `env` (for `extra.marker`, e.g. `prod/canary`, when given), dev's is not marked.
 */
export function childKustomization(env: string, version: string, extra: { readonly suspend?: boolean; readonly interval?: string; readonly marker?: string } = {}): string {
  const marker = env === 'dev' ? '' : ` # {"$promotion": "${PIPELINE_NAMESPACE}:${PIPELINE_NAME}:${extra.marker ?? env}"}`;
  return [
    'apiVersion: kustomize.toolkit.fluxcd.io/v1',
    'kind: Kustomization',
    'metadata:',
    '  name: podinfo',
    `  namespace: ${APP_NAMESPACE}`,
    'spec:',
    `  interval: ${extra.interval ?? '10m'}`,
    '  prune: true',
    ...(extra.suspend === true ? ['  suspend: true'] : []),
    '  path: ./apps/podinfo',
    `  targetNamespace: ${APP_NAMESPACE}`,
    `  sourceRef: { kind: GitRepository, name: fleet, namespace: ${FLUX_NAMESPACE} }`,
    '  postBuild:',
    '    substitute:',
    `      version: "${version}"${marker}`,
    '',
  ].join('\n');
}

/** What every child applies: ConfigMap `podinfo` with data.version from the child's substitution. */
export const CONFIGMAP = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: podinfo\ndata:\n  version: "${version}"\n';

/** The repository's files with every environment at `version` (children reconciled every `interval`, default 10m). */
export function fleetFiles(version: string, interval?: string): Record<string, string> {
  const files: Record<string, string> = { 'apps/podinfo/configmap.yaml': CONFIGMAP };
  for (const env of ENVIRONMENTS) files[`clusters/${env}/podinfo.yaml`] = childKustomization(env, version, interval === undefined ? {} : { interval });
  return files;
}

/** The Pipeline of a Flux fleet: the child Kustomizations, promoted by commits to `url`. */
export function fluxPipelineObject(url: string): object {
  return fleetPipeline({
    appRef: { apiVersion: 'kustomize.toolkit.fluxcd.io/v1', kind: 'Kustomization', name: 'podinfo' },
    promotion: { strategy: 'git', git: { url, branch: 'main', path: 'clusters' } },
    revisionPath: VERSION_PATH,
  });
}

/**
 * Points a cluster's Flux at its folder of the fleet repository: the namespaces, GitRepository
 * `flux-system/fleet` (polled every `gitInterval`, default 5 s) and the parent Kustomization
 * `flux-system/fleet` applying `./clusters/<folder>` (every `kustomizationInterval`, default 10m).
 */
export async function syncFolder(cluster: TestCluster, server: GitServer, folder: string, options: { readonly gitInterval?: string; readonly kustomizationInterval?: string } = {}): Promise<void> {
  for (const ns of [FLUX_NAMESPACE, APP_NAMESPACE]) await ensureNamespace(cluster, ns);
  await must(cluster, 'POST', `${GIT_REPOSITORIES}/namespaces/${FLUX_NAMESPACE}/gitrepositories`, {
    apiVersion: 'source.toolkit.fluxcd.io/v1',
    kind: 'GitRepository',
    metadata: { name: 'fleet', namespace: FLUX_NAMESPACE },
    spec: { url: server.url(FLUX_REPOSITORY), ref: { branch: 'main' }, interval: options.gitInterval ?? '5s' },
  });
  await must(cluster, 'POST', `${KUSTOMIZATIONS}/namespaces/${FLUX_NAMESPACE}/kustomizations`, {
    apiVersion: 'kustomize.toolkit.fluxcd.io/v1',
    kind: 'Kustomization',
    metadata: { name: 'fleet', namespace: FLUX_NAMESPACE },
    spec: { interval: options.kustomizationInterval ?? '10m', prune: true, path: `./clusters/${folder}`, sourceRef: { kind: 'GitRepository', name: 'fleet' } },
  });
}

/** Options of {@link setUpFluxFleet}. */
export interface FluxFleetOptions {
  /** GitRepository `spec.interval`: how often Flux polls Git. Default 5s. */
  readonly gitInterval?: string;
  /** `spec.interval` of every Kustomization, parents and children: how often Flux re-applies with no change. Default 10m. */
  readonly kustomizationInterval?: string;
  /** The Pipeline to create, given the repository URL. Default {@link fluxPipelineObject}. */
  readonly pipeline?: (url: string) => object;
}

/**
 * Seeds the repository (every environment at `initialVersion`), starts a Flux pair in each
 * cluster with the GitRepository and parent Kustomization for its environment, and installs the
 * Pipeline CRD, the kubeconfig Secrets of staging and prod and the Pipeline in the management
 * cluster. The result stops the controllers.
 */
export async function setUpFluxFleet(fleet: Fleet, server: GitServer, initialVersion: string, options: FluxFleetOptions = {}): Promise<FluxControllers[]> {
  await server.seed(FLUX_REPOSITORY, fleetFiles(initialVersion, options.kustomizationInterval));
  await fleet.management.installCRDs([pipelineCrd]);
  const controllers: FluxControllers[] = [];
  try {
    for (const [env, cluster] of [['dev', fleet.management], ['staging', fleet.staging], ['prod', fleet.prod]] as const) {
      controllers.push(await startFluxControllers(cluster));
      await syncFolder(cluster, server, env, options);
    }
    await putKubeconfigSecrets(fleet);
    await must(fleet.management, 'POST', `/apis/fleetcache.dev/v1alpha1/namespaces/${PIPELINE_NAMESPACE}/pipelines`, (options.pipeline ?? fluxPipelineObject)(server.url(FLUX_REPOSITORY)));
    return controllers;
  } catch (err) {
    await Promise.all(controllers.map((c) => c.stop()));
    throw err;
  }
}

/** The version Flux applied in `cluster`: ConfigMap `apps/podinfo`'s data.version. */
export async function appliedConfigVersion(cluster: TestCluster): Promise<string | undefined> {
  const res = await cluster.request('GET', `/api/v1/namespaces/${APP_NAMESPACE}/configmaps/podinfo`);
  return res.statusCode === 200 ? (res.body as { data?: { version?: string } }).data?.version : undefined;
}

/** A human's release: commits `version` into dev's folder (one commit, the child reconciled every `interval`). Returns its SHA. */
export async function releaseToDevInGit(server: GitServer, version: string, interval?: string): Promise<string> {
  return server.commit(FLUX_REPOSITORY, { 'clusters/dev/podinfo.yaml': childKustomization('dev', version, interval === undefined ? {} : { interval }) }, `release podinfo ${version} to dev`);
}

