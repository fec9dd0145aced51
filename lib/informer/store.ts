import type { KubeObject, ObjectMeta } from '../transport/index.ts';
import { dictionaryFrom, MIN_DICTIONARY, pack, Packed, SAMPLE_BYTES } from './pack.ts';

/**
 * Values an object is indexed under; an empty array leaves it out of the index. Index values are
 * computed at ingest: a custom function is given the parsed object, so an informer with one
 * parses every object it takes ({@link labelIndex} and the namespace index read only metadata and
 * cost no parse).
 */
export type IndexFunc<T extends KubeObject = KubeObject> = (obj: T) => readonly string[];

/** The name of the built-in index by namespace ('' for cluster-scoped objects). */
export const NAMESPACE_INDEX = 'namespace';

/** An index of objects by the value of one label (objects without the label are left out). */
export function labelIndex(label: string): IndexFunc {
  const fn: IndexFunc = (obj) => {
    const value = obj.metadata?.labels?.[label];
    return value === undefined ? [] : [value];
  };
  HEAD_ONLY.add(fn);
  return fn;
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
 * What an object is known by without parsing it: its kind and its whole metadata (after the
 * transform), frozen. Meta handlers and the informer's bookkeeping (keys, resourceVersion
 * compares, the namespace and label indexes) need no more.
 */
export type ObjectHead = KubeObject & { readonly metadata: ObjectMeta };

/**
 * One cached object: its JSON text (lazy; parsed on read), that text packed (a cold object of a
 * compressed cache: {@link Slot.text} unpacks it), or, for an informer whose transform needs whole
 * objects (or an object whose text could not be made), the frozen object itself. Exactly one of
 * `text` and `obj` is set. `metadataStart`/`metadataEnd` locate the metadata in `text` (-1 when
 * unknown: the head then costs a whole parse). Immutable: a change is a new slot. `born` is when
 * it was made, in {@link slotTicks}, for a cache that packs cold objects (0 otherwise: the clock
 * is not read per event where nothing uses it).
 *
 * Compact because there is one per cached object (issue 27): six fields, no strings of its own
 * where the text has them. A text's uid and resourceVersion are kept as where they are in the
 * text (`at × 512 + length`, a small integer) and sliced out when asked; a parsed object's are
 * read from its metadata. A value the text does not hold verbatim (an escape) is kept as a string,
 * as are a packed slot's (reading them in place would cost an unpack).
 */
export class Slot<T extends KubeObject = KubeObject> {
  readonly #body: string | Packed | T;
  readonly metadataStart: number;
  readonly metadataEnd: number;
  readonly #uid: string | number | typeof NONE | undefined;
  readonly #rv: string | number | typeof NONE | undefined;
  readonly born: number;

  constructor(text: string | Packed | undefined, obj: T | undefined, metadataStart: number, metadataEnd: number, uid: string | undefined, resourceVersion: string | undefined, born = 0) {
    this.#body = text ?? obj ?? ({} as T);
    this.metadataStart = metadataStart;
    this.metadataEnd = metadataEnd;
    this.born = born;
    if (text instanceof Packed) {
      // Kept as strings: comparing in place would cost an unpack per event.
      this.#uid = uid ?? NONE;
      this.#rv = resourceVersion ?? NONE;
    } else if (text === undefined) {
      // Read from the object's own metadata unless told otherwise.
      const meta = obj?.metadata;
      this.#uid = meta?.uid === uid ? undefined : uid ?? NONE;
      this.#rv = meta?.resourceVersion === resourceVersion ? undefined : resourceVersion ?? NONE;
    } else {
      this.#uid = locate(text, uid, metadataStart, metadataEnd);
      this.#rv = locate(text, resourceVersion, metadataStart, metadataEnd);
    }
  }

  /** The object's text; unpacked on every call when packed (see {@link packed}). */
  get text(): string | undefined {
    const body = this.#body;
    if (typeof body === 'string') return body;
    return body instanceof Packed ? body.text() : undefined;
  }

