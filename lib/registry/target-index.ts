import type { KubeObject } from '../transport/index.ts';
import { namespaceOfObjectKey, objectKeyOf, setKeyOf, type CacheKey, type ObjectKey, type OwnerKey, type SetKey, type TargetRef } from './keys.ts';
import { EVERYTHING, selectionMatcher, selectionOf, type ObjectMatcher, type Selection } from './selectors.ts';

/** One exact object as the index files it. */
export interface IndexedObject {
  readonly cacheKey: CacheKey;
  /** `objectKeyOf(cacheKey, namespace, name)`. */
  readonly objectKey: ObjectKey;
}

/** One set target (a namespace, the whole cache, or a selector) as the index files it. */
export interface IndexedSet {
  readonly cacheKey: CacheKey;
  /** `setKeyOf(...)`: one per ⟨cache, namespace, selectors⟩, never equal to an object key. */
  readonly setKey: SetKey;
  /** The set's one namespace, or '' for every namespace of the cache. */
  readonly namespace: string;
  /** The set's selectors (the namespace is the index's to check). */
  readonly matches: ObjectMatcher;
}

export type IndexedTarget = IndexedObject | IndexedSet;

/** The owners of one set target; the first filing of a set key keeps its matcher. */
interface SetEntry {
  readonly target: IndexedSet;
  readonly owners: Set<OwnerKey>;
}

const none: ReadonlySet<OwnerKey> = new Set();

/** Visits the owners of every set in `sets` that `obj` (or `previous`, the object before a change) falls in. */
function wakeSets(sets: ReadonlyMap<SetKey, SetEntry> | undefined, obj: KubeObject, previous: KubeObject | undefined, visit: (owner: OwnerKey) => void): void {
  if (sets === undefined) return;
  for (const { target, owners } of sets.values()) {
    if (!target.matches(obj) && (previous === undefined || !target.matches(previous))) continue;
    for (const owner of owners) visit(owner);
  }
}

/** An owner's target, as the index files it: an object's key or a set's. */
type TargetKey = ObjectKey | SetKey;

function keyOf(target: IndexedTarget): TargetKey {
  return 'setKey' in target ? target.setKey : target.objectKey;
}

/**
 * Which owners use which targets, answering "who must be requeued when this object changes" in
 * O(owners of the object + set targets of its cache in its namespace and in all namespaces), never
 * O(all owners), and "does anyone still use this cache" in O(1).
 *
 * Invariants (every method keeps all four):
 * - `#byOwner.get(o).get(k)` is target t  ⇔  o is in `#byTarget.get(k)` (t an object) or in
 *   `#sets.get(t.cacheKey).get(t.namespace).get(k).owners` (t a set).
 * - `#sets.get(c).get(n)` holds exactly the set targets of cache c whose namespace is n ('' for
 *   all), each under its set key, each with at least one owner.
 * - `#byCache.get(c).get(o)` is the number of o's targets (objects and sets) whose cache key is c.
 * - No map or set is ever left empty: an absent key means zero.
 */
export class TargetIndex {
  readonly #byOwner = new Map<OwnerKey, Map<TargetKey, IndexedTarget>>();
  readonly #byTarget = new Map<ObjectKey, Set<OwnerKey>>();
  readonly #sets = new Map<CacheKey, Map<string, Map<SetKey, SetEntry>>>();
  readonly #byCache = new Map<CacheKey, Map<OwnerKey, number>>();

