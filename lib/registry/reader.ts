import type { ConnectionKey } from '../cluster/index.ts';
import type { Informer } from '../informer/index.ts';
import type { KubeObject } from '../transport/index.ts';
import type { CacheKey } from './keys.ts';
import { ClosedError, FleetcacheError, type GroupVersionKind } from '../util/index.ts';

/**
 * The cache a reader follows was stopped on an open registry (collected, scoped down to
 * namespaces, or its cluster's Secret deleted) and nothing replaced it. Retryable: ask
 * `watchTargetAndGetReader` again. Never means "closed": that is `ClosedError`.
 */
export class CacheGoneError extends FleetcacheError {
  /** Always true: asking for the reader again is the remedy. */
  readonly retryable = true;
  readonly cluster: string;
  readonly gvk: GroupVersionKind;
  /** What the cache selected (`app=web; metadata.name=x`), '' for the whole kind. */
  readonly selector: string;

  constructor(cluster: string, gvk: GroupVersionKind, selector = '') {
    super('ERR_CACHE_GONE', `the cache of ${gvk.kind}${selector === '' ? '' : ` selecting ${selector}`} in cluster ${cluster} was stopped; ask for it again`);
    this.cluster = cluster;
    this.gvk = gvk;
    this.selector = selector;
  }
}

/** Which object: `name` and, for namespaced kinds, `namespace` (controller-runtime's `client.ObjectKey`). */
export interface NamespacedName {
  /** '' or unset for cluster-scoped kinds. */
  readonly namespace?: string | undefined;
  readonly name: string;
}

/** The arguments of either form of `get`, as `[namespace, name]`. */
export function nameOf(keyOrNamespace: NamespacedName | string | undefined, name: string | undefined): readonly [string, string] {
  return typeof keyOrNamespace === 'object' ? [keyOrNamespace.namespace ?? '', keyOrNamespace.name] : [keyOrNamespace ?? '', name ?? ''];
}

/**
 * Reads one kind in one cluster from the registry's cache (`client.Reader` in controller-runtime
 * terms). Reads never touch the network. Objects are frozen and shared: copy before changing.
 */
export interface CacheReader<T extends KubeObject = KubeObject> {
  /**
   * The connection key of the cache (`ClusterSet.connectionKey`): the cluster's key, plus the
   * identity for an impersonated `local` connection (`local[as=…]`).
   */
  readonly cluster: string;
  readonly gvk: GroupVersionKind;
  /**
   * True once the cache holds a complete LIST. Until then `get` may miss objects that exist: treat
   * "not found before synced" as "unknown", and wait for the owner to be requeued.
   */
  readonly synced: boolean;
  /** The last LIST/WATCH failure (typed: cluster, GVK, HTTP status), cleared by no later success. */
  readonly lastError: Error | undefined;
  /** The last resourceVersion the cache has seen (opaque; '' before the first LIST): how fresh it is. */
  readonly resourceVersion: string;
  /**
   * The object, or undefined: `get({ namespace, name })`, controller-runtime's `client.ObjectKey`.
   * `namespace` is '' or unset for cluster-scoped kinds. A set target's reader holds only what its
   * selectors select: an object outside them reads as undefined.
   */
  get(key: NamespacedName): T | undefined;
  /**
   * The same, positional: namespace FIRST, the reverse of client-node's `ObjectCache.get(name,
   * namespace)`. Kept for existing callers; the named form above cannot be swapped by mistake.
   */
  get(namespace: string | undefined, name: string): T | undefined;
  /** Every cached object (for a set target with selectors: every object they select), or those of one namespace. */
  list(options?: { readonly namespace?: string | undefined }): T[];
  /**
   * Resolves once synced, following the cache across a credential rotation; rejects with the
   * signal's reason, `CacheGoneError` (retryable) when the cache was stopped and not replaced, or
   * `ClosedError` once the registry is closed.
   */
  waitForSync(signal?: AbortSignal): Promise<void>;
}

/**
 * Where readers find their caches: one per registry, shared by all its readers (a pair of closures
 * per reader cost about 150 bytes per cache, issue 12).
 */
export interface ReaderSource {
  /** The informer published under a cache key now, if any. */
  informer(key: CacheKey): Informer | undefined;
  /** Whether the registry is closed. */
  closed(): boolean;
}

