import { checkGvk, type KubeObject, type ObjectMeta, type ObjectText, type ResourceClient, type ResourceResolver } from '../transport/index.ts';
import {
  abortReason,
  apiVersionOf,
  ClosedError,
  formatGvk,
  nonNegativeInteger,
  nonNegativeNumber,
  noopLogger,
  ObjectSkippedError,
  onAbort,
  realClock,
  toError,
  type BackoffOptions,
  type Clock,
  type GroupVersionKind,
  type Logger,
  type Timer,
} from '../util/index.ts';
import { compactor } from './compactor.ts';
import { TypedEvents } from './events.ts';
import { Reflector, type ListReason, type ReflectorSource } from './reflector.ts';
import { isHeadOnlyIndex, objectKey, Slot, slotTicks, Store, type IndexFunc, type ObjectHead, type StoreReader } from './store.ts';
import { deepFreeze, stripManagedFields, type Transform } from './transform.ts';

/**
 * Callbacks for the changes an informer sees. Every callback is optional. A callback may return a
 * promise: it is not awaited, but its rejection is caught and logged, as is anything thrown.
 */
export interface InformerHandler<T extends KubeObject = KubeObject> {
  /**
   * An object appeared. `isInInitialList` is true for objects of the first LIST and for the objects
   * already cached when this handler was registered; false for later additions.
   */
  readonly add?: (obj: T, isInInitialList: boolean) => void | Promise<void>;
  /** An object changed (its resourceVersion differs; an unchanged object is never reported). */
  readonly update?: (oldObj: T, newObj: T) => void | Promise<void>;
  /**
   * An object went away. `finalStateUnknown` is true when the deletion was not seen on the watch
   * but inferred by a relist (or a recreation with another UID): `obj` is then the last state the
   * cache knew, not the object's final state.
   */
  readonly delete?: (obj: T, finalStateUnknown: boolean) => void | Promise<void>;
  /**
   * Periodic resync (only when `resyncIntervalMs` > 0): every cached object, whether or not it
   * changed since the last event (skipping unchanged resourceVersions is for `update` alone). The
   * object is the cache's state at the moment of delivery, so a resync never carries a state older
   * than one an `add` or `update` already delivered (client-go's DeltaFIFO drops a Sync for a key
   * with pending deltas for the same reason; here the cache is written before any delivery, so
   * there is no pending change to clobber).
   */
  readonly resync?: (obj: T) => void | Promise<void>;
}

/** What a relist changed, reported by the `relisted` event. */
export interface RelistSummary {
  readonly reason: ListReason;
  readonly added: number;
  readonly updated: number;
  readonly deleted: number;
}

/** Facts an informer reports as they happen. Counters are in {@link Informer.stats}. */
export interface InformerEvents {
  [event: string]: readonly unknown[];
  /** The first complete LIST has been applied. */
  synced: [];
  /**
   * A LIST or WATCH attempt failed (410 Gone excepted); the informer keeps retrying. Also an
   * `ObjectSkippedError` for an object that could not be taken into the cache (left out alone).
   */
  error: [error: Error];
  /**
   * A LIST or WATCH succeeded after failed attempts: `stats().lastError` is clear again. A watch
   * that resumes without a relist delivers no object event, so this is how readers waiting on an
   * error learn that it is gone.
   */
  recovered: [];
  /** A LIST was applied (the first one included). */
  relisted: [summary: RelistSummary];
  /**
   * A periodic resync pass ended: every `resync` callback has received every cached object
   * (`objects` of them). For work keyed by something other than the objects (requeue every user
   * of the cache, including those whose object does not exist).
   */
  resynced: [objects: number];
}

/** A snapshot of an informer's state and counters, for health checks and metrics. */
export interface InformerStats {
  /** True once the first complete LIST has been applied; stays true. */
  readonly synced: boolean;
  /** Objects in the cache. */
  readonly objects: number;
  /** LISTs after the first one. */
  readonly relists: number;
  /** 410 Gone answers (expired resourceVersion or continue token). */
  readonly gones: number;
  /** Watches opened again without a LIST in between (stream ended, broke, or went silent). */
  readonly reconnects: number;
  /** ADDED/MODIFIED/DELETED watch events received (bookmarks excluded). */
  readonly events: number;
  /** Objects left out of the cache because they could not be taken (see `ObjectSkippedError`). */
  readonly skipped: number;
  /**
   * Objects parsed from their stored text with `objects: 'lazy'` (for a reader, a handler, a custom
   * index or a snapshot; one served by the decoded-object cache is not counted); 0 otherwise.
   */
  readonly decodes: number;
  /**
   * Estimated bytes the cache holds: the stored text of every object plus a fixed estimate per
   * object for its key, slot and index entries (a flat estimate per object kept parsed).
   */
  readonly retainedBytes: number;
  /** Objects held packed (compressed) now (`objects: 'compressed'`); 0 otherwise. */
  readonly compressed: number;
  /** The last resourceVersion seen (opaque). */
  readonly resourceVersion: string;
  /** When the last complete LIST was applied (clock milliseconds). */
  readonly lastSyncTime: number | undefined;
  /** When the last watch event, bookmarks included, arrived. */
  readonly lastEventTime: number | undefined;
  /**
   * The error of the last failed attempt, typed (`KubeApiError` with cluster, GVK and status,
   * `UnknownKindError`, `TransportError`, ...). Cleared when a LIST succeeds or a WATCH is accepted.
   */
  readonly lastError: Error | undefined;
  readonly lastErrorTime: number | undefined;
}

