import type { KubeObject } from '../transport/index.ts';

/** Values an object is indexed under; an empty array leaves it out of the index. */
export type IndexFunc<T extends KubeObject = KubeObject> = (obj: T) => readonly string[];

/** The name of the built-in index by namespace ('' for cluster-scoped objects). */
export const NAMESPACE_INDEX = 'namespace';

/** An index of objects by the value of one label (objects without the label are left out). */
export function labelIndex(label: string): IndexFunc {
  return (obj) => {
    const value = obj.metadata?.labels?.[label];
    return value === undefined ? [] : [value];
  };
}

/** The store key of an object: `namespace/name`, or `name` for cluster-scoped objects. */
export function objectKey(obj: KubeObject): string {
  const meta = obj.metadata;
  const name = meta?.name ?? '';
  const ns = meta?.namespace;
  return ns === undefined || ns === '' ? name : `${ns}/${name}`;
}

/**
 * Read access to an informer's cache. Objects handed out are deeply frozen: they are shared with
 * every other reader and handler, so copy before changing (`structuredClone(obj)`). Lists are new
 * arrays the caller may keep.
 */
export interface StoreReader<T extends KubeObject = KubeObject> {
  /** The object under `namespace/name` (or `name` when cluster-scoped). */
  get(key: string): T | undefined;
  /** The object with this namespace ('' for cluster-scoped) and name. */
  getByName(namespace: string, name: string): T | undefined;
  /** Every object, in no particular order. */
  list(): T[];
  /** Every key. */
  keys(): string[];
  /**
   * Objects an index files under `value`: `byIndex('namespace', 'default')`, or a custom index
   * given to the informer. Throws a TypeError for an index that does not exist.
   */
  byIndex(indexName: string, value: string): T[];
  /** Names of the indexes, `namespace` included. */
  indexNames(): string[];
  readonly size: number;
}

/**
 * The informer's cache: objects by key, with their indexes. Only the informer mutates it; it is a
 * plain synchronous structure (mutations happen one event at a time on the event loop).
 *
 * Invariants: for every index `i` and value `v`, `i.keys[v]` holds exactly the keys `k` of
 * `#items` with `v ∈ i.fn(#items[k])`, and holds no empty set. `i.values[k]` is the value list
 * `k` is filed under in `i`, so removing `k` touches only those sets. (`i.keys` and `i.values`
 * are `i.files`, absent, and so empty, until a first value is filed.)
 */
export class Store<T extends KubeObject = KubeObject> implements StoreReader<T> {
  /** Created with the first object: an empty cache (a kind the cluster has none of) holds no map. */
  #items: Map<string, T> | undefined;
  /**
   * One entry per index, `namespace` first: walked on every write, so an array, not a map; found
   * by name by a walk too (a store has a handful of indexes, and a Map of them cost about 190 bytes
   * per cache, issue 12).
   */
  readonly #indexes: readonly StoreIndex<T>[];
  readonly #onIndexError: (index: string, key: string, err: unknown) => void;

  /**
   * @param indexers custom indexes by name ('namespace' is built in and reserved).
   * @param onIndexError called when an index function throws; the object is then left out of it.
   */
  constructor(indexers: Readonly<Record<string, IndexFunc<T>>>, onIndexError: (index: string, key: string, err: unknown) => void) {
    const all = new Map<string, IndexFunc<T>>([[NAMESPACE_INDEX, namespaceOf]]);
    for (const [name, fn] of Object.entries(indexers)) all.set(name, fn);
    this.#indexes = [...all].map(([name, fn]) => ({ name, fn, files: undefined }));
    this.#onIndexError = onIndexError;
  }

  get size(): number {
    return this.#items?.size ?? 0;
  }

  get(key: string): T | undefined {
    return this.#items?.get(key);
  }

  getByName(namespace: string, name: string): T | undefined {
    return this.#items?.get(namespace === '' ? name : `${namespace}/${name}`);
  }

