// The registry's readers and the holds on them: one reader per cache key, handed to every caller
// of that key, and the held readers (`Registry.reader`) that keep a cache from collection.
import type { GroupVersionKind } from '../util/index.ts';
import type { Hold } from './cache-entry.ts';
import { RegistryReader, type ReaderSource } from './reader.ts';

/**
 * Readers and holds by cache key. Invariants: `#holds` never holds an empty set (a key is held iff
 * it is in `#holds`); `#readers` keeps a key's reader across rebuilds of its cache (a reader reads
 * whatever cache is published under its key) until the key is gone for good ({@link forget}).
 */
export class HeldReaders {
  readonly #readers = new Map<string, RegistryReader>();
  readonly #holds = new Map<string, Set<Hold>>();
  readonly #source: ReaderSource;

  constructor(source: ReaderSource) {
    this.#source = source;
  }

  /** The one reader of the cache key (made on first use). */
  reader(key: string, cluster: string, gvk: GroupVersionKind): RegistryReader {
    let reader = this.#readers.get(key);
    if (reader === undefined) {
      reader = new RegistryReader({ cluster, gvk, key, source: this.#source });
      this.#readers.set(key, reader);
    }
    return reader;
  }

  /** The key's cache is gone for good (collected, or dropped and not rebuilt): its reader need not be kept. */
  forget(key: string): void {
    this.#readers.delete(key);
  }

  /** Registers a hold on the key. */
  hold(key: string, hold: Hold): void {
    let holds = this.#holds.get(key);
    if (holds === undefined) {
      holds = new Set();
      this.#holds.set(key, holds);
    }
    holds.add(hold);
  }

  /** Removes a hold from the key. */
  release(key: string, hold: Hold): void {
    const holds = this.#holds.get(key);
    holds?.delete(hold);
    if (holds?.size === 0) this.#holds.delete(key);
  }

  /** The holds on the key, whose handlers each new cache of the key attaches. */
  holdsOf(key: string): Iterable<Hold> {
    return this.#holds.get(key) ?? [];
  }

  /** Whether any held reader keeps the key's cache from collection. */
  isHeld(key: string): boolean {
    return this.#holds.has(key);
  }
}