/**
 * One watched cache of one resource in one cluster.
 *
 * Delivery rules: handlers receive events in the order the watch delivered them, one at a time,
 * each after the store already reflects it. A handler must return promptly (enqueue a key, do not
 * do I/O inline): it runs on the informer's path. A handler that throws or rejects is logged and
 * never stalls the informer or other handlers. A handler registered late first receives an `add`
 * (with `isInInitialList` true) for every cached object, then the live events. Resync events go only
 * to `resync` callbacks, never as updates; each carries the cache's current state of the object (never
 * an older one than a delivered update), and a resync pass runs between two watch batches, never
 * inside one, so it cannot interleave with a change being applied.
 */
export interface Informer<T extends KubeObject = KubeObject> {
  readonly cluster: string;
  readonly gvk: GroupVersionKind;
  /** The cache. Objects are deeply frozen and shared: copy before changing. */
  readonly store: StoreReader<T>;
  /** True once the first complete LIST has been applied. */
  readonly synced: boolean;
  /** Starts listing and watching (no I/O before this). Idempotent; throws `ClosedError` after `stop()`. */
  start(signal?: AbortSignal): void;
  /** Stops for good; resolves when streams and timers are released. Idempotent. */
  stop(): Promise<void>;
  /** Resolves once synced; rejects with the signal's reason, or `ClosedError` if stopped first. */
  waitForSync(signal?: AbortSignal): Promise<void>;
  /**
   * Registers a handler; returns the function that unregisters it. The handler receives whole
   * objects: with lazy objects (`objects: 'lazy'`), each event it has a callback for costs a parse of
   * the new object (and, for `update`, of the old one unless it is still in the decoded-object
   * cache). A handler that needs only keys, labels and other metadata should use `addHeadHandler`.
   */
  addHandler(handler: InformerHandler<T>): () => void;
  /**
   * Registers a handler that receives each object's head (`apiVersion`, `kind` and the whole
   * `metadata`, frozen) instead of the object: it never causes a parse of a whole object. With lazy
   * objects, an `update`'s old head has its metadata parsed from the stored text when the handler
   * first reads it (an own getter: it spreads, stringifies, clones and compares as a plain head;
   * `util.inspect` shows `[Getter]`). Same delivery rules as `addHandler`. Returns the function
   * that unregisters it.
   */
  addHeadHandler(handler: InformerHandler<ObjectHead>): () => void;
  /** Subscribes to an event; returns the unsubscribe function. */
  on<K extends keyof InformerEvents>(event: K, listener: (...args: InformerEvents[K]) => void): () => void;
  stats(): InformerStats;
}

/** Options of {@link ResourceInformer}. Give either `client`, or `connection` and `gvk`. */
export interface InformerOptions<T extends KubeObject = KubeObject> {
  /** A LIST/WATCH client for a resolved resource. */
  readonly client?: ResourceClient;
  /**
   * A connection (or any resolver) to find `gvk` through discovery; an unknown kind is retried
   * slowly, so the informer syncs once its CRD is installed.
   */
  readonly connection?: ResourceResolver;
  /** The kind to watch through `connection`. */
  readonly gvk?: GroupVersionKind;
  /** Only this namespace. Default: all namespaces (ignored for cluster-scoped kinds). */
  readonly namespace?: string;
  /** Label selector for LIST and WATCH alike. Default: none (everything). */
  readonly labelSelector?: string;
  /** Field selector for LIST and WATCH alike. Default: none (everything). */
  readonly fieldSelector?: string;
  /** LIST page size. Default 500. */
  readonly pageSize?: number;
  /**
   * Applied to each object at ingest. Default {@link stripManagedFields} (drops managedFields and
   * the last-applied annotation); pass `identityTransform` to keep objects whole. With the default
   * (that very function), LIST and WATCH responses are decoded without building those parts at
   * all; any other transform receives whole objects.
   */
  readonly transform?: Transform<T>;
  /**
   * How the cache keeps objects. `'parsed'` (the default): parsed, deeply frozen objects. `'lazy'`
   * (with the default transform only): as their JSON text (managedFields and the last-applied
   * annotation removed) plus what bookkeeping needs, parsed when a reader or a whole-object handler
   * asks (a read past the decoded-object cache costs a parse: about 3-4 µs for a 3 KB ConfigMap on
   * a quiet machine, 24 µs at load 12). Measured (issue 27): with a head handler, ingest 1.04×
   * parsed objects' and 5 % fewer bytes on 3 KB ConfigMaps; at 1,000 clusters × 4 kinds
   * × 200 objects, 4 % less heap and 24 % less CPU to sync. A whole-object handler costs 30 % of
   * ingest. They pay where objects are mostly metadata-read and rarely read whole. An
   * informer with a custom transform always keeps parsed objects.
   */
  readonly objects?: 'lazy' | 'parsed' | 'compressed';
  /**
   * With `objects: 'compressed'`: lazy objects whose text, once unchanged (and not read) for this
   * long, is packed in the background against a dictionary of the cache's own first objects (13–23 %
   * of their text for real objects; an object that would keep over two thirds, or whose text is not
   * ASCII, stays text). A read of a packed object unpacks it first (about 4 µs for 2 KB, beside a
   * parse of 5 µs); packing costs about as much, once. Secrets are never packed: their values are
   * random and a packed size can tell what repeats. Default 60 000; at least 100.
   */
  readonly compressAfterMs?: number;
  /**
   * Decoded objects kept for readers with lazy objects, least recently used dropped first.
   * Default 64 (about 150 KB for 3 KB objects); 0 keeps none (every read parses).
   */
  readonly decodedCacheSize?: number;
  /**
   * Custom indexes by name, queried with `store.byIndex`. `namespace` is built in. Default: none.
   * A custom function is given the parsed object at ingest: with lazy objects, an informer with
   * one parses every object it takes ({@link labelIndex} reads only metadata and does not).
   */
  readonly indexers?: Readonly<Record<string, IndexFunc<T>>>;
  /**
   * Period of resync events to `resync` callbacks, jittered ×[0.9, 1.1). Default 0: no resync.
   */
  readonly resyncIntervalMs?: number;
  /**
   * A watch that delivers nothing (not even a bookmark) for this long is reconnected. Must exceed
   * the server's bookmark interval (about 1 minute). Default 180 000.
   */
  readonly watchInactivityTimeoutMs?: number;
  /** Backoff for transient failures. Default 800 ms doubling to 30 s, jitter 1.0, reset after 2 min quiet. */
  readonly backoff?: BackoffOptions;
  /** Backoff for 401/403/404 and unknown kinds. Default 5 s doubling to 60 s. */
  readonly slowBackoff?: BackoffOptions;
  /** Default: discards everything. */
  readonly logger?: Logger;
  /** Default: the wall clock. */
  readonly clock?: Clock;
  /** Randomness in [0, 1) for jitter. Default Math.random. */
  readonly random?: () => number;
}

