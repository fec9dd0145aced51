import type { KubeObject, ObjectText, ResourceClient, ResourceResolver, SelectorOptions } from '../transport/index.ts';
import {
  abortReason,
  apiVersionOf,
  Backoff,
  childController,
  ClosedError,
  isAbortError,
  KubeApiError,
  sleep,
  toError,
  TransportError,
  UnknownKindError,
  WatchDecodeError,
  type BackoffOptions,
  type Clock,
  type GroupVersionKind,
  type Logger,
} from '../util/index.ts';

/** Where the reflector's objects go: the subset of the informer a reflector drives. */
export interface ReflectorSink {
  /**
   * A complete LIST, to be diffed against what is cached (freshly decoded objects). With
   * `objectText`, `texts[i]` may carry item `i` as text; `items[i]` then holds only its metadata.
   */
  replace(items: readonly KubeObject[], texts: readonly (ObjectText | undefined)[], reason: ListReason): void;
  /**
   * One watch event (freshly decoded object). With `objectText`, `text` may carry the object as
   * text; `obj` then holds only its metadata.
   */
  apply(type: 'ADDED' | 'MODIFIED' | 'DELETED', obj: KubeObject, text: ObjectText | undefined): void;
}

/** What a reflector watches: a ready client, or a resolver that finds the resource by GVK. */
export type ReflectorSource =
  | { readonly client: ResourceClient }
  | { readonly resolver: ResourceResolver; readonly gvk: GroupVersionKind };

/** Settings of a {@link Reflector}, validated and defaulted by the informer. */
export interface ReflectorSettings extends SelectorOptions {
  readonly source: ReflectorSource;
  readonly sink: ReflectorSink;
  readonly pageSize: number;
  /** Ask the client to leave managedFields and the last-applied annotation out (the sink drops them anyway). */
  readonly dropManagedFields: boolean;
  /** Ask for objects as text where the pre-pass vouches for them (with `dropManagedFields`). */
  readonly objectText: boolean;
  readonly watchInactivityTimeoutMs: number;
  readonly backoff: BackoffOptions;
  readonly slowBackoff: BackoffOptions;
  readonly clock: Clock;
  readonly random: () => number;
  readonly logger: Logger;
  /** Called for every failed attempt (410 Gone excepted: it is routine and leads to a relist). */
  readonly onError: (error: Error) => void;
  /** Called when a LIST or WATCH succeeds after failed attempts (the last error is cleared). */
  readonly onRecovered: () => void;
}

/** Why a LIST happened. */
export type ListReason = 'initial' | 'gone' | 'resolved';

/** The reflector's counters and times; the informer publishes them in its stats. */
export interface ReflectorState {
  relists: number;
  gones: number;
  reconnects: number;
  events: number;
  resourceVersion: string;
  lastSyncTime: number | undefined;
  lastEventTime: number | undefined;
  lastError: Error | undefined;
  lastErrorTime: number | undefined;
}

/** Reads the flag afresh: TypeScript would otherwise assume it unchanged across an `await`. */
function isAborted(signal: AbortSignal): boolean {
  return signal.aborted;
}

/** How the loop reacts to a failure. */
type Reaction =
  | { readonly kind: 'relist' }
  | { readonly kind: 'retry'; readonly retryAfterMs: number }
  | { readonly kind: 'slow'; readonly resolveAgain: boolean };

/** Retry-After values beyond this are capped (a misconfigured proxy must not park us for hours). */
const MAX_RETRY_AFTER_MS = 600_000;
/** A watch that ends sooner than this without a single event counts as a failure (avoids a hot loop). */
const SHORT_WATCH_MS = 1_000;

/**
 * Classifies a failure. Network errors, malformed lines, 408, 429 and 5xx are transient; 410 Gone
 * (status, or an ERROR event with reason Expired/Gone) means relist; 401/403/404, an unknown kind
 * and other 4xx are retried slowly (credentials rotate, CRDs appear, RBAC is granted).
 */
export function classifyFailure(err: unknown): Reaction {
  if (err instanceof KubeApiError) {
    if (err.isGone) return { kind: 'relist' };
    const code = err.statusCode;
    if (code === 408 || code === 429 || code >= 500) {
      return { kind: 'retry', retryAfterMs: Math.min((err.retryAfterSeconds ?? 0) * 1000, MAX_RETRY_AFTER_MS) };
    }
    return { kind: 'slow', resolveAgain: code === 404 };
  }
  if (err instanceof UnknownKindError) return { kind: 'slow', resolveAgain: true };
  if (err instanceof ClosedError) return { kind: 'slow', resolveAgain: false };
  return { kind: 'retry', retryAfterMs: 0 };
}