/** Options of {@link RegistryReader}. */
export interface RegistryReaderOptions {
  readonly cluster: ConnectionKey;
  readonly gvk: GroupVersionKind;
  /** The cache key whose published informer the reader follows. */
  readonly key: CacheKey;
  /** What the cache selects, as people read it ('' for the whole kind): for `CacheGoneError`. */
  readonly selector: string;
  readonly source: ReaderSource;
}

/**
 * A reader that follows whatever informer the registry currently publishes under its key, so a
 * reader handed out before a credential rotation reads the rebuilt cache afterwards, and one whose
 * cache was collected reads as empty and unsynced rather than stale.
 */
export class RegistryReader<T extends KubeObject = KubeObject> implements CacheReader<T> {
  readonly cluster: string;
  readonly gvk: GroupVersionKind;
  readonly #key: CacheKey;
  readonly #selector: string;
  readonly #source: ReaderSource;

  constructor(options: RegistryReaderOptions) {
    this.cluster = options.cluster;
    this.gvk = options.gvk;
    this.#key = options.key;
    this.#selector = options.selector;
    this.#source = options.source;
  }

  #current(): Informer | undefined {
    return this.#source.informer(this.#key);
  }

  get synced(): boolean {
    return this.#current()?.synced ?? false;
  }

  get lastError(): Error | undefined {
    return this.#current()?.stats().lastError;
  }

  get resourceVersion(): string {
    return this.#current()?.stats().resourceVersion ?? '';
  }

  get(key: NamespacedName): T | undefined;
  get(namespace: string | undefined, name: string): T | undefined;
  get(keyOrNamespace: NamespacedName | string | undefined, name?: string): T | undefined {
    return this.#current()?.store.getByName(...nameOf(keyOrNamespace, name)) as T | undefined;
  }

  list(options: { readonly namespace?: string | undefined } = {}): T[] {
    const store = this.#current()?.store;
    if (store === undefined) return [];
    return (options.namespace === undefined ? store.list() : store.byIndex('namespace', options.namespace)) as T[];
  }

  async waitForSync(signal?: AbortSignal): Promise<void> {
    for (;;) {
      const informer = this.#current();
      if (informer === undefined) throw this.#source.closed() ? new ClosedError('registry') : new CacheGoneError(this.cluster, this.gvk, this.#selector);
      try {
        await informer.waitForSync(signal);
        return;
      } catch (err) {
        // A stopped informer: follow whatever is published now (a rotation's rebuilt cache), if anything.
        if (signal?.aborted === true || !(err instanceof ClosedError) || this.#current() === informer) throw err;
      }
    }
  }
}

/** A reader that keeps its cache alive, without an owner, until released. */
export interface HeldReader<T extends KubeObject = KubeObject> extends CacheReader<T> {
  /** Lets the cache go (collected a grace period later if no owner uses it) and detaches the handler. Idempotent. */
  release(): void;
}

/** A {@link CacheReader} with the release of the hold that keeps its cache. */
export class HeldRegistryReader<T extends KubeObject = KubeObject> implements HeldReader<T> {
  readonly #reader: CacheReader<T>;
  readonly release: () => void;

  constructor(reader: CacheReader<T>, release: () => void) {
    this.#reader = reader;
    this.release = release;
  }

  get cluster(): string {
    return this.#reader.cluster;
  }

  get gvk(): GroupVersionKind {
    return this.#reader.gvk;
  }

  get synced(): boolean {
    return this.#reader.synced;
  }

  get lastError(): Error | undefined {
    return this.#reader.lastError;
  }

  get resourceVersion(): string {
    return this.#reader.resourceVersion;
  }

  get(key: NamespacedName): T | undefined;
  get(namespace: string | undefined, name: string): T | undefined;
  get(keyOrNamespace: NamespacedName | string | undefined, name?: string): T | undefined {
    const [namespace, objectName] = nameOf(keyOrNamespace, name);
    return this.#reader.get(namespace, objectName);
  }

  list(options?: { readonly namespace?: string | undefined }): T[] {
    return this.#reader.list(options);
  }

  waitForSync(signal?: AbortSignal): Promise<void> {
    return this.#reader.waitForSync(signal);
  }
}
