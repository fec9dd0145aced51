// The no-orphan check: how long each live key has had no acting owner, as this replica sees it.

/** A live key no live replica acts for, and since when (this replica's clock). */
export interface UnownedKey {
  readonly key: string;
  readonly forMs: number;
}

/**
 * Tracks keys without an acting owner. Each replica reads the whole group (every fence and peer),
 * so each reports the same group-wide view. A key whose fence holder died counts from when this
 * replica last saw that holder renew, not from when it noticed the death: the bound is measured
 * from the change, not from its detection.
 *
 * Invariant: `#since` has exactly the keys of the last `update` that had no acting owner;
 * `#reported` ⊆ keys of `#since`.
 */
export class UnownedTracker {
  #since = new Map<string, number>();
  #reported = new Set<string>();

  /**
   * `unowned` maps each key without an acting owner to the earliest time it may have had none
   * (undefined: now). Returns the keys that crossed `boundMs` in this update (to log once).
   */
  update(unowned: ReadonlyMap<string, number | undefined>, now: number, boundMs: number): readonly string[] {
    const next = new Map<string, number>();
    const crossed: string[] = [];
    const reported = new Set<string>();
    for (const [key, hint] of unowned) {
      const since = this.#since.get(key) ?? Math.min(hint ?? now, now);
      next.set(key, since);
      if (now - since <= boundMs) continue;
      reported.add(key);
      if (!this.#reported.has(key)) crossed.push(key);
    }
    this.#since = next;
    this.#reported = reported;
    return crossed;
  }

  /** Every unowned key, longest first. */
  unowned(now: number): readonly UnownedKey[] {
    return [...this.#since].map(([key, since]) => ({ key, forMs: now - since })).sort((a, b) => b.forMs - a.forMs);
  }
}