/**
 * Keeps a sink in step with one resource: paginated LIST, then WATCH from the list's
 * resourceVersion with bookmarks, re-opening the watch when it ends and relisting on 410 Gone.
 * resourceVersions are opaque: only stored, sent back and compared for equality. Never stops
 * retrying on its own; only the signal given to `run` stops it.
 */
export class Reflector {
  readonly #s: ReflectorSettings;
  readonly #backoff: Backoff;
  readonly #slowBackoff: Backoff;
  /** Counters and times; the loop is their only writer. */
  readonly state: ReflectorState = {
    relists: 0,
    gones: 0,
    reconnects: 0,
    events: 0,
    resourceVersion: '',
    lastSyncTime: undefined,
    lastEventTime: undefined,
    lastError: undefined,
    lastErrorTime: undefined,
  };
  /** True once a LIST completed: later LISTs are relists. */
  #listed = false;
  /** True once a watch was opened since the last LIST: the next open is a reconnect. */
  #watchedSinceList = false;
  /** Watch events received so far, bookmarks included: a 410 after one is not "in a row". */
  #received = 0;

  constructor(settings: ReflectorSettings) {
    this.#s = settings;
    this.#backoff = new Backoff(settings.clock, { random: settings.random, ...settings.backoff });
    this.#slowBackoff = new Backoff(settings.clock, { initialMs: 5_000, maxMs: 60_000, random: settings.random, ...settings.slowBackoff });
  }

  /** The cluster name, for logs and errors. */
  get cluster(): string {
    const source = this.#s.source;
    return 'client' in source ? source.client.cluster : source.resolver.name;
  }

  /** The kind watched. */
  get gvk(): GroupVersionKind {
    const source = this.#s.source;
    return 'client' in source ? source.client.info.gvk : source.gvk;
  }

  /** Runs until `signal` aborts; resolves once every stream and timer it used is released. */
  async run(signal: AbortSignal): Promise<void> {
    const source = this.#s.source;
    let client: ResourceClient | undefined = 'client' in source ? source.client : undefined;
    let listReason: ListReason | undefined = 'initial';
    // 410s in a row with no watch event between them: the first relists at once, later ones back off.
    let gonesInARow = 0;
    while (!signal.aborted) {
      const receivedBefore = this.#received;
      let progressed = false;
      let delay: number;
      try {
        client ??= await this.#resolve(signal);
        if (listReason !== undefined) {
          await this.#list(client, listReason, signal);
          listReason = undefined;
        }
        progressed = await this.#watch(client, signal);
        if (progressed) gonesInARow = 0;
        continue;
      } catch (err) {
        if (isAborted(signal)) break;
        const reaction = classifyFailure(err);
        const error = toError(err);
        switch (reaction.kind) {
          case 'relist':
            this.state.gones++;
            listReason ??= 'gone';
            // A watch that delivered events before its 410 ends the streak (the routine compaction case).
            if (this.#received !== receivedBefore) gonesInARow = 0;
            delay = gonesInARow++ === 0 ? 0 : this.#backoff.next();
            this.#s.logger.info('resourceVersion expired; relisting', { resourceVersion: this.state.resourceVersion, inMs: Math.round(delay) });
            break;
          case 'retry':
            delay = Math.max(this.#backoff.next(), reaction.retryAfterMs);
            this.#record(error);
            this.#s.logger.warn('list/watch failed; retrying', { error: error.message, inMs: Math.round(delay) });
            break;
          case 'slow':
            delay = this.#slowBackoff.next();
            this.#record(error);
            if (reaction.resolveAgain && !('client' in source)) {
              client = undefined;
              listReason ??= 'resolved';
            }
            this.#s.logger.warn('list/watch refused; retrying slowly', { error: error.message, inMs: Math.round(delay) });
            break;
        }
      }
      if (delay <= 0) continue;
      try {
        await sleep(delay, signal, this.#s.clock);
      } catch {
        break;
      }
    }
  }

  #record(error: Error): void {
    this.state.lastError = error;
    this.state.lastErrorTime = this.#s.clock.now();
    this.#s.onError(error);
  }

  #recovered(): void {
    if (this.state.lastError === undefined) return;
    this.state.lastError = undefined;
    this.state.lastErrorTime = undefined;
    this.#s.onRecovered();
  }

  async #resolve(signal: AbortSignal): Promise<ResourceClient> {
    const source = this.#s.source;
    if ('client' in source) return source.client;
    const info = await source.resolver.resolve(source.gvk, signal);
    return source.resolver.resourceClient(info);
  }

