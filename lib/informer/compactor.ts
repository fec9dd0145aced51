/**
 * Packs the cold objects of every compressed cache in the process (`objects: 'compressed'`, issue
 * 27), in the background. One schedule for all caches, not a timer each: a thousand clusters of
 * four kinds would otherwise wake the process four thousand times a period. Work runs in slices
 * of at most {@link SLICE_MS} with the event loop's I/O between them, so a pass over a fleet's
 * caches never stalls watch events or readers.
 *
 * Invariants: `#timer` or `#immediate` (never both) is armed iff at least one cache is registered;
 * `#round` holds registered caches only (an unregistered cache is dropped from it at once).
 */
import { slotTicks } from './store.ts';

/** What the compactor drives: a store's {@link Store.compact}. */
export interface Compactable {
  compact(olderThan: number, budgetMs: number): boolean;
}

/** Longest run of packing before the event loop gets its turn. */
const SLICE_MS = 5;
/** Shortest pause between passes. */
const MIN_PERIOD_MS = 100;

export class Compactor {
  /** Registered caches and after how many slot ticks their objects count as cold. */
  readonly #caches = new Map<Compactable, number>();
  /** Caches whose walk of this pass is not done yet. */
  #round: Compactable[] = [];
  #timer: NodeJS.Timeout | undefined;
  #immediate: NodeJS.Immediate | undefined;

  /** True while a pass is scheduled or under way (a timer or an immediate armed). */
  get armed(): boolean {
    return this.#timer !== undefined || this.#immediate !== undefined;
  }

  /** Packs `cache`'s objects once unchanged for `afterMs`, until the returned function is called. */
  register(cache: Compactable, afterMs: number): () => void {
    this.#caches.set(cache, Math.max(1, Math.ceil(afterMs / 100)));
    if (this.#timer === undefined && this.#immediate === undefined) this.#arm();
    return () => {
      if (!this.#caches.delete(cache)) return;
      this.#round = this.#round.filter((c) => c !== cache);
      if (this.#caches.size === 0) this.#disarm();
    };
  }

  /** Waits one period (half the shortest cold age: an object is packed within 1.5× its age). */
  #arm(): void {
    let shortest = Infinity;
    for (const ticks of this.#caches.values()) shortest = Math.min(shortest, ticks);
    const period = Math.max(MIN_PERIOD_MS, (shortest * 100) / 2);
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#round = [...this.#caches.keys()];
      this.#slice();
    }, period);
    // Background work: it never keeps a process alive.
    this.#timer.unref();
  }

  #disarm(): void {
    clearTimeout(this.#timer);
    if (this.#immediate !== undefined) clearImmediate(this.#immediate);
    this.#timer = undefined;
    this.#immediate = undefined;
    this.#round = [];
  }

  /** One slice of the pass: caches in turn until the slice's time is spent. */
  #slice(): void {
    this.#immediate = undefined;
    const until = performance.now() + SLICE_MS;
    const now = slotTicks();
    while (this.#round.length > 0) {
      const left = until - performance.now();
      if (left <= 0) {
        this.#immediate = setImmediate(() => { this.#slice(); });
        this.#immediate.unref();
        return;
      }
      const cache = this.#round[0];
      if (cache === undefined) break;
      const ticks = this.#caches.get(cache) ?? 0;
      let done: boolean;
      try {
        done = cache.compact(now - ticks, left);
      } catch {
        // Packing is an optimisation: a cache it fails on (zlib out of memory) stays as it is
        // until the next pass.
        done = true;
      }
      if (done) this.#round.shift();
    }
    if (this.#caches.size > 0) this.#arm();
  }
}

/** The process's one compactor. */
export const compactor = new Compactor();
