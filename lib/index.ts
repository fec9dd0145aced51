/**
 * fleetcache: watched, in-memory caches of Kubernetes objects across a fleet of clusters, for
 * controllers that must react when objects in other clusters change.
 */
export * from './util/index.ts';
export * from './transport/index.ts';
export * from './cluster/index.ts';
export * from './informer/index.ts';
export * from './queue/index.ts';
export * from './registry/index.ts';
export * from './snapshot/index.ts';
export * from './pipeline/index.ts';
export * from './gitops/index.ts';
