import { checkGvk, type KubeObject, type ResourceClient, type ResourceResolver } from '../transport/index.ts';
import {
  abortReason,
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
import { TypedEvents } from './events.ts';
import { Reflector, type ListReason, type ReflectorSource } from './reflector.ts';
import { objectKey, Store, type IndexFunc, type StoreReader } from './store.ts';
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
  /** Registers a handler; returns the function that unregisters it. */
  addHandler(handler: InformerHandler<T>): () => void;
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
  /** Custom indexes by name, queried with `store.byIndex`. `namespace` is built in. Default: none. */
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
  readonly handler: InformerHandler<T>;
  active: boolean;
  pending: boolean;
}

interface Waiter {
  resolve(): void;
  reject(err: Error): void;
}

type Callback = 'add' | 'update' | 'delete' | 'resync';

/** Any handler callback, seen uniformly for delivery. */
type HandlerFn<T extends KubeObject> = (this: InformerHandler<T>, a: T, b: T | boolean | undefined) => unknown;

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
    this.#store = new Store<T>(indexers, (index, key, err) => {
      this.#logger.warn('index function threw; object left out of the index', { index, key, error: toError(err).message });
    });
    this.#reflector = new Reflector({
      source,
      sink: {
        replace: (items, reason) => { this.#replace(items, reason); },
        apply: (type, obj) => { this.#apply(type, obj); },
      },
      namespace: options.namespace,
      labelSelector: options.labelSelector,
      fieldSelector: options.fieldSelector,
      pageSize: settings.pageSize,
      // The default transform drops these anyway: the client can skip building them. A custom
      // transform sees whole objects.
      dropManagedFields: settings.transform === stripManagedFields,
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
    const registration: Registration<T> = { handler, active: true, pending: this.#store.size > 0 };
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
      resourceVersion: r.resourceVersion,
      lastSyncTime: r.lastSyncTime,
      lastEventTime: r.lastEventTime,
      lastError: r.lastError,
      lastErrorTime: r.lastErrorTime,
    };
  }

  /** Diffs a complete LIST against the cache (the reflector's `replace`). */
  #replace(items: readonly KubeObject[], reason: ListReason): void {
    if (this.#state === 'stopped') return;
    if (this.#pending > 0) this.#flushPending();
    const initial = !this.#synced;
    const tally = { added: 0, updated: 0, deleted: 0 };
    this.#tally = tally;
    const seen = new Set<string>();
    for (const raw of items) {
      const key = objectKey(raw);
      seen.add(key);
      const old = this.#store.get(key);
      if (old !== undefined && uidOf(old) === uidOf(raw) && rvOf(old) === rvOf(raw)) continue;
      const obj = this.#ingest(raw);
      if (obj === undefined) {
        this.#drop(key, old);
        continue;
      }
      if (old === undefined) {
        this.#store.set(key, obj);
        this.#deliver('add', obj, initial);
      } else if (uidOf(old) !== uidOf(obj)) {
        this.#replaceIncarnation(key, old, obj);
      } else {
        this.#store.set(key, obj);
        this.#deliver('update', old, obj);
      }
    }
    const vanished: [string, T][] = [];
    for (const entry of this.#store.entries()) if (!seen.has(entry[0])) vanished.push(entry);
    for (const [key, old] of vanished) {
      this.#store.delete(key);
      this.#deliver('delete', old, true);
    }
    this.#tally = undefined;
    if (initial) this.#markSynced();
    this.#events.emit('relisted', { reason, ...tally });
  }

  /** Applies one watch event (the reflector's `apply`). */
  #apply(type: 'ADDED' | 'MODIFIED' | 'DELETED', raw: KubeObject): void {
    if (this.#state === 'stopped') return;
    if (this.#pending > 0) this.#flushPending();
    const key = objectKey(raw);
    const old = this.#store.get(key);
    if (type === 'DELETED') {
      if (old === undefined) return;
      const obj = this.#ingest(raw);
      this.#store.delete(key);
      // An untakeable final state still deletes: the last cached state stands in for it.
      this.#deliver('delete', obj ?? old, obj === undefined);
      return;
    }
    if (old !== undefined && uidOf(old) === uidOf(raw) && rvOf(old) === rvOf(raw)) return;
    const obj = this.#ingest(raw);
    if (obj === undefined) {
      this.#drop(key, old);
      return;
    }
    if (old === undefined) {
      this.#store.set(key, obj);
      this.#deliver('add', obj, false);
      return;
    }
    if (uidOf(old) !== uidOf(obj)) {
      this.#replaceIncarnation(key, old, obj);
      return;
    }
    this.#store.set(key, obj);
    this.#deliver('update', old, obj);
  }

  /** Same key, another UID: the old object was deleted (unseen) and a new one created. */
  #replaceIncarnation(key: string, old: T, obj: T): void {
    this.#store.delete(key);
    this.#deliver('delete', old, true);
    this.#store.set(key, obj);
    this.#deliver('add', obj, false);
  }

  /**
   * Transforms and freezes a decoded object; undefined when it cannot be taken (freezing it
   * failed): it is then reported as an `ObjectSkippedError` and left out, and the rest of the
   * cache carries on.
   */
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
      const error = new ObjectSkippedError({ cluster: this.cluster, gvk: this.gvk, namespace: meta?.namespace ?? '', name: meta?.name ?? '' }, { cause: err });
      this.#skipped++;
      this.#logger.warn('object left out of the cache', { error: error.message });
      this.#events.emit('error', error);
      return undefined;
    }
  }

  /**
   * An object that could not be taken: whatever the cache held under its key is stale now, so it
   * goes, reported as a delete whose final state is unknown.
   */
  #drop(key: string, old: T | undefined): void {
    if (old === undefined) return;
    this.#store.delete(key);
    this.#deliver('delete', old, true);
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
        const obj = this.#store.get(key);
        if (obj === undefined) continue;
        delivered++;
        this.#deliver('resync', obj);
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
      const add = reg.handler.add;
      if (add === undefined) continue;
      for (const obj of this.#store.list()) {
        if (!reg.active) break;
        try {
          this.#watchResult('add', add.call(reg.handler, obj, true));
        } catch (err) {
          this.#handlerFailed('add', err);
        }
      }
    }
  }

  /** `flag` is isInInitialList for add, finalStateUnknown for delete. */
  #deliver(callback: 'add' | 'delete', obj: T, flag: boolean): void;
  #deliver(callback: 'update', oldObj: T, newObj: T): void;
  #deliver(callback: 'resync', obj: T): void;
  #deliver(callback: Callback, a: T, b?: T | boolean): void {
    const tally = this.#tally;
    if (tally !== undefined) {
      if (callback === 'add') tally.added++;
      else if (callback === 'update') tally.updated++;
      else if (callback === 'delete') tally.deleted++;
    }
    for (const reg of this.#registrations) {
      if (!reg.active || reg.pending) continue;
      const fn = reg.handler[callback] as HandlerFn<T> | undefined;
      if (fn === undefined) continue;
      try {
        this.#watchResult(callback, fn.call(reg.handler, a, b));
      } catch (err) {
        this.#handlerFailed(callback, err);
      }
    }
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
