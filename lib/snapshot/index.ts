/**
 * Fleet snapshots: the kates Accumulator across clusters. Named queries over the registry's shared
 * caches are delivered as consistent, coalesced snapshots with deltas, through an async iterator,
 * and writes made through the accumulator's client are in the next snapshot.
 *
 * Layout: `accumulator.ts` merges cache events and own writes into each query's view; `follow.ts`
 * opens and follows each query's cache (retries, catch-up after a replacement cache, opening it
 * again after it was dropped); `check.ts` checks each cache's freshness and whether it was
 * dropped; `query.ts` is one query's state; `coherence.ts` decides when the cache has caught up
 * with an own write; `delivery.ts` coalesces snapshots and builds each consumer's deltas; `client.ts`
 * is the write client; `types.ts` the public types; `source.ts` what the accumulator needs of the
 * world, and `registry-source.ts` that on a registry.
 */
export { FleetAccumulator } from './accumulator.ts';
export { SnapshotClient } from './client.ts';
export { snapshotQuery } from './types.ts';
export type {
  AccumulatorOptions,
  AccumulatorStatus,
  DeltaOf,
  FleetSnapshot,
  Freshness,
  ObjectOf,
  PatchOptions,
  QuerySet,
  QueryStatus,
  SnapshotDelta,
  SnapshotQuery,
  SnapshotsOptions,
  WriteOptions,
} from './types.ts';
export { registrySource } from './registry-source.ts';
export type { SnapshotSource, SourceQuery, SourceReader, WriteConnection } from './source.ts';