  get obj(): T | undefined {
    const body = this.#body;
    return typeof body === 'string' || body instanceof Packed ? undefined : body;
  }

  /** True when the text is kept packed. */
  get packed(): boolean {
    return this.#body instanceof Packed;
  }

  /**
   * This slot with its text packed against `dictionary`, or, when packing saves too little, the
   * same text marked never to be tried again; undefined when it is not {@link packable}.
   */
  packWith(dictionary: Uint8Array): Slot<T> | undefined {
    const body = this.#body;
    if (typeof body !== 'string' || this.born === NEVER) return undefined;
    const packed = pack(body, dictionary);
    if (packed === undefined) return new Slot<T>(body, undefined, this.metadataStart, this.metadataEnd, this.uid, this.resourceVersion, NEVER);
    return new Slot<T>(packed, undefined, this.metadataStart, this.metadataEnd, detached(this.uid), detached(this.resourceVersion), this.born);
  }

  /** True for a text slot that may still be packed (not packed, not found not worth it). */
  get packable(): boolean {
    return typeof this.#body === 'string' && this.born !== NEVER;
  }

  get uid(): string | undefined {
    return this.#field(this.#uid, 'uid');
  }

  get resourceVersion(): string | undefined {
    return this.#field(this.#rv, 'resourceVersion');
  }

  /**
   * True when this slot is the object `uid` at `resourceVersion`: compared where the text holds
   * them, without slicing a string out of it (the informer asks on every event, issue 27).
   */
  isVersion(uid: string | undefined, resourceVersion: string | undefined): boolean {
    return this.#fieldIs(this.#uid, 'uid', uid) && this.#fieldIs(this.#rv, 'resourceVersion', resourceVersion);
  }

  /** True when this slot's uid is `uid` (see {@link isVersion}). */
  hasUid(uid: string | undefined): boolean {
    return this.#fieldIs(this.#uid, 'uid', uid);
  }

  #fieldIs(ref: string | number | typeof NONE | undefined, name: 'uid' | 'resourceVersion', value: string | undefined): boolean {
    if (typeof ref !== 'number') return this.#field(ref, name) === value;
    const body = this.#body;
    if (typeof body !== 'string' || value?.length !== ref % 512) return false;
    return body.startsWith(value, Math.floor(ref / 512));
  }

  #field(ref: string | number | typeof NONE | undefined, name: 'uid' | 'resourceVersion'): string | undefined {
    const body = this.#body;
    if (typeof ref === 'number') return typeof body === 'string' ? body.slice(Math.floor(ref / 512), Math.floor(ref / 512) + (ref % 512)) : undefined;
    if (ref === NONE) return undefined;
    if (ref !== undefined) return ref;
    return typeof body === 'string' || body instanceof Packed ? undefined : body.metadata?.[name];
  }

  /** Bytes retained for this slot: its text (one byte per character as V8 keeps Latin-1 text) and a fixed estimate for the rest. */
  get retainedBytes(): number {
    const body = this.#body;
    if (typeof body === 'string') return SLOT_OVERHEAD_BYTES + body.length;
    return body instanceof Packed ? PACKED_OVERHEAD_BYTES + body.length : PARSED_ESTIMATE_BYTES;
  }
}

/**
 * `value` in a string of its own: a uid sliced out of a text is a view that keeps the whole text
 * alive (V8 slices strings of 13 characters or more), which a packed slot must not.
 */
function detached(value: string | undefined): string | undefined {
  return value === undefined || value.length < 13 ? value : Buffer.from(value, 'utf8').toString('utf8');
}

/** The `born` of a slot whose text packing would not shrink enough: never tried again. */
const NEVER = 2 ** 30 - 1;

/** A slot's clock: tenths of a second of the process's monotonic clock (a small integer for years). */
export function slotTicks(): number {
  return Math.floor(performance.now() / 100);
}

/** A uid or resourceVersion known to be absent (a parsed object's metadata cannot say otherwise). */
const NONE: unique symbol = Symbol('none');

