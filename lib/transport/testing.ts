import { abortReason, type GroupVersionKind } from '../util/index.ts';
import { parseListLazily } from './list-scan.ts';
import { decodeWatchLine } from './watch-decoder.ts';
import type { KubeList, KubeObject, ListOptions, ResourceClient, ResourceInfo, WatchEvent, WatchOptions } from './types.ts';

/**
 * A deep copy of a JSON value that walks with its own stack: objects nest as deep as the API server
 * allows (thousands of levels), where `structuredClone` overflows the call stack.
 */
function cloneJson<T>(value: T): T {
  if (typeof value !== 'object' || value === null) return value;
  const root: unknown = Array.isArray(value) ? [] : {};
  const stack: [Record<string, unknown>, Record<string, unknown>][] = [[value as Record<string, unknown>, root as Record<string, unknown>]];
  for (let pair = stack.pop(); pair !== undefined; pair = stack.pop()) {
    const [from, to] = pair;
    for (const key of Object.keys(from)) {
      const child = from[key];
      if (typeof child === 'object' && child !== null) {
        const copy = Array.isArray(child) ? [] : {};
        to[key] = copy;
        stack.push([child as Record<string, unknown>, copy]);
      } else {
        to[key] = child;
      }
    }
  }
  return root as T;
}

type StreamItem = { readonly event: WatchEvent } | { readonly end: true } | { readonly error: Error };

/**
 * One open watch of a {@link FakeResourceClient}: the test pushes events, ends or breaks it.
 *
 * Invariant: `#queue` holds what was pushed and not yet consumed; `#wake` is set only while the
 * consumer waits on an empty queue.
 */
export class FakeWatchStream implements AsyncIterable<readonly WatchEvent[]> {
  readonly options: WatchOptions;
  #queue: StreamItem[] = [];
  #wake: (() => void) | undefined;
  #closed = false;
  readonly #onClose: (stream: FakeWatchStream) => void;

