/**
 * Real Kubernetes control planes for tests, without Docker: each cluster is its own etcd and
 * kube-apiserver on loopback, built from their Go modules (or taken from KUBEBUILDER_ASSETS).
 * The same tests can run against existing clusters (kind) through FLEETCACHE_KUBECONFIGS.
 */
export { startCluster, startClusters } from './cluster.ts';
export type { StartClusterOptions, StartTimings, TestCluster } from './cluster.ts';
export type { AdminApi, AdminResponse } from './api.ts';
export { externalCluster, externalClustersFromEnv } from './external.ts';
export { useClusters } from './node-test.ts';
export type { ClusterFixture, Clusters as TestClusters } from './node-test.ts';
export { resolveAssets } from './assets.ts';
export type { Assets } from './assets.ts';
export { eventually, freePort } from './wait.ts';
export type { WaitOptions } from './wait.ts';
