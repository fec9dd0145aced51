import type { ClusterRef, Identity } from '../cluster/index.ts';
import type { InformerHandler } from '../informer/index.ts';
import type { ClusterConnection, KubeObject } from '../transport/index.ts';
import type { GroupVersionKind } from '../util/index.ts';

/** Which cache a query reads: one kind in one cluster, all namespaces or one. */
export interface SourceQuery {
  readonly cluster: ClusterRef;
  readonly gvk: GroupVersionKind;
  /** Only this namespace. Unset: all namespaces. */
  readonly namespace?: string | undefined;
  /** The namespace admitted through the cluster provider (its cross-namespace rule). */
  readonly ownerNamespace: string;
  /** Who reads and writes. Unset: the process's own identity. */
  readonly identity?: Identity | undefined;
}

/**
 * A held, read-only view of one shared cache (the subset of the registry's held reader the
 * accumulator uses). Objects are frozen and shared: never change them.
 */
export interface SourceReader<T extends KubeObject = KubeObject> {
  /** True once the cache holds a complete LIST. */
  readonly synced: boolean;
  /** The last LIST/WATCH failure, cleared by the next success. */
  readonly lastError: Error | undefined;
  /**
   * The last resourceVersion the cache has seen (its position in the cluster's history), '' when
   * unknown. Opaque except where it parses as an integer (see the accumulator's coherence rule).
   */
  readonly resourceVersion: string;
  get(namespace: string | undefined, name: string): T | undefined;
  list(): T[];
  /**
   * Resolves once synced (following a rebuilt cache); rejects with the signal's reason or when the
   * cache is gone for good (`CacheGoneError` on a registry). A dropped cache sends no event: the
   * accumulator's periodic check learns of it here, asking an unsynced reader.
   */
  waitForSync(signal?: AbortSignal): Promise<void>;
  /** Detaches the handler and lets the cache go (others may still use it). Idempotent. */
  release(): void;
}

/** The part of a cluster connection writes go through. */
export type WriteConnection = Pick<ClusterConnection, 'resolve' | 'request'>;

/**
 * What a fleet-snapshot accumulator needs from the world: a held reader of a shared cache with
 * the cache's events, and a connection for writes. {@link registrySource} adapts the registry;
 * `FakeSnapshotSource` (in `testing.ts`) fakes it for tests.
 */
export interface SnapshotSource {
  /**
   * Opens (and holds) the cache a query reads; `handler` receives its events, starting with an
   * `add` for each object the cache holds. Rejects when the cluster cannot be reached or the kind
   * is not served (the accumulator retries), or with the signal's reason.
   */
  open<T extends KubeObject>(query: SourceQuery, handler: InformerHandler<T>, signal: AbortSignal): Promise<SourceReader<T>>;
  /** The connection to the query's cluster, as the query's identity. Never close it. */
  connection(query: SourceQuery, signal?: AbortSignal): Promise<WriteConnection>;
}