/** A registered handler. `pending` until it has received the adds for what the cache held. */
interface Registration<T extends KubeObject> {
  readonly handler: InformerHandler<T> | InformerHandler<ObjectHead>;
  /** Receives heads, not objects. */
  readonly head: boolean;
  active: boolean;
  pending: boolean;
}

interface Waiter {
  resolve(): void;
  reject(err: Error): void;
}

type Callback = 'add' | 'update' | 'delete' | 'resync';

/** Any handler callback, seen uniformly for delivery. */
type HandlerFn = (this: unknown, a: KubeObject, b: KubeObject | boolean | undefined) => unknown;

/**
 * One side of a change being delivered: a slot, and its head and object once computed (each at
 * most once per delivery, whatever the number of handlers).
 */
interface Side<T extends KubeObject> {
  readonly slot: Slot<T>;
  head: ObjectHead | undefined;
  obj: T | undefined;
}

/** What an object taken at ingest is stored as, with what is known of it already. */
interface Taken<T extends KubeObject> {
  readonly slot: Slot<T>;
  readonly head: ObjectHead;
  /** Set when it was parsed at ingest (parsed objects; or lazy ones a handler or index needed). */
  readonly obj: T | undefined;
}

/** The metadata of a head whose object has none. */
const EMPTY_META: ObjectMeta = Object.freeze({});

/**
 * Where a deferred head's metadata comes from (see `#deferredHeadOf`): parsed on the first read,
 * then kept. Held under a non-enumerable symbol, so the head spreads, stringifies, clones and
 * compares as a plain head.
 */
interface DeferredMeta {
  parse: ((key: string, slot: Slot) => ObjectMeta) | undefined;
  key: string;
  slot: Slot | undefined;
  metadata: ObjectMeta | undefined;
}
const DEFERRED: unique symbol = Symbol('deferred metadata');
/** One getter shared by every deferred head: per-head getters would give each head its own hidden class. */
const DEFERRED_METADATA: PropertyDescriptor = {
  enumerable: true,
  get(this: { readonly [DEFERRED]: DeferredMeta }): ObjectMeta {
    const d = this[DEFERRED];
    if (d.metadata === undefined && d.parse !== undefined && d.slot !== undefined) {
      d.metadata = d.parse(d.key, d.slot);
      d.parse = undefined;
      d.slot = undefined;
    }
    return d.metadata ?? EMPTY_META;
  },
};

/** No backoff option set: one shared object, not two empty ones kept per cache. */
const DEFAULT_BACKOFF: BackoffOptions = Object.freeze({});

function uidOf(obj: KubeObject): string | undefined {
  return obj.metadata?.uid;
}

function rvOf(obj: KubeObject): string | undefined {
  return obj.metadata?.resourceVersion;
}

/**
 * An informer: a {@link Reflector} feeding a keyed, indexed, read-only {@link Store}, and handlers.
 *
 * Invariants: `#registrations` is replaced, never mutated, so a delivery walks a stable list;
 * `#pending` counts the registrations with `pending` set, and each is flushed (sent the cache's
 * contents) before the next store mutation, so it never misses or doubles an event. `#waiters` is
 * empty once synced or stopped.
 */
