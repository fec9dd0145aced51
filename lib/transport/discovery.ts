// Discovery: which resource and scope serve a GVK on one cluster, read per group/version, cached
// with a TTL and re-read on a miss (a CRD installed later is found).
import {
  apiVersionOf,
  KubeApiError,
  raceAbort,
  UnknownKindError,
  type Clock,
  type GroupVersionKind,
  type Logger,
} from '../util/index.ts';
import { checkGvk, checkResource } from './segments.ts';
import type { ResourceInfo } from './types.ts';

/**
 * Group/versions whose discovery a connection remembers (least recently used re-read beyond). A
 * connection resolves only the kinds its caches watch, a handful in practice.
 */
const DISCOVERY_GROUPS = 64;

interface DiscoveredGroup {
  /**
   * The top-level resources (no subresources) of one group/version, in the server's order. An
   * array, searched from the end (a kind listed twice resolves to its last entry, as a Map set in
   * order would): a Map per group/version cost about 130 bytes more for the few kinds of a group.
   */
  readonly kinds: readonly ResourceInfo[];
  /** When it was read (the connection's clock): trusted until `ttlMs` later. */
  readonly readAt: number;
}

/**
 * The discovery results of one connection: at most `max` group/versions, the least recently used
 * dropped first, each trusted for `ttlMs` after it was read (a hit does not extend it). A Map in
 * recency order: lru-cache, used before, allocates its arrays for `max` up front, about 5.6 KiB
 * per cluster for the handful of group/versions a connection uses (issue 12).
 *
 * Invariant: `#groups` iterates from the least to the most recently used and holds at most `max`.
 */
class DiscoveryCache {
  readonly #groups = new Map<string, DiscoveredGroup>();
  readonly #max: number;
  readonly #ttlMs: number;
  readonly #clock: Clock;

  constructor(options: { readonly max: number; readonly ttlMs: number; readonly clock: Clock }) {
    this.#max = options.max;
    this.#ttlMs = options.ttlMs;
    this.#clock = options.clock;
  }