  /** Records that `owner` uses `target` (idempotent). */
  add(owner: OwnerKey, target: IndexedTarget): void {
    const key = keyOf(target);
    let targets = this.#byOwner.get(owner);
    if (targets?.has(key) === true) return;
    if (targets === undefined) {
      targets = new Map();
      this.#byOwner.set(owner, targets);
    }
    targets.set(key, target);
    if ('setKey' in target) {
      let byNamespace = this.#sets.get(target.cacheKey);
      if (byNamespace === undefined) {
        byNamespace = new Map();
        this.#sets.set(target.cacheKey, byNamespace);
      }
      let sets = byNamespace.get(target.namespace);
      if (sets === undefined) {
        sets = new Map();
        byNamespace.set(target.namespace, sets);
      }
      let entry = sets.get(target.setKey);
      if (entry === undefined) {
        entry = { target, owners: new Set() };
        sets.set(target.setKey, entry);
      }
      entry.owners.add(owner);
    } else {
      let owners = this.#byTarget.get(target.objectKey);
      if (owners === undefined) {
        owners = new Set();
        this.#byTarget.set(target.objectKey, owners);
      }
      owners.add(owner);
    }
    let counts = this.#byCache.get(target.cacheKey);
    if (counts === undefined) {
      counts = new Map();
      this.#byCache.set(target.cacheKey, counts);
    }
    counts.set(owner, (counts.get(owner) ?? 0) + 1);
  }

