/**
 * The multi-cluster registry: `watchTargetAndGetReader` lazily builds one informer cache per
 * ⟨cluster, identity, namespace scope, group/version/kind, selectors⟩ on connections from the keeper
 * it is lent (a set target's selectors go to the LIST and WATCH), records which owners use which targets (one object, or the set of a namespace or
 * selector), funnels every cache event into one requeue queue of owner keys, and garbage-collects
 * caches no owner uses. `registry.ts` is the face; the cache table (`cache-table.ts`), event →
 * owner wiring (`wiring.ts`), the rotation swap (`rotation.ts`), the 403 scope-down
 * (`scope-down.ts`) and the held readers (`holds.ts`) each do one job behind it.
 */
export { Registry } from './registry.ts';
export type { CacheInfo, ReaderOptions, RegistryOptions } from './registry.ts';
export type { CacheInformerOptions } from './wiring.ts';
export { CacheGoneError } from './reader.ts';
export { MemoryBudgetExceededError } from './memory-budget.ts';
export type { MemoryBudgetOptions, MemoryBudgetStatus } from './memory-budget.ts';
export type { CacheReader, HeldReader, NamespacedName } from './reader.ts';
export { ownerKey, parseOwnerKey } from './keys.ts';
export { watchOwners } from './owners.ts';
export type { WatchOwnersOptions } from './owners.ts';
export type { CacheScope, ObjectTargetRef, OwnerKey, OwnerRef, SetTargetRef, TargetRef } from './keys.ts';
export { fieldMatcher, InvalidSelectorError, labelMatcher } from './selectors.ts';
export type { ObjectMatcher } from './selectors.ts';
export { StatusConflictError, writeStatus } from './write-status.ts';
export type { StatusConnection, WriteStatusOptions, WriteStatusResult } from './write-status.ts';
