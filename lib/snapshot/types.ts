// The public types of fleet snapshots: queries, snapshots and their deltas, status, and options.
import type { ClusterRef, Identity } from '../cluster/index.ts';
import type { KubeObject } from '../transport/index.ts';
import type { BackoffOptions, Clock, GroupVersionKind, Logger } from '../util/index.ts';
import type { SnapshotSource } from './source.ts';

/**
 * One named query of a fleet snapshot: a kind in a cluster (the cluster references the registry
 * takes), optionally one namespace, selectors and a predicate. Declare it with
 * {@link snapshotQuery} to type its objects.
 */
export interface SnapshotQuery<T extends KubeObject = KubeObject> {
  readonly cluster: ClusterRef;
  readonly gvk: GroupVersionKind;
  /** Only this namespace. Default: all namespaces. */
  readonly namespace?: string | undefined;
  /**
   * The namespace admitted through the cluster provider (a kubeconfig Secret is read there).
   * Default: `namespace`, else `default`.
   */
  readonly ownerNamespace?: string | undefined;
  /** Who reads and writes. Default: the process's own identity. */
  readonly identity?: Identity | undefined;
  /**
   * Label selector in the API's string form, applied to the shared cache's objects (the cache
   * itself watches the whole kind, so other users share it). Default: everything.
   */
  readonly labelSelector?: string | undefined;
  /** Field selector in the API's string form (dotted JSON paths), applied the same way. Default: everything. */
  readonly fieldSelector?: string | undefined;
  /**
   * Which objects the snapshot holds. Called once per new state of an object (never again for an
   * unchanged one, resyncs included); must not change its argument. Default: every object.
   */
  predicate?(obj: T): boolean;
}

/** The queries of an accumulator, by name. */
export type QuerySet = Readonly<Record<string, SnapshotQuery>>;

/** The object type of a query. */
export type ObjectOf<Q> = Q extends SnapshotQuery<infer T> ? T : KubeObject;

/** Types a query by the shape of its objects: `snapshotQuery<Deployment>({ ... })`. */
export function snapshotQuery<T extends KubeObject>(query: SnapshotQuery<T>): SnapshotQuery<T> {
  return query;
}

/** One change between two snapshots delivered to the same consumer. */
export interface SnapshotDelta<K extends string = string, T extends KubeObject = KubeObject> {
  readonly query: K;
  readonly type: 'add' | 'update' | 'delete';
  /** The new state for add and update; for delete the last state known. */
  readonly object: T;
  /**
   * For delete: true when the deletion was not seen on the watch but inferred by a relist (or a
   * recreation under another UID), so `object` is the last cached state, not the final one.
   */
  readonly finalStateUnknown: boolean;
}

/** Every delta type of a query set. */
export type DeltaOf<Q extends QuerySet> = { [K in keyof Q & string]: SnapshotDelta<K, ObjectOf<Q[K]>> }[keyof Q & string];

/**
 * How fresh one query's objects are (a query reads one kind in one cluster, so this is the
 * cluster's freshness as that query sees it).
 * - `live`: its cache is listed and its watch is up: the objects are the cluster's current state.
 * - `stale`: its cache is not synced, or its LIST/WATCH is failing (cluster down, credentials
 *   refused): the objects are as last seen, at `syncedAt`.
 * - `gone`: its cache was dropped (the cluster left the fleet: its kubeconfig Secret was deleted,
 *   or the cache was stopped and not replaced). Its objects were deleted from the snapshot with
 *   `finalStateUnknown`; the query is opened again with backoff, and once its cluster is back and
 *   listed its objects are added again and it is `live`.
 */
export interface Freshness {
  readonly state: 'live' | 'stale' | 'gone';
  /**
   * The last time (clock milliseconds) the query's cache was known to be in sync with its cluster:
   * the snapshot's `takenAt` while `live`; the last check that saw it live when `stale` or `gone`;
   * undefined if it never was. Checks run every `checkIntervalMs`.
   */
  readonly syncedAt: number | undefined;
}

