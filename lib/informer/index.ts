/**
 * One watched cache of one resource in one cluster: a reflector (paginated LIST, WATCH with
 * bookmarks, relist on 410 Gone with synthesized deletes, retries with backoff) feeding a keyed,
 * indexed, read-only store, and the handlers that observe it.
 */
export { ResourceInformer } from './informer.ts';
export type { Informer, InformerEvents, InformerHandler, InformerOptions, InformerStats, RelistSummary } from './informer.ts';
export { labelIndex, NAMESPACE_INDEX, objectKey } from './store.ts';
export type { IndexFunc, ObjectHead, StoreReader } from './store.ts';
export { deepFreeze, identityTransform, LAST_APPLIED_ANNOTATION, stripManagedFields } from './transform.ts';
export type { Transform } from './transform.ts';
export type { ListReason } from './reflector.ts';