  constructor(options: WatchOptions, onClose: (stream: FakeWatchStream) => void) {
    this.options = options;
    this.#onClose = onClose;
    options.signal.addEventListener('abort', () => { this.#put({ error: abortReason(options.signal) }); }, { once: true });
  }

  /** True once the consumer left (stream ended, failed, or abandoned). */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Queues an event. A watch opened with `objectText` (and `dropManagedFields`) gets it as the real
   * decoder makes it from the event's JSON line: the object as text where the pre-pass vouches for
   * it (an object too deep to serialize is sent parsed).
   */
  push(event: WatchEvent): void {
    if (this.options.objectText === true && this.options.dropManagedFields === true) {
      let line: string | undefined;
      try {
        line = JSON.stringify(event);
      } catch {
        line = undefined;
      }
      if (line !== undefined) {
        this.pushLine(line);
        return;
      }
    }
    this.#put({ event: cloneJson(event) });
  }

  /**
   * Queues one line of a watch stream, decoded as the connection decodes it (with this watch's
   * options): a malformed line breaks the stream with the decoder's error, as over the wire.
   */
  pushLine(line: string): void {
    const buf = Buffer.from(line);
    let event: WatchEvent | undefined;
    try {
      event = decodeWatchLine(buf, 0, buf.length, { cluster: 'fake' }, { dropManagedFields: this.options.dropManagedFields, objectText: this.options.objectText });
    } catch (err) {
      this.#put({ error: err instanceof Error ? err : new Error(String(err)) });
      return;
    }
    if (event !== undefined) this.#put({ event });
  }

  /** Ends the stream normally, as a server-side timeout does. */
  end(): void {
    this.#put({ end: true });
  }

  /** Breaks the stream with an error (a cut connection, an ERROR event, a malformed line). */
  fail(error: Error): void {
    this.#put({ error });
  }

  #put(item: StreamItem): void {
    this.#queue.push(item);
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }

  /** Yields the events pushed since the last batch, as the real stream does, up to an end or error. */
  async *[Symbol.asyncIterator](): AsyncGenerator<readonly WatchEvent[], void, undefined> {
    try {
      for (;;) {
        const batch: WatchEvent[] = [];
        let item = this.#queue[0];
        while (item !== undefined && 'event' in item) {
          batch.push(item.event);
          this.#queue.shift();
          item = this.#queue[0];
        }
        if (batch.length > 0) {
          yield batch;
          continue;
        }
        if (item === undefined) {
          await new Promise<void>((resolve) => { this.#wake = resolve; });
          continue;
        }
        this.#queue.shift();
        if ('end' in item) return;
        throw item.error;
      }
    } finally {
      this.#closed = true;
      this.#onClose(this);
    }
  }
}

/** Options of {@link FakeResourceClient}. */
export interface FakeResourceClientOptions {
  /** Default `fake`. */
  readonly cluster?: string;
  /** Default v1 ConfigMap (`configmaps`, namespaced). */
  readonly info?: ResourceInfo;
}

/**
 * An in-memory {@link ResourceClient} for unit tests: a collection with integer resourceVersions,
 * paginated LIST, watches the test drives, and failures injected per operation. Objects are copied
 * in and out, as over the wire.
 *
 * Invariants: `#objects` is the collection as a LIST would return it; `#streams` holds exactly the
 * watches whose consumer has not left.
 */
export class FakeResourceClient implements ResourceClient {
  readonly cluster: string;
  readonly info: ResourceInfo;
  /** Every LIST call, in order. */
  readonly listCalls: ListOptions[] = [];
  /** Every WATCH call, in order. */
  readonly watchCalls: WatchOptions[] = [];
  readonly #objects = new Map<string, KubeObject>();
  #rv = 100;
  #uid = 0;
  readonly #failures: { readonly op: 'list' | 'watch'; readonly error: Error }[] = [];
  readonly #streams = new Set<FakeWatchStream>();

  constructor(options: FakeResourceClientOptions = {}) {
    this.cluster = options.cluster ?? 'fake';
    this.info = options.info ?? { gvk: { group: '', version: 'v1', kind: 'ConfigMap' }, resource: 'configmaps', namespaced: true, verbs: ['list', 'watch'] };
  }

  get gvk(): GroupVersionKind {
    return this.info.gvk;
  }

  /** The collection's current resourceVersion. */
  get resourceVersion(): string {
    return String(this.#rv);
  }

  /** Watches still open, oldest first. */
  get streams(): FakeWatchStream[] {
    return [...this.#streams];
  }

  /** The newest open watch, if any. */
  get stream(): FakeWatchStream | undefined {
    return this.streams.at(-1);
  }

  /**
   * Creates or replaces an object (a new resourceVersion; a new UID unless `metadata.uid` is
   * given or the object exists) and sends ADDED/MODIFIED to open watches unless `quiet`.
   */
  upsert(obj: KubeObject, options: { readonly quiet?: boolean } = {}): KubeObject {
    const meta = obj.metadata ?? {};
    const key = meta.namespace === undefined || meta.namespace === '' ? meta.name ?? '' : `${meta.namespace}/${meta.name ?? ''}`;
    const previous = this.#objects.get(key);
    const uid = meta.uid ?? previous?.metadata?.uid ?? `uid-${++this.#uid}`;
    const stored: KubeObject = {
      apiVersion: 'v1',
      kind: this.info.gvk.kind,
      ...cloneJson(obj),
      metadata: { ...cloneJson(meta), uid, resourceVersion: String(++this.#rv) },
    };
    this.#objects.set(key, stored);
    if (options.quiet !== true) this.send({ type: previous === undefined ? 'ADDED' : 'MODIFIED', object: stored });
    return cloneJson(stored);
  }

  /** Deletes an object and sends DELETED (with a new resourceVersion) unless `quiet`. */
  remove(key: string, options: { readonly quiet?: boolean } = {}): void {
    const previous = this.#objects.get(key);
    if (previous === undefined) throw new Error(`fake: no object ${key}`);
    this.#objects.delete(key);
    const finalState = { ...previous, metadata: { ...previous.metadata, resourceVersion: String(++this.#rv) } };
    if (options.quiet !== true) this.send({ type: 'DELETED', object: finalState });
  }

  /** Sends a BOOKMARK at the current resourceVersion to open watches. */
  bookmark(): void {
    this.send({ type: 'BOOKMARK', object: { kind: this.info.gvk.kind, metadata: { resourceVersion: this.resourceVersion } } });
  }

  /** Sends an event to every open watch. */
  send(event: WatchEvent): void {
    for (const stream of this.#streams) stream.push(event);
  }

  /** The next call of `op` rejects with `error` (queued in order). */
  failNext(op: 'list' | 'watch', error: Error): void {
    this.#failures.push({ op, error });
  }

  list(options: ListOptions): Promise<KubeList> {
    this.listCalls.push(options);
    const failure = this.#takeFailure('list');
    if (failure !== undefined) return Promise.reject(failure);
    if (options.signal.aborted) return Promise.reject(abortReason(options.signal));
    const all = [...this.#objects.entries()]
      .filter(([, obj]) => options.namespace === undefined || obj.metadata?.namespace === options.namespace)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    const start = options.continue === undefined ? 0 : Number(options.continue.split(':')[1]);
    const rv = options.continue === undefined ? this.resourceVersion : options.continue.split(':')[0] ?? '';
    const end = options.limit === undefined ? all.length : Math.min(all.length, start + options.limit);
    const items = all.slice(start, end).map(([, obj]) => {
      // Items of a typed list carry no apiVersion/kind.
      const { apiVersion: _apiVersion, kind: _kind, ...rest } = cloneJson(obj);
      return rest;
    });
    const page: KubeList = {
      metadata: { resourceVersion: rv, ...(end < all.length ? { continue: `${rv}:${end}` } : {}) },
      items,
    };
    // Items as text, as the real client decodes the page's JSON body for lazy objects.
    if (options.objectText === true && options.dropManagedFields === true) return Promise.resolve(parseListLazily(Buffer.from(JSON.stringify(page))) as KubeList);
    return Promise.resolve(page);
  }

  watch(options: WatchOptions): Promise<AsyncIterable<readonly WatchEvent[]>> {
    this.watchCalls.push(options);
    const failure = this.#takeFailure('watch');
    if (failure !== undefined) return Promise.reject(failure);
    if (options.signal.aborted) return Promise.reject(abortReason(options.signal));
    const stream = new FakeWatchStream(options, (s) => { this.#streams.delete(s); });
    this.#streams.add(stream);
    return Promise.resolve(stream);
  }

  #takeFailure(op: 'list' | 'watch'): Error | undefined {
    const index = this.#failures.findIndex((f) => f.op === op);
    if (index === -1) return undefined;
    return this.#failures.splice(index, 1)[0]?.error;
  }
}
