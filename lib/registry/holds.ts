// The registry's readers and the holds on them: one reader per cache key, handed to every caller
// of that key, and the held readers (`Registry.reader`) that keep a cache from collection.
import type { ConnectionKey } from '../cluster/index.ts';
import type { InformerHandler } from '../informer/index.ts';
import type { GroupVersionKind } from '../util/index.ts';
import { attachHold, detachHold, type CacheEntry, type Hold } from './cache-entry.ts';
import type { CacheKey } from './keys.ts';
import { RegistryReader, type ReaderSource } from './reader.ts';
import { describeSelection, EVERYTHING, type Selection } from './selectors.ts';

/** Options of {@link HeldReaders}: the registry's view of its cache table. */
export interface HeldReadersOptions {
  /** The cache published under a key now, if any. */
  readonly entry: (key: CacheKey) => CacheEntry | undefined;
  /** Whether the registry is closed (readers then refuse). */
  readonly closed: () => boolean;
  /** Keys whose last user may have gone: the collector looks at them after the grace period. */
  readonly released: (keys: readonly CacheKey[]) => void;
}

/**
 * Readers and holds by cache key. Invariants: `#holds` never holds an empty set (a key is held iff
 * it is in `#holds`); `#readers` keeps a key's reader across rebuilds of its cache (a reader reads
 * whatever cache is published under its key) until the key is gone for good ({@link forget}).
 */
export class HeldReaders {
  readonly #readers = new Map<CacheKey, RegistryReader>();
  readonly #holds = new Map<CacheKey, Set<Hold>>();
  readonly #options: HeldReadersOptions;
  readonly #source: ReaderSource;

  constructor(options: HeldReadersOptions) {
    this.#options = options;
    this.#source = { informer: (key) => options.entry(key)?.informer, closed: options.closed };
  }

  /** The one reader of the cache key (made on first use). */
  reader(key: CacheKey, cluster: ConnectionKey, gvk: GroupVersionKind, selection: Selection = EVERYTHING): RegistryReader {
    let reader = this.#readers.get(key);
    if (reader === undefined) {
      reader = new RegistryReader({ cluster, gvk, key, selector: describeSelection(selection), source: this.#source });
      this.#readers.set(key, reader);
    }
    return reader;
  }

  /** The key's cache is gone for good (collected, or dropped and not rebuilt): its reader need not be kept. */
  forget(key: CacheKey): void {
    this.#readers.delete(key);
  }

  /**
   * Holds the key's cache against collection, with `handler` (if any) attached to every cache
   * created for the key from now on. `attach()` attaches it to the cache published now, if that
   * one was created before the hold; `release()` (idempotent) detaches it and lets the collector
   * look at the key.
   */
  hold(key: CacheKey, handler: InformerHandler | undefined): { readonly attach: () => void; readonly release: () => void } {
    const hold: Hold = { handler };
    let holds = this.#holds.get(key);
    if (holds === undefined) {
      holds = new Set();
      this.#holds.set(key, holds);
    }
    holds.add(hold);
    let released = false;
    return {
      attach: () => {
        const entry = this.#options.entry(key);
        if (entry !== undefined && entry.held?.has(hold) !== true) attachHold(entry, hold);
      },
      release: () => {
        if (released) return;
        released = true;
        const set = this.#holds.get(key);
        set?.delete(hold);
        if (set?.size === 0) this.#holds.delete(key);
        const entry = this.#options.entry(key);
        if (entry !== undefined) detachHold(entry, hold);
        this.#options.released([key]);
      },
    };
  }

  /** The holds on the key, whose handlers each new cache of the key attaches. */
  holdsOf(key: CacheKey): Iterable<Hold> {
    return this.#holds.get(key) ?? [];
  }

  /** Whether any held reader keeps the key's cache from collection. */
  isHeld(key: CacheKey): boolean {
    return this.#holds.has(key);
  }
}
