import { clusterKey, type ClusterRef } from '../cluster/index.ts';
import { deepFreeze, type InformerHandler } from '../informer/index.ts';
import type { KubeObject, RequestOptions, ResourceInfo } from '../transport/index.ts';
import { CacheGoneError } from '../registry/index.ts';
import { abortReason, ClosedError, KubeApiError, onAbort, type GroupVersionKind } from '../util/index.ts';
import type { SnapshotSource, SourceQuery, SourceReader, WriteConnection } from './source.ts';

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

function keyOf(namespace: string | undefined, name: string): string {
  return namespace === undefined || namespace === '' ? name : `${namespace}/${name}`;
}

function clone<T>(value: T): T {
  return structuredClone(value);
}

/** JSON merge patch (RFC 7386). */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) return clone(patch);
  const out: Record<string, unknown> = typeof target === 'object' && target !== null && !Array.isArray(target) ? { ...(target as Record<string, unknown>) } : {};
  for (const [k, v] of Object.entries(patch as Record<string, unknown>)) {
    if (v === null) Reflect.deleteProperty(out, k);
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

/**
 * One fake cache of one kind in one cluster, with the cluster's truth behind it. Writes (the
 * methods here, or requests through the source's connection) change the truth and produce watch
 * events; the cache applies them at once, or queues them while `holdEvents` is set (a slow watch),
 * until {@link flush}. Nothing is cached before {@link sync} (the first LIST).
 */
export class FakeCache {
  readonly key: string;
  readonly gvk: GroupVersionKind;
  /** While set, `open` rejects with it (the cluster cannot be reached). */
  unreachable: Error | undefined;
  /** While true, watch events wait in a queue until `flush()`. */
  holdEvents = false;
  /** Integer resourceVersions by default; opaque strings (`v-<n>`) when true. */
  opaqueVersions = false;
  /** Caches opened and readers released, for tests of sharing and release. */
  opens = 0;
  releases = 0;
  #rv = 100;
  #uid = 0;
  readonly #server = new Map<string, KubeObject>();
  readonly #cached = new Map<string, KubeObject>();
  readonly #handlers = new Set<InformerHandler>();
  #held: { readonly type: 'ADDED' | 'MODIFIED' | 'DELETED'; readonly object: KubeObject }[] = [];
  #synced = false;
  #lastError: Error | undefined;
  #resourceVersion = '';
  #waiters: { readonly resolve: () => void; readonly reject: (err: Error) => void }[] = [];
  /** Grows at each {@link drop}: readers of an older generation read a dropped cache. */
  #generation = 0;

  constructor(key: string, gvk: GroupVersionKind) {
    this.key = key;
    this.gvk = gvk;
  }

  get synced(): boolean {
    return this.#synced;
  }

  get handlers(): number {
    return this.#handlers.size;
  }

  /** The truth, as a LIST would return it now. */
  serverObjects(): KubeObject[] {
    return [...this.#server.values()];
  }

  /** The cache's current contents. */
  cachedObjects(): KubeObject[] {
    return [...this.#cached.values()];
  }

  /** The cache's LIST/WATCH failure (what the reader reports as `lastError`). */
  fail(error: Error | undefined): void {
    this.#lastError = error;
  }

  #nextRv(): string {
    this.#rv++;
    return this.opaqueVersions ? `v-${this.#rv}` : String(this.#rv);
  }

  /** Creates or replaces an object in the truth (new resourceVersion) and emits its event. */
  upsert(obj: KubeObject): KubeObject {
    const meta = obj.metadata ?? {};
    const key = keyOf(meta.namespace, meta.name ?? '');
    const previous = this.#server.get(key);
    const stored = deepFreeze({
      apiVersion: this.gvk.group === '' ? this.gvk.version : `${this.gvk.group}/${this.gvk.version}`,
      kind: this.gvk.kind,
      ...clone(obj),
      metadata: { ...clone(meta), uid: previous?.metadata?.uid ?? meta.uid ?? `uid-${++this.#uid}`, resourceVersion: this.#nextRv() },
    });
    this.#server.set(key, stored);
    this.#emit(previous === undefined ? 'ADDED' : 'MODIFIED', stored);
    return stored;
  }

  /** Deletes an object from the truth and emits DELETED (final state with a new resourceVersion). */
  remove(namespace: string | undefined, name: string): KubeObject {
    const key = keyOf(namespace, name);
    const previous = this.#server.get(key);
    if (previous === undefined) throw new Error(`fake: no object ${key}`);
    this.#server.delete(key);
    const final = deepFreeze({ ...previous, metadata: { ...previous.metadata, resourceVersion: this.#nextRv() } });
    this.#emit('DELETED', final);
    return final;
  }

  #emit(type: 'ADDED' | 'MODIFIED' | 'DELETED', object: KubeObject): void {
    if (!this.#synced) return; // not watching yet: the first LIST will carry it
    if (this.holdEvents) this.#held.push({ type, object });
    else this.#apply(type, object);
  }

  #apply(type: 'ADDED' | 'MODIFIED' | 'DELETED', object: KubeObject): void {
    const key = keyOf(object.metadata?.namespace, object.metadata?.name ?? '');
    const old = this.#cached.get(key);
    this.#resourceVersion = object.metadata?.resourceVersion ?? this.#resourceVersion;
    if (type === 'DELETED') {
      if (old === undefined) return;
      this.#cached.delete(key);
      for (const h of this.#handlers) void h.delete?.(object, false);
      return;
    }
    this.#cached.set(key, object);
    for (const h of this.#handlers) {
      if (old === undefined) void h.add?.(object, false);
      else void h.update?.(old, object);
    }
  }

  /** Delivers the held watch events, in order. */
  flush(): void {
    const held = this.#held;
    this.#held = [];
    for (const e of held) this.#apply(e.type, e.object);
  }

  /**
   * A complete LIST replaces the cache (the first one syncs it; a later one is a relist after a
   * 410): held events are dropped (the gap), changed objects are updates, vanished ones deletes
   * with `finalStateUnknown`.
   */
  sync(): void {
    this.#held = [];
    const initial = !this.#synced;
    const seen = new Set<string>();
    for (const [key, obj] of this.#server) {
      seen.add(key);
      const old = this.#cached.get(key);
      if (old === obj) continue;
      this.#cached.set(key, obj);
      for (const h of this.#handlers) {
        if (old === undefined) void h.add?.(obj, initial);
        else void h.update?.(old, obj);
      }
    }
    for (const [key, old] of [...this.#cached]) {
      if (seen.has(key)) continue;
      this.#cached.delete(key);
      for (const h of this.#handlers) void h.delete?.(old, true);
    }
    this.#resourceVersion = this.opaqueVersions ? `v-${this.#rv}` : String(this.#rv);
    this.#lastError = undefined;
    if (initial) {
      this.#synced = true;
      const waiters = this.#waiters;
      this.#waiters = [];
      for (const w of waiters) w.resolve();
    }
  }

  /**
   * The registry dropping the cache and not replacing it (its cluster's kubeconfig Secret was
   * deleted): no event reaches the handlers; readers of it read as empty and unsynced, and their
   * `waitForSync` rejects with `CacheGoneError`. The truth stays: a reader opened afterwards
   * follows a new cache, which lists it at the next {@link sync}. Set `unreachable` too for the
   * time the cluster is out of the fleet.
   */
  drop(): void {
    this.#generation++;
    this.#handlers.clear();
    this.#held = [];
    this.#cached.clear();
    this.#synced = false;
    this.#lastError = undefined;
    this.#resourceVersion = '';
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const w of waiters) w.reject(this.#gone());
  }

  /**
   * The registry replacing the cache (a credential rotation) with one that has not listed yet:
   * readers stay attached and read it as empty and unsynced, their `waitForSync` waits, and the
   * next {@link sync} replays the truth to the handlers as initial adds, as {@link rotate} does.
   */
  rebuild(): void {
    this.#held = [];
    this.#cached.clear();
    this.#synced = false;
    this.#resourceVersion = '';
  }

  #gone(): CacheGoneError {
    return new CacheGoneError(this.key, this.gvk);
  }

  /**
   * The registry replacing the cache after a credential rotation: held events are lost, the new
   * cache lists the truth (new copies of every object) and replays it to the handlers as initial
   * adds; what vanished meanwhile gets no delete event.
   */
  rotate(): void {
    this.#held = [];
    this.#cached.clear();
    for (const [key, obj] of this.#server) {
      const copy = deepFreeze(clone(obj));
      this.#cached.set(key, copy);
      for (const h of this.#handlers) void h.add?.(copy, true);
    }
    this.#resourceVersion = this.opaqueVersions ? `v-${this.#rv}` : String(this.#rv);
  }

  /** A periodic resync: every cached object to every `resync` callback. */
  resync(): void {
    for (const obj of this.#cached.values()) for (const h of this.#handlers) void h.resync?.(obj);
  }

  /** A held reader, with `handler` attached (replaying the cache as adds, as the registry does). */
  reader(handler: InformerHandler): SourceReader {
    this.opens++;
    this.#handlers.add(handler);
    for (const obj of this.#cached.values()) void handler.add?.(obj, true);
    let released = false;
    const generation = this.#generation;
    const dropped = (): boolean => generation !== this.#generation;
    const state = (): { synced: boolean; lastError: Error | undefined; resourceVersion: string } => (dropped()
      ? { synced: false, lastError: undefined, resourceVersion: '' }
      : { synced: this.#synced, lastError: this.#lastError, resourceVersion: this.#resourceVersion });
    return {
      get synced() { return state().synced; },
      get lastError() { return state().lastError; },
      get resourceVersion() { return state().resourceVersion; },
      get: (namespace, name) => dropped() ? undefined : this.#cached.get(keyOf(namespace, name)),
      list: () => dropped() ? [] : [...this.#cached.values()],
      waitForSync: (signal) => dropped() ? Promise.reject(this.#gone()) : this.#waitForSync(signal),
      release: () => {
        if (released) return;
        released = true;
        this.releases++;
        this.#handlers.delete(handler);
      },
    };
  }

  #waitForSync(signal?: AbortSignal): Promise<void> {
    if (this.#synced) return Promise.resolve();
    if (signal?.aborted === true) return Promise.reject(abortReason(signal));
    return new Promise<void>((resolve, reject) => {
      const detach = signal === undefined ? () => undefined : onAbort(signal, () => {
        this.#waiters = this.#waiters.filter((w) => w !== waiter);
        reject(abortReason(signal));
      });
      const waiter = {
        resolve: (): void => { detach(); resolve(); },
        reject: (err: Error): void => { detach(); reject(err); },
      };
      this.#waiters.push(waiter);
    });
  }

  /** The cluster's write API for this kind (POST, PUT, PATCH with merge patch, DELETE). */
  request(options: RequestOptions): Promise<unknown> {
    const m = /\/namespaces\/([^/]+)\/[^/]+(?:\/([^/]+))?(\/status)?$/.exec(options.path);
    if (m === null) return Promise.reject(new Error(`fake: unsupported path ${options.path}`));
    const namespace = decodeURIComponent(m[1] ?? '');
    const name = m[2] === undefined ? undefined : decodeURIComponent(m[2]);
    const fail = (statusCode: number, reason: string): Promise<never> => Promise.reject(new KubeApiError({
      cluster: this.key, gvk: this.gvk, statusCode, status: { kind: 'Status', reason, code: statusCode }, request: { method: options.method, path: options.path },
    }));
    const body = options.body as KubeObject | undefined;
    switch (options.method) {
      case 'POST': {
        const objName = body?.metadata?.name ?? '';
        if (this.#server.has(keyOf(namespace, objName))) return fail(409, 'AlreadyExists');
        return Promise.resolve(this.upsert({ ...body, metadata: { ...body?.metadata, namespace } }));
      }
      case 'PUT': {
        const current = this.#server.get(keyOf(namespace, name ?? ''));
        if (current === undefined) return fail(404, 'NotFound');
        const rv = body?.metadata?.resourceVersion;
        if (rv !== undefined && rv !== current.metadata?.resourceVersion) return fail(409, 'Conflict');
        return Promise.resolve(this.upsert({ ...body, metadata: { ...body?.metadata, namespace, name: name ?? '', uid: current.metadata?.uid ?? '' } }));
      }
      case 'PATCH': {
        const current = this.#server.get(keyOf(namespace, name ?? ''));
        if (current === undefined) return fail(404, 'NotFound');
        const patched = mergePatch(current, options.body) as Mutable<KubeObject>;
        return Promise.resolve(this.upsert({ ...patched, metadata: { ...patched.metadata, namespace, name: name ?? '' } }));
      }
      case 'DELETE': {
        if (!this.#server.has(keyOf(namespace, name ?? ''))) return fail(404, 'NotFound');
        return Promise.resolve(this.remove(namespace, name ?? ''));
      }
      default:
        return Promise.reject(new Error(`fake: unsupported method ${options.method}`));
    }
  }
}

/**
 * A {@link SnapshotSource} over in-memory {@link FakeCache}s, one per ⟨cluster, kind⟩ (whole
 * kind: queries narrow by namespace themselves), shared by every query that names it, as the
 * registry's caches are.
 */
export class FakeSnapshotSource implements SnapshotSource {
  readonly #caches = new Map<string, FakeCache>();
  #closed = false;

  /** The cache of `gvk` in the cluster `ref` names (created on first use). */
  cache(ref: ClusterRef, gvk: GroupVersionKind, ownerNamespace = 'default'): FakeCache {
    const key = `${clusterKey(ref, ownerNamespace)} ${gvk.group}/${gvk.version}/${gvk.kind}`;
    let cache = this.#caches.get(key);
    if (cache === undefined) {
      cache = new FakeCache(key, gvk);
      this.#caches.set(key, cache);
    }
    return cache;
  }

  /** Makes later calls fail with `ClosedError`. */
  close(): void {
    this.#closed = true;
  }

  open<T extends KubeObject>(query: SourceQuery, handler: InformerHandler<T>, signal: AbortSignal): Promise<SourceReader<T>> {
    if (this.#closed) return Promise.reject(new ClosedError('fake snapshot source'));
    if (signal.aborted) return Promise.reject(abortReason(signal));
    const cache = this.cache(query.cluster, query.gvk, query.ownerNamespace);
    if (cache.unreachable !== undefined) return Promise.reject(cache.unreachable);
    return Promise.resolve(cache.reader(handler as InformerHandler) as SourceReader<T>);
  }

  connection(query: SourceQuery): Promise<WriteConnection> {
    if (this.#closed) return Promise.reject(new ClosedError('fake snapshot source'));
    const cache = this.cache(query.cluster, query.gvk, query.ownerNamespace);
    if (cache.unreachable !== undefined) return Promise.reject(cache.unreachable);
    const info: ResourceInfo = { gvk: query.gvk, resource: `${query.gvk.kind.toLowerCase()}s`, namespaced: true, verbs: ['create', 'update', 'patch', 'delete'] };
    return Promise.resolve({
      resolve: () => Promise.resolve(info),
      request: (options: RequestOptions) => cache.request(options),
    });
  }
}