  /** The group/version's result while it is trusted (it becomes the most recently used); undefined otherwise. */
  get(gv: string): DiscoveredGroup | undefined {
    const group = this.#groups.get(gv);
    if (group === undefined) return undefined;
    this.#groups.delete(gv);
    if (this.#clock.now() - group.readAt > this.#ttlMs) return undefined;
    this.#groups.set(gv, group);
    return group;
  }

  set(gv: string, group: DiscoveredGroup): void {
    this.#groups.delete(gv);
    this.#groups.set(gv, group);
    if (this.#groups.size <= this.#max) return;
    for (const oldest of this.#groups.keys()) {
      this.#groups.delete(oldest);
      break;
    }
  }

  clear(): void {
    this.#groups.clear();
  }
}

interface ApiResourceList {
  readonly resources?: readonly { readonly name?: unknown; readonly kind?: unknown; readonly namespaced?: unknown; readonly verbs?: unknown }[];
}

/** Options of {@link Discovery}. */
export interface DiscoveryOptions {
  /** The cluster's name, carried by the errors. */
  readonly cluster: string;
  /** How long a result is trusted. */
  readonly ttlMs: number;
  readonly clock: Clock;
  readonly logger: Logger;
  /**
   * Reads one discovery document: a GET of `path` through the connection's limiters, on a signal
   * that only closing the connection aborts (the read is shared by every caller of its group/version).
   */
  readonly fetch: (path: string, gvk: GroupVersionKind) => Promise<unknown>;
}

/**
 * The discovery of one connection: GVK → resource and scope, one read per group/version at a time.
 *
 * Invariants: `#cache` holds only successful discovery results; `#discovering` holds the one
 * in-flight discovery request per group/version and loses it when it settles.
 */
export class Discovery {
  readonly #cluster: string;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #fetch: (path: string, gvk: GroupVersionKind) => Promise<unknown>;
  readonly #cache: DiscoveryCache;
  /** Created while a discovery is in flight, dropped when none is: most of a connection's life. */
  #discovering: Map<string, Promise<DiscoveredGroup>> | undefined;

  constructor(options: DiscoveryOptions) {
    this.#cluster = options.cluster;
    this.#clock = options.clock;
    this.#logger = options.logger;
    this.#fetch = options.fetch;
    this.#cache = new DiscoveryCache({ max: DISCOVERY_GROUPS, ttlMs: options.ttlMs, clock: options.clock });
  }

  /**
   * A GVK's resource name and scope. A cached group/version that lacks the kind is re-read once
   * before giving up (the errors are those of `ClusterConnection.resolve`).
   */
  async resolve(gvk: GroupVersionKind, signal?: AbortSignal): Promise<ResourceInfo> {
    checkGvk(gvk);
    const gv = apiVersionOf(gvk);
    let group = this.#cache.get(gv);
    let fresh = false;
    if (group === undefined) {
      group = await this.#discover(gv, gvk, signal);
      fresh = true;
    }
    let info = kindIn(group, gvk.kind);
    if (info === undefined && !fresh) {
      group = await this.#discover(gv, gvk, signal);
      info = kindIn(group, gvk.kind);
    }
    if (info === undefined) throw new UnknownKindError({ cluster: this.#cluster, gvk, statusCode: 200 });
    return info;
  }

  /** Forgets every result (the connection closed). */
  clear(): void {
    this.#cache.clear();
  }

  #discover(gv: string, gvk: GroupVersionKind, signal: AbortSignal | undefined): Promise<DiscoveredGroup> {
    const discovering = this.#discovering ??= new Map<string, Promise<DiscoveredGroup>>();
    let pending = discovering.get(gv);
    if (pending === undefined) {
      pending = this.#fetchGroup(gv, gvk).finally(() => {
        discovering.delete(gv);
        if (discovering.size === 0 && this.#discovering === discovering) this.#discovering = undefined;
      });
      discovering.set(gv, pending);
    }
    return raceAbort(pending, signal);
  }

  async #fetchGroup(gv: string, gvk: GroupVersionKind): Promise<DiscoveredGroup> {
    const path = gvk.group === '' ? `/api/${gvk.version}` : `/apis/${gv}`;
    let body: unknown;
    try {
      body = await this.#fetch(path, gvk);
    } catch (err) {
      if (err instanceof KubeApiError && err.statusCode === 404) throw new UnknownKindError({ cluster: this.#cluster, gvk, statusCode: 404 }, { cause: err });
      throw err;
    }
    const kinds: ResourceInfo[] = [];
    for (const r of (body as ApiResourceList | undefined)?.resources ?? []) {
      if (typeof r.name !== 'string' || typeof r.kind !== 'string' || r.name.includes('/')) continue;
      // The server names the resource pasted into later URLs: an entry that is not a plain
      // segment (or a kind we would refuse to ask for) is left out, as if not served.
      if (!validDiscovered(gvk, r.name, r.kind)) {
        this.#logger.debug('discovery entry left out: not a valid resource name or kind', { groupVersion: gv });
        continue;
      }
      const verbs = Array.isArray(r.verbs) ? r.verbs.filter((v): v is string => typeof v === 'string') : [];
      kinds.push(Object.freeze({
        gvk: Object.freeze({ group: gvk.group, version: gvk.version, kind: r.kind }),
        resource: r.name,
        namespaced: r.namespaced === true,
        verbs: verbSet(verbs),
      }));
    }
    // A copy of exactly its length: `push` leaves room for more (kept per group/version).
    const group: DiscoveredGroup = { kinds: kinds.slice(), readAt: this.#clock.now() };
    this.#cache.set(gv, group);
    this.#logger.debug('discovered group version', { groupVersion: gv, kinds: kinds.length });
    return group;
  }
}

/** The kind's entry in a discovered group/version (its last, should the server list it twice). */
function kindIn(group: DiscoveredGroup, kind: string): ResourceInfo | undefined {
  return group.kinds.findLast((info) => info.gvk.kind === kind);
}

/** Distinct verb lists shared by every discovered kind of the process (most kinds have the same few). */
const verbSets = new Map<string, readonly string[]>();
/**
 * Bounds on `verbSets`, which outlives every connection: a server inventing verb lists cannot grow
 * it past `VERB_SETS` entries, nor pin a long list for the process's life (the longest list a
 * kube-apiserver serves, all eight verbs, is 76 characters as JSON).
 */
const VERB_SETS = 256;
const VERB_SET_CHARS = 256;

/**
 * The frozen verb list of a discovered kind, shared with every kind that has the same one: every
 * cluster's discovery repeats a handful of lists, each about 150 bytes per kind if kept apart. A
 * list beyond the bounds is kept by its kind alone (and goes with its connection's discovery).
 */
export function verbSet(verbs: readonly string[]): readonly string[] {
  const key = JSON.stringify(verbs);
  const known = verbSets.get(key);
  if (known !== undefined) return known;
  const set = Object.freeze(verbs.slice());
  if (verbSets.size < VERB_SETS && key.length <= VERB_SET_CHARS) verbSets.set(key, set);
  return set;
}

function validDiscovered(gvk: GroupVersionKind, resource: string, kind: string): boolean {
  try {
    checkResource(resource);
    checkGvk({ group: gvk.group, version: gvk.version, kind });
    return true;
  } catch {
    return false;
  }
}
