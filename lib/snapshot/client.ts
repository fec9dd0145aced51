// The accumulator's write client: writes to a query's cluster and kind whose results the snapshots
// show before the watch delivers them (read/write coherence).
import { deepFreeze } from '../informer/index.ts';
import { resourcePath, type KubeObject } from '../transport/index.ts';
import { oneOf } from '../util/index.ts';
import { keyOf, type QueryState } from './query.ts';
import type { SnapshotSource } from './source.ts';
import type { ObjectOf, PatchOptions, QuerySet, WriteOptions } from './types.ts';

const PATCH_TYPES = {
  merge: 'application/merge-patch+json',
  json: 'application/json-patch+json',
  strategic: 'application/strategic-merge-patch+json',
  apply: 'application/apply-patch+yaml',
} as const;
const PATCH_TYPE_NAMES = Object.keys(PATCH_TYPES) as (keyof typeof PATCH_TYPES)[];

/** What the client needs of its accumulator. */
export interface ClientPort {
  readonly source: SnapshotSource;
  query(name: string): QueryState;
  applyWrite(q: QueryState, key: string, namespace: string | undefined, object: KubeObject | undefined, rv: string, uid: string | undefined): void;
}

interface ObjectName {
  /** Unset for cluster-scoped kinds; default the query's namespace. */
  readonly namespace?: string | undefined;
  readonly name: string;
}

function isStatus(body: unknown): boolean {
  return typeof body !== 'object' || body === null || (body as KubeObject).kind === 'Status' || typeof (body as KubeObject).metadata?.name !== 'string';
}

/**
 * Writes to a query's cluster and kind whose results the accumulator's snapshots show at once,
 * before the watch delivers them (read/write coherence). Each resolves with the object the server
 * returned; failures reject with the server's typed errors (`KubeApiError` with status and reason,
 * `TransportError`), and then change nothing in the snapshots.
 */
export class SnapshotClient<Q extends QuerySet> {
  readonly #port: ClientPort;

  /** Made by the accumulator: use `accumulator.client`. */
  constructor(port: ClientPort) {
    this.#port = port;
  }

  /** POST: creates `obj` (namespace: its own, else the query's). */
  async create<K extends keyof Q & string>(query: K, obj: ObjectOf<Q[K]>, options: WriteOptions = {}): Promise<ObjectOf<Q[K]>> {
    const q = this.#port.query(query);
    const namespace = obj.metadata?.namespace ?? q.spec.namespace;
    return this.#send(q, 'POST', { namespace }, { ...obj, metadata: { ...obj.metadata, namespace } }, options) as Promise<ObjectOf<Q[K]>>;
  }

  /** PUT: replaces `obj` (its resourceVersion is the precondition, as the API does). */
  async update<K extends keyof Q & string>(query: K, obj: ObjectOf<Q[K]>, options: WriteOptions = {}): Promise<ObjectOf<Q[K]>> {
    const q = this.#port.query(query);
    return this.#send(q, 'PUT', this.#nameOf(q, obj), obj, options) as Promise<ObjectOf<Q[K]>>;
  }

  /** PUT to the status subresource. */
  async updateStatus<K extends keyof Q & string>(query: K, obj: ObjectOf<Q[K]>, options: WriteOptions = {}): Promise<ObjectOf<Q[K]>> {
    const q = this.#port.query(query);
    return this.#send(q, 'PUT', this.#nameOf(q, obj), obj, options, '/status') as Promise<ObjectOf<Q[K]>>;
  }

  /** PATCH (merge patch by default; `status: true` for the status subresource). */
  async patch<K extends keyof Q & string>(query: K, target: ObjectName, patch: unknown, options: PatchOptions = {}): Promise<ObjectOf<Q[K]>> {
    const q = this.#port.query(query);
    const type = oneOf('patch', 'type', options.type ?? 'merge', PATCH_TYPE_NAMES);
    if (type === 'apply' && options.fieldManager === undefined) throw new TypeError('patch option fieldManager is required for an apply patch');
    return this.#send(q, 'PATCH', { namespace: target.namespace ?? q.spec.namespace, name: target.name }, patch, options, options.status === true ? '/status' : '', PATCH_TYPES[type]) as Promise<ObjectOf<Q[K]>>;
  }

  /**
   * DELETE. The snapshot drops the object at once, unless finalizers keep it (then it holds the
   * returned object with its deletionTimestamp). Resolves with what the server returned.
   */
  async delete(query: keyof Q & string, target: ObjectName, options: WriteOptions = {}): Promise<unknown> {
    const q = this.#port.query(query);
    return this.#send(q, 'DELETE', { namespace: target.namespace ?? q.spec.namespace, name: target.name }, undefined, options);
  }

  #nameOf(q: QueryState, obj: KubeObject): ObjectName {
    const name = obj.metadata?.name;
    if (name === undefined || name === '') throw new TypeError('the object to write has no metadata.name');
    return { namespace: obj.metadata?.namespace ?? q.spec.namespace, name };
  }

  async #send(q: QueryState, method: 'POST' | 'PUT' | 'PATCH' | 'DELETE', where: { readonly namespace?: string | undefined; readonly name?: string }, body: unknown, options: WriteOptions, subresource = '', contentType?: string): Promise<unknown> {
    const signal = options.signal;
    const connection = await this.#port.source.connection(q.source, signal);
    const info = await connection.resolve(q.spec.gvk, signal);
    const path = resourcePath(info, where) + subresource;
    const result = await connection.request({
      method,
      path,
      body,
      gvk: q.spec.gvk,
      query: { fieldManager: options.fieldManager },
      ...(contentType === undefined ? {} : { contentType }),
      ...(signal === undefined ? {} : { signal }),
    });
    if (method === 'DELETE') {
      const name = where.name ?? '';
      const namespace = info.namespaced ? where.namespace : undefined;
      const key = namespace === undefined || namespace === '' ? name : `${namespace}/${name}`;
      const returned = isStatus(result) ? undefined : (result as KubeObject);
      const kept = returned?.metadata?.deletionTimestamp !== undefined && (returned.metadata.finalizers?.length ?? 0) > 0;
      const rv = returned?.metadata?.resourceVersion ?? '';
      this.#port.applyWrite(q, key, namespace, kept ? deepFreeze(returned) : undefined, rv, returned?.metadata?.uid);
      return result;
    }
    if (!isStatus(result)) {
      const obj = result as KubeObject;
      this.#port.applyWrite(q, keyOf(obj), obj.metadata?.namespace, deepFreeze(obj), obj.metadata?.resourceVersion ?? '', obj.metadata?.uid);
    }
    return result;
  }
}
