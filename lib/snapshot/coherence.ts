// The rules of read/write coherence: when a cache state is the one an own write produced, or newer,
// so it may replace the written state (resourceVersions ordered only when both are integers).
import type { KubeObject } from '../transport/index.ts';
import type { Overlay, QueryState } from './query.ts';

const INTEGER = /^\d+$/;

/** Two copies of one state of one object: same UID and resourceVersion (set, not ''). */
export function sameState(a: KubeObject, b: KubeObject): boolean {
  const ma = a.metadata;
  const mb = b.metadata;
  if (ma === undefined || mb === undefined) return false;
  const rv = ma.resourceVersion;
  return rv !== undefined && rv !== '' && rv === mb.resourceVersion && ma.uid === mb.uid;
}

/** Orders two resourceVersions when both are integers (etcd's are); undefined otherwise. */
export function compareRv(a: string | undefined, b: string | undefined): number | undefined {
  if (a === undefined || b === undefined || !INTEGER.test(a) || !INTEGER.test(b)) return undefined;
  const x = BigInt(a);
  const y = BigInt(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

/**
 * Whether the cache has caught up with an own write, so its state may replace the written one.
 * `deleted` is the object of a cache delete (its final or last known state).
 */
export function superseded(q: QueryState, overlay: Overlay, cache: KubeObject | undefined, deleted: KubeObject | undefined, finalStateUnknown: boolean): boolean {
  if (overlay.object === undefined) {
    // A written delete: until the cache drops the object, or holds another incarnation.
    return cache === undefined || (overlay.uid !== undefined && cache.metadata?.uid !== overlay.uid);
  }
  if (cache !== undefined) {
    const rv = cache.metadata?.resourceVersion;
    if (rv === overlay.rv) return true;
    const order = compareRv(rv, overlay.rv);
    if (order !== undefined) return order > 0;
    return rv !== overlay.cacheRvAtWrite;
  }
  // The cache dropped the object: a delete after the write, or one of an older state?
  const order = finalStateUnknown
    // A relist's delete carries the last cached state: the cache's position says how fresh the relist was.
    ? compareRv(q.reader?.resourceVersion, overlay.rv)
    : compareRv(deleted?.metadata?.resourceVersion, overlay.rv);
  if (order !== undefined) return order >= 0;
  return deleted?.metadata?.resourceVersion !== overlay.cacheRvAtWrite || overlay.cacheRvAtWrite === undefined;
}
