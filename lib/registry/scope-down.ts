// The 403 scope-down: a cluster-wide `auto` cache whose LIST is refused probes its targets'
// namespaces, and is dropped when the policy scopes its kind down (its owners ask again and get a
// cache per namespace).
import { toError, type Logger } from '../util/index.ts';
import type { CacheEntry } from './cache-entry.ts';
import type { CacheTable } from './cache-table.ts';
import { describeCacheKey, type CacheKey, type TargetRef } from './keys.ts';
import type { ScopePolicy } from './scope.ts';
import type { TargetIndex } from './target-index.ts';

/** Options of {@link ScopeDown}. */
export interface ScopeDownOptions {
  readonly table: CacheTable;
  readonly index: TargetIndex;
  readonly scopes: ScopePolicy;
  readonly logger: Logger;
}

/**
 * Runs the probes of refused caches. Invariant: at most one probe loop runs per cache
 * (`entry.probing`); a request that arrives while it runs (`entry.probeAsked` moved on) makes it go
 * round again, so targets naming new namespaces meanwhile are probed too.
 */
export class ScopeDown {
  readonly #options: ScopeDownOptions;

  constructor(options: ScopeDownOptions) {
    this.#options = options;
  }

  /**
   * The cluster-wide LIST of an `auto` cache was refused (its `refused` set is fresh): probes its
   * targets' namespaces not refused yet, and drops the cache if the policy scopes its kind down
   * (owners are requeued to ask again).
   */
  refused(entry: CacheEntry): void {
    entry.probeAsked += 1;
    if (entry.probing) return;
    entry.probing = true;
    void this.#probe(entry).catch((cause: unknown) => {
      this.#options.logger.warn('could not scope a forbidden cache down', { cluster: entry.lease.key, gvk: describeCacheKey(entry.lease.key, entry.gvk), error: toError(cause).message });
    }).finally(() => { entry.probing = false; });
  }

  /**
   * A target names a namespace that the refused cluster-wide cache under `key` has not probed:
   * probe it now, not at the informer's next slow retry (up to minutes away), so an owner whose
   * namespace may be listed is not held back by owners of the same cache whose namespaces may not.
   */
  probeIfRefused(key: CacheKey, target: TargetRef): void {
    const entry = this.#options.table.get(key);
    const namespace = target.namespace ?? '';
    if (entry?.refused === undefined || namespace === '' || entry.refused.has(namespace)) return;
    this.refused(entry);
  }

  async #probe(entry: CacheEntry): Promise<void> {
    const { table, index, scopes, logger } = this.#options;
    for (let seen = -1; seen !== entry.probeAsked;) {
      seen = entry.probeAsked;
      const refused = entry.refused;
      if (refused === undefined || table.get(entry.key) !== entry) return;
      const namespaces = [...index.namespacesOfCache(entry.key)].filter((ns) => ns !== '' && !refused.has(ns));
      if (namespaces.length > 0 && await scopes.scopeDown(entry.lease.key, entry.gvk, entry.client, namespaces, refused, entry.lease.signal)) {
        logger.info('listing at the cluster scope is forbidden: scoping the cache down to its targets\' namespaces', { cluster: entry.lease.key, gvk: describeCacheKey(entry.lease.key, entry.gvk) });
        await table.remove(entry, () => new Set(index.ownersOfCache(entry.key)));
        return;
      }
    }
  }
}
