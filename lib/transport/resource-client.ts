// The resource client: LIST of one resource, page by page with the next page fetched ahead, and
// WATCH, over the capabilities a connection lends it.
import { childController, FleetcacheError, raceAbort, TransportError, type GroupVersionKind } from '../util/index.ts';
import type { Peek } from './bounded.ts';
import { resourcePath } from './path.ts';
import { parseListLazily } from './list-scan.ts';
import { parseListDroppingManagedFields } from './strip.ts';
import type { KubeList, ListOptions, ResourceClient, ResourceInfo, WatchEvent, WatchOptions } from './types.ts';

/** One request a resource client sends through its connection (path and query already built). */
export interface PortRequest {
  readonly method: string;
  readonly path: string;
  readonly query?: URLSearchParams;
  readonly body?: string | undefined;
  readonly contentType?: string | undefined;
  readonly gvk?: GroupVersionKind | undefined;
  /** Parses the response body; default `JSON.parse` of its text. */
  readonly parse?: ((body: Buffer) => unknown) | undefined;
  /** Sees the start of the body as it arrives. */
  readonly peek?: Peek | undefined;
}

/**
 * A LIST page is read under `maxListBytes`, anything else under `maxResponseBytes`. A continuation
 * page (`continue`) skips the QPS limiter: it is the rest of one LIST already admitted, as
 * client-go's pager does not pay the rate limit per page either; it still takes a LIST slot.
 */
export type Sent = 'list' | 'continue' | 'other';

/** One watch a resource client opens through its connection. */
export interface WatchRequest {
  readonly path: string;
  readonly query: URLSearchParams;
  readonly gvk: GroupVersionKind;
  readonly dropManagedFields: boolean;
  readonly objectText: boolean;
}

/** The private capabilities a connection lends its resource clients. */
export interface ConnectionPort {
  send(request: PortRequest, signal: AbortSignal, kind: Sent): Promise<unknown>;
  openWatch(request: WatchRequest, signal: AbortSignal): Promise<AsyncIterable<readonly WatchEvent[]>>;
}

function selectorQuery(options: { readonly labelSelector?: string | undefined; readonly fieldSelector?: string | undefined }): URLSearchParams {
  const query = new URLSearchParams();
  if (options.labelSelector !== undefined && options.labelSelector !== '') query.set('labelSelector', options.labelSelector);
  if (options.fieldSelector !== undefined && options.fieldSelector !== '') query.set('fieldSelector', options.fieldSelector);
  return query;
}

/** How a LIST page is decoded: as is, managedFields dropped, or items as text (lazy objects). */
type Strip = 'none' | 'drop' | 'text';

/** One LIST page asked for, or fetched ahead. */
interface Page {
  /** Path, query and stripping of the request: what a caller must ask for to take it. */
  readonly key: string;
  /** The signal of the caller whose LIST it continues. */
  readonly signal: AbortSignal;
  /** True once a caller took it; only then is the page after it fetched ahead. */
  claimed: boolean;
  /** Its continue token, once seen at the start of its body. */
  next: string | undefined;
  readonly cancel: () => void;
  list: Promise<KubeList>;
}

/**
 * The continue token of a list body from its first bytes: `metadata` comes before `items` in what
 * the API server writes. Undefined while neither is seen; '' for a last page (or a body in another
 * order, which then is simply not fetched ahead).
 */
export function continueTokenOf(head: Buffer): string | undefined {
  const text = head.toString('latin1');
  const items = text.indexOf('"items"');
  const meta = items === -1 ? text : text.slice(0, items);
  const match = /"continue"\s*:\s*"((?:[^"\\]|\\.)*)"/.exec(meta);
  if (match !== null) {
    try {
      return JSON.parse(`"${match[1] ?? ''}"`) as string;
    } catch {
      return '';
    }
  }
  return items === -1 ? undefined : '';
}

/**
 * LIST and WATCH of one resource over a `ClusterConnection`.
 *
 * Invariant: `#ahead` is at most one page, fetched only after a page a caller claimed; the next
 * `list()` takes it, or cancels it when it asks for anything else.
 */
export class HttpResourceClient implements ResourceClient {
  readonly cluster: string;
  readonly info: ResourceInfo;
  readonly #port: ConnectionPort;
  /** The page fetched ahead of the caller, if any (at most one). */
  #ahead: Page | undefined;

  constructor(cluster: string, info: ResourceInfo, port: ConnectionPort) {
    this.cluster = cluster;
    this.info = info;
    this.#port = port;
  }

