// Cache events → owners: every cache's informer is created here with its events wired to the
// requeue queue through the target index, so one place decides which event wakes whom.
import type { ClusterLease } from '../cluster/index.ts';
import { ResourceInformer, type InformerOptions } from '../informer/index.ts';
import type { RateLimitingQueue } from '../queue/index.ts';
import type { KubeObject, ResourceClient } from '../transport/index.ts';
import { KubeApiError, type Clock, type GroupVersionKind, type Logger } from '../util/index.ts';
import { attachHold, type CacheEntry, type Hold } from './cache-entry.ts';
import { describeCacheKey, objectKeyOf, type CacheKey, type OwnerKey } from './keys.ts';
import type { Selection } from './selectors.ts';
import type { TargetIndex } from './target-index.ts';

/**
 * The informer settings the registry applies to every cache (`objects: 'lazy'` keeps every cache's
 * objects as text; `'compressed'` deflates them once cold, after `compressAfterMs`).
 */
export type CacheInformerOptions = Pick<InformerOptions, 'pageSize' | 'transform' | 'objects' | 'compressAfterMs' | 'decodedCacheSize' | 'resyncIntervalMs' | 'watchInactivityTimeoutMs' | 'backoff' | 'slowBackoff'>;

/** Options of {@link CacheWiring}: the registry's, already validated. */
export interface CacheWiringOptions {
  readonly informer: CacheInformerOptions;
  readonly index: TargetIndex;
  readonly queue: RateLimitingQueue<OwnerKey>;
  /** Held readers of a cache key: their handlers are attached to each informer made for it. */
  readonly holds: (key: CacheKey) => Iterable<Hold>;
  /** An `auto` cluster-wide cache's LIST was refused (403) before it synced: scope it down. */
  readonly forbidden: (entry: CacheEntry) => void;
  readonly logger: Logger;
  readonly clock: Clock;
}

/**
 * Makes cache entries whose informer events requeue their owners: an object event wakes the
 * owners of the object and of the set targets it is in (or was in before an update); `synced`,
 * `resynced`, `recovered` and a changed error wake every owner of the cache. Events of an entry
 * marked `detached` reach nobody.
 */
export class CacheWiring {
  readonly #options: CacheWiringOptions;
  /** Requeues one owner: the one function every cache's object events wake owners through. */
  readonly #wake = (owner: OwnerKey): void => { this.#options.queue.add(owner); };

  constructor(options: CacheWiringOptions) {
    this.#options = options;
  }

  /** Creates (not starts) an informer for a cache and wires its events to the owners' queue. */
  create(key: CacheKey, lease: ClusterLease, namespace: string, selection: Selection, gvk: GroupVersionKind, auto: boolean, client: ResourceClient): CacheEntry {
    const { index, queue, clock } = this.#options;
    const informer = new ResourceInformer({
      ...this.#options.informer,
      client,
      ...(namespace === '' ? {} : { namespace }),
      // The selection goes to the API server (LIST and WATCH): the cache holds only what it selects,
      // and an object leaving it arrives as a DELETED event.
      ...(selection.labels === '' ? {} : { labelSelector: selection.labels }),
      ...(selection.fields === '' ? {} : { fieldSelector: selection.fields }),
      logger: this.#options.logger.child({ cluster: lease.key, gvk: describeCacheKey(lease.key, gvk, namespace, selection) }),
      clock,
    });
    // The owners of the object, and of the set targets it is in now or was in before an update.
    const requeueObject = (obj: KubeObject, previous?: KubeObject): void => {
      const meta = obj.metadata;
      if (entry.detached || meta?.name === undefined) return;
      index.wake(key, objectKeyOf(key, meta.namespace, meta.name), obj, previous, this.#wake);
    };
    const requeueAll = (): void => {
      if (entry.detached) return;
      for (const owner of index.ownersOfCache(key)) queue.add(owner);
    };
    let lastErrorMessage: string | undefined;
    const entry: CacheEntry = {
      key,
      lease,
      namespace,
      gvk,
      selection,
      auto,
      informer,
      client,
      refused: undefined,
      probing: false,
      probeAsked: 0,
      createdAt: clock.now(),
      held: undefined,
      detached: false,
      unusedSince: undefined,
      nextGcCheckAt: undefined,
      errors: 0,
    };
    // Subscribed for the informer's life: `detach` silences them (through `entry.detached`) when
    // the informer is about to stop and be dropped, instead of the registry keeping an unsubscribe
    // function per listener (about 0.8 KiB per cache, issue 12).
    // Heads (metadata) are all a wake-up reads (set targets match labels, name and namespace):
    // with lazy objects, an event then costs no parse.
    informer.addHeadHandler({
      add: (obj) => { requeueObject(obj); },
      update: (old, current) => { requeueObject(current, old); },
      delete: (obj) => { requeueObject(obj); },
    });
    // Owners whose target does not exist get no object event: wake them when the answer is known.
    informer.on('synced', () => { lastErrorMessage = undefined; requeueAll(); });
    // A periodic resync (`informer.resyncIntervalMs`) requeues every owner of the cache, those
    // whose target does not exist included: the drift correction resync is for.
    informer.on('resynced', requeueAll);
    informer.on('error', (err) => {
      if (entry.detached) return;
      entry.errors += 1;
      if (entry.auto && namespace === '' && !informer.synced && err instanceof KubeApiError && err.statusCode === 403) {
        // Every refusal (the informer retries them slowly) probes every target namespace again.
        entry.refused = new Set();
        this.#options.forbidden(entry);
      }
      // Requeue owners when the failure changes (so status can say why), not on every retry.
      if (err.message !== lastErrorMessage) requeueAll();
      lastErrorMessage = err.message;
    });
    // A watch that resumes without a relist sends no object event: owners that saw the error
    // would otherwise wait for their next resync to see it gone.
    informer.on('recovered', () => { lastErrorMessage = undefined; requeueAll(); });
    for (const hold of this.#options.holds(key)) attachHold(entry, hold);
    return entry;
  }
}
