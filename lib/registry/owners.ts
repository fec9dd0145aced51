// The one-call wiring of an owner kind: a held reader of the owners that feeds the registry's queue
// and forgets deleted owners (what every controller on the registry would otherwise write by hand).
import type { ClusterRef, Identity } from '../cluster/index.ts';
import type { KubeObject } from '../transport/index.ts';
import { oneOf, type GroupVersionKind } from '../util/index.ts';
import { ownerKey, type OwnerRef } from './keys.ts';
import type { HeldReader } from './reader.ts';
import type { Registry } from './registry.ts';

/** Options of {@link watchOwners}. */
export interface WatchOwnersOptions {
  /** The owner kind (a Pipeline, say). */
  readonly gvk: GroupVersionKind;
  /** The cluster the owners live in. Default `{ kind: 'local' }` (the management cluster). */
  readonly cluster?: ClusterRef | undefined;
  /** Watch owners of this namespace only. Default: all namespaces. */
  readonly namespace?: string | undefined;
  /** Who reads the owners; see `ClusterSet.connectionKey`. Default `OWN_IDENTITY`. */
  readonly identity?: Identity | undefined;
  /**
   * Which updates requeue the owner: `any` (labels, annotations and status included) or
   * `generation` (spec changes only: `metadata.generation` moved, or a deletion began).
   * Default `any`.
   */
  readonly updates?: 'any' | 'generation' | undefined;
  /**
   * Only owners with these labels (controller-runtime's `ByObject{Label}`): sent to the API server,
   * so the cache holds only them; an owner whose labels stop matching is forgotten as if deleted.
   * Default: every owner.
   */
  readonly labelSelector?: string | undefined;
  readonly signal?: AbortSignal | undefined;
}

function ownerOf(gvk: GroupVersionKind, obj: KubeObject): OwnerRef | undefined {
  const meta = obj.metadata;
  if (meta?.name === undefined) return undefined;
  return { group: gvk.group, kind: gvk.kind, namespace: meta.namespace ?? '', name: meta.name };
}

/**
 * Wires an owner kind to `registry`: starts a held reader (no owner of its own, never collected)
 * on the owners, adds an owner's key to `registry.queue` (kind-qualified, `group/kind/namespace/name`:
 * `parseOwnerKey` gives the owner back, so several owner kinds share one registry) when it appears (the initial list
 * included) or changes, and calls `registry.forgetOwner` when it is deleted (a relist's
 * `finalStateUnknown` delete included). Resolves once the owners' cache is built (not necessarily
 * synced: `await reader.waitForSync()` before trusting "not in the cache" to mean "deleted").
 * `release()` on the returned reader stops the wiring.
 *
 * @throws as `Registry.reader`.
 */
export function watchOwners<T extends KubeObject = KubeObject>(registry: Registry, options: WatchOwnersOptions): Promise<HeldReader<T>> {
  const updates = oneOf('watchOwners', 'updates', options.updates ?? 'any', ['any', 'generation']);
  const enqueue = (obj: KubeObject): void => {
    const owner = ownerOf(options.gvk, obj);
    if (owner !== undefined) registry.queue.add(ownerKey(owner));
  };
  return registry.reader<T>(options.cluster ?? { kind: 'local' }, options.gvk, {
    identity: options.identity,
    namespace: options.namespace,
    labelSelector: options.labelSelector,
    signal: options.signal,
    handler: {
      add: enqueue,
      update: (old, current) => {
        if (updates === 'generation' && old.metadata?.generation === current.metadata?.generation && old.metadata?.deletionTimestamp === current.metadata?.deletionTimestamp) return;
        enqueue(current);
      },
      delete: (obj) => {
        const owner = ownerOf(options.gvk, obj);
        if (owner !== undefined) registry.forgetOwner(owner);
      },
    },
  });
}
