import type { GroupVersionKind, KubeObject } from '../util/index.ts';

export type { KubeObject, ObjectMeta, Wire } from '../util/index.ts';

/**
 * An object kept as its JSON text, not parsed (a watch opened with `objectText`): `text` is the
 * object (without managedFields and the last-applied annotation, raw spellings), and
 * `text.slice(metadataStart, metadataEnd)` its metadata. Parsing `text` gives the object.
 */
export interface ObjectText {
  readonly text: string;
  readonly metadataStart: number;
  readonly metadataEnd: number;
}

/** One page of a LIST. */
export interface KubeList<T extends KubeObject = KubeObject> {
  readonly apiVersion?: string;
  readonly kind?: string;
  readonly metadata: {
    /** The collection's resourceVersion: where a WATCH continues from. Opaque. */
    readonly resourceVersion?: string;
    /** Token for the next page; absent or '' on the last page. */
    readonly continue?: string;
    readonly remainingItemCount?: number;
  };
  readonly items: T[];
  /**
   * With `ListOptions.objectText`: `texts[i]`, where set, is item `i` as text (as a watch event's
   * `text`), and `items[i]` then holds only its parsed `metadata`. Absent otherwise.
   */
  readonly texts?: readonly (ObjectText | undefined)[];
}

/**
 * An event of a WATCH stream. ERROR events never appear here: the stream throws them as a
 * `KubeApiError` (a 410 one has `isGone`). A BOOKMARK carries only a resourceVersion.
 */
export type WatchEvent<T extends KubeObject = KubeObject> =
  | { readonly type: 'ADDED' | 'MODIFIED' | 'DELETED'; readonly object: T; readonly text?: ObjectText | undefined }
  | { readonly type: 'BOOKMARK'; readonly object: KubeObject };

/** A resource the server serves, as discovery resolved it. */
export interface ResourceInfo {
  readonly gvk: GroupVersionKind;
  /** Plural resource name used in URLs (`configmaps`, `kustomizations`). */
  readonly resource: string;
  /** True for namespaced resources, false for cluster-scoped ones. */
  readonly namespaced: boolean;
  /** Verbs the server allows on the collection (`list`, `watch`, `create`, ...). */
  readonly verbs: readonly string[];
}

/** What narrows a LIST or WATCH. The same selectors must be given to both. */
export interface SelectorOptions {
  /** Only this namespace; unset means all namespaces (and is required for cluster-scoped kinds). */
  readonly namespace?: string | undefined;
  /** Label selector in the API's string form (`app=web,tier!=db`); unset means everything. */
  readonly labelSelector?: string | undefined;
  /** Field selector in the API's string form (`metadata.name=x`); unset means everything. */
  readonly fieldSelector?: string | undefined;
}

/** Options of {@link ResourceClient.list}. */
export interface ListOptions extends SelectorOptions {
  /** Page size; unset asks for the whole collection in one response. */
  readonly limit?: number | undefined;
  /** The previous page's continue token. */
  readonly continue?: string | undefined;
  /** Unset means a consistent (quorum) read, the only kind fleetcache issues. */
  readonly resourceVersion?: string | undefined;
  /** As {@link WatchOptions.dropManagedFields}, for each item of the page. Default false. */
  readonly dropManagedFields?: boolean | undefined;
  /**
   * With `dropManagedFields`: items the pre-pass vouches for come as text in `KubeList.texts`,
   * found by the watch events' scan (see {@link WatchOptions.objectText}); no item is parsed whole.
   * Default false.
   */
  readonly objectText?: boolean | undefined;
  readonly signal: AbortSignal;
}

/** Options of {@link ResourceClient.watch}. */
export interface WatchOptions extends SelectorOptions {
  /** Where to start: events after this resourceVersion. */
  readonly resourceVersion: string;
  /** The server closes the stream after this many seconds. */
  readonly timeoutSeconds: number;
  /** Ask for BOOKMARK events. */
  readonly allowWatchBookmarks: boolean;
  /**
   * Leave `metadata.managedFields` and the `kubectl.kubernetes.io/last-applied-configuration`
   * annotation out of each event's object, without ever building them (cheaper than deleting
   * them after parsing). Only raw spellings of those keys are dropped, so a caller that must not
   * see them still removes them itself. Default false: objects arrive whole.
   */
  readonly dropManagedFields?: boolean | undefined;
  /**
   * With `dropManagedFields`: each ADDED/MODIFIED/DELETED event whose object the pre-pass can
   * vouch for carries the object as `text` (not parsed), and its `object` holds only the parsed
   * `metadata`. An event without `text` carries the whole object as before. The object's body is
   * then checked only for its strings and brackets: a grammar error in it shows when the text is
   * parsed. Default false.
   */
  readonly objectText?: boolean | undefined;
  /** Aborting ends the stream and releases its socket. */
  readonly signal: AbortSignal;
}

/**
 * The subset of a cluster connection a reflector uses: LIST and WATCH of one resource. Failures
 * reject (or throw from the stream) with typed errors: `KubeApiError` for an HTTP status or an
 * ERROR event, `TransportError` for a broken connection, `WatchDecodeError` for a malformed line,
 * and the signal's reason when aborted.
 */
export interface ResourceClient {
  /** The cluster's name, for errors and logs. */
  readonly cluster: string;
  readonly info: ResourceInfo;
  list(options: ListOptions): Promise<KubeList>;
  /**
   * Opens a WATCH. Resolves once the server accepted it (HTTP 200); the stream then yields events
   * in order, in batches (never empty: whatever arrived since the consumer last took a batch, so a
   * busy stream costs one iteration per socket read rather than one per event), and ends when the server closes
   * it. Leaving the loop early releases the socket.
   */
  watch(options: WatchOptions): Promise<AsyncIterable<readonly WatchEvent[]>>;
}

/**
 * The subset of a `ClusterConnection` an informer needs to find its resource: discovery plus a
 * client for what it found.
 */
export interface ResourceResolver {
  readonly name: string;
  /** Resolves a GVK through discovery; rejects with `UnknownKindError` when it is not served. */
  resolve(gvk: GroupVersionKind, signal?: AbortSignal): Promise<ResourceInfo>;
  resourceClient(info: ResourceInfo): ResourceClient;
}
