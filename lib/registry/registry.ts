// The registry: one cache per ⟨connection, namespace scope, GVK⟩ built once (single flight, double-checked
// publish), the owners each cache wakes, and the wiring to the keeper of clusters and the collector.
import { Mutex } from 'async-mutex';
import {
  ClusterChangedError,
  type ClusterChange,
  type ClusterLease,
  type ClusterRef,
  type Clusters,
  type Identity,
} from '../cluster/index.ts';
import { checkGvk, type ClusterConnection, type KubeObject, type ResourceClient } from '../transport/index.ts';
import { ResourceInformer, type InformerHandler, type InformerOptions } from '../informer/index.ts';
import { RateLimitingWorkQueue, defaultControllerRateLimiter, type RateLimitingQueue } from '../queue/index.ts';
import {
  abortReason,
  childController,
  ClosedError,
  KubeApiError,
  noopLogger,
  onAbort,
  raceAbort,
  realClock,
  toError,
  TransportError,
  type Clock,
  type GroupVersionKind,
  type Logger,
  type Timer,
} from '../util/index.ts';
import { BuildGate } from './build-gate.ts';
import { GarbageCollector } from './gc.ts';
import { checkScope, ScopePolicy } from './scope.ts';
import { cacheKeyOf, describeCacheKey, objectKeyOf, ownerKey, type CacheScope, type OwnerKey, type OwnerRef, type TargetRef } from './keys.ts';
import { HeldRegistryReader, RegistryReader, type CacheReader, type HeldReader, type ReaderSource } from './reader.ts';
import { indexedTarget, TargetIndex, type IndexedTarget } from './target-index.ts';

/** Options of {@link Registry}. */
export interface RegistryOptions {
  /**
   * The keeper of clusters the registry gets its connections from (a `ClusterSet`, shared with the
   * rest of the process: leader election, Secret reads). Lent, not owned: `close()` leaves it
   * open, and whoever built it closes it after the registry. Required.
   */
  readonly clusters: Clusters;
  /**
   * The requeue queue of owner keys every cache event is funnelled into. Default: a new
   * rate-limiting queue with per-item backoff 5 ms doubling to 1000 s under a 10 qps / 100 burst
   * bucket (controller-runtime's default). The registry shuts it down on `close()`.
   */
  readonly queue?: RateLimitingQueue<OwnerKey>;
  /**
   * Default namespace scope of a cache when the target does not name one (see {@link CacheScope}).
   * Default `auto`: cluster-wide when the credentials may list the kind at the cluster scope; on a
   * 403 at the cluster scope the cache is dropped for that ⟨connection, kind⟩ and its owners are
   * requeued, and from then on each target's namespace gets a cache of its own.
   */
  readonly scope?: CacheScope;
  /**
   * Informer settings applied to every cache (page size, transform, inactivity timeout...). With
   * `resyncIntervalMs`, every owner of a cache is requeued at each of its resyncs.
   */
  readonly informer?: Pick<InformerOptions, 'pageSize' | 'transform' | 'resyncIntervalMs' | 'watchInactivityTimeoutMs' | 'backoff' | 'slowBackoff'>;
  /** First delay between checks of a cache that is still used. Default 2 000. */
  readonly gcInitialDelayMs?: number;
  /** Ceiling of that delay (it doubles at each check that finds the cache used). Default 512 000. */
  readonly gcMaxDelayMs?: number;
  /** How long a cache must have had no owner before it is stopped. Default 30 000. */
  readonly gcGraceMs?: number;
  /** Bound on building one cache (credentials, connection, discovery). Default 30 000. */
  readonly buildTimeoutMs?: number;
  /**
   * How many caches may be built at once (admission, connection, discovery, start); further calls
   * that need a build wait their turn in order of arrival, for as long as their signal allows
   * (each build ahead takes at most `buildTimeoutMs`, which starts when a call gets its turn).
   * Calls served by a published cache, or joining a build in flight, never wait. Default 32.
   */
  readonly maxConcurrentBuilds?: number;
  /** Default: discards everything. */
  readonly logger?: Logger;
  /** Default: the wall clock. */
  readonly clock?: Clock;
}

/** What {@link Registry.caches} reports about one cache. */
export interface CacheInfo {
  /** The connection key: the cluster, plus the identity on the management cluster (`local[as=…]`). */
  readonly cluster: string;
  /** The one namespace the cache watches, or undefined for all namespaces. */
  readonly namespace?: string | undefined;
  readonly gvk: GroupVersionKind;
  readonly synced: boolean;
  readonly objects: number;
  readonly owners: number;
  readonly ageMs: number;
  readonly lastError: Error | undefined;
  /** Milliseconds until the garbage collector looks at this cache again. */
  readonly nextGcCheckInMs: number | undefined;
  readonly relists: number;
  readonly watchErrors: number;
}