/** Where `value` is in `text` within [from, to) as `at × 512 + length`; the value itself when it is not there verbatim (or too long). */
function locate(text: string, value: string | undefined, from: number, to: number): string | number | typeof NONE | undefined {
  if (value === undefined || value.length >= 512 || from < 0) return value ?? NONE;
  const at = text.indexOf(value, from);
  if (at < 0 || at + value.length > to || at >= 4_000_000) return value;
  return at * 512 + value.length;
}

/**
 * Estimated bytes of a lazy object besides its text's characters: the text's header, its slot, map
 * entry, key and namespace-index entry, measured as 140 B per object over 100,000 ConfigMaps
 * (bench/lazy-bytes.bench.ts, issue 27), rounded up for label indexes and the decoded cache. An
 * estimate, not a measurement.
 */
const SLOT_OVERHEAD_BYTES = 160;
/** A packed object's besides its bytes: its slot, uid and resourceVersion strings, {@link Packed}, key and index entries (276 B measured over 100,000 ConfigMaps, 342 over 30,000: bench/lazy-bytes.bench.ts). */
const PACKED_OVERHEAD_BYTES = 300;
/** A parsed object has no cheap size: a flat estimate, everything included (1,930 B measured for issue 27's 3.2 KB ConfigMap). */
const PARSED_ESTIMATE_BYTES = 1_900;

/** Where a {@link Store} turns text into objects, and heads into metadata. */
export interface StoreCodec<T extends KubeObject> {
  /** Parses, transforms and deeply freezes a slot's text; throws when it does not parse or disagrees with the slot. */
  decode(slot: Slot<T>): T;
  /** The head of a slot, parsed from its metadata text (or its whole text). */
  head(slot: Slot<T>): ObjectHead;
  /** A slot's text did not parse: the store has already dropped it. */
  corrupt(key: string, slot: Slot<T>, err: unknown): void;
  /** An index function threw; the object is then left out of that index. */
  indexError(index: string, key: string, err: unknown): void;
}

/** Index functions that read only `metadata`: the store gives them the head, never a parse. */
const HEAD_ONLY = new WeakSet<IndexFunc<never>>();

/** True for the index functions that read only metadata (the namespace index, {@link labelIndex}). */
export function isHeadOnlyIndex(fn: IndexFunc<never>): boolean {
  return HEAD_ONLY.has(fn);
}

/**
 * The informer's cache: slots by key, with their indexes, and a bounded cache of decoded objects.
 * Only the informer mutates it; it is a plain synchronous structure (mutations happen one event at
 * a time on the event loop).
 *
 * Invariants: for every index `i` and value `v`, `i.keys[v]` holds exactly the keys `k` of
 * `#items` with `v ∈ i.fn(#items[k])`, and holds no empty set. `i.values[k]` is the value list
 * `k` is filed under in `i`, so removing `k` touches only those sets. (`i.keys` and `i.values`
 * are `i.files`, absent, and so empty, until a first value is filed.) `#decoded` holds at most
 * `#decodedMax` entries, each the decoded object of the slot it names; an entry whose slot is no
 * longer `#items`' slot for its key is stale and is dropped when met, or on set/delete of the key.
 * `#retained` is the sum of `retainedBytes` over `#items`, `#packed` the number of its packed
 * slots. Compaction replaces a slot by its packed twin under the same key (same head, so no index
 * changes) and never a key in `#decoded`; every slot packed in a store is packed against its
 * `#dictionary`, which never changes once made.
 */
