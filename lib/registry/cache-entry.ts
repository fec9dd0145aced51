// One cache of the registry as its rooms share it: the entry, and how held readers' handlers are
// attached to (and detached from) its informer.
import type { ClusterLease } from '../cluster/index.ts';
import type { InformerHandler, ResourceInformer } from '../informer/index.ts';
import type { ResourceClient } from '../transport/index.ts';
import type { GroupVersionKind } from '../util/index.ts';
import type { CacheKey } from './keys.ts';
import type { Selection } from './selectors.ts';

/** One cache: built, then published in the table (cache-table.ts), or stopped unpublished. */
export interface CacheEntry {
  readonly key: CacheKey;
  readonly lease: ClusterLease;
  /** '' for all namespaces, or the one namespace watched. */
  readonly namespace: string;
  readonly gvk: GroupVersionKind;
  /** What the LIST and WATCH select (canonical; empty: the whole kind): the cache holds only that. */
  readonly selection: Selection;
  /** Built for a caller whose scope was `auto`: a 403 at the cluster scope scopes it down. */
  readonly auto: boolean;
  readonly informer: ResourceInformer;
  /** The informer's client, for the probes of a scope-down. */
  readonly client: ResourceClient;
  /**
   * Set while an `auto` cluster-wide cache's LIST is refused with a 403 before it synced: the
   * target namespaces whose probe was refused since the latest such error (each error probes them
   * all again, as RBAC may have changed). A target naming another namespace is probed at once.
   */
  refused: Set<string> | undefined;
  /** Whether a probe is running; `probeAsked` counts the requests for one (a running probe goes round again). */
  probing: boolean;
  probeAsked: number;
  readonly createdAt: number;
  /** Handlers of held readers attached to this informer, by hold; created with the first. */
  held: Map<Hold, () => void> | undefined;
  /** Set by {@link detach}: the informer's events no longer reach the owners (it is being stopped). */
  detached: boolean;
  unusedSince: number | undefined;
  nextGcCheckAt: number | undefined;
  errors: number;
}

/** One held reader (`Registry.reader`): keeps its cache from collection until released; its handler sees every event. */
export interface Hold {
  readonly handler: InformerHandler | undefined;
}

/** What a build resolves with: the cache, or word that the key's scope changed. */
export type Built = CacheEntry | 'scoped-down';

/** Attaches a held reader's handler to the entry's informer (it replays what the cache holds). */
export function attachHold(entry: CacheEntry, hold: Hold): void {
  entry.held ??= new Map();
  entry.held.set(hold, hold.handler === undefined ? () => undefined : entry.informer.addHandler(hold.handler));
}

/** Detaches one held reader's handler, if attached. */
export function detachHold(entry: CacheEntry, hold: Hold): void {
  entry.held?.get(hold)?.();
  entry.held?.delete(hold);
}

/** Silences the registry's listeners on the entry's informer and detaches the held readers' handlers. */
export function detach(entry: CacheEntry): void {
  entry.detached = true;
  const held = entry.held;
  if (held === undefined) return;
  for (const detachHandler of held.values()) detachHandler();
  held.clear();
}