/** Options of {@link Registry.reader}. */
export interface ReaderOptions {
  /** Who reads; see `ClusterSet.connectionKey`. Default `OWN_IDENTITY`. */
  readonly identity?: Identity | undefined;
  /** Watch this namespace only. Default: all namespaces. */
  readonly namespace?: string | undefined;
  /** The namespace admitted through the provider (the cross-namespace rule). Default `namespace`, else `default`. */
  readonly ownerNamespace?: string | undefined;
  /**
   * Handler of the cache's events, attached when the cache is published (replaying what it holds)
   * and re-attached to the cache that replaces it after a credential rotation. Default none.
   */
  readonly handler?: InformerHandler | undefined;
  readonly signal?: AbortSignal | undefined;
}

/** One published cache. */
interface CacheEntry {
  readonly key: string;
  readonly lease: ClusterLease;
  /** '' for all namespaces, or the one namespace watched. */
  readonly namespace: string;
  readonly gvk: GroupVersionKind;
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
  /** Set by `#detach`: the informer's events no longer reach the owners (it is being stopped). */
  detached: boolean;
  unusedSince: number | undefined;
  nextGcCheckAt: number | undefined;
  errors: number;
}

interface Hold {
  readonly handler: InformerHandler | undefined;
}

/** What a build resolves with: the cache, or word that the key's scope changed. */
type Built = CacheEntry | 'scoped-down';

function positive(option: string, value: number, allowZero = false): number {
  if (!Number.isFinite(value) || value < 0 || (!allowZero && value === 0)) {
    throw new TypeError(`registry option ${option} must be a ${allowZero ? 'non-negative' : 'positive'} number, got ${value}`);
  }
  return value;
}

/** How long `connectionFor` keeps its cluster connected for the caller's writes: a request's default timeout. */
const CONNECTION_LINGER_MS = 60_000;

/**
 * How many forgotten owners the registry remembers as forgotten (oldest dropped first): a
 * reconcile still in flight for one of them cannot register it again (see `forgetOwner`).
 */
const FORGOTTEN_OWNERS_KEPT = 65_536;

/** Options of the keeper the registry once built for itself: refused by name rather than silently ignored. */
const KEEPER_OPTIONS = ['provider', 'local', 'qps', 'burst', 'maxConcurrentLists', 'readLimits', 'connection', 'credentialCheckIntervalMs', 'onRequest'] as const;

/** How many times one call follows a cluster that changed under it before it gives up with `ClusterChangedError`. */
const MAX_ATTEMPTS = 3;

/**
 * The multi-cluster registry: one informer cache per ⟨connection (cluster, identity), namespace
 * scope, group/version/kind⟩, built lazily by {@link watchTargetAndGetReader}, an index of which
 * owners use which targets, one requeue queue of owner keys fed by every cache, and a garbage
 * collector (gc.ts) for caches nobody uses. Connections come from the keeper it is lent ({@link Clusters}): each cache
 * holds a lease on the generation of the cluster it reads.
 *
 * Concurrency (JavaScript interleaves only at `await`):
 * - `#caches` holds only published caches; the hot path reads it without taking `#lock`.
 * - `#building` holds the single in-flight build per cache key; it is set before the build's first
 *   `await` and removed when the build settles, so concurrent callers share one build and a failed
 *   build is never remembered. A caller joins a build only after its own admission by the keeper.
 * - `#lock` serialises publishing, removing and swapping caches (double check under the lock).
 *   Nothing inside it awaits I/O: credentials, connections, discovery and the first LIST all happen
 *   before it is taken, so a hanging cluster never delays another.
 * - A cache is published only on a current cluster generation; a build that finds its generation
 *   replaced moves to the new one (up to {@link MAX_ATTEMPTS} times, then `ClusterChangedError`).
 * - Which namespace a cache watches is the {@link ScopePolicy}'s answer (scope.ts).
 */