  /**
   * Reads the whole collection page by page, then hands it to the sink at once. An expired continue
   * token restarts the LIST; a second expiry in the same LIST falls back to one unpaginated request.
   */
  async #list(client: ResourceClient, reason: ListReason, signal: AbortSignal): Promise<void> {
    const s = this.#s;
    const items: KubeObject[] = [];
    const texts: (ObjectText | undefined)[] = [];
    const apiVersion = apiVersionOf(client.info.gvk);
    const kind = client.info.gvk.kind;
    let limit: number | undefined = s.pageSize;
    let token: string | undefined;
    let resourceVersion = '';
    let expired = false;
    for (;;) {
      let page;
      try {
        page = await client.list({ namespace: s.namespace, labelSelector: s.labelSelector, fieldSelector: s.fieldSelector, limit, continue: token, dropManagedFields: s.dropManagedFields, objectText: s.objectText, signal });
      } catch (err) {
        if (token === undefined || !(err instanceof KubeApiError) || !err.isGone) throw err;
        this.state.gones++;
        s.logger.info('continue token expired; restarting the list', { paginated: !expired });
        items.length = 0;
        texts.length = 0;
        token = undefined;
        if (expired) limit = undefined;
        expired = true;
        continue;
      }
      const pageTexts = page.texts;
      for (const [k, item] of page.items.entries()) {
        // Items of a typed list carry no apiVersion/kind; handlers and callers want them (an item
        // as text gets them when parsed).
        if (item.kind === undefined) (item as { apiVersion?: string; kind?: string }).apiVersion = apiVersion;
        if (item.kind === undefined) (item as { kind?: string }).kind = kind;
        items.push(item);
        texts.push(pageTexts?.[k]);
      }
      if (token === undefined) resourceVersion = page.metadata.resourceVersion ?? '';
      token = page.metadata.continue;
      if (token === undefined || token === '') break;
      if (signal.aborted) throw abortReason(signal);
    }
    if (signal.aborted) throw abortReason(signal);
    s.sink.replace(items, texts, reason);
    this.state.resourceVersion = resourceVersion;
    this.state.lastSyncTime = s.clock.now();
    if (this.#listed) this.state.relists++;
    this.#listed = true;
    this.#watchedSinceList = false;
    this.#recovered();
  }

  /**
   * One WATCH from the current resourceVersion. Returns normally when the server ends the stream
   * (true when at least one event arrived); throws on failure. An inactivity deadline, re-armed
   * lazily from the time of the last event, aborts a stream that went silent.
   */
  async #watch(client: ResourceClient, signal: AbortSignal): Promise<boolean> {
    const s = this.#s;
    const clock = s.clock;
    const child = childController(signal);
    const watchSignal = child.controller.signal;
    const started = clock.now();
    let lastActivity = started;
    let received = 0;
    const idleLimit = s.watchInactivityTimeoutMs;
    const scope = { cluster: client.cluster, gvk: client.info.gvk };
    let timer = clock.setTimer(idleLimit, function check(): void {
      const idle = clock.now() - lastActivity;
      if (idle >= idleLimit) {
        child.controller.abort(new TransportError(scope, `watch stream silent for ${Math.round(idle / 1000)} s; reconnecting`));
      } else {
        timer = clock.setTimer(idleLimit - idle, check);
      }
    });
    if (this.#watchedSinceList) this.state.reconnects++;
    this.#watchedSinceList = true;
    try {
      const stream = await client.watch({
        namespace: s.namespace,
        labelSelector: s.labelSelector,
        fieldSelector: s.fieldSelector,
        resourceVersion: this.state.resourceVersion,
        // Randomized so the watches of a fleet do not all reconnect in the same second.
        timeoutSeconds: Math.floor(300 + s.random() * 300),
        allowWatchBookmarks: true,
        dropManagedFields: s.dropManagedFields,
        objectText: s.objectText,
        signal: watchSignal,
      });
      this.#recovered();
      lastActivity = clock.now();
      events: for await (const batch of stream) {
        lastActivity = clock.now();
        this.state.lastEventTime = lastActivity;
        for (const event of batch) {
          // A handler may stop the informer mid-batch: nothing after that is applied.
          if (watchSignal.aborted) break events;
          received++;
          this.#received++;
          const rv = event.object.metadata?.resourceVersion;
          if (event.type !== 'BOOKMARK') {
            this.state.events++;
            s.sink.apply(event.type, event.object, event.text);
          }
          if (rv !== undefined && rv !== '') this.state.resourceVersion = rv;
        }
      }
      if (watchSignal.aborted) throw abortReason(watchSignal);
    } catch (err) {
      // A stream silenced by the deadline fails with the deadline's TransportError.
      if (!signal.aborted && watchSignal.aborted && isAbortError(err)) throw abortReason(watchSignal);
      if (err instanceof WatchDecodeError) s.logger.warn('malformed watch event; resuming from the last good one', { excerpt: err.excerpt });
      throw err;
    } finally {
      timer.cancel();
      child.dispose();
    }
    if (received === 0 && clock.now() - started < SHORT_WATCH_MS) {
      throw new TransportError(scope, `watch closed after ${clock.now() - started} ms without any event`);
    }
    return received > 0;
  }
}
