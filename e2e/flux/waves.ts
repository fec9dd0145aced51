// A fleet environment under real Flux: dev on the management cluster, prod a fleet of clusters
// found by the label of their kubeconfig Secrets and promoted in waves through Git. Each cluster
// runs source-controller + kustomize-controller reading one repository with a folder per cluster:
//
//   clusters/dev/podinfo.yaml        the release's child Kustomization (no marker: a human's)
//   clusters/prod-<n>/podinfo.yaml   the child of prod-<n>, its version line marked with its
//                                    wave's marker `delivery:podinfo:prod/<wave>`
//   apps/podinfo/configmap.yaml      what every child applies (ConfigMap `apps/podinfo`)
//
// so a wave's commit changes its own clusters' folders only.
import { pipelineCrd } from '../../lib/pipeline/index.ts';
import { APP_NAMESPACE, PIPELINE_NAME, PIPELINE_NAMESPACE } from '../fleet.ts';
import type { GitServer } from '../git/server.ts';
import type { TestCluster } from '../harness/index.ts';
import { startFluxControllers, type FluxControllers } from './controllers.ts';
import { childKustomization, CONFIGMAP, FLUX_REPOSITORY, syncFolder, VERSION_PATH } from './fleet.ts';
import { ensureNamespace, must } from '../../fixtures/support/index.ts';

/** One prod cluster of the fleet: its folder (and Secret) name and its wave. */
export interface WaveMember {
  readonly cluster: TestCluster;
  /** `prod-<n>`: the folder under clusters/ and the kubeconfig Secret's name. */
  readonly name: string;
  readonly wave: string;
}

/** The fleet's label on every prod kubeconfig Secret (its clusterSelector). */
export const FLEET_LABEL = { fleet: 'prod' } as const;

/** The repository's files: dev and every member at `version`, each member's line marked for its wave. */
export function waveFleetFiles(version: string, members: readonly WaveMember[]): Record<string, string> {
  const files: Record<string, string> = { 'apps/podinfo/configmap.yaml': CONFIGMAP, 'clusters/dev/podinfo.yaml': childKustomization('dev', version) };
  for (const m of members) files[`clusters/${m.name}/podinfo.yaml`] = childKustomization(m.name, version, { marker: `prod/${m.wave}` });
  return files;
}

/**
 * The Pipeline: dev (the management cluster) → prod, a fleet of the Secrets labelled
 * {@link FLEET_LABEL} promoted by the git strategy in `waves`.
 */
export function wavePipelineObject(url: string, waves: readonly object[]): object {
  return {
    apiVersion: 'fleetcache.dev/v1alpha1',
    kind: 'Pipeline',
    metadata: { name: PIPELINE_NAME, namespace: PIPELINE_NAMESPACE },
    spec: {
      appRef: { apiVersion: 'kustomize.toolkit.fluxcd.io/v1', kind: 'Kustomization', name: 'podinfo' },
      revisionPath: VERSION_PATH,
      promotion: { strategy: 'git', git: { url, branch: 'main', path: 'clusters' } },
      environments: [
        { name: 'dev', targets: [{ namespace: APP_NAMESPACE }] },
        { name: 'prod', fleet: { namespace: APP_NAMESPACE, clusterSelector: { matchLabels: FLEET_LABEL }, waves } },
      ],
    },
  };
}

/** Options of {@link setUpFluxWaves}. */
export interface FluxWavesOptions {
  /** GitRepository `spec.interval`. Default 5s. */
  readonly gitInterval?: string;
  /** Extra labels of a member's Secret (a wave's selector). */
  readonly labels?: (member: WaveMember) => Readonly<Record<string, string>>;
}

/**
 * Seeds the repository at `initialVersion`, starts a Flux pair in the management cluster (dev) and
 * in every member (each a GitRepository and a parent Kustomization applying its own folder), puts
 * the members' kubeconfig Secrets (labelled) and the Pipeline in the management cluster. The
 * result stops the controllers.
 */
export async function setUpFluxWaves(management: TestCluster, members: readonly WaveMember[], server: GitServer, initialVersion: string, pipeline: object, options: FluxWavesOptions = {}): Promise<FluxControllers[]> {
  await server.seed(FLUX_REPOSITORY, waveFleetFiles(initialVersion, members));
  await management.installCRDs([pipelineCrd]);
  const controllers: FluxControllers[] = [];
  try {
    for (const [folder, cluster] of [['dev', management] as const, ...members.map((m) => [m.name, m.cluster] as const)]) {
      controllers.push(await startFluxControllers(cluster));
      await syncFolder(cluster, server, folder, options);
    }
    await ensureNamespace(management, PIPELINE_NAMESPACE);
    for (const m of members) {
      await must(management, 'POST', `/api/v1/namespaces/${PIPELINE_NAMESPACE}/secrets`, {
        metadata: { name: m.name, namespace: PIPELINE_NAMESPACE, labels: { ...FLEET_LABEL, ...options.labels?.(m) } },
        data: { value: Buffer.from(m.cluster.adminKubeconfig).toString('base64') },
      });
    }
    await must(management, 'POST', `/apis/fleetcache.dev/v1alpha1/namespaces/${PIPELINE_NAMESPACE}/pipelines`, pipeline);
    return controllers;
  } catch (err) {
    await Promise.all(controllers.map((c) => c.stop()));
    throw err;
  }
}
