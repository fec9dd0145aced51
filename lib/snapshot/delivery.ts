// Delivery of snapshots to consumers: coalescing (at most one per interval, only once something
// changed for that consumer), freshness holds, the keys each consumer has not seen yet, and the
// snapshot with its deltas and freshness built on demand.
import type { KubeObject } from '../transport/index.ts';
import { onAbort, type Clock, type Timer } from '../util/index.ts';
import type { QueryState } from './query.ts';
import type { FleetSnapshot, Freshness, QuerySet, SnapshotDelta } from './types.ts';

/** A key touched since a consumer's last snapshot: what that snapshot held, and how it went. */
interface Touch {
  readonly before: KubeObject | undefined;
  gone: KubeObject | undefined;
  finalStateUnknown: boolean;
}

/** One iterator of `snapshots()`. */
export interface Consumer {
  /** The version of its last snapshot; -1 before the first. */
  version: number;
  lastAt: number;
  /** Keys touched since its last snapshot, by query. Unused before the first snapshot. */
  readonly touched: Map<QueryState, Map<string, Touch>>;
  /** Each query's freshness state in its last snapshot, by query. Empty before the first. */
  readonly freshness: Map<QueryState, Freshness['state']>;
  /** Only snapshots whose stale queries were in sync at most this long before (`SnapshotsOptions`). */
  readonly freshWithinMs: number | undefined;
  /** Set while it waits for a change (not while it waits out the interval). */
  wake: (() => void) | undefined;
  /** Set while it waits at all: ends the wait (close). */
  stop: (() => void) | undefined;
}

/** What delivery reads of its accumulator. */
export interface DeliveryFeed {
  readonly queries: readonly QueryState[];
  /** The accumulator's version: grows by one per change of any query's view. */
  version(): number;
  /** True once every query completed its initial list: no snapshot before. */
  bootstrapped(): boolean;
  closed(): boolean;
}

/**
 * The consumers of one accumulator and what each is owed. A snapshot is built when its consumer
 * asks for it, so it holds the newest state: intermediate states are dropped, never queued.
 *
 * Invariants: every consumer's `touched` holds only keys changed since its last snapshot, with the
 * state that snapshot held (nothing before its first); a consumer is owed a snapshot only when one
 * of those keys' view differs from that state or a query's freshness state differs from the one it
 * last received (changes undone meanwhile are absorbed: no empty wake-up); `wake` is set only while
 * the consumer waits for a change, `stop` while it waits at all, and both are cleared when that wait ends.
 */
export class Delivery<Q extends QuerySet> {
  readonly #consumers = new Set<Consumer>();
  readonly #feed: DeliveryFeed;
  readonly #clock: Clock;
  readonly #minIntervalMs: number;

  constructor(feed: DeliveryFeed, clock: Clock, minIntervalMs: number) {
    this.#feed = feed;
    this.#clock = clock;
    this.#minIntervalMs = minIntervalMs;
  }

  /** A new consumer, owed its first snapshot. */
  join(freshWithinMs: number | undefined): Consumer {
    const consumer: Consumer = { version: -1, lastAt: Number.NEGATIVE_INFINITY, touched: new Map(), freshness: new Map(), freshWithinMs, wake: undefined, stop: undefined };
    this.#consumers.add(consumer);
    return consumer;
  }

  leave(consumer: Consumer): void {
    this.#consumers.delete(consumer);
  }

  /**
   * Records that `key` of `q` changed its view (it was `before`; `gone`, when set, is the state that
   * went) for every consumer past its first snapshot, and wakes the waiting ones.
   */
  changed(q: QueryState, key: string, before: KubeObject | undefined, gone: KubeObject | undefined, finalStateUnknown: boolean): void {
    for (const consumer of this.#consumers) {
      if (consumer.version < 0) continue;
      let touched = consumer.touched.get(q);
      if (touched === undefined) {
        touched = new Map();
        consumer.touched.set(q, touched);
      }
      let touch = touched.get(key);
      if (touch === undefined) {
        touch = { before, gone: undefined, finalStateUnknown: false };
        touched.set(key, touch);
      }
      if (gone !== undefined) {
        touch.gone = gone;
        touch.finalStateUnknown = finalStateUnknown;
      }
    }
    this.notify();
  }

  /** Wakes every consumer waiting for a change (also: a query's freshness state changed). */
  notify(): void {
    for (const consumer of this.#consumers) {
      const wake = consumer.wake;
      if (wake === undefined) continue;
      consumer.wake = undefined;
      wake();
    }
  }

