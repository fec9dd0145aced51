import type { ConnectionKey, Identity } from '../cluster/index.ts';
import { apiVersionOf, type GroupVersionKind } from '../util/index.ts';
import { describeSelection, EVERYTHING, type Selection } from './selectors.ts';

/** An owner of targets: a Pipeline, or whatever object the embedding controller reconciles. */
export interface OwnerRef {
  /**
   * The owner's API group and kind, so that several controllers (several owner kinds) share one
   * registry: owners of different kinds never share a key. Default: unset, the one implied kind
   * of a registry with a single controller (key `namespace/name`); a group needs a kind.
   */
  readonly group?: string | undefined;
  readonly kind?: string | undefined;
  /** '' for a cluster-scoped owner. */
  readonly namespace: string;
  readonly name: string;
  /**
   * Who the owner acts as on the management cluster: its reads and writes on `local` references
   * and the kubeconfig-Secret reads of remote ones. Not part of the owner's key. Default
   * `OWN_IDENTITY` (the service's own credentials).
   */
  readonly identity?: Identity | undefined;
}

declare const ownerKeyBrand: unique symbol;

/**
 * An owner's key, the item type of the requeue queue: made only by {@link ownerKey}, read back with
 * {@link parseOwnerKey}. Branded so that no other string (an object, cache or connection key, a
 * hand-built `namespace/name`) is taken for one.
 */
export type OwnerKey = string & { readonly [ownerKeyBrand]: true };

/**
 * The owner's key: `namespace/name` without a kind, `group/kind/namespace/name` with one (the core
 * group and cluster-scoped owners leave their part empty). Unambiguous: none of the parts may hold
 * a `/`, so the number of slashes says which form it is.
 */
export function ownerKey(owner: OwnerRef): OwnerKey {
  if (owner.kind === undefined) {
    if (owner.group !== undefined) throw new TypeError('an owner with a group must have a kind');
    return `${owner.namespace}/${owner.name}` as OwnerKey;
  }
  for (const [part, value] of [['group', owner.group ?? ''], ['kind', owner.kind], ['namespace', owner.namespace]] as const) {
    if (value.includes('/')) throw new TypeError(`owner ${part} may not contain '/': ${JSON.stringify(value)}`);
  }
  if (owner.kind === '') throw new TypeError('owner kind may not be empty');
  return `${owner.group ?? ''}/${owner.kind}/${owner.namespace}/${owner.name}` as OwnerKey;
}

/**
 * The inverse of {@link ownerKey}. A `TypeError` for a malformed key, which only a caller without
 * the compiler (plain JavaScript, a cast) can pass.
 */
