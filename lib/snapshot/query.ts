// One query's state: its spec, matcher and cache id, and per object key the cache's state, the own
// write not yet seen (overlay) and what the snapshot holds (view).
import { clusterKey, identityKey } from '../cluster/index.ts';
import { fieldMatcher, labelMatcher, type ObjectMatcher } from '../registry/index.ts';
import type { KubeObject } from '../transport/index.ts';
import type { SourceQuery, SourceReader } from './source.ts';
import type { SnapshotQuery } from './types.ts';

/** An own write the cache has not shown yet. `object` undefined: the write deleted it. */
export interface Overlay {
  readonly object: KubeObject | undefined;
  readonly rv: string;
  readonly uid: string | undefined;
  /** The cache's resourceVersion for the key when the write returned (the opaque rule). */
  readonly cacheRvAtWrite: string | undefined;
}

/** One object key of one query. Removed once it holds nothing. */
export interface Entry {
  /** The cache's state; undefined when the cache does not hold it. */
  cache: KubeObject | undefined;
  overlay: Overlay | undefined;
  /** The last state selectors and predicate were evaluated on (they never run twice on one). */
  evaluated: KubeObject | undefined;
  /** What the snapshot holds: `evaluated` when it passed, else undefined. */
  view: KubeObject | undefined;
}

/**
 * One query of an accumulator, changed only by its accumulator (on one thread, between `await`s).
 *
 * Invariants: `entries` holds a key while its entry holds a cache state, an overlay or a view (an
 * entry left with none is removed); `members` counts the entries whose `view` is set and
 * `pendingWrites` those whose `overlay` is; `unseenDeletes` holds every key whose overlay is a delete
 * of an object the cache has not shown (keys that no longer are leave it at the next settling).
 */
export class QueryState {
  readonly name: string;
  readonly spec: SnapshotQuery;
  readonly source: SourceQuery;
  readonly match: ObjectMatcher;
  /** Queries with the same cache id read the same cache: a write lands in all of them. */
  readonly cacheId: string;
  readonly entries = new Map<string, Entry>();
  /**
   * `phase`, `openError`, `reader`, `catchingUp` and `left` are written by following its cache
   * (`follow.ts`); `freshness`, `syncedAt` and `checking` by following it and by its checks (`check.ts`).
   */
  phase: 'opening' | 'listing' | 'synced' = 'opening';
  openError: Error | undefined;
  reader: SourceReader | undefined;
  /** `stale` until first listed; `gone` from its cache being dropped until listed again. */
  freshness: 'live' | 'stale' | 'gone' = 'stale';
  /** The last time it was known in sync with its cluster (see `Freshness.syncedAt`). */
  syncedAt: number | undefined;
  /** A check is waiting on the reader of an unsynced cache, to learn whether it was dropped. */
  checking = false;
  /**
   * Set while its cache is followed after listing: a check calls it with the reason the cache is
   * gone; the accumulator's close with undefined. Either ends the wait once and clears it.
   */
  left: ((reason: Error | undefined) => void) | undefined;
  /** The accumulator version of this query's last view change. */
  version = 0;
  /** A catch-up with a replacement cache is scheduled. */
  catchingUp = false;
  members = 0;
  pendingWrites = 0;
  /**
   * Keys of own deletes of objects the cache has never shown (their own create still pending). A
   * relist may skip both events; once the cache's position passes the delete, the tombstone goes.
   */
  readonly unseenDeletes = new Set<string>();
  #array: { version: number; objects: readonly KubeObject[] } | undefined;

  constructor(name: string, spec: SnapshotQuery) {
    this.name = name;
    this.spec = spec;
    if (spec.namespace === '') throw new TypeError(`snapshot query ${name}: namespace must be unset or non-empty`);
    this.source = {
      cluster: spec.cluster,
      gvk: spec.gvk,
      namespace: spec.namespace,
      ownerNamespace: spec.ownerNamespace ?? spec.namespace ?? 'default',
      identity: spec.identity,
    };
    const labels = labelMatcher(spec.labelSelector, `snapshot query option ${name}.labelSelector`);
    const fields = fieldMatcher(spec.fieldSelector, `snapshot query option ${name}.fieldSelector`);
    const namespace = spec.namespace;
    this.match = (obj) => (namespace === undefined || obj.metadata?.namespace === namespace) && labels(obj) && fields(obj);
    const { group, version, kind } = spec.gvk;
    this.cacheId = JSON.stringify([clusterKey(spec.cluster, this.source.ownerNamespace), identityKey(spec.identity), group, version, kind]);
  }

  /** Whether a write to an object in `namespace` lands in this query. */
  covers(namespace: string | undefined): boolean {
    return this.spec.namespace === undefined || this.spec.namespace === (namespace ?? '');
  }

  /** What the snapshot holds for this query, frozen; rebuilt only after its view changed. */
  objects(): readonly KubeObject[] {
    if (this.#array?.version !== this.version) {
      const objects: KubeObject[] = [];
      for (const entry of this.entries.values()) if (entry.view !== undefined) objects.push(entry.view);
      this.#array = { version: this.version, objects: Object.freeze(objects) };
    }
    return this.#array.objects;
  }
}

/** The object key of a query entry: `namespace/name`, or `name` for a cluster-scoped object. */
export function keyOf(obj: KubeObject): string {
  const meta = obj.metadata;
  const ns = meta?.namespace ?? '';
  return ns === '' ? meta?.name ?? '' : `${ns}/${meta?.name ?? ''}`;
}
