import { apiVersionOf, type GroupVersionKind } from '../util/index.ts';

/** An owner of targets: a Pipeline, or whatever object the embedding controller reconciles. */
export interface OwnerRef {
  readonly namespace: string;
  readonly name: string;
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

/** One object an owner watches, in a cluster the call names separately. */
export interface TargetRef {
  readonly gvk: GroupVersionKind;
  /** Unset or '' for cluster-scoped kinds. */
  readonly namespace?: string | undefined;
  readonly name: string;
}

// Unit separator: cannot occur in cluster keys, API groups, versions, kinds or object names.
const SEP = '\u001f';

/** The key of one cache: ⟨cluster, group/version/kind⟩. */
export function cacheKeyOf(cluster: string, gvk: GroupVersionKind): string {
  return `${cluster}${SEP}${gvk.group}${SEP}${gvk.version}${SEP}${gvk.kind}`;
}

/** The key of one object within the fleet: its cache key and `namespace/name`. */
export function objectKeyOf(cacheKey: string, namespace: string | undefined, name: string): string {
  return `${cacheKey}${SEP}${namespace ?? ''}/${name}`;
}

/** `cluster apps/v1/Deployment`: a cache key as people read it. */
export function describeCacheKey(cluster: string, gvk: GroupVersionKind): string {
  return `${cluster} ${apiVersionOf(gvk)}/${gvk.kind}`;
}