export class Store<T extends KubeObject = KubeObject> implements StoreReader<T> {
  /** Created with the first object: an empty cache (a kind the cluster has none of) holds no map. */
  #items: Map<string, Slot<T>> | undefined;
  /** Recently decoded objects, least recently used first (a Map keeps insertion order). */
  #decoded: Map<string, { readonly slot: Slot<T>; readonly obj: T }> | undefined;
  readonly #decodedMax: number;
  #decodes = 0;
  #retained = 0;
  /** Slots of `#items` held packed. */
  #packed = 0;
  /** What this cache's objects are packed against: sampled from its own texts on the first compaction with enough of them. */
  #dictionary: Uint8Array | undefined;
  /** `#retained` when a dictionary was last sampled and none came of it (too little ASCII text): tried again at twice that. */
  #noDictionaryAt = 0;
  /** Where the compaction walk in progress is (a live Map iterator: it tolerates the writes between slices). */
  #cursor: IterableIterator<[string, Slot<T>]> | undefined;
  /**
   * One entry per index, `namespace` first: walked on every write, so an array, not a map; found
   * by name by a walk too (a store has a handful of indexes, and a Map of them cost about 190 bytes
   * per cache, issue 12).
   */
  readonly #indexes: readonly StoreIndex<T>[];
  readonly #codec: StoreCodec<T>;

  /**
   * @param indexers custom indexes by name ('namespace' is built in and reserved).
   * @param decodedMax how many decoded objects are kept for readers (0: none).
   */
  constructor(indexers: Readonly<Record<string, IndexFunc<T>>>, codec: StoreCodec<T>, decodedMax: number) {
    const all = new Map<string, IndexFunc<T>>([[NAMESPACE_INDEX, namespaceOf]]);
    for (const [name, fn] of Object.entries(indexers)) all.set(name, fn);
    this.#indexes = [...all].map(([name, fn]) => ({ name, fn, headOnly: HEAD_ONLY.has(fn as IndexFunc<never>), files: undefined }));
    this.#codec = codec;
    this.#decodedMax = decodedMax;
  }

  get size(): number {
    return this.#items?.size ?? 0;
  }

  /** Objects parsed from their text so far (a parse served by the decoded cache is not counted). */
  get decodes(): number {
    return this.#decodes;
  }

  /** Estimated bytes the cached objects hold (see {@link Slot.retainedBytes}). */
  get retainedBytes(): number {
    return this.#retained;
  }

  /** Objects held packed (see {@link compact}). */
  get packed(): number {
    return this.#packed;
  }

