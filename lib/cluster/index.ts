/**
 * Who a cluster is and who we are on it: cluster references and the providers that turn them into
 * credentials (local, static, kubeconfig Secret, Cluster API through a composite), safe loading of
 * untrusted kubeconfigs, identities, and the keeper (`ClusterSet`) that owns every connection:
 * admission, rotation, and closing what nobody holds. Consumers name the keeper's small `Clusters`
 * interface and are lent one; `testing.ts` (not exported) keeps one in memory for their tests.
 */
export { loadKubeconfig, localKubeConfig } from './kubeconfig.ts';
export type { LoadKubeconfigOptions, LocalKubeConfigOptions } from './kubeconfig.ts';
export { clusterKey, clusterRefOf, CompositeProvider, InvalidClusterRefError, LocalProvider, StaticProvider } from './providers.ts';
export type { ClusterAccess, ClusterProvider, ClusterRef, CompositeProviderOptions, LocalProviderOptions, ResolveContext, StaticProviderOptions } from './providers.ts';
export { CoreV1SecretReader, KubeconfigSecretNotFoundError, SecretProvider } from './provider-secret.ts';
export type { CoreV1SecretReaderOptions, SecretData, SecretProviderOptions, SecretReader } from './provider-secret.ts';
export { identityKey, impersonationOf, OWN_IDENTITY, serviceAccountIdentity } from './identity.ts';
export { ClusterChangedError, ClusterSet } from './cluster-set.ts';
export type { ConnectionOptions } from './connection-options.ts';
export type { ClusterSetOptions } from './cluster-set.ts';
export type { AcquireOptions, ClusterChange, ClusterLease, Clusters, ConnectionKey } from './clusters.ts';
export type { Identity } from './identity.ts';
