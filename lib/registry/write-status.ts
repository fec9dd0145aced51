import { resourcePath, type ClusterConnection, type KubeObject } from '../transport/index.ts';
import { FleetcacheError, formatGvk, KubeApiError, type GroupVersionKind } from '../util/index.ts';

/** The subset of a connection {@link writeStatus} uses: what `registry.connectionFor` lends. */
export type StatusConnection = Pick<ClusterConnection, 'name' | 'resolve' | 'request'>;

/** Options of {@link writeStatus}. */
export interface WriteStatusOptions<T extends KubeObject> {
  /** Where the object lives: `await registry.connectionFor(cluster, owner)` (never close it). */
  readonly connection: StatusConnection;
  readonly gvk: GroupVersionKind;
  /**
   * The object as last read (from a cache, say): its namespace and name say which object, and its
   * `metadata.resourceVersion` is the precondition of the first attempt (unset: read it first).
   */
  readonly object: T;
  /**
   * Decides the status from the object as it stands: what to merge into `.status` (a JSON merge
   * patch: fields left out are kept, `null` removes one), or `undefined` to write nothing. Called
   * again with the object re-read after each conflict, so the decision is made on what is there.
   */
  readonly status: (current: T) => Readonly<Record<string, unknown>> | undefined;
  /** Attempts before {@link StatusConflictError}: each conflict re-reads and decides again. Default 5; at least 1. */
  readonly maxAttempts?: number;
  readonly signal?: AbortSignal;
}

/** What {@link writeStatus} did, with the object as it stands after it. */
export interface WriteStatusResult<T extends KubeObject> {
  /** `unchanged`: the decision was `undefined`, or the status already held it (no request sent). */
  readonly result: 'written' | 'unchanged';
  readonly object: T;
  /** Attempts made (1 without a conflict). */
  readonly attempts: number;
}

/** Another writer kept changing the object: every attempt of {@link writeStatus} met a newer resourceVersion. */
export class StatusConflictError extends FleetcacheError {
  readonly cluster: string;
  readonly gvk: GroupVersionKind;
  /** Which object ('' namespace for a cluster-scoped one). */
  readonly object: { readonly namespace: string; readonly name: string };
  readonly attempts: number;

  constructor(where: { readonly cluster: string; readonly gvk: GroupVersionKind; readonly namespace: string; readonly name: string; readonly attempts: number }, options?: ErrorOptions) {
    super('ERR_STATUS_CONFLICT', `cluster ${where.cluster}, ${formatGvk(where.gvk)} ${where.namespace === '' ? '' : `${where.namespace}/`}${where.name}: the status write still conflicted after ${where.attempts} attempts`, options);
    this.cluster = where.cluster;
    this.gvk = where.gvk;
    this.object = { namespace: where.namespace, name: where.name };
    this.attempts = where.attempts;
  }
}

/**
 * Writes an object's status the way a controller should: a JSON merge patch
 * (`application/merge-patch+json`) on the `status` subresource, carrying the `resourceVersion` the
 * decision was made on, so the API server refuses it with 409 Conflict if the object changed since
 * (controller-runtime's `MergeFromWithOptimisticLock`). On a conflict it reads the object again,
 * decides again and retries, `maxAttempts` times at most, then throws {@link StatusConflictError}
 * (the conflict as `cause`). A decision the status already holds sends nothing.
 *
 * The kind needs a status subresource (CRDs: `subresources: { status: {} }`); without one the API
 * server answers 404, thrown as a `KubeApiError` like every other refusal (403, 422…).
 */
export async function writeStatus<T extends KubeObject>(options: WriteStatusOptions<T>): Promise<WriteStatusResult<T>> {
  const { connection, gvk, object } = options;
  const maxAttempts = options.maxAttempts ?? 5;
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1) throw new TypeError(`writeStatus: maxAttempts must be an integer ≥ 1, got ${maxAttempts}`);
  const namespace = object.metadata?.namespace ?? '';
  const name = object.metadata?.name ?? '';
  if (name === '') throw new TypeError('writeStatus: the object has no metadata.name');
  const signal = options.signal === undefined ? {} : { signal: options.signal };
  const info = await connection.resolve(gvk, options.signal);
  const path = resourcePath(info, { namespace, name });
  const read = async (): Promise<T> => (await connection.request({ method: 'GET', path, gvk, ...signal })) as T;
  let current = object.metadata?.resourceVersion === undefined ? await read() : object;
  for (let attempt = 1; ; attempt++) {
    const status = options.status(current);
    if (status === undefined || holds(current.status, status)) return { result: 'unchanged', object: current, attempts: attempt };
    const body = { metadata: { resourceVersion: current.metadata?.resourceVersion }, status };
    try {
      const written = (await connection.request({ method: 'PATCH', path: `${path}/status`, gvk, body, contentType: 'application/merge-patch+json', ...signal })) as T;
      return { result: 'written', object: written, attempts: attempt };
    } catch (err) {
      if (!(err instanceof KubeApiError && err.statusCode === 409)) throw err;
      if (attempt >= maxAttempts) throw new StatusConflictError({ cluster: connection.name, gvk, namespace, name, attempts: attempt }, { cause: err });
    }
    current = await read();
  }
}

/** Whether merging `patch` into `status` would leave it as it is. */
function holds(status: unknown, patch: Readonly<Record<string, unknown>>): boolean {
  const base = typeof status === 'object' && status !== null && !Array.isArray(status) ? status as Record<string, unknown> : undefined;
  return Object.entries(patch).every(([key, value]) => {
    const before = base?.[key];
    if (value === null) return before === undefined;
    if (typeof value === 'object' && !Array.isArray(value) && typeof before === 'object' && before !== null && !Array.isArray(before)) return holds(before, value as Record<string, unknown>);
    return canonical(before) === canonical(value);
  });
}

/** JSON with object keys sorted: equal values, equal text. */
function canonical(value: unknown): string {
  // JSON.stringify answers undefined (not a string) for undefined: a field that is absent.
  const text = JSON.stringify(value, (_key, v: unknown) => (typeof v === 'object' && v !== null && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : v)) as string | undefined;
  return text ?? 'absent';
}
