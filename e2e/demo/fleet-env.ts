// `make demo DEMO_FLAGS=--fleet`: prod is a fleet of several real clusters, reached through
// kubeconfig Secrets in `delivery` labelled `fleet: prod` (the first also `wave: canary`), and
// promoted in two waves: the canary, soaked, then the rest. Everything else is the demo's fleet
// (e2e/fleet.ts): dev on the management cluster, staging through its Secret, the patch strategy.
import { readFileSync } from 'node:fs';
import { loadAll } from 'js-yaml';
import { helmReleaseCrd, kustomizationCrd } from '../../fixtures/crds/index.ts';
import { ensureNamespace, must, putKubeconfigSecret } from '../../fixtures/support/index.ts';
import { pipelineCrd } from '../../lib/pipeline/index.ts';
import { APP_NAME, APP_NAMESPACE, PIPELINE_NAME, PIPELINE_NAMESPACE } from '../fleet.ts';
import type { TestCluster } from '../harness/index.ts';

/** How many clusters prod has with --fleet: a canary and three more. */
export const FLEET_SIZE = 4;
/** How long the canary must have been ready before the rest starts. */
export const CANARY_SOAK_SECONDS = 5;
/** The prod clusters' names, which are also their kubeconfig Secrets' names. */
export const FLEET_CLUSTERS: readonly string[] = Array.from({ length: FLEET_SIZE }, (_, i) => `prod-${i + 1}`);

/**
 * The account the Pipeline acts as: a selector lists Secrets, which the service's own identity may
 * not, so the Pipeline names a ServiceAccount with config/samples/fleet-tenant-role.yaml's Role.
 */
export const FLEET_ACCOUNT = 'fleet-deployer';

/** The Pipeline: dev (local) → staging (Secret) → prod (the fleet, in waves), patch strategy. */
export function fleetPipelineObject(): object {
  return {
    apiVersion: 'fleetcache.dev/v1alpha1',
    kind: 'Pipeline',
    metadata: { name: PIPELINE_NAME, namespace: PIPELINE_NAMESPACE },
    spec: {
      appRef: { apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease', name: APP_NAME },
      serviceAccountName: FLEET_ACCOUNT,
      promotion: { strategy: 'patch', patch: { path: '/spec/chart/spec/version' } },
      environments: [
        { name: 'dev', targets: [{ namespace: APP_NAMESPACE }] },
        { name: 'staging', targets: [{ namespace: APP_NAMESPACE, clusterRef: { kind: 'Secret', name: 'staging-kubeconfig' } }] },
        {
          name: 'prod',
          fleet: {
            namespace: APP_NAMESPACE,
            clusterSelector: { matchLabels: { fleet: 'prod' } },
            readiness: { policy: 'All' },
            waves: [
              { name: 'canary', selector: { matchLabels: { wave: 'canary' } }, soakSeconds: CANARY_SOAK_SECONDS },
              { name: 'rest', count: FLEET_SIZE - 1 },
            ],
          },
        },
      ],
    },
  };
}

/**
 * Installs the CRDs, podinfo's HelmRelease at `initialVersion` in every cluster, staging's Secret,
 * the prod clusters' labelled Secrets and the Pipeline. `prod` is the fleet, in FLEET_CLUSTERS order.
 */
export async function setUpFleetEnvironment(management: TestCluster, staging: TestCluster, prod: readonly TestCluster[], initialVersion: string): Promise<void> {
  await management.installCRDs([pipelineCrd, helmReleaseCrd, kustomizationCrd]);
  for (const cluster of [staging, ...prod]) await cluster.installCRDs([helmReleaseCrd]);
  for (const cluster of [management, staging, ...prod]) {
    await ensureNamespace(cluster, APP_NAMESPACE);
    await must(cluster, 'POST', `/apis/helm.toolkit.fluxcd.io/v2/namespaces/${APP_NAMESPACE}/helmreleases`, {
      apiVersion: 'helm.toolkit.fluxcd.io/v2',
      kind: 'HelmRelease',
      metadata: { name: APP_NAME, namespace: APP_NAMESPACE },
      spec: { interval: '1m', chart: { spec: { chart: 'podinfo', version: initialVersion, sourceRef: { kind: 'HelmRepository', name: 'podinfo' } } } },
    }, [409]);
  }
  await ensureNamespace(management, PIPELINE_NAMESPACE);
  await putKubeconfigSecret(management, PIPELINE_NAMESPACE, 'staging-kubeconfig', staging.adminKubeconfig);
  for (const [i, cluster] of prod.entries()) {
    await must(management, 'POST', `/api/v1/namespaces/${PIPELINE_NAMESPACE}/secrets`, {
      metadata: { name: cluster.name, namespace: PIPELINE_NAMESPACE, labels: { fleet: 'prod', ...(i === 0 ? { wave: 'canary' } : {}) } },
      data: { value: Buffer.from(cluster.adminKubeconfig).toString('base64') },
    }, [409]);
  }
  await grantFleetAccount(management);
  await must(management, 'POST', `/apis/fleetcache.dev/v1alpha1/namespaces/${PIPELINE_NAMESPACE}/pipelines`, fleetPipelineObject(), [409]);
}

interface RoleRule { readonly apiGroups: readonly string[]; readonly resources: readonly string[]; readonly verbs: readonly string[] }

/**
 * The Pipeline's account, as config/samples/fleet-tenant-role.yaml ships it, in `delivery` (the
 * Secrets and the selector), and its HelmRelease rule in `apps` too (dev's target lives there).
 */
async function grantFleetAccount(management: TestCluster): Promise<void> {
  const sample = loadAll(readFileSync(new URL('../../config/samples/fleet-tenant-role.yaml', import.meta.url), 'utf8')) as { kind: string; rules?: RoleRule[] }[];
  const rules = sample.find((d) => d.kind === 'Role')?.rules ?? [];
  await must(management, 'POST', `/api/v1/namespaces/${PIPELINE_NAMESPACE}/serviceaccounts`, { metadata: { name: FLEET_ACCOUNT } }, [409]);
  const grants: readonly (readonly [string, readonly RoleRule[]])[] = [[PIPELINE_NAMESPACE, rules], [APP_NAMESPACE, rules.filter((r) => r.resources.includes('helmreleases'))]];
  for (const [namespace, granted] of grants) {
    await must(management, 'POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${namespace}/roles`, { metadata: { name: FLEET_ACCOUNT }, rules: granted }, [409]);
    await must(management, 'POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${namespace}/rolebindings`, {
      metadata: { name: FLEET_ACCOUNT },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: FLEET_ACCOUNT },
      subjects: [{ kind: 'ServiceAccount', name: FLEET_ACCOUNT, namespace: PIPELINE_NAMESPACE }],
    }, [409]);
  }
}
