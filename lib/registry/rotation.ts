// The rotation swap: when the keeper rotates or drops a cluster, every cache on the old generation
// is rebuilt on the new one outside the lock, then swapped in (or removed) in one step.
import type { ClusterChange, Clusters } from '../cluster/index.ts';
import { toError, type Logger } from '../util/index.ts';
import type { CacheEntry } from './cache-entry.ts';
import type { CacheTable } from './cache-table.ts';
import { describeCacheKey } from './keys.ts';
import type { ScopePolicy } from './scope.ts';
import type { CacheWiring } from './wiring.ts';

/** What {@link followClusterChange} works with. */
export interface RotationContext {
  readonly table: CacheTable;
  readonly clusters: Clusters;
  readonly wiring: CacheWiring;
  readonly scopes: ScopePolicy;
  readonly logger: Logger;
}

/**
 * The keeper rotated or dropped a cluster: every cache on the old generation is rebuilt on the
 * new one (outside the lock) and swapped in one step under the lock, or removed. Owners are
 * requeued. Leases on the old generation are released last, so its connection closes only
 * after every cache on it stopped. A cache that cannot be rebuilt is dropped: its owners are
 * requeued and rebuild it on their next call.
 */
export async function followClusterChange(context: RotationContext, change: ClusterChange): Promise<void> {
  const { table, clusters, wiring, scopes, logger } = context;
  scopes.forget(change.key);
  const stale = [...table.entries()].filter((entry) => entry.lease.key === change.key && !entry.lease.current);
  const rebuilt = new Map<CacheEntry, CacheEntry>();
  if (change.type === 'rotated') {
    for (const old of stale) {
      const lease = clusters.retain(change.key);
      if (lease === undefined) break;
      try {
        const info = await lease.connection.resolve(old.gvk, table.signal);
        rebuilt.set(old, wiring.create(old.key, lease, old.namespace, old.selection, old.gvk, old.auto, lease.connection.resourceClient(info)));
      } catch (err) {
        lease.release();
        logger.warn('could not rebuild a cache with the new credentials', { cluster: change.key, gvk: describeCacheKey(change.key, old.gvk, old.namespace, old.selection), error: toError(err).message });
      }
    }
  }
  await table.swap(stale, rebuilt);
}