  list(): T[] {
    return this.#items === undefined ? [] : [...this.#items.values()];
  }

  keys(): string[] {
    return this.#items === undefined ? [] : [...this.#items.keys()];
  }

  indexNames(): string[] {
    return this.#indexes.map((index) => index.name);
  }

  byIndex(indexName: string, value: string): T[] {
    const index = this.#indexes.find((i) => i.name === indexName);
    if (index === undefined) throw new TypeError(`no index named ${JSON.stringify(indexName)}; indexes: ${this.indexNames().join(', ')}`);
    const out: T[] = [];
    for (const key of index.files?.keys.get(value) ?? []) {
      const obj = this.#items?.get(key);
      if (obj !== undefined) out.push(obj);
    }
    return out;
  }

  /** Iterates without copying; the informer uses it where nothing mutates during the walk. */
  entries(): IterableIterator<[string, T]> {
    return (this.#items ?? NO_ITEMS).entries();
  }

  /** Inserts or replaces the object under `key`, keeping every index in step. */
  set(key: string, obj: T): void {
    const items = this.#items ??= new Map();
    const replacing = items.has(key);
    items.set(key, obj);
    for (const index of this.#indexes) {
      let values: readonly string[];
      try {
        values = index.fn(obj);
      } catch (err) {
        this.#onIndexError(index.name, key, err);
        values = [];
      }
      const old = replacing ? index.files?.values.get(key) : undefined;
      if (old !== undefined && sameValues(old, values)) continue;
      if (values.length === 0) {
        if (old !== undefined && index.files !== undefined) {
          unfile(index.files.keys, key, old);
          index.files.values.delete(key);
        }
        continue;
      }
      // Created with the first value filed: an index with nothing in it costs no maps.
      const files = index.files ??= { keys: new Map<string, Set<string>>(), values: new Map<string, readonly string[]>() };
      if (old !== undefined) unfile(files.keys, key, old);
      files.values.set(key, values);
      for (const v of values) {
        let keys = files.keys.get(v);
        if (keys === undefined) {
          keys = new Set();
          files.keys.set(v, keys);
        }
        keys.add(key);
      }
    }
  }

  /** Removes the object under `key` from the items and every index; returns what was there. */
  delete(key: string): T | undefined {
    const items = this.#items;
    const previous = items?.get(key);
    if (items === undefined || previous === undefined) return undefined;
    items.delete(key);
    for (const index of this.#indexes) {
      const files = index.files;
      const old = files?.values.get(key);
      if (files === undefined || old === undefined) continue;
      unfile(files.keys, key, old);
      files.values.delete(key);
    }
    return previous;
  }
}

/** What an empty store iterates: never written. */
const NO_ITEMS: ReadonlyMap<string, never> = new Map<string, never>();

/** The built-in index: the object's namespace, '' when cluster-scoped. */
function namespaceOf(obj: KubeObject): readonly string[] {
  return [obj.metadata?.namespace ?? ''];
}

/** One index of a {@link Store}. */
interface StoreIndex<T extends KubeObject> {
  readonly name: string;
  readonly fn: IndexFunc<T>;
  /**
   * What is filed, created with the first value: two empty Maps cost about 370 bytes, for every
   * index of every cache, including the caches of kinds a cluster has none of (issue 12).
   */
  files: IndexFiles | undefined;
}

/** The two sides of one index. */
interface IndexFiles {
  /** Index value → the keys filed under it (never an empty set). */
  readonly keys: Map<string, Set<string>>;
  /** Key → the values it is filed under, so removing it touches only those sets. */
  readonly values: Map<string, readonly string[]>;
}

function sameValues(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function unfile(index: Map<string, Set<string>>, key: string, values: readonly string[]): void {
  for (const v of values) {
    const keys = index.get(v);
    if (keys === undefined) continue;
    keys.delete(key);
    if (keys.size === 0) index.delete(v);
  }
}