export class ResourceInformer<T extends KubeObject = KubeObject> implements Informer<T> {
  readonly cluster: string;
  readonly gvk: GroupVersionKind;
  readonly #store: Store<T>;
  readonly #reflector: Reflector;
  readonly #transform: Transform<T>;
  readonly #logger: Logger;
  readonly #clock: Clock;
  readonly #random: () => number;
  readonly #resyncIntervalMs: number;
  readonly #events: TypedEvents<InformerEvents>;
  #registrations: readonly Registration<T>[] = [];
  #pending = 0;
  #waiters: Waiter[] = [];
  #synced = false;
  #state: 'new' | 'running' | 'stopped' = 'new';
  #controller: AbortController | undefined;
  #disposeParent: (() => void) | undefined;
  #run: Promise<void> | undefined;
  #stopping: Promise<void> | undefined;
  #resyncTimer: Timer | undefined;
  #skipped = 0;
  /** Slots hold text (lazy objects), not parsed objects. */
  readonly #lazy: boolean;
  /** Set for a compressed cache: how long an object stays text once unchanged. */
  readonly #compressAfterMs: number | undefined;
  #stopCompacting: (() => void) | undefined;
  /** A custom index needs parsed objects at ingest. */
  readonly #indexesParse: boolean;
  /** Active registrations receiving whole objects: while any, lazy objects are parsed at ingest. */
  #objectHandlers = 0;
  readonly #apiVersion: string;
  /** Slots whose text did not parse, already reported (reported once). */
  readonly #corrupt = new WeakSet<Slot<T>>();
  /** Set during a relist, to count what it changed. */
  #tally: { added: number; updated: number; deleted: number } | undefined;

  constructor(options: InformerOptions<T>) {
    let source: ReflectorSource;
    if (options.client !== undefined) {
      if (options.connection !== undefined || options.gvk !== undefined) throw new TypeError('informer options: give either client, or connection and gvk, not both');
      source = { client: options.client };
    } else {
      if (options.connection === undefined || options.gvk === undefined) throw new TypeError('informer options: give either client, or connection and gvk');
      // Typed error now rather than a slow retry loop: the GVK would be pasted into URLs.
      checkGvk(options.gvk);
      source = { resolver: options.connection, gvk: options.gvk };
    }
    const pageSize = nonNegativeInteger('informer', 'pageSize', options.pageSize ?? 500);
    if (pageSize === 0) throw new TypeError('informer option pageSize must be at least 1, got 0');
    const settings = {
      pageSize,
      resyncIntervalMs: nonNegativeNumber('informer', 'resyncIntervalMs', options.resyncIntervalMs ?? 0),
      watchInactivityTimeoutMs: nonNegativeNumber('informer', 'watchInactivityTimeoutMs', options.watchInactivityTimeoutMs ?? 180_000),
      clock: options.clock ?? realClock,
      random: options.random ?? Math.random,
      transform: options.transform ?? (stripManagedFields as Transform<T>),
    };
    if (settings.watchInactivityTimeoutMs < 1000) throw new TypeError(`informer option watchInactivityTimeoutMs must be at least 1000, got ${settings.watchInactivityTimeoutMs}`);
    const decodedCacheSize = nonNegativeInteger('informer', 'decodedCacheSize', options.decodedCacheSize ?? 64);
    const objects: string = options.objects ?? 'parsed';
    if (objects !== 'lazy' && objects !== 'parsed' && objects !== 'compressed') throw new TypeError(`informer option objects must be 'lazy', 'parsed' or 'compressed', got ${JSON.stringify(objects)}`);
    const compressAfterMs = nonNegativeNumber('informer', 'compressAfterMs', options.compressAfterMs ?? 60_000);
    if (compressAfterMs < 100) throw new TypeError(`informer option compressAfterMs must be at least 100, got ${compressAfterMs}`);
    const indexers = options.indexers ?? {};
    if ('namespace' in indexers) throw new TypeError('informer option indexers: the name "namespace" is reserved for the built-in index');

    this.cluster = 'client' in source ? source.client.cluster : source.resolver.name;
    this.gvk = 'client' in source ? source.client.info.gvk : source.gvk;
    this.#logger = (options.logger ?? noopLogger).child({ cluster: this.cluster, gvk: formatGvk(this.gvk) });
    this.#clock = settings.clock;
    this.#random = settings.random;
    this.#resyncIntervalMs = settings.resyncIntervalMs;
    this.#transform = settings.transform;
    this.#events = new TypedEvents(this.#logger);
    this.#lazy = objects !== 'parsed' && settings.transform === stripManagedFields;
    this.#compressAfterMs = this.#lazy && objects === 'compressed' && !(this.gvk.group === '' && this.gvk.kind === 'Secret') ? compressAfterMs : undefined;
    this.#indexesParse = Object.values(indexers).some((fn) => !isHeadOnlyIndex(fn));
    this.#apiVersion = apiVersionOf(this.gvk);
    this.#store = new Store<T>(indexers, {
      decode: (slot) => this.#decode(slot.text ?? '', slot.uid, slot.resourceVersion),
      head: (slot) => this.#headOf('', slot),
      corrupt: (key, slot, err) => { this.#corrupted(key, slot, err); },
      indexError: (index, key, err) => {
        this.#logger.warn('index function threw; object left out of the index', { index, key, error: toError(err).message });
      },
    }, decodedCacheSize);
    this.#reflector = new Reflector({
      source,
      sink: {
        replace: (items, texts, reason) => { this.#replace(items, texts, reason); },
        apply: (type, obj, text) => { this.#apply(type, obj, text); },
      },
      namespace: options.namespace,
      labelSelector: options.labelSelector,
      fieldSelector: options.fieldSelector,
      pageSize: settings.pageSize,
      // The default transform drops these anyway: the client can skip building them. A custom
      // transform sees whole objects.
      dropManagedFields: settings.transform === stripManagedFields,
      objectText: this.#lazy,
      watchInactivityTimeoutMs: settings.watchInactivityTimeoutMs,
      backoff: options.backoff ?? DEFAULT_BACKOFF,
      slowBackoff: options.slowBackoff ?? DEFAULT_BACKOFF,
      clock: settings.clock,
      random: settings.random,
      logger: this.#logger,
      onError: (error) => { this.#events.emit('error', error); },
      onRecovered: () => { this.#events.emit('recovered'); },
    });
  }

  get store(): StoreReader<T> {
    return this.#store;
  }

  get synced(): boolean {
    return this.#synced;
  }

  start(signal?: AbortSignal): void {
    if (this.#state === 'stopped') throw new ClosedError(`informer for ${formatGvk(this.gvk)} in cluster ${this.cluster}`);
    if (this.#state === 'running') return;
    this.#state = 'running';
    const controller = new AbortController();
    this.#controller = controller;
    if (signal?.aborted === true) {
      // As a child of an aborted parent: the loop ends at once; stopping is the caller's.
      controller.abort(signal.reason);
    } else if (signal !== undefined) {
      // A parent abort aborts the loop with the parent's reason and stops the informer as stop()
      // would (timers and waiters included): one callback on the parent, not a listener of the
      // informer's own signal besides (about 160 bytes per cache, issue 12).
      this.#disposeParent = onAbort(signal, () => {
        controller.abort(signal.reason);
        if (this.#state !== 'stopped') void this.stop().catch(() => undefined);
      });
    }
    if (this.#compressAfterMs !== undefined) this.#stopCompacting = compactor.register(this.#store, this.#compressAfterMs);
    this.#run = this.#reflector.run(controller.signal).catch((err: unknown) => {
      this.#logger.error('informer loop failed', { error: toError(err).message });
    });
  }

  stop(): Promise<void> {
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  async #stop(): Promise<void> {
    // Set first: the abort below re-enters through the signal listener of start().
    this.#state = 'stopped';
    this.#controller?.abort(new ClosedError(`informer for ${formatGvk(this.gvk)} in cluster ${this.cluster}`));
    this.#resyncTimer?.cancel();
    this.#resyncTimer = undefined;
    this.#stopCompacting?.();
    this.#stopCompacting = undefined;
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const w of waiters) w.reject(new ClosedError(`informer for ${formatGvk(this.gvk)} in cluster ${this.cluster}`));
    await this.#run;
    this.#disposeParent?.();
  }