  /**
   * Packs the text of objects unchanged since `olderThan` ({@link slotTicks}) and not in the
   * decoded cache (read lately), walking on from where the last call stopped, for about `budgetMs`.
   * True when the walk reached the end (the next call starts a new one). Nothing is packed until the
   * cache holds eight times the smallest dictionary's worth of text: a few objects are not worth one.
   */
  compact(olderThan: number, budgetMs: number): boolean {
    const items = this.#items;
    if (items === undefined || this.#retained < 8 * MIN_DICTIONARY) return true;
    if (this.#dictionary === undefined) {
      if (this.#noDictionaryAt > 0 && this.#retained < 2 * this.#noDictionaryAt) return true;
      this.#dictionary = dictionaryFrom(sample(items.values()), this.#retained);
      if (this.#dictionary === undefined) {
        this.#noDictionaryAt = this.#retained;
        return true;
      }
    }
    const dictionary = this.#dictionary;
    const cursor = this.#cursor ??= items.entries();
    const until = performance.now() + budgetMs;
    for (let n = 1; ; n++) {
      if ((n & 15) === 0 && performance.now() >= until) return false;
      const next = cursor.next();
      if (next.done === true) {
        this.#cursor = undefined;
        return true;
      }
      const [key, slot] = next.value;
      if (!slot.packable || slot.born > olderThan || this.#decoded?.has(key) === true) continue;
      const packed = slot.packWith(dictionary);
      if (packed === undefined) continue;
      // Same key, same head: the indexes are unchanged. Map iterators visit a replaced key once.
      items.set(key, packed);
      this.#retained += packed.retainedBytes - slot.retainedBytes;
      if (packed.packed) this.#packed++;
    }
  }

  get(key: string): T | undefined {
    const slot = this.#items?.get(key);
    return slot === undefined ? undefined : this.objectOf(key, slot);
  }

  getByName(namespace: string, name: string): T | undefined {
    return this.get(namespace === '' ? name : `${namespace}/${name}`);
  }

  list(): T[] {
    const out: T[] = [];
    // Collected first: a slot whose text does not parse is dropped from the map while decoding.
    for (const [key, slot] of this.#items === undefined ? [] : [...this.#items]) {
      const obj = this.objectOf(key, slot);
      if (obj !== undefined) out.push(obj);
    }
    return out;
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
    for (const key of [...(index.files?.keys.get(value) ?? [])]) {
      const slot = this.#items?.get(key);
      const obj = slot === undefined ? undefined : this.objectOf(key, slot);
      if (obj !== undefined) out.push(obj);
    }
    return out;
  }

  /** The slot under `key`. */
  slot(key: string): Slot<T> | undefined {
    return this.#items?.get(key);
  }

  /**
   * The object of `slot` (cached under `key`, or about to be): from the slot, the decoded cache,
   * or a parse (then cached). Undefined when its text does not parse: the slot is then dropped
   * from the store (if still there) and the codec told.
   */
  objectOf(key: string, slot: Slot<T>): T | undefined {
    if (slot.obj !== undefined) return slot.obj;
    const decoded = this.#decoded;
    const hit = decoded?.get(key);
    if (decoded !== undefined && hit?.slot === slot) {
      // Most recently used goes last.
      decoded.delete(key);
      decoded.set(key, hit);
      return hit.obj;
    }
    let obj: T;
    try {
      this.#decodes++;
      obj = this.#codec.decode(slot);
    } catch (err) {
      if (this.#items?.get(key) === slot) this.delete(key);
      this.#codec.corrupt(key, slot, err);
      return undefined;
    }
    if (this.#items?.get(key) === slot) this.prime(key, slot, obj);
    return obj;
  }

  /** The decoded object of `slot` if the slot holds it or the decoded cache does (no parse). */
  peek(key: string, slot: Slot<T>): T | undefined {
    if (slot.obj !== undefined) return slot.obj;
    const hit = this.#decoded?.get(key);
    return hit?.slot === slot ? hit.obj : undefined;
  }

  /** Puts an object decoded at ingest into the decoded cache (the slot is `key`'s current one). */
  prime(key: string, slot: Slot<T>, obj: T): void {
    if (this.#decodedMax === 0 || slot.obj !== undefined) return;
    const cache = this.#decoded ??= new Map();
    cache.delete(key);
    cache.set(key, { slot, obj });
    if (cache.size > this.#decodedMax) {
      const oldest = cache.keys().next();
      if (oldest.done !== true) cache.delete(oldest.value);
    }
  }

  /** Iterates without copying; the informer uses it where nothing mutates during the walk. */
  entries(): IterableIterator<[string, Slot<T>]> {
    return (this.#items ?? NO_ITEMS).entries();
  }

  /** Inserts or replaces the slot under `key` (its head is `head`), keeping every index in step. */
  set(key: string, slot: Slot<T>, head: ObjectHead): void {
    const items = this.#items ??= new Map<string, Slot<T>>();
    const previous = items.get(key);
    const replacing = previous !== undefined;
    if (previous !== undefined) {
      this.#retained -= previous.retainedBytes;
      if (previous.packed) this.#packed--;
    }
    this.#retained += slot.retainedBytes;
    if (slot.packed) this.#packed++;
    // A new key is kept flat: `namespace/name` built by concatenation is a rope holding both parts
    // (about 50 bytes more per object). A replaced entry keeps the key it has.
    if (!replacing) key = flatKey(key);
    items.set(key, slot);
    this.#decoded?.delete(key);
    for (const index of this.#indexes) {
      // A key names its namespace, and one informer's objects are all namespaced or all not: a
      // replaced key stays filed where it is (one Map walk less per event, issue 27).
      if (replacing && index.fn === namespaceOf) continue;
      let values: readonly string[];
      try {
        if (index.headOnly) {
          values = index.fn(head as T);
        } else {
          const obj = this.objectOf(key, slot);
          // Text that does not parse: the slot is gone already, and the indexes with it.
          if (obj === undefined) return;
          values = index.fn(obj);
        }
      } catch (err) {
        this.#codec.indexError(index.name, key, err);
        values = [];
      }
      const old = replacing ? filedValues(index, key) : undefined;
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
      // The namespace index remembers no values for a key whose namespace the key itself tells.
      if (index.fn === namespaceOf && sameValues(namespaceOfKey(key), values)) files.values.delete(key);
      else files.values.set(key, values);
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

  /** Removes the slot under `key` from the items and every index; returns what was there. */
  delete(key: string): Slot<T> | undefined {
    const items = this.#items;
    const previous = items?.get(key);
    if (items === undefined || previous === undefined) return undefined;
    items.delete(key);
    this.#retained -= previous.retainedBytes;
    if (previous.packed) this.#packed--;
    this.#decoded?.delete(key);
    for (const index of this.#indexes) {
      const files = index.files;
      const old = filedValues(index, key);
      if (files === undefined || old === undefined) continue;
      unfile(files.keys, key, old);
      files.values.delete(key);
    }
    return previous;
  }
}

/** The first texts of `slots` (those that hold text), {@link SAMPLE_BYTES} of them: what a dictionary is sampled and probed from. */
function sample<T extends KubeObject>(slots: Iterable<Slot<T>>): string[] {
  const out: string[] = [];
  let bytes = 0;
  for (const slot of slots) {
    if (bytes >= SAMPLE_BYTES) break;
    if (!slot.packable) continue;
    const text = slot.text ?? '';
    out.push(text);
    bytes += text.length;
  }
  return out;
}

/** What an empty store iterates: never written. */
const NO_ITEMS: ReadonlyMap<string, never> = new Map<string, never>();

/** One shared value list per namespace: the index keeps one per object (issue 27). */
const namespaceLists = new Map<string, readonly string[]>();

/** The built-in index: the object's namespace, '' when cluster-scoped. */
function namespaceOf(obj: KubeObject): readonly string[] {
  return namespaceList(obj.metadata?.namespace ?? '');
}
HEAD_ONLY.add(namespaceOf);

/** The shared value list of one namespace. */
function namespaceList(namespace: string): readonly string[] {
  let list = namespaceLists.get(namespace);
  if (list === undefined) {
    list = Object.freeze([namespace]);
    // Bounded: namespaces are few, but a process may see many over its life.
    if (namespaceLists.size < 10_000) namespaceLists.set(namespace, list);
  }
  return list;
}

/**
 * The values `key` is filed under in `index` (undefined: not filed). The namespace index files
 * every cached key and, to save a map entry per object, remembers values only for a key whose
 * namespace is not the part before its first `/` (a cluster-scoped name with a slash).
 */
function filedValues<T extends KubeObject>(index: StoreIndex<T>, key: string): readonly string[] | undefined {
  const files = index.files;
  if (files === undefined) return undefined;
  const values = files.values.get(key);
  if (values !== undefined || index.fn !== namespaceOf) return values;
  return namespaceOfKey(key);
}

/** The namespace a store key names: the part before its first `/`, '' without one (one shared list per namespace). */
function namespaceOfKey(key: string): readonly string[] {
  const slash = key.indexOf('/');
  return namespaceList(slash < 0 ? '' : key.slice(0, slash));
}

/** `key` as one flat string (a `namespace/name` rope is copied once into a sequential string). */
function flatKey(key: string): string {
  const slash = key.indexOf('/');
  return slash < 0 ? key : [key.slice(0, slash), key.slice(slash + 1)].join('/');
}

/** One index of a {@link Store}. */
interface StoreIndex<T extends KubeObject> {
  readonly name: string;
  readonly fn: IndexFunc<T>;
  /** The function reads only metadata: it is given the head (no parse at ingest). */
  readonly headOnly: boolean;
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