  /**
   * One LIST page. The next page is asked for as soon as this page's continue token is known (the
   * API server writes `metadata` before `items`), so it travels while this one is read and parsed;
   * it is kept for the caller's next `list()` with that token. At most one page is fetched ahead,
   * and only for a page the caller asked for; a next call that asks for anything else drops it.
   */
  async list(options: ListOptions): Promise<KubeList> {
    const query = selectorQuery(options);
    if (options.limit !== undefined) query.set('limit', String(options.limit));
    if (options.continue !== undefined && options.continue !== '') query.set('continue', options.continue);
    if (options.resourceVersion !== undefined) query.set('resourceVersion', options.resourceVersion);
    const path = resourcePath(this.info, { namespace: options.namespace });
    const drop = options.dropManagedFields === true;
    const strip: Strip = !drop ? 'none' : options.objectText === true ? 'text' : 'drop';
    const key = `${path}?${query.toString()}#${strip}`;
    let page = this.#ahead;
    this.#ahead = undefined;
    if (page !== undefined && (page.key !== key || page.signal.aborted)) {
      page.cancel();
      page = undefined;
    }
    page ??= this.#fetch(path, query, strip, key, options.signal);
    page.claimed = true;
    if (page.next !== undefined) this.#fetchAhead(page, page.next);
    return raceAbort(page.list, options.signal);
  }

  #fetch(path: string, query: URLSearchParams, strip: Strip, key: string, signal: AbortSignal): Page {
    const child = childController(signal);
    const parse = strip === 'text' ? parseListLazily : strip === 'drop' ? parseListDroppingManagedFields : undefined;
    const kind: Sent = query.has('continue') ? 'continue' : 'list';
    const page: Page = {
      key,
      signal,
      claimed: false,
      next: undefined,
      cancel: () => { child.controller.abort(new TransportError({ cluster: this.cluster, gvk: this.info.gvk }, 'a page fetched ahead was not asked for')); },
      list: Promise.resolve(undefined as unknown as KubeList),
    };
    const peek: Peek = (head) => {
      const seen = continueTokenOf(head);
      if (seen === undefined) return false;
      if (seen !== '') {
        page.next = seen;
        if (page.claimed) this.#fetchAhead(page, seen);
      }
      return true;
    };
    page.list = this.#port.send({ method: 'GET', path, query, gvk: this.info.gvk, parse, peek }, child.controller.signal, kind).then((body) => {
      const list = body as Partial<KubeList> | undefined;
      if (typeof list !== 'object' || !Array.isArray(list.items) || typeof list.metadata !== 'object') {
        throw new TransportError({ cluster: this.cluster, gvk: this.info.gvk }, `GET ${path}: the response is not a list`);
      }
      return list as KubeList;
    }).finally(() => { child.dispose(); });
    // A page fetched ahead may never be asked for: its failure is nobody's unhandled rejection.
    page.list.catch(() => undefined);
    return page;
  }

  /** Starts fetching the page after `page` (token `next`), unless one is already ahead. */
  #fetchAhead(page: Page, next: string): void {
    if (this.#ahead !== undefined || page.signal.aborted) return;
    const [path, rest = ''] = page.key.split('?', 2);
    const hash = rest.lastIndexOf('#');
    const query = new URLSearchParams(rest.slice(0, hash));
    query.set('continue', next);
    const strip = rest.slice(hash + 1) as Strip;
    this.#ahead = this.#fetch(path ?? '', query, strip, `${path ?? ''}?${query.toString()}#${strip}`, page.signal);
  }

  async watch(options: WatchOptions): Promise<AsyncIterable<readonly WatchEvent[]>> {
    const query = selectorQuery(options);
    query.set('watch', 'true');
    query.set('resourceVersion', options.resourceVersion);
    query.set('timeoutSeconds', String(options.timeoutSeconds));
    if (options.allowWatchBookmarks) query.set('allowWatchBookmarks', 'true');
    const path = resourcePath(this.info, { namespace: options.namespace });
    try {
      return await this.#port.openWatch({ path, query, gvk: this.info.gvk, dropManagedFields: options.dropManagedFields === true, objectText: options.objectText === true }, options.signal);
    } catch (err) {
      if (err instanceof FleetcacheError || options.signal.aborted) throw err;
      throw new TransportError({ cluster: this.cluster, gvk: this.info.gvk }, `GET ${path} (watch): ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
  }
}