  /** Ends every wait (close). */
  stopAll(): void {
    for (const consumer of this.#consumers) consumer.stop?.();
  }

  /** Waits until a snapshot is due for `consumer`; false when it should end. */
  async ready(consumer: Consumer, signal: AbortSignal | undefined): Promise<boolean> {
    for (;;) {
      if (this.#feed.closed() || signal?.aborted === true) return false;
      if (this.#feed.bootstrapped() && (consumer.version < 0 || this.#owed(consumer))) {
        const wait = consumer.lastAt + this.#minIntervalMs - this.#clock.now();
        if (wait > 0) {
          // Waiting out the interval: changes meanwhile do not wake the consumer (they coalesce).
          await this.#wait(consumer, wait, signal);
          continue;
        }
        if (this.#fresh(consumer)) return true;
        // A stale query past the consumer's bound: held back until a freshness state changes.
      }
      await this.#wait(consumer, undefined, signal);
    }
  }

  /**
   * Whether `consumer`'s next snapshot would differ from its last: a touched key whose view is not
   * the one it received, or a freshness state that changed. Changes that undid themselves (an
   * object created and deleted meanwhile) are absorbed here, so they never wake it.
   */
  #owed(consumer: Consumer): boolean {
    for (const q of this.#feed.queries) if (consumer.freshness.get(q) !== q.freshness) return true;
    if (this.#feed.version() === consumer.version) return false;
    for (const [q, touched] of consumer.touched) {
      for (const [key, touch] of touched) if (q.entries.get(key)?.view !== touch.before) return true;
    }
    consumer.touched.clear();
    consumer.version = this.#feed.version();
    return false;
  }

  /** Whether every query is fresh enough for `consumer` (see `SnapshotsOptions.freshWithinMs`). */
  #fresh(consumer: Consumer): boolean {
    const within = consumer.freshWithinMs;
    if (within === undefined) return true;
    const now = this.#clock.now();
    return this.#feed.queries.every((q) => q.freshness !== 'stale' || (q.syncedAt !== undefined && now - q.syncedAt <= within));
  }

  /** Resolves on a change (when `ms` is undefined), after `ms`, on abort, or on close. */
  #wait(consumer: Consumer, ms: number | undefined, signal: AbortSignal | undefined): Promise<void> {
    return new Promise<void>((resolve) => {
      let timer: Timer | undefined;
      let detach: () => void = () => undefined;
      const done = (): void => {
        consumer.wake = undefined;
        consumer.stop = undefined;
        timer?.cancel();
        detach();
        resolve();
      };
      consumer.stop = done;
      if (ms === undefined) consumer.wake = done;
      else timer = this.#clock.setTimer(ms, done);
      if (signal !== undefined) detach = onAbort(signal, done);
    });
  }

  /** The snapshot owed to `consumer` now, with its deltas since its last one. */
  take(consumer: Consumer): FleetSnapshot<Q> {
    const objects: Record<string, readonly KubeObject[]> = {};
    for (const q of this.#feed.queries) objects[q.name] = q.objects();
    const deltas: SnapshotDelta[] = [];
    if (consumer.version < 0) {
      for (const q of this.#feed.queries) for (const obj of q.objects()) deltas.push({ query: q.name, type: 'add', object: obj, finalStateUnknown: false });
    } else {
      for (const q of this.#feed.queries) {
        const touched = consumer.touched.get(q);
        if (touched === undefined) continue;
        for (const [key, touch] of touched) {
          const now = q.entries.get(key)?.view;
          const before = touch.before;
          if (before === undefined) {
            if (now !== undefined) deltas.push({ query: q.name, type: 'add', object: now, finalStateUnknown: false });
          } else if (now === undefined) {
            deltas.push({ query: q.name, type: 'delete', object: touch.gone ?? before, finalStateUnknown: touch.finalStateUnknown });
          } else if (now !== before) {
            if (now.metadata?.uid !== before.metadata?.uid) {
              // Another incarnation under the same name: the old one went, a new one came.
              deltas.push({ query: q.name, type: 'delete', object: touch.gone ?? before, finalStateUnknown: touch.gone === undefined || touch.finalStateUnknown });
              deltas.push({ query: q.name, type: 'add', object: now, finalStateUnknown: false });
            } else {
              deltas.push({ query: q.name, type: 'update', object: now, finalStateUnknown: false });
            }
          }
        }
      }
    }
    const now = this.#clock.now();
    const freshness: Record<string, Freshness> = {};
    for (const q of this.#feed.queries) {
      freshness[q.name] = Object.freeze({ state: q.freshness, syncedAt: q.freshness === 'live' ? now : q.syncedAt });
      consumer.freshness.set(q, q.freshness);
    }
    consumer.touched.clear();
    consumer.version = this.#feed.version();
    consumer.lastAt = now;
    return Object.freeze({
      version: this.#feed.version(),
      takenAt: now,
      freshness: Object.freeze(freshness),
      objects: Object.freeze(objects),
      deltas: Object.freeze(deltas),
    }) as unknown as FleetSnapshot<Q>;
  }
}
