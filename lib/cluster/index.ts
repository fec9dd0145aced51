/**
 * Reaching a cluster: the per-cluster connection (kubeconfig credentials, one keep-alive HTTP
 * agent, request and LIST limiters, discovery of GVK → resource and scope) and the LIST/WATCH
 * client seam the informer builds on.
 */
export { ClusterConnection, resourcePath } from './connection.ts';
export type { ClusterConnectionOptions, RequestOptions } from './connection.ts';
export { createListLimiter } from './limiter.ts';
export type {
  KubeList,
  KubeObject,
  ListOptions,
  ObjectMeta,
  ResourceClient,
  ResourceInfo,
  ResourceResolver,
  SelectorOptions,
  WatchEvent,
  WatchOptions,
} from './types.ts';
export { loadKubeconfig, localKubeConfig } from './kubeconfig.ts';
export type { LoadKubeconfigOptions, LocalKubeConfigOptions } from './kubeconfig.ts';
export { clusterKey, CompositeProvider, InvalidClusterRefError, LocalProvider, StaticProvider } from './providers.ts';
export type { ClusterAccess, ClusterProvider, ClusterRef, CompositeProviderOptions, LocalProviderOptions, ResolveContext, StaticProviderOptions } from './providers.ts';
export { CoreV1SecretReader, KubeconfigSecretNotFoundError, SecretProvider } from './provider-secret.ts';
export type { CoreV1SecretReaderOptions, SecretData, SecretProviderOptions, SecretReader } from './provider-secret.ts';
