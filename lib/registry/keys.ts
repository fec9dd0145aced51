import type { Identity } from '../cluster/index.ts';
import { apiVersionOf, type GroupVersionKind } from '../util/index.ts';

/** An owner of targets: a Pipeline, or whatever object the embedding controller reconciles. */
export interface OwnerRef {
  readonly namespace: string;
  readonly name: string;
  /**
   * Who the owner acts as on the management cluster: its reads and writes on `local` references
   * and the kubeconfig-Secret reads of remote ones. Not part of the owner's key. Default
   * `OWN_IDENTITY` (the service's own credentials).
   */
  readonly identity?: Identity | undefined;
}

/** `namespace/name` of an owner: the item type of the requeue queue. */
export type OwnerKey = string;

/** The owner's key: `namespace/name`. */
export function ownerKey(owner: OwnerRef): OwnerKey {
  return `${owner.namespace}/${owner.name}`;
}

/** The inverse of {@link ownerKey}. */
export function parseOwnerKey(key: OwnerKey): OwnerRef {
  const slash = key.indexOf('/');
  if (slash <= 0 || slash === key.length - 1) throw new TypeError(`not an owner key (namespace/name): ${JSON.stringify(key)}`);
  return { namespace: key.slice(0, slash), name: key.slice(slash + 1) };
}

/**
 * Which namespaces a cache lists and watches:
 * - `cluster`: all of them (one cache per kind serves every namespace);
 * - `namespace`: only the target's namespace (credentials with a namespaced Role suffice);
 * - `auto`: all of them when the credentials may list the kind at the cluster scope, else the
 *   target's namespace: a 403 at the cluster scope is answered by scoping down, once, not retried.
 * Cluster-scoped kinds are always cached whole.
 */
export type CacheScope = 'cluster' | 'namespace' | 'auto';

/** One object an owner watches, in a cluster the call names separately. */
export interface TargetRef {
  readonly gvk: GroupVersionKind;
  /** Unset or '' for cluster-scoped kinds. */
  readonly namespace?: string | undefined;
  readonly name: string;
  /** The cache's namespace scope for this call. Default: the registry's `scope` option. */
  readonly scope?: CacheScope | undefined;
}

// Unit separator: cannot occur in cluster keys, API groups, versions, kinds or object names.
const SEP = '\u001f';

/**
 * The key of one cache: ⟨connection, namespace scope, group/version/kind⟩, where the connection
 * key names the cluster and, for the management cluster, the identity (`ClusterSet.connectionKey`)
 * and the scope is '' for all namespaces or the one namespace watched.
 */
export function cacheKeyOf(connection: string, namespaceScope: string, gvk: GroupVersionKind): string {
  return `${connection}${SEP}${namespaceScope}${SEP}${gvk.group}${SEP}${gvk.version}${SEP}${gvk.kind}`;
}

/** The key of one object within the fleet: its cache key and `namespace/name`. */
export function objectKeyOf(cacheKey: string, namespace: string | undefined, name: string): string {
  return `${cacheKey}${SEP}${namespace ?? ''}/${name}`;
}

/** `cluster apps/v1/Deployment` (`… in team-a` for a namespaced cache): a cache key as people read it. */
export function describeCacheKey(cluster: string, gvk: GroupVersionKind, namespaceScope = ''): string {
  return `${cluster} ${apiVersionOf(gvk)}/${gvk.kind}${namespaceScope === '' ? '' : ` in ${namespaceScope}`}`;
}
