/**
 * Fleet snapshots: the kates Accumulator across clusters. Named queries over the registry's shared
 * caches are delivered as consistent, coalesced snapshots with deltas, through an async iterator,
 * and writes made through the accumulator's client are in the next snapshot.
 */
export { FleetAccumulator, SnapshotClient, snapshotQuery } from './accumulator.ts';
export type {
  AccumulatorOptions,
  AccumulatorStatus,
  DeltaOf,
  FleetSnapshot,
  ObjectOf,
  PatchOptions,
  QuerySet,
  QueryStatus,
  SnapshotDelta,
  SnapshotQuery,
  WriteOptions,
} from './accumulator.ts';
export { registrySource } from './registry-source.ts';
export type { SnapshotSource, SourceQuery, SourceReader, WriteConnection } from './source.ts';