/** Options of {@link FleetAccumulator.snapshots}: one consumer's. */
export interface SnapshotsOptions {
  /** Ends the iterator, without error. */
  readonly signal?: AbortSignal | undefined;
  /**
   * Deliver a snapshot only when every query is `live`, `gone`, or `stale` with `syncedAt` at most
   * this many milliseconds before; otherwise hold it back until the stale clusters are live again
   * (a gone cluster does not hold snapshots back: it is no longer in the fleet). Default: deliver
   * whatever the freshness (each snapshot says it in `freshness`).
   */
  readonly freshWithinMs?: number | undefined;
}

/** A consistent view of every query, and what changed since the consumer's previous one. */
export interface FleetSnapshot<Q extends QuerySet> {
  /** Grows with every change applied; equal versions hold equal objects. */
  readonly version: number;
  /** When the snapshot was built (clock milliseconds): compare with `freshness[...].syncedAt`. */
  readonly takenAt: number;
  /** Per query, how fresh its objects are. */
  readonly freshness: { readonly [K in keyof Q]: Freshness };
  /** Per query, the objects that match its selectors and predicate. Frozen and shared. */
  readonly objects: { readonly [K in keyof Q]: readonly ObjectOf<Q[K]>[] };
  /**
   * From the previous snapshot this consumer received to this one, one delta per object at most
   * (an object added and deleted in between is left out). The first snapshot: an add per object.
   */
  readonly deltas: readonly DeltaOf<Q>[];
}

/** Where one query stands. */
export interface QueryStatus {
  readonly name: string;
  /**
   * `opening`: its cache could not be had yet (or again, after its cluster left the fleet);
   * `listing`: its LIST is not complete; `synced`.
   */
  readonly phase: 'opening' | 'listing' | 'synced';
  /** Why it is not synced (or the cache's last failure since): typed, with cluster and GVK. */
  readonly lastError: Error | undefined;
  /** Objects the snapshot holds for it now. */
  readonly objects: number;
  /** The cache's last resourceVersion ('' when unknown). */
  readonly resourceVersion: string;
  /** Own writes not yet seen by the cache. */
  readonly pendingWrites: number;
  /** How fresh its objects are (as the last check saw it; `stale` before its first LIST). */
  readonly freshness: Freshness;
}

/** What {@link FleetAccumulator.status} reports. */
export interface AccumulatorStatus {
  /** True once every query completed its initial list; stays true. */
  readonly bootstrapped: boolean;
  /** The names of the queries the first snapshot waits for (empty once bootstrapped). */
  readonly waitingFor: readonly string[];
  readonly version: number;
  readonly queries: readonly QueryStatus[];
}

/** Options of {@link FleetAccumulator}. */
export interface AccumulatorOptions<Q extends QuerySet> {
  /** Where caches and connections come from: `registrySource(registry)`, or a fake. Required. */
  readonly source: SnapshotSource;
  /** The named queries. At least one. Required. */
  readonly queries: Q;
  /**
   * A consumer receives at most one snapshot per this many milliseconds (the first one excepted);
   * changes in between are coalesced. 0: as soon as anything changed. Default 100.
   */
  readonly minIntervalMs?: number;
  /**
   * How often each query's cache is checked: whether its watch is up (its freshness) and whether it
   * still exists (a cluster that left the fleet). Default 1000.
   */
  readonly checkIntervalMs?: number;
  /**
   * Backoff between attempts to open a query's cache, also after its cluster left the fleet.
   * Default 1 s doubling to 30 s, jitter 0.5.
   */
  readonly openBackoff?: BackoffOptions;
  /** Default: discards everything. */
  readonly logger?: Logger;
  /** Default: the wall clock. */
  readonly clock?: Clock;
}

/** Options of the accumulator's writes. */
export interface WriteOptions {
  readonly signal?: AbortSignal | undefined;
  /** `fieldManager` query parameter. Default: unset (the server's default). */
  readonly fieldManager?: string | undefined;
}

/** Options of {@link SnapshotClient.patch}. */
export interface PatchOptions extends WriteOptions {
  /** Default `merge` (JSON merge patch). `apply` needs `fieldManager`. */
  readonly type?: 'merge' | 'json' | 'strategic' | 'apply' | undefined;
  /** Patch the status subresource. Default false. */
  readonly status?: boolean | undefined;
}