export function parseOwnerKey(key: OwnerKey): OwnerRef {
  const parts = key.split('/');
  const name = parts.at(-1) ?? '';
  if (name === '') throw new TypeError(`not an owner key (namespace/name or group/kind/namespace/name): ${JSON.stringify(key)}`);
  if (parts.length === 2) return { namespace: parts[0] ?? '', name };
  if (parts.length === 4 && parts[1] !== '') return { group: parts[0] ?? '', kind: parts[1] ?? '', namespace: parts[2] ?? '', name };
  throw new TypeError(`not an owner key (namespace/name or group/kind/namespace/name): ${JSON.stringify(key)}`);
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

interface TargetBase {
  readonly gvk: GroupVersionKind;
  /** The cache's namespace scope for this call. Default: the registry's `scope` option. */
  readonly scope?: CacheScope | undefined;
}

/** One object an owner watches, in a cluster the call names separately: any change to it wakes the owner. */
export interface ObjectTargetRef extends TargetBase {
  /** Unset or '' for cluster-scoped kinds. */
  readonly namespace?: string | undefined;
  readonly name: string;
  readonly labelSelector?: undefined;
  readonly fieldSelector?: undefined;
}

/**
 * A set of objects an owner watches: every object of the kind in `namespace`, or in every namespace
 * when unset or '', narrowed by the selectors. The owner is woken when an object of the set
 * appears, changes, is deleted, or enters or leaves the set by a change of its labels.
 *
 * Selectors go to the API server: the set's cache (shared by every target with equal selectors,
 * compared in canonical form) lists and watches only what they select, so its reader's `list()`
 * is the selection (by namespace: `list({ namespace })`). An object whose labels leave the
 * selection arrives as a delete. Targets with different selectors on one kind hold a cache each
 * (objects in both are held twice); a set without selectors, and every object target, share the
 * kind's whole cache.
 */
export interface SetTargetRef extends TargetBase {
  /** The one namespace of the set. Default: every namespace (and cluster-scoped kinds). */
  readonly namespace?: string | undefined;
  readonly name?: undefined;
  /**
   * A label selector in the API's string form (`app=web,tier in (a,b),!legacy`): at most 32
   * requirements (with the field selector's) and 1,024 characters, else `InvalidSelectorError`.
   * Default: every label set.
   */
  readonly labelSelector?: string | undefined;
  /**
   * A field selector on `metadata.name` and `metadata.namespace` only (the fields every kind
   * supports on the server): `metadata.name=web,metadata.namespace!=kube-system`. Default: any.
   */
  readonly fieldSelector?: string | undefined;
}

/**
 * What an owner watches in a cluster: one object (`{ gvk, namespace, name }`), or a set of
 * objects (`{ gvk, namespace? }` for a namespace or the whole cluster, `{ gvk, namespace?,
 * labelSelector?, fieldSelector? }` narrowed by selectors): a target without a `name` is a set.
 */
export type TargetRef = ObjectTargetRef | SetTargetRef;

// Unit separator: cannot occur in cluster keys, API groups, versions, kinds or object names.
const SEP = '\u001f';

declare const cacheKeyBrand: unique symbol;
declare const objectKeyBrand: unique symbol;
declare const setKeyBrand: unique symbol;

/** The key of one cache ({@link cacheKeyOf}): only that function makes one. */
export type CacheKey = string & { readonly [cacheKeyBrand]: true };
/** The key of one object of one cache ({@link objectKeyOf}): only that function makes one. */
export type ObjectKey = string & { readonly [objectKeyBrand]: true };
/** The key of one set target of one cache ({@link setKeyOf}): only that function makes one. */
export type SetKey = string & { readonly [setKeyBrand]: true };

/**
 * The key of one cache: ⟨connection, namespace scope, group/version/kind, selection⟩, where the
 * connection key names the cluster and, for the management cluster, the identity
 * (`ClusterSet.connectionKey`), the scope is '' for all namespaces or the one namespace watched, and
 * the selection is canonical (`selectionOf`: equal selectors, one key), empty for the whole kind.
 * A canonical selection holds no separator (its keys, values and fields are checked).
 */
export function cacheKeyOf(connection: ConnectionKey, namespaceScope: string, gvk: GroupVersionKind, selection: Selection = EVERYTHING): CacheKey {
  return `${connection}${SEP}${namespaceScope}${SEP}${gvk.group}${SEP}${gvk.version}${SEP}${gvk.kind}${SEP}${selection.labels}${SEP}${selection.fields}` as CacheKey;
}

/** The key of one object within the fleet: its cache key and `namespace/name`. */
export function objectKeyOf(cacheKey: CacheKey, namespace: string | undefined, name: string): ObjectKey {
  return `${cacheKey}${SEP}${namespace ?? ''}/${name}` as ObjectKey;
}

/** The namespace part of an object key of the cache `cacheKey` ('' for cluster-scoped objects). */
export function namespaceOfObjectKey(cacheKey: CacheKey, objectKey: ObjectKey): string {
  const rest = objectKey.slice(cacheKey.length + 1);
  return rest.slice(0, rest.indexOf('/'));
}

/**
 * The key of one set target within the fleet: its cache key, namespace ('' for all) and selectors.
 * It starts with the separator, which no object key does (a connection key is never empty), so
 * set and object keys never collide; the selectors come last, so they may hold anything.
 */
export function setKeyOf(cacheKey: CacheKey, namespace: string, labelSelector: string, fieldSelector: string): SetKey {
  return `${SEP}${cacheKey}${SEP}${namespace}${SEP}${JSON.stringify([labelSelector, fieldSelector])}` as SetKey;
}

/**
 * `cluster apps/v1/Deployment` (`… in team-a` for a namespaced cache, `… selecting app=web` for a
 * selector's): a cache key as people read it.
 */
export function describeCacheKey(cluster: string, gvk: GroupVersionKind, namespaceScope = '', selection: Selection = EVERYTHING): string {
  const selected = describeSelection(selection);
  return `${cluster} ${apiVersionOf(gvk)}/${gvk.kind}${namespaceScope === '' ? '' : ` in ${namespaceScope}`}${selected === '' ? '' : ` selecting ${selected}`}`;
}
