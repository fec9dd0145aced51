/**
 * The multi-cluster registry: `watchTargetAndGetReader` lazily builds one informer cache per
 * ⟨cluster, group/version/kind⟩, records which owners use which targets, funnels every cache event
 * into one requeue queue of owner keys, and garbage-collects caches no owner uses.
 */
export { Registry } from './registry.ts';
export type { CacheInfo, RegistryOptions } from './registry.ts';
export type { CacheReader } from './reader.ts';
export { ownerKey, parseOwnerKey } from './keys.ts';
export type { OwnerKey, OwnerRef, TargetRef } from './keys.ts';