  waitForSync(signal?: AbortSignal): Promise<void> {
    if (this.#synced) return Promise.resolve();
    if (this.#state === 'stopped') return Promise.reject(new ClosedError(`informer for ${formatGvk(this.gvk)} in cluster ${this.cluster}`));
    if (signal?.aborted === true) return Promise.reject(abortReason(signal));
    return new Promise<void>((resolve, reject) => {
      const onAbort = (): void => {
        this.#waiters = this.#waiters.filter((w) => w !== waiter);
        if (signal !== undefined) reject(abortReason(signal));
      };
      const waiter: Waiter = {
        resolve: () => { signal?.removeEventListener('abort', onAbort); resolve(); },
        reject: (err) => { signal?.removeEventListener('abort', onAbort); reject(err); },
      };
      this.#waiters.push(waiter);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  addHandler(handler: InformerHandler<T>): () => void {
    return this.#register(handler, false);
  }

  addHeadHandler(handler: InformerHandler<ObjectHead>): () => void {
    return this.#register(handler, true);
  }

  #register(handler: InformerHandler<T> | InformerHandler<ObjectHead>, head: boolean): () => void {
    const registration: Registration<T> = { handler, head, active: true, pending: this.#store.size > 0 };
    if (!head) this.#objectHandlers++;
    // `concat` allocates exactly the length; a spread would leave room for 17 (issue 12).
    this.#registrations = this.#registrations.concat(registration);
    if (registration.pending) {
      this.#pending++;
      // Delivered after the caller's synchronous code, or earlier if an event comes first.
      queueMicrotask(() => { this.#flushPending(); });
    }
    return () => {
      if (!registration.active) return;
      registration.active = false;
      if (!head) this.#objectHandlers--;
      if (registration.pending) {
        registration.pending = false;
        this.#pending--;
      }
      this.#registrations = this.#registrations.filter((r) => r !== registration);
    };
  }

  on<K extends keyof InformerEvents>(event: K, listener: (...args: InformerEvents[K]) => void): () => void {
    return this.#events.on(event, listener);
  }

  stats(): InformerStats {
    const r = this.#reflector.state;
    return {
      synced: this.#synced,
      objects: this.#store.size,
      relists: r.relists,
      gones: r.gones,
      reconnects: r.reconnects,
      events: r.events,
      skipped: this.#skipped,
      decodes: this.#store.decodes,
      retainedBytes: this.#store.retainedBytes,
      compressed: this.#store.packed,
      resourceVersion: r.resourceVersion,
      lastSyncTime: r.lastSyncTime,
      lastEventTime: r.lastEventTime,
      lastError: r.lastError,
      lastErrorTime: r.lastErrorTime,
    };
  }

  /** Diffs a complete LIST against the cache (the reflector's `replace`). */
  #replace(items: readonly KubeObject[], texts: readonly (ObjectText | undefined)[], reason: ListReason): void {
    if (this.#state === 'stopped') return;
    if (this.#pending > 0) this.#flushPending();
    const initial = !this.#synced;
    const tally = { added: 0, updated: 0, deleted: 0 };
    this.#tally = tally;
    const seen = new Set<string>();
    for (const [k, raw] of items.entries()) {
      const key = objectKey(raw);
      seen.add(key);
      const old = this.#store.slot(key);
      if (old?.isVersion(uidOf(raw), rvOf(raw)) === true) continue;
      this.#change(key, old, raw, texts[k], initial);
    }
    const vanished: [string, Slot<T>][] = [];
    for (const entry of this.#store.entries()) if (!seen.has(entry[0])) vanished.push(entry);
    for (const [key, old] of vanished) {
      const side = this.#side(key, old);
      this.#store.delete(key);
      this.#deliver('delete', key, side, true);
    }
    this.#tally = undefined;
    if (initial) this.#markSynced();
    this.#events.emit('relisted', { reason, ...tally });
  }

  /** Applies one watch event (the reflector's `apply`); `text` is the object's text when it came unparsed. */
  #apply(type: 'ADDED' | 'MODIFIED' | 'DELETED', raw: KubeObject, text: ObjectText | undefined): void {
    if (this.#state === 'stopped') return;
    if (this.#pending > 0) this.#flushPending();
    const key = objectKey(raw);
    const old = this.#store.slot(key);
    if (type === 'DELETED') {
      if (old === undefined) return;
      const oldSide = this.#side(key, old);
      const taken = this.#take(raw, text);
      this.#store.delete(key);
      // An untakeable final state still deletes: the last cached state stands in for it.
      if (taken === undefined) this.#deliver('delete', key, oldSide, true);
      else this.#deliver('delete', key, { slot: taken.slot, head: taken.head, obj: taken.obj }, false);
      return;
    }
    if (old?.isVersion(uidOf(raw), rvOf(raw)) === true) return;
    this.#change(key, old, raw, text, false);
  }

  /** An object new or changed at `key` (`old` is what the cache holds there): stores and reports it. */
  #change(key: string, old: Slot<T> | undefined, raw: KubeObject, text: ObjectText | undefined, initial: boolean): void {
    const oldSide = old === undefined ? undefined : this.#side(key, old);
    const taken = this.#take(raw, text);
    if (taken === undefined) {
      this.#drop(key, oldSide);
      return;
    }
    const side: Side<T> = { slot: taken.slot, head: taken.head, obj: taken.obj };
    if (oldSide === undefined) {
      this.#set(key, taken);
      this.#deliver('add', key, side, initial);
    } else if (!oldSide.slot.hasUid(taken.slot.uid)) {
      // Same key, another UID: the old object was deleted (unseen) and a new one created.
      this.#store.delete(key);
      this.#deliver('delete', key, oldSide, true);
      this.#set(key, taken);
      this.#deliver('add', key, side, false);
    } else {
      this.#set(key, taken);
      this.#deliver('update', key, oldSide, side);
    }
  }

  #set(key: string, taken: Taken<T>): void {
    this.#store.set(key, taken.slot, taken.head);
    if (taken.obj !== undefined) this.#store.prime(key, taken.slot, taken.obj);
  }

  /** A cached slot about to be replaced or removed, with its decoded object if that is at hand. */
  #side(key: string, slot: Slot<T>): Side<T> {
    return { slot, head: undefined, obj: this.#store.peek(key, slot) };
  }

  /**
   * What an object from the reflector is stored as; undefined when it cannot be taken (freezing or
   * parsing it failed): it is then reported as an `ObjectSkippedError` and left out, and the rest
   * of the cache carries on. Text is parsed here only when a whole-object handler or a custom index
   * will need the object.
   */
  #take(raw: KubeObject, text: ObjectText | undefined): Taken<T> | undefined {
    if (text !== undefined) {
      const metadata: ObjectMeta = raw.metadata ?? EMPTY_META;
      let obj: T | undefined;
      if (this.#objectHandlers > 0 || this.#indexesParse) {
        try {
          obj = this.#decode(text.text, metadata.uid, metadata.resourceVersion);
        } catch (err) {
          this.#skip(metadata.namespace ?? '', metadata.name ?? '', err);
          return undefined;
        }
      }
      // The decoder parsed the metadata with the pre-pass's removals; the transform finishes it.
      const head = deepFreeze(stripManagedFields({ apiVersion: this.#apiVersion, kind: this.gvk.kind, metadata })) as ObjectHead;
      const born = this.#compressAfterMs === undefined ? 0 : slotTicks();
      const slot = new Slot<T>(text.text, undefined, text.metadataStart, text.metadataEnd, metadata.uid, metadata.resourceVersion, born);
      return { slot, head, obj };
    }
    const obj = this.#ingest(raw);
    if (obj === undefined) return undefined;
    const metadata = obj.metadata ?? {};
    const head = this.#headOfObject(obj);
    // Parsed objects; with lazy objects, an item the scan could not vouch for (kept parsed).
    return { slot: new Slot<T>(undefined, obj, -1, -1, metadata.uid, metadata.resourceVersion), head, obj };
  }

  /** Transforms and freezes a decoded object; undefined (reported) when freezing fails. */
  #ingest(raw: KubeObject): T | undefined {
    let obj: T;
    try {
      obj = this.#transform(raw);
    } catch (err) {
      this.#logger.warn('transform threw; caching the object untransformed', { key: objectKey(raw), error: toError(err).message });
      obj = raw as T;
    }
    try {
      return deepFreeze(obj);
    } catch (err) {
      const meta = raw.metadata;
      this.#skip(meta?.namespace ?? '', meta?.name ?? '', err);
      return undefined;
    }
  }

  /**
   * Parses, transforms and freezes a slot's text; throws when it does not parse or freeze, or when
   * its uid or resourceVersion is not the one captured at ingest (the pre-pass reads the text only
   * up to the metadata's end: what follows is checked here).
   */
  #decode(text: string, uid: string | undefined, resourceVersion: string | undefined): T {
    const parsed = JSON.parse(text) as unknown;
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new TypeError('the object\'s text is not a JSON object');
    const meta = (parsed as KubeObject).metadata;
    if (meta?.uid !== uid || meta?.resourceVersion !== resourceVersion) throw new TypeError('the object\'s text disagrees with the metadata read at ingest');
    // A LIST item of a typed list carries no apiVersion/kind: added as the reflector adds them to parsed items.
    if ((parsed as KubeObject).kind === undefined) {
      (parsed as { apiVersion?: string }).apiVersion = this.#apiVersion;
      (parsed as { kind?: string }).kind = this.gvk.kind;
    }
    let obj: T;
    try {
      obj = this.#transform(parsed as KubeObject);
    } catch (err) {
      this.#logger.warn('transform threw; caching the object untransformed', { key: objectKey(parsed as KubeObject), error: toError(err).message });
      obj = parsed as T;
    }
    return deepFreeze(obj);
  }

  #headOfObject(obj: KubeObject): ObjectHead {
    return Object.freeze({ apiVersion: obj.apiVersion ?? this.#apiVersion, kind: obj.kind ?? this.gvk.kind, metadata: obj.metadata ?? EMPTY_META });
  }

  /** The head of a slot: from its metadata text, else its object; `key` names it when neither parses. */
  #headOf(key: string, slot: Slot<T>): ObjectHead {
    if (slot.obj !== undefined) return this.#headOfObject(slot.obj);
    const text = slot.text ?? '';
    if (slot.metadataStart >= 0) {
      try {
        const metadata = JSON.parse(text.slice(slot.metadataStart, slot.metadataEnd)) as ObjectMeta;
        return deepFreeze(stripManagedFields({ apiVersion: this.#apiVersion, kind: this.gvk.kind, metadata })) as ObjectHead;
      } catch {
        // Fall through to the whole text.
      }
    }
    try {
      return this.#headOfObject(this.#decode(text, slot.uid, slot.resourceVersion));
    } catch {
      const slash = key.indexOf('/');
      const metadata: Record<string, string> = slash < 0 ? { name: key } : { namespace: key.slice(0, slash), name: key.slice(slash + 1) };
      if (slot.uid !== undefined) metadata.uid = slot.uid;
      if (slot.resourceVersion !== undefined) metadata.resourceVersion = slot.resourceVersion;
      return deepFreeze({ apiVersion: this.#apiVersion, kind: this.gvk.kind, metadata });
    }
  }

  /**
   * The head of a slot whose metadata is parsed when first read: frozen, `metadata` an own
   * enumerable getter (one value on every read), so spreading, `JSON.stringify`, `structuredClone`
   * and deep equality see a plain head (`util.inspect` shows `[Getter]`). A parsed slot's head
   * costs no parse and is made at once. About 0.3 µs against 1.3 µs for a parsed head of a 3 KB
   * ConfigMap's metadata.
   */
  #deferredHeadOf(key: string, slot: Slot<T>): ObjectHead {
    if (slot.obj !== undefined) return this.#headOfObject(slot.obj);
    const head = { apiVersion: this.#apiVersion, kind: this.gvk.kind };
    const source: DeferredMeta = { parse: this.#metadataOf, key, slot, metadata: undefined };
    Object.defineProperty(head, DEFERRED, { value: source });
    Object.defineProperty(head, 'metadata', DEFERRED_METADATA);
    return Object.freeze(head) as ObjectHead;
  }

  /** The metadata of a slot's head, for a deferred head (bound once: no closure per event). */
  readonly #metadataOf = (key: string, slot: Slot): ObjectMeta => this.#headOf(key, slot as Slot<T>).metadata;

  /** Reports an object left out of the cache. */
  #skip(namespace: string, name: string, err: unknown): void {
    const error = new ObjectSkippedError({ cluster: this.cluster, gvk: this.gvk, namespace, name }, { cause: err });
    this.#skipped++;
    this.#logger.warn('object left out of the cache', { error: error.message });
    this.#events.emit('error', error);
  }

  /**
   * A lazy object's text did not parse when it was read (the store has dropped it): reported as an
   * `ObjectSkippedError`, and, a microtask later (not inside the reader's call), as a delete whose
   * final state is unknown, its head standing in for the object, unless the key holds another
   * object by then.
   */
  #corrupted(key: string, slot: Slot<T>, err: unknown): void {
    if (this.#corrupt.has(slot)) return;
    this.#corrupt.add(slot);
    const slash = key.indexOf('/');
    this.#skip(slash < 0 ? '' : key.slice(0, slash), slash < 0 ? key : key.slice(slash + 1), err);
    queueMicrotask(() => {
      if (this.#state !== 'running' || this.#store.slot(key) !== undefined) return;
      const head = this.#headOf(key, slot);
      this.#deliver('delete', key, { slot, head, obj: head as T }, true);
    });
  }

  /**
   * An object that could not be taken: whatever the cache held under its key is stale now, so it
   * goes, reported as a delete whose final state is unknown.
   */
  #drop(key: string, old: Side<T> | undefined): void {
    if (old === undefined) return;
    this.#store.delete(key);
    this.#deliver('delete', key, old, true);
  }

  #markSynced(): void {
    this.#synced = true;
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const w of waiters) w.resolve();
    this.#events.emit('synced');
    this.#scheduleResync();
  }

  #running(): boolean {
    return this.#state === 'running';
  }

  #scheduleResync(): void {
    if (this.#resyncIntervalMs === 0 || this.#state !== 'running') return;
    const delay = this.#resyncIntervalMs * (0.9 + 0.2 * this.#random());
    this.#resyncTimer = this.#clock.setTimer(delay, () => {
      this.#resyncTimer = undefined;
      if (this.#state !== 'running') return;
      if (this.#pending > 0) this.#flushPending();
      // The cache as it is now, read at the pass (never captured earlier): the newest state of
      // each object. A handler may stop the informer mid-pass: nothing is delivered after that.
      const keys = this.#store.keys();
      let delivered = 0;
      for (const key of keys) {
        // Read through a method: a handler's stop() changes the state behind the compiler's back.
        if (!this.#running()) return;
        const slot = this.#store.slot(key);
        if (slot === undefined) continue;
        delivered++;
        this.#deliver('resync', key, { slot, head: undefined, obj: undefined });
      }
      this.#events.emit('resynced', delivered);
      this.#scheduleResync();
    });
  }

  /** Sends each pending registration an add for every cached object. */
  #flushPending(): void {
    for (const reg of this.#registrations) {
      if (!reg.pending) continue;
      reg.pending = false;
      this.#pending--;
      const add = reg.handler.add as HandlerFn | undefined;
      if (add === undefined) continue;
      for (const [key, slot] of [...this.#store.entries()]) {
        if (!reg.active) break;
        // A slot whose text does not parse is dropped (and reported) as it is met.
        const obj = reg.head ? this.#headOf(key, slot) : this.#store.objectOf(key, slot);
        if (obj === undefined) continue;
        try {
          this.#watchResult('add', add.call(reg.handler, obj, true));
        } catch (err) {
          this.#handlerFailed('add', err);
        }
      }
    }
  }

  /** `flag` is isInInitialList for add, finalStateUnknown for delete. */
  #deliver(callback: 'add' | 'delete', key: string, side: Side<T>, flag: boolean): void;
  #deliver(callback: 'update', key: string, oldSide: Side<T>, newSide: Side<T>): void;
  #deliver(callback: 'resync', key: string, side: Side<T>): void;
  #deliver(callback: Callback, key: string, a: Side<T>, b?: Side<T> | boolean): void {
    const tally = this.#tally;
    if (tally !== undefined) {
      if (callback === 'add') tally.added++;
      else if (callback === 'update') tally.updated++;
      else if (callback === 'delete') tally.deleted++;
    }
    for (const reg of this.#registrations) {
      if (!reg.active || reg.pending) continue;
      const fn = reg.handler[callback] as HandlerFn | undefined;
      if (fn === undefined) continue;
      // An update's old head is parsed only if the handler reads its metadata (most compare
      // nothing old): parsing it on every update cost what the lazy path saved (issue 27).
      const first = reg.head ? (a.head ??= callback === 'update' ? this.#deferredHeadOf(key, a.slot) : this.#headOf(key, a.slot)) : this.#objectOf(key, a);
      const second = typeof b !== 'object' ? b : reg.head ? (b.head ??= this.#headOf(key, b.slot)) : this.#objectOf(key, b);
      try {
        this.#watchResult(callback, fn.call(reg.handler, first, second));
      } catch (err) {
        this.#handlerFailed(callback, err);
      }
    }
  }

  /** The object of one side of a delivery: its head stands in when its text does not parse. */
  #objectOf(key: string, side: Side<T>): T {
    if (side.obj !== undefined) return side.obj;
    const obj = this.#store.objectOf(key, side.slot) ?? (side.head ??= this.#headOf(key, side.slot)) as T;
    side.obj = obj;
    return obj;
  }

  /** A handler's promise is not awaited, but its rejection is logged rather than left unhandled. */
  #watchResult(callback: Callback, result: unknown): void {
    if (typeof result === 'object' && result !== null && typeof (result as { then?: unknown }).then === 'function') {
      (result as Promise<unknown>).then(undefined, (err: unknown) => { this.#handlerFailed(callback, err); });
    }
  }

  #handlerFailed(callback: Callback, err: unknown): void {
    const error = toError(err);
    this.#logger.warn('informer handler failed', { callback, error: error.message, stack: error.stack });
  }
}
