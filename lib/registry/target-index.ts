import type { OwnerKey } from './keys.ts';

/** One target as the index files it. */
export interface IndexedTarget {
  readonly cacheKey: string;
  readonly objectKey: string;
}

const none: ReadonlySet<OwnerKey> = new Set();

/**
 * Which owners use which targets, answering in O(1) both "who must be requeued when this object
 * changes" and "does anyone still use this cache".
 *
 * Invariants (every method keeps all three):
 * - `#byOwner.get(o)` maps target t to its cache key  ⇔  `#byTarget.get(t)` contains o.
 * - `#byCache.get(c).get(o)` is the number of o's targets whose cache key is c.
 * - No map or set is ever left empty: an absent key means zero.
 */
export class TargetIndex {
  readonly #byOwner = new Map<OwnerKey, Map<string, string>>();
  readonly #byTarget = new Map<string, Set<OwnerKey>>();
  readonly #byCache = new Map<string, Map<OwnerKey, number>>();

  /** Records that `owner` uses `target` (idempotent). */
  add(owner: OwnerKey, target: IndexedTarget): void {
    let targets = this.#byOwner.get(owner);
    if (targets?.has(target.objectKey) === true) return;
    if (targets === undefined) {
      targets = new Map();
      this.#byOwner.set(owner, targets);
    }
    targets.set(target.objectKey, target.cacheKey);
    let owners = this.#byTarget.get(target.objectKey);
    if (owners === undefined) {
      owners = new Set();
      this.#byTarget.set(target.objectKey, owners);
    }
    owners.add(owner);
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
  set(owner: OwnerKey, targets: Iterable<IndexedTarget>): string[] {
    const wanted = new Map<string, string>();
    for (const t of targets) wanted.set(t.objectKey, t.cacheKey);
    const released: string[] = [];
    for (const [objectKey, cacheKey] of this.#byOwner.get(owner) ?? []) {
      if (!wanted.has(objectKey) && this.#remove(owner, objectKey, cacheKey)) released.push(cacheKey);
    }
    for (const [objectKey, cacheKey] of wanted) this.add(owner, { objectKey, cacheKey });
    return released.filter((key) => !this.#byCache.has(key));
  }

  /** Forgets `owner` entirely (it was deleted). Returns the cache keys left without any owner. */
  forget(owner: OwnerKey): string[] {
    return this.set(owner, []);
  }

  /** Removes one target of one owner; true when the owner no longer uses that cache. */
  #remove(owner: OwnerKey, objectKey: string, cacheKey: string): boolean {
    const targets = this.#byOwner.get(owner);
    if (targets?.delete(objectKey) !== true) return false;
    if (targets.size === 0) this.#byOwner.delete(owner);
    const owners = this.#byTarget.get(objectKey);
    owners?.delete(owner);
    if (owners?.size === 0) this.#byTarget.delete(objectKey);
    const counts = this.#byCache.get(cacheKey);
    const left = (counts?.get(owner) ?? 0) - 1;
    if (left > 0) {
      counts?.set(owner, left);
      return false;
    }
    counts?.delete(owner);
    if (counts?.size === 0) this.#byCache.delete(cacheKey);
    return true;
  }

  /** The owners using the object with this key. Do not keep the set: it changes as owners do. */
  ownersOf(objectKey: string): ReadonlySet<OwnerKey> {
    return this.#byTarget.get(objectKey) ?? none;
  }

  /** How many distinct owners use at least one target of this cache. */
  ownerCount(cacheKey: string): number {
    return this.#byCache.get(cacheKey)?.size ?? 0;
  }

  /** The owners using at least one target of this cache. */
  ownersOfCache(cacheKey: string): OwnerKey[] {
    return [...(this.#byCache.get(cacheKey)?.keys() ?? [])];
  }

  /** The object keys of this cache's targets, over every owner. */
  targetsOfCache(cacheKey: string): string[] {
    const keys = new Set<string>();
    for (const owner of this.#byCache.get(cacheKey)?.keys() ?? []) {
      for (const [objectKey, cache] of this.#byOwner.get(owner) ?? []) if (cache === cacheKey) keys.add(objectKey);
    }
    return [...keys];
  }

  /** The object keys `owner` uses. */
  targetsOf(owner: OwnerKey): string[] {
    return [...(this.#byOwner.get(owner)?.keys() ?? [])];
  }

  /** Number of owners with at least one target. */
  get owners(): number {
    return this.#byOwner.size;
  }
}