  /**
   * Declares the complete set of targets `owner` uses now; targets it no longer names are
   * released. Returns the cache keys that this left without any owner.
   */
  set(owner: OwnerKey, targets: Iterable<IndexedTarget>): CacheKey[] {
    const wanted = new Map<TargetKey, IndexedTarget>();
    for (const t of targets) wanted.set(keyOf(t), t);
    const released: CacheKey[] = [];
    for (const [key, target] of this.#byOwner.get(owner) ?? []) {
      if (!wanted.has(key) && this.#remove(owner, key, target)) released.push(target.cacheKey);
    }
    for (const target of wanted.values()) this.add(owner, target);
    return released.filter((key) => !this.#byCache.has(key));
  }

  /** Forgets `owner` entirely (it was deleted). Returns the cache keys left without any owner. */
  forget(owner: OwnerKey): CacheKey[] {
    return this.set(owner, []);
  }

  /** Removes one target of one owner; true when the owner no longer uses that cache. */
  #remove(owner: OwnerKey, key: TargetKey, target: IndexedTarget): boolean {
    const targets = this.#byOwner.get(owner);
    if (targets?.delete(key) !== true) return false;
    if (targets.size === 0) this.#byOwner.delete(owner);
    if ('setKey' in target) {
      const byNamespace = this.#sets.get(target.cacheKey);
      const sets = byNamespace?.get(target.namespace);
      const entry = sets?.get(target.setKey);
      entry?.owners.delete(owner);
      if (entry?.owners.size === 0) sets?.delete(target.setKey);
      if (sets?.size === 0) byNamespace?.delete(target.namespace);
      if (byNamespace?.size === 0) this.#sets.delete(target.cacheKey);
    } else {
      const owners = this.#byTarget.get(target.objectKey);
      owners?.delete(owner);
      if (owners?.size === 0) this.#byTarget.delete(target.objectKey);
    }
    const counts = this.#byCache.get(target.cacheKey);
    const left = (counts?.get(owner) ?? 0) - 1;
    if (left > 0) {
      counts?.set(owner, left);
      return false;
    }
    counts?.delete(owner);
    if (counts?.size === 0) this.#byCache.delete(target.cacheKey);
    return true;
  }

  /** The owners using the object with this key as an exact target. Do not keep the set: it changes as owners do. */
  ownersOf(objectKey: ObjectKey): ReadonlySet<OwnerKey> {
    return this.#byTarget.get(objectKey) ?? none;
  }

  /**
   * Calls `visit` for each owner a change of `obj` (whose key in cache `cacheKey` is `objectKey`)
   * wakes: the owners of the object itself, and those of every set target of the cache the object
   * is in, or was in (`previous`: its state before an update), so an object leaving a set by a
   * change of its labels wakes the set's owners too. Only the set targets of the object's
   * namespace and of all namespaces are looked at; each matcher runs on `obj` and `previous` only.
   * An owner may be visited more than once (the queue de-duplicates).
   */
  wake(cacheKey: CacheKey, objectKey: ObjectKey, obj: KubeObject, previous: KubeObject | undefined, visit: (owner: OwnerKey) => void): void {
    for (const owner of this.#byTarget.get(objectKey) ?? none) visit(owner);
    const byNamespace = this.#sets.get(cacheKey);
    if (byNamespace === undefined) return;
    const namespace = obj.metadata?.namespace ?? '';
    // Two calls, not a loop over a two-element array: this runs for every event of the cache.
    if (namespace !== '') wakeSets(byNamespace.get(namespace), obj, previous, visit);
    wakeSets(byNamespace.get(''), obj, previous, visit);
  }

  /** The matcher of the set target filed under `setKey`, if any owner uses it. */
  matcherOf(cacheKey: CacheKey, namespace: string, setKey: SetKey): ObjectMatcher | undefined {
    return this.#sets.get(cacheKey)?.get(namespace)?.get(setKey)?.target.matches;
  }

  /** How many distinct owners use at least one target of this cache. */
  ownerCount(cacheKey: CacheKey): number {
    return this.#byCache.get(cacheKey)?.size ?? 0;
  }

  /** The owners using at least one target of this cache. */
  ownersOfCache(cacheKey: CacheKey): OwnerKey[] {
    return [...(this.#byCache.get(cacheKey)?.keys() ?? [])];
  }

  /** The namespaces this cache's targets name, over every owner ('' for cluster-scoped objects and sets of every namespace). */
  namespacesOfCache(cacheKey: CacheKey): Set<string> {
    const namespaces = new Set<string>(this.#sets.get(cacheKey)?.keys() ?? []);
    for (const owner of this.#byCache.get(cacheKey)?.keys() ?? []) {
      for (const target of this.#byOwner.get(owner)?.values() ?? []) {
        if (target.cacheKey === cacheKey && !('setKey' in target)) namespaces.add(namespaceOfObjectKey(cacheKey, target.objectKey));
      }
    }
    return namespaces;
  }

  /** The keys (object keys and set keys) of the targets `owner` uses. */
  targetsOf(owner: OwnerKey): TargetKey[] {
    return [...(this.#byOwner.get(owner)?.keys() ?? [])];
  }

  /** Number of owners with at least one target. */
  get owners(): number {
    return this.#byOwner.size;
  }
}

/**
 * The selection of the cache `target` is read from: its canonical selectors for a set target
 * (`selectionOf`), everything for an object target. Throws a TypeError for a target with both a
 * name and selectors, `InvalidSelectorError` for a selector refused.
 */
export function targetSelection(target: TargetRef): Selection {
  if (target.name !== undefined) {
    const name: unknown = target.name;
    if (typeof name !== 'string') throw new TypeError(`target name must be a string, got ${typeof name}`);
    // The type forbids it; JavaScript callers and casts do not.
    const { labelSelector, fieldSelector }: { labelSelector?: unknown; fieldSelector?: unknown } = target;
    if (labelSelector !== undefined || fieldSelector !== undefined) {
      throw new TypeError('target: name one object (name) or a set (labelSelector, fieldSelector), not both');
    }
    return EVERYTHING;
  }
  return selectionOf(target.labelSelector, target.fieldSelector);
}

/**
 * How `index` files `target` in the cache `cacheKey`, whose selection (`targetSelection`) is
 * `selection`. A set target already filed keeps its matcher (a reconcile's repeated calls build
 * nothing).
 */
export function indexedTarget(index: TargetIndex, cacheKey: CacheKey, target: TargetRef, selection: Selection = targetSelection(target)): IndexedTarget {
  if (target.name !== undefined) return { cacheKey, objectKey: objectKeyOf(cacheKey, target.namespace, target.name) };
  const namespace = target.namespace ?? '';
  const setKey = setKeyOf(cacheKey, namespace, selection.labels, selection.fields);
  const matches = index.matcherOf(cacheKey, namespace, setKey) ?? selectionMatcher(selection);
  return { cacheKey, setKey, namespace, matches };
}