export class Registry {
  readonly #clusters: Clusters;
  readonly #unsubscribe: () => void;
  readonly #queue: RateLimitingQueue<OwnerKey>;
  readonly #index = new TargetIndex();
  /** Owners `forgetOwner` removed and no `setOwnerTargets` registered since, oldest first (bounded). */
  readonly #forgotten = new Set<OwnerKey>();
  readonly #lock = new Mutex();
  readonly #caches = new Map<string, CacheEntry>();
  readonly #building = new Map<string, Promise<Built>>();
  /** Per cache key, how many callers hold a build slot and are being admitted on their way to build it. */
  readonly #headed = new Map<string, number>();
  readonly #readers = new Map<string, RegistryReader>();
  readonly #holds = new Map<string, Set<Hold>>();
  /** Leases `connectionFor` holds for a while after handing out their connection. */
  readonly #lingering = new Map<Timer, ClusterLease>();
  readonly #scopes = new ScopePolicy();
  readonly #gc: GarbageCollector<CacheEntry>;
  readonly #root = new AbortController();
  /** What every reader of this registry reads through. */
  readonly #readerSource: ReaderSource = {
    informer: (key) => this.#caches.get(key)?.informer,
    closed: () => this.#closed !== undefined,
  };
  /** Requeues one owner: the one function every cache's object events wake owners through. */
  readonly #wake = (owner: OwnerKey): void => { this.#queue.add(owner); };
  readonly #logger: Logger;
  readonly #clock: Clock;
  readonly #scope: CacheScope;
  readonly #informerOptions: NonNullable<RegistryOptions['informer']>;
  readonly #buildTimeoutMs: number;
  /** Bounds the slow path: a slot from before admission until the build this caller started settles. */
  readonly #builds: BuildGate;
  #closed: Promise<void> | undefined;

  constructor(options: RegistryOptions) {
    this.#logger = options.logger ?? noopLogger;
    this.#clock = options.clock ?? realClock;
    this.#scope = checkScope('registry option scope', options.scope ?? 'auto');
    this.#informerOptions = { ...options.informer };
    this.#buildTimeoutMs = positive('buildTimeoutMs', options.buildTimeoutMs ?? 30_000);
    const maxConcurrentBuilds = options.maxConcurrentBuilds ?? 32;
    if (!Number.isSafeInteger(maxConcurrentBuilds) || maxConcurrentBuilds < 1) throw new TypeError(`registry option maxConcurrentBuilds must be a positive integer, got ${maxConcurrentBuilds}`);
    this.#builds = new BuildGate(maxConcurrentBuilds);
    const gcGraceMs = positive('gcGraceMs', options.gcGraceMs ?? 30_000, true);
    const gcInitialDelayMs = positive('gcInitialDelayMs', options.gcInitialDelayMs ?? 2_000);
    const gcMaxDelayMs = positive('gcMaxDelayMs', options.gcMaxDelayMs ?? 512_000);
    for (const option of KEEPER_OPTIONS) {
      // JavaScript callers, and options objects built for the registry before it was lent its keeper.
      if ((options as unknown as Record<string, unknown>)[option] !== undefined) throw new TypeError(`registry option ${option} configures the keeper: set it on the ClusterSet passed as clusters`);
    }
    const clusters: unknown = options.clusters;
    if (typeof clusters !== 'object' || clusters === null || typeof (clusters as { acquire?: unknown }).acquire !== 'function' || typeof (clusters as { subscribe?: unknown }).subscribe !== 'function') {
      throw new TypeError('registry option clusters must be a keeper of clusters (a ClusterSet)');
    }
    this.#clusters = options.clusters;
    this.#queue = options.queue ?? new RateLimitingWorkQueue<OwnerKey>({
      name: 'owners',
      clock: this.#clock,
      rateLimiter: defaultControllerRateLimiter({ clock: this.#clock }),
    });
    this.#gc = new GarbageCollector<CacheEntry>({
      host: {
        entry: (key) => this.#caches.get(key),
        used: (key) => this.#used(key),
        collect: (key, entry) => this.#collect(key, entry),
      },
      initialDelayMs: gcInitialDelayMs,
      maxDelayMs: gcMaxDelayMs,
      graceMs: gcGraceMs,
      clock: this.#clock,
      logger: this.#logger,
    });
    this.#unsubscribe = this.#clusters.subscribe((change) => this.#clusterChanged(change));
  }

  /** The requeue queue every cache event feeds: consume it with `runWorkers`. */
  get queue(): RateLimitingQueue<OwnerKey> {
    return this.#queue;
  }

  /**
   * Returns a reader of `target`'s kind in the cluster `ref` names, as `owner.identity`, building
   * and starting its cache on first use, and records that `owner` uses `target`, so that any change
   * to it requeues the owner: to the one object, or for a set target (no `name`: a namespace, the
   * whole cluster, or a selector) to any object entering, changing in or leaving the set. The
   * reader holds the whole kind: filter its `list()` by the set's selectors (`labelMatcher`).
   * The reader may not be synced yet: the owner is requeued when it is,
   * and when an `auto`-scoped cache is scoped down (call again then: the new reader watches the
   * target's namespace).
   *
   * For an owner {@link forgetOwner} removed, and that no {@link setOwnerTargets} registered
   * since, nothing is recorded: the reader is returned (and works while its cache lives) but the
   * owner is not registered again, so a reconcile still in flight when its owner was deleted
   * leaves no owner behind.
   *
   * Every caller is admitted by the keeper for its own namespace and identity before it may share
   * a cache or a build in flight; a credential rotation or a collection racing the call is followed
   * internally.
   *
   * @throws TypeError for a target with both a name and selectors, or a malformed selector;
   *   the provider's errors (`KubeconfigRefusedError`, `KubeconfigSecretNotFoundError`,
   *   `KubeApiError` 403 when the owner's identity may not read the kubeconfig Secret, ...),
   *   `UnknownKindError` when the cluster does not serve the kind, `KubeApiError`/`TransportError`
   *   when discovery fails, `ClusterChangedError` (retryable) when the cluster kept changing under
   *   the call, `ClosedError` after `close()` and only then, or the signal's reason. Nothing
   *   failed is remembered: the next call tries again.
   */
  async watchTargetAndGetReader<T extends KubeObject = KubeObject>(
    ref: ClusterRef,
    target: TargetRef,
    owner: OwnerRef,
    signal?: AbortSignal,
  ): Promise<CacheReader<T>> {
    if (this.#closed !== undefined) throw new ClosedError('registry');
    // Before anything is recorded or requested: the GVK ends up in URLs sent with the cluster's credentials.
    checkGvk(target.gvk);
    const connection = this.#clusters.connectionKey(ref, owner.namespace, owner.identity);
    const scope = checkScope('target scope', target.scope ?? this.#scope);
    for (;;) {
      const namespace = this.#scopes.namespaceOf(connection, scope, target);
      const key = cacheKeyOf(connection, namespace, target.gvk);
      // Recorded first, as after any call, so the cache counts as used from the moment it is published;
      // never for a forgotten owner (a reconcile that was in flight when it was deleted).
      const keyOfOwner = ownerKey(owner);
      const indexed = indexedTarget(this.#index, key, target);
      if (!this.#forgotten.has(keyOfOwner)) this.#index.add(keyOfOwner, indexed);
      // Hot path: published, and this owner's namespace and identity already admitted. No lock.
      if (this.#caches.has(key) && this.#clusters.isAdmitted(connection, owner.namespace, owner.identity)) {
        this.#probeIfRefused(key, target);
        return this.#reader(key, connection, target.gvk) as unknown as CacheReader<T>;
      }
      const built = await this.#admitAndBuild(ref, owner.namespace, owner.identity, key, namespace, target.gvk, scope === 'auto', signal);
      if (built === 'scoped-down') continue;
      this.#probeIfRefused(key, target);
      // T is the caller's claim about the kind's shape: the cache holds the JSON the server sent.
      return this.#reader(key, connection, target.gvk) as unknown as CacheReader<T>;
    }
  }

  /**
   * A reader of one kind that does not register an owner: for the embedder's own objects (the
   * service's Pipelines). The cache is held, never collected, until `release()`; with a `handler`,
   * the caller sees every event. Same admission, sharing and errors as {@link watchTargetAndGetReader}.
   */
  async reader<T extends KubeObject = KubeObject>(ref: ClusterRef, gvk: GroupVersionKind, options: ReaderOptions = {}): Promise<HeldReader<T>> {
    if (this.#closed !== undefined) throw new ClosedError('registry');
    checkGvk(gvk);
    const namespace = options.namespace ?? '';
    const ownerNamespace = options.ownerNamespace ?? (namespace === '' ? 'default' : namespace);
    const connection = this.#clusters.connectionKey(ref, ownerNamespace, options.identity);
    const key = cacheKeyOf(connection, namespace, gvk);
    const hold: Hold = { handler: options.handler };
    let holds = this.#holds.get(key);
    if (holds === undefined) {
      holds = new Set();
      this.#holds.set(key, holds);
    }
    holds.add(hold);
    let released = false;
    const release = (): void => {
      if (released) return;
      released = true;
      const set = this.#holds.get(key);
      set?.delete(hold);
      if (set?.size === 0) this.#holds.delete(key);
      const entry = this.#caches.get(key);
      entry?.held?.get(hold)?.();
      entry?.held?.delete(hold);
      this.#gc.released([key]);
    };
    try {
      if (!(this.#caches.has(key) && this.#clusters.isAdmitted(connection, ownerNamespace, options.identity))) {
        await this.#admitAndBuild(ref, ownerNamespace, options.identity, key, namespace, gvk, false, options.signal);
      }
    } catch (err) {
      release();
      throw err;
    }
    // Published by another build before this hold was registered: attach its handler now.
    const entry = this.#caches.get(key);
    if (entry !== undefined && entry.held?.has(hold) !== true) this.#attachHold(entry, hold);
    return new HeldRegistryReader<T>(this.#reader(key, connection, gvk) as unknown as CacheReader<T>, release);
  }

  /**
   * The connection to the cluster `ref` names, as `owner.identity`, for the writes an owner makes
   * there (reads go through the caches). The owner is admitted by the keeper as for
   * {@link watchTargetAndGetReader}, so an owner can write only where it may watch, and on the
   * management cluster an impersonated owner writes as its ServiceAccount.
   *
   * The connection belongs to the keeper: never close it. It stays open at least 60 s after the
   * call (longer while caches on the cluster use it), is replaced when credentials rotate and
   * closed once nothing uses the cluster, so ask for it at each use rather than keeping it.
   *
   * @throws the provider's errors, `ClosedError` after `close()`, or the signal's reason.
   */
  async connectionFor(ref: ClusterRef, owner: OwnerRef, signal?: AbortSignal): Promise<ClusterConnection> {
    if (this.#closed !== undefined) throw new ClosedError('registry');
    const lease = await this.#acquire(ref, owner.namespace, owner.identity, signal);
    // Held a while for the caller's writes (the cluster's caches usually hold it anyway), then let go.
    const linger = this.#clock.setTimer(CONNECTION_LINGER_MS, () => {
      this.#lingering.delete(linger);
      lease.release();
    });
    this.#lingering.set(linger, lease);
    return lease.connection;
  }

  /**
   * Declares the complete set of targets `owner` uses now (objects and sets), each with its
   * cluster. Targets it no longer names are released, and caches left without owners become
   * eligible for collection after the grace period. No I/O: call it at the start of a reconcile,
   * then {@link watchTargetAndGetReader} for each target. Throws a TypeError, recording nothing,
   * for a malformed target.
   *
   * This is what (re-)registers an owner that {@link forgetOwner} removed: call it right after
   * reading the owner as present (from a synced cache), with no `await` in between, so that a
   * delete seen later is ordered after it.
   */
  setOwnerTargets(owner: OwnerRef, targets: readonly { readonly cluster: ClusterRef; readonly target: TargetRef }[]): void {
    const indexed: IndexedTarget[] = targets.map(({ cluster, target }) => {
      const connection = this.#clusters.connectionKey(cluster, owner.namespace, owner.identity);
      const key = cacheKeyOf(connection, this.#scopes.namespaceOf(connection, target.scope ?? this.#scope, target), target.gvk);
      return indexedTarget(this.#index, key, target);
    });
    const key = ownerKey(owner);
    this.#forgotten.delete(key);
    this.#gc.released(this.#index.set(key, indexed));
  }

  /**
   * Forgets an owner that was deleted: its caches become eligible for collection.
   *
   * The rule against reconciles in flight: a forgotten owner stays forgotten until
   * {@link setOwnerTargets} is called for it again. {@link watchTargetAndGetReader} calls for it
   * meanwhile (a reconcile that began before the delete and is still running) record nothing, so
   * they cannot re-register it and keep its caches alive. The last 65,536 forgotten owners are
   * remembered as such; an owner forgotten longer ago is simply unknown again.
   */
  forgetOwner(owner: OwnerRef): void {
    const key = ownerKey(owner);
    this.#forgotten.delete(key);
    this.#forgotten.add(key);
    if (this.#forgotten.size > FORGOTTEN_OWNERS_KEPT) {
      for (const oldest of this.#forgotten) {
        this.#forgotten.delete(oldest);
        break;
      }
    }
    this.#gc.released(this.#index.forget(key));
  }

  /** Owners using at least one target in the cluster-wide cache of this kind (own identity). */
  ownersOf(ref: ClusterRef, ownerNamespace: string, gvk: GroupVersionKind): OwnerKey[] {
    return this.#index.ownersOfCache(cacheKeyOf(this.#clusters.connectionKey(ref, ownerNamespace), '', gvk));
  }

  /**
   * Resolves a cluster's credentials again now: a changed fingerprint rebuilds its connection and
   * caches, a deleted Secret stops them; either way their owners are requeued. The keeper's
   * periodic checks (`ClusterSetOptions.credentialCheckIntervalMs`) do the same; call this when
   * you know sooner (a Secret event).
   */
  async checkCluster(ref: ClusterRef, ownerNamespace: string, identity?: Identity): Promise<void> {
    await this.#clusters.check(this.#clusters.connectionKey(ref, ownerNamespace, identity));
  }

  /** Every published cache, for the debug endpoint and metrics. */
  caches(): CacheInfo[] {
    const now = this.#clock.now();
    return [...this.#caches.values()].map((entry) => {
      const stats = entry.informer.stats();
      return {
        cluster: entry.lease.key,
        namespace: entry.namespace === '' ? undefined : entry.namespace,
        gvk: entry.gvk,
        synced: stats.synced,
        objects: stats.objects,
        owners: this.#index.ownerCount(entry.key),
        ageMs: now - entry.createdAt,
        lastError: stats.lastError,
        nextGcCheckInMs: entry.nextGcCheckAt === undefined ? undefined : Math.max(0, entry.nextGcCheckAt - now),
        relists: stats.relists,
        watchErrors: entry.errors,
      };
    });
  }

  /**
   * Stops every cache, releases its connections (the keeper, lent, stays open: close it after)
   * and the queues; resolves when all of it is released. Idempotent.
   */
  close(): Promise<void> {
    this.#closed ??= this.#close();
    return this.#closed;
  }

  async #close(): Promise<void> {
    this.#root.abort(new ClosedError('registry'));
    this.#unsubscribe();
    await this.#gc.shutDown();
    // Builds in flight see the abort; wait for them so none publishes after this.
    await Promise.allSettled([...this.#building.values()]);
    const entries = await this.#lock.runExclusive(() => {
      const all = [...this.#caches.values()];
      this.#caches.clear();
      return all;
    });
    for (const entry of entries) this.#detach(entry);
    await Promise.all(entries.map((entry) => entry.informer.stop()));
    for (const entry of entries) entry.lease.release();
    for (const [timer, lease] of this.#lingering) {
      timer.cancel();
      lease.release();
    }
    this.#lingering.clear();
    this.#queue.shutDown();
  }

  /** Whether an owner or a held reader uses the cache under `key`. */
  #used(key: string): boolean {
    return this.#index.ownerCount(key) > 0 || this.#holds.has(key);
  }

  /** A lease for this caller, admitted for its own namespace and identity, within the build deadline. */
  async #acquire(ref: ClusterRef, ownerNamespace: string, identity: Identity | undefined, signal: AbortSignal | undefined): Promise<ClusterLease> {
    const { controller, dispose } = childController(this.#root.signal);
    const deadline = this.#clock.setTimer(this.#buildTimeoutMs, () => {
      controller.abort(new TransportError({ cluster: this.#clusters.connectionKey(ref, ownerNamespace, identity) }, `connecting took longer than ${this.#buildTimeoutMs} ms`));
    });
    // The caller's signal ends this caller's wait too (one fan-out listener per signal, not one per call).
    const detach = signal === undefined ? () => undefined : onAbort(signal, () => { controller.abort(abortReason(signal)); });
    try {
      return await this.#clusters.acquire(ref, { ownerNamespace, identity, signal: controller.signal });
    } catch (err) {
      // The registry's own abort is a close(), whatever the keeper says about it.
      if (this.#root.signal.aborted) throw new ClosedError('registry');
      throw err;
    } finally {
      detach();
      deadline.cancel();
      dispose();
    }
  }

  /**
   * The slow path: a build slot (FIFO, bounded by `maxConcurrentBuilds`), this caller's own
   * admission (a lease), then the single build of `key`, started with that lease or joined. The
   * slot is held until the build this caller started settles; a caller joining a build gives it
   * back at once, and one that finds the build already in flight takes no slot at all (joining
   * runs no setup, and must not queue behind other clusters' builds).
   */
  async #admitAndBuild(
    ref: ClusterRef,
    ownerNamespace: string,
    identity: Identity | undefined,
    key: string,
    namespace: string,
    gvk: GroupVersionKind,
    auto: boolean,
    signal: AbortSignal | undefined,
  ): Promise<Built> {
    // Joining a build in flight (or a caller headed for one) takes no slot; a free slot is taken
    // without an await (nor a timer).
    const joining = this.#building.has(key) || this.#headed.has(key);
    const release = joining ? undefined : this.#builds.tryAcquire() ?? await this.#buildSlot(signal);
    if (release !== undefined) this.#headed.set(key, (this.#headed.get(key) ?? 0) + 1);
    const arrived = (): void => {
      if (release === undefined) return;
      const left = (this.#headed.get(key) ?? 1) - 1;
      if (left > 0) this.#headed.set(key, left);
      else this.#headed.delete(key);
    };
    let building: Promise<Built> | undefined;
    try {
      let lease: ClusterLease;
      try {
        lease = await this.#acquire(ref, ownerNamespace, identity, signal);
      } finally {
        arrived();
      }
      building = this.#building.get(key);
      if (building === undefined && release === undefined) {
        // The build this caller came to join settled (or its caller was refused) while this one was
        // admitted: take its cache, or start one in turn like any other caller.
        lease.release();
        return this.#caches.get(key) ?? await this.#admitAndBuild(ref, ownerNamespace, identity, key, namespace, gvk, auto, signal);
      }
      if (building === undefined) {
        // The build takes over the lease: a published cache keeps it, a failed build releases it.
        const reacquire = (signal: AbortSignal): Promise<ClusterLease> => this.#acquire(ref, ownerNamespace, identity, signal);
        const started = this.#build(key, namespace, gvk, auto, lease, reacquire);
        building = started;
        this.#building.set(key, started);
        const forget = (): void => {
          if (this.#building.get(key) === started) this.#building.delete(key);
          release?.();
        };
        started.then(forget, forget);
      } else {
        lease.release();
        release?.();
      }
    } catch (err) {
      release?.();
      throw err;
    }
    return raceAbort(building, signal);
  }

  /**
   * Waits for a build slot, in order of arrival, for as long as the caller's signal and the
   * registry's life allow. No deadline of its own: every build ahead holds its slot for at most
   * `buildTimeoutMs`, so the turn comes, and a fleet asked for at once is built in order instead
   * of failing at the back of the queue (`buildTimeoutMs` bounds each build once it has its slot).
   */
  async #buildSlot(signal: AbortSignal | undefined): Promise<() => void> {
    try {
      return await this.#builds.acquire(this.#root.signal, signal);
    } catch (err) {
      if (this.#root.signal.aborted) throw new ClosedError('registry');
      throw err;
    }
  }

  async #build(
    key: string,
    namespace: string,
    gvk: GroupVersionKind,
    auto: boolean,
    first: ClusterLease,
    reacquire: (signal: AbortSignal) => Promise<ClusterLease>,
  ): Promise<Built> {
    // Bounded on the injected clock, and released when the build settles: close() leaves no timer.
    const { controller, dispose } = childController(this.#root.signal);
    const deadline = this.#clock.setTimer(this.#buildTimeoutMs, () => {
      controller.abort(new TransportError({ cluster: first.key, gvk }, `building the cache took longer than ${this.#buildTimeoutMs} ms`));
    });
    let lease: ClusterLease | undefined = first;
    try {
      for (let attempt = 1; ; attempt++) {
        if (!lease.current) {
          // Rotated (or dropped) under us: build on the cluster as it is now, admitted afresh
          // (a dropped cluster's Secret is gone, and the provider says so).
          lease.release();
          lease = undefined;
          lease = await reacquire(controller.signal);
        }
        if (auto && namespace === '' && this.#scopes.isNarrowed(lease.key, gvk)) return 'scoped-down';
        const info = await lease.connection.resolve(gvk, controller.signal);
        const entry = this.#newEntry(key, lease, namespace, gvk, auto && info.namespaced, lease.connection.resourceClient(info));
        const published = await this.#lock.runExclusive((): CacheEntry | undefined => {
          if (this.#root.signal.aborted) throw new ClosedError('registry');
          const existing = this.#caches.get(key);
          // Published meanwhile (a rotation swaps it if it is on an old generation).
          if (existing !== undefined) return existing;
          if (lease?.current !== true) return undefined;
          this.#publish(entry);
          return entry;
        });
        if (published === entry) {
          lease = undefined; // the cache holds it now
          return entry;
        }
        this.#detach(entry);
        await entry.informer.stop();
        if (published !== undefined) return published;
        if (attempt >= MAX_ATTEMPTS) throw new ClusterChangedError(first.key, `the cluster's credentials changed ${attempt} times while a cache was being built`);
      }
    } catch (err) {
      if (this.#root.signal.aborted) throw new ClosedError('registry');
      throw err;
    } finally {
      lease?.release();
      deadline.cancel();
      dispose();
    }
  }

  /** Creates (not starts) an informer for a cache and wires its events to the owners' queue. */
  #newEntry(key: string, lease: ClusterLease, namespace: string, gvk: GroupVersionKind, auto: boolean, client: ResourceClient): CacheEntry {
    const informer = new ResourceInformer({
      ...this.#informerOptions,
      client,
      ...(namespace === '' ? {} : { namespace }),
      logger: this.#logger.child({ cluster: lease.key, gvk: describeCacheKey(lease.key, gvk, namespace) }),
      clock: this.#clock,
    });
    // The owners of the object, and of the set targets it is in now or was in before an update.
    const requeueObject = (obj: KubeObject, previous?: KubeObject): void => {
      const meta = obj.metadata;
      if (entry.detached || meta?.name === undefined) return;
      this.#index.wake(key, objectKeyOf(key, meta.namespace, meta.name), obj, previous, this.#wake);
    };
    const requeueAll = (): void => {
      if (entry.detached) return;
      for (const owner of this.#index.ownersOfCache(key)) this.#queue.add(owner);
    };
    let lastErrorMessage: string | undefined;
    const entry: CacheEntry = {
      key,
      lease,
      namespace,
      gvk,
      auto,
      informer,
      client,
      refused: undefined,
      probing: false,
      probeAsked: 0,
      createdAt: this.#clock.now(),
      held: undefined,
      detached: false,
      unusedSince: undefined,
      nextGcCheckAt: undefined,
      errors: 0,
    };
    // Subscribed for the informer's life: `#detach` silences them (through `entry.detached`) when
    // the informer is about to stop and be dropped, instead of the registry keeping an unsubscribe
    // function per listener (about 0.8 KiB per cache, issue 12).
    informer.addHandler({
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
        this.#scopeDown(entry);
      }
      // Requeue owners when the failure changes (so status can say why), not on every retry.
      if (err.message !== lastErrorMessage) requeueAll();
      lastErrorMessage = err.message;
    });
    // A watch that resumes without a relist sends no object event: owners that saw the error
    // would otherwise wait for their next resync to see it gone.
    informer.on('recovered', () => { lastErrorMessage = undefined; requeueAll(); });
    for (const hold of this.#holds.get(key) ?? []) this.#attachHold(entry, hold);
    return entry;
  }

  /** Silences the registry's listeners on the entry's informer and detaches the held readers' handlers. */
  #detach(entry: CacheEntry): void {
    entry.detached = true;
    const held = entry.held;
    if (held === undefined) return;
    for (const detach of held.values()) detach();
    held.clear();
  }

  #attachHold(entry: CacheEntry, hold: Hold): void {
    entry.held ??= new Map();
    entry.held.set(hold, hold.handler === undefined ? () => undefined : entry.informer.addHandler(hold.handler));
  }

  /** Under `#lock`: makes a built cache visible, starts it on its cluster's signal, schedules its first GC check. */
  #publish(entry: CacheEntry): void {
    this.#caches.set(entry.key, entry);
    entry.informer.start(entry.lease.signal);
    this.#gc.published(entry.key, entry);
  }

  /** Drops a published cache: its informer is stopped and its lease released. Owners in `wake` are requeued. */
  async #drop(entries: readonly CacheEntry[], wake: ReadonlySet<OwnerKey>): Promise<void> {
    for (const entry of entries) {
      this.#detach(entry);
      // Keys not rebuilt are gone for good (as after GC): their readers need not be kept.
      if (!this.#caches.has(entry.key)) this.#readers.delete(entry.key);
    }
    await Promise.all(entries.map((entry) => entry.informer.stop()));
    for (const entry of entries) entry.lease.release();
    for (const owner of wake) this.#queue.add(owner);
  }

  /**
   * The cluster-wide LIST of an `auto` cache was refused: probes its targets' namespaces not refused
   * yet, and drops the cache if the policy scopes its kind down (owners are requeued to ask again).
   * One probe runs per cache at a time; targets that name new namespaces meanwhile get another round.
   */
  #scopeDown(entry: CacheEntry): void {
    entry.probeAsked += 1;
    if (entry.probing) return;
    entry.probing = true;
    void this.#probe(entry).catch((cause: unknown) => {
      this.#logger.warn('could not scope a forbidden cache down', { cluster: entry.lease.key, gvk: describeCacheKey(entry.lease.key, entry.gvk), error: toError(cause).message });
    }).finally(() => { entry.probing = false; });
  }

  async #probe(entry: CacheEntry): Promise<void> {
    for (let seen = -1; seen !== entry.probeAsked;) {
      seen = entry.probeAsked;
      const refused = entry.refused;
      if (refused === undefined || this.#caches.get(entry.key) !== entry) return;
      const namespaces = [...this.#index.namespacesOfCache(entry.key)].filter((ns) => ns !== '' && !refused.has(ns));
      if (namespaces.length > 0 && await this.#scopes.scopeDown(entry.lease.key, entry.gvk, entry.client, namespaces, refused, entry.lease.signal)) {
        this.#logger.info('listing at the cluster scope is forbidden: scoping the cache down to its targets\' namespaces', { cluster: entry.lease.key, gvk: describeCacheKey(entry.lease.key, entry.gvk) });
        const removed = await this.#lock.runExclusive(() => {
          if (this.#caches.get(entry.key) !== entry) return false;
          this.#caches.delete(entry.key);
          return true;
        });
        if (removed) await this.#drop([entry], new Set(this.#index.ownersOfCache(entry.key)));
        return;
      }
    }
  }

  /**
   * A target names a namespace that the refused cluster-wide cache under `key` has not probed:
   * probe it now, not at the informer's next slow retry (up to minutes away), so an owner whose
   * namespace may be listed is not held back by owners of the same cache whose namespaces may not.
   */
  #probeIfRefused(key: string, target: TargetRef): void {
    const entry = this.#caches.get(key);
    const namespace = target.namespace ?? '';
    if (entry?.refused === undefined || namespace === '' || entry.refused.has(namespace)) return;
    this.#scopeDown(entry);
  }

  /** The GC's removal: double-checked under the lock. */
  async #collect(key: string, entry: CacheEntry): Promise<boolean> {
    const removed = await this.#lock.runExclusive(() => {
      // Double check: an owner may have come back, or the cache been swapped, since the check began.
      if (this.#caches.get(key) !== entry || this.#used(key)) return false;
      this.#caches.delete(key);
      return true;
    });
    if (!removed) return false;
    this.#logger.info('stopping unused cache', { cluster: entry.lease.key, gvk: describeCacheKey(entry.lease.key, entry.gvk, entry.namespace) });
    await this.#drop([entry], new Set());
    return true;
  }

  /**
   * The keeper rotated or dropped a cluster: every cache on the old generation is rebuilt on the
   * new one (outside the lock) and swapped in one step under the lock, or removed. Owners are
   * requeued. Leases on the old generation are released last, so its connection closes only
   * after every cache on it stopped.
   */
  async #clusterChanged(change: ClusterChange): Promise<void> {
    this.#scopes.forget(change.key);
    const stale = [...this.#caches.values()].filter((entry) => entry.lease.key === change.key && !entry.lease.current);
    const rebuilt = new Map<CacheEntry, CacheEntry>();
    if (change.type === 'rotated') {
      for (const old of stale) {
        const lease = this.#clusters.retain(change.key);
        if (lease === undefined) break;
        try {
          const info = await lease.connection.resolve(old.gvk, this.#root.signal);
          rebuilt.set(old, this.#newEntry(old.key, lease, old.namespace, old.gvk, old.auto, lease.connection.resourceClient(info)));
        } catch (err) {
          lease.release();
          // Not rebuilt: dropped below; its owners are requeued and rebuild it on their next call.
          this.#logger.warn('could not rebuild a cache with the new credentials', { cluster: change.key, gvk: describeCacheKey(change.key, old.gvk, old.namespace), error: toError(err).message });
        }
      }
    }
    const { gone, wake } = await this.#lock.runExclusive(() => {
      const removed: CacheEntry[] = [];
      const owners = new Set<OwnerKey>();
      for (const old of stale) {
        if (this.#caches.get(old.key) !== old) continue;
        removed.push(old);
        for (const owner of this.#index.ownersOfCache(old.key)) owners.add(owner);
        const fresh = rebuilt.get(old);
        if (fresh !== undefined && !this.#root.signal.aborted && fresh.lease.current) {
          this.#publish(fresh);
          rebuilt.delete(old);
        } else {
          this.#caches.delete(old.key);
        }
      }
      return { gone: removed, wake: owners };
    });
    // Whatever was not published (removed or swapped meanwhile) is ours to release.
    for (const fresh of rebuilt.values()) {
      this.#detach(fresh);
      await fresh.informer.stop();
      fresh.lease.release();
    }
    await this.#drop(gone, wake);
  }

  #reader(key: string, cluster: string, gvk: GroupVersionKind): RegistryReader {
    let reader = this.#readers.get(key);
    if (reader === undefined) {
      reader = new RegistryReader({ cluster, gvk, key, source: this.#readerSource });
      this.#readers.set(key, reader);
    }
    return reader;
  }
}
