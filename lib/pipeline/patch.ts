import { resourcePath, type ClusterConnection, type KubeObject } from '../transport/index.ts';
import { KubeApiError, type GroupVersionKind } from '../util/index.ts';
import { PromotionError } from './errors.ts';
import { getAtPointer, setAtPointerOp, type JsonPatchOp } from './json-pointer.ts';

/** The subset of a cluster connection the patch strategy uses. */
export type WriteConnection = Pick<ClusterConnection, 'name' | 'resolve' | 'request'>;

/** What {@link setRevision} does to one object. */
export interface SetRevisionOptions {
  readonly connection: WriteConnection;
  readonly gvk: GroupVersionKind;
  readonly namespace: string;
  readonly name: string;
  /** JSON pointer to the field that holds the desired revision. */
  readonly path: string;
  readonly revision: string;
  /** Reads and patches before giving up on conflicts. Default 5. */
  readonly maxAttempts?: number;
  /** Told the object as it stands after the call (the PATCH's answer, or the object read when unchanged). Default: none. */
  readonly onResult?: (object: KubeObject) => void;
  readonly signal?: AbortSignal;
}

/** A write lost to a concurrent one: the `test` of our resourceVersion failed, or the update conflicted. */
function isConflict(err: unknown): boolean {
  return err instanceof KubeApiError && (err.statusCode === 409 || (err.statusCode === 422 && /test/i.test(err.status?.message ?? err.message)));
}

/**
 * Sets `revision` at `path` in one object, in its own cluster, with optimistic concurrency: read
 * the object, then send a JSON patch that first tests `/metadata/resourceVersion` against what was
 * read, so a concurrent writer makes it fail instead of being overwritten; on a conflict, read
 * again and retry. An object already at `revision` is left alone (idempotent, so a promotion
 * resumed after a restart does no second write).
 *
 * @returns `'patched'` or `'unchanged'`.
 * @throws KubeApiError (the object is missing, forbidden, or the value invalid), PromotionError
 *   (the path runs through a non-object, or conflicts persisted), TransportError.
 */
export async function setRevision(options: SetRevisionOptions): Promise<'patched' | 'unchanged'> {
  const { connection, gvk, namespace, name, path: pointer, revision } = options;
  const signal = options.signal === undefined ? {} : { signal: options.signal };
  const maxAttempts = options.maxAttempts ?? 5;
  const info = await connection.resolve(gvk, options.signal);
  const path = resourcePath(info, { namespace, name });
  for (let attempt = 1; ; attempt++) {
    const current = (await connection.request({ method: 'GET', path, gvk, ...signal })) as KubeObject;
    if (getAtPointer(current, pointer) === revision) {
      options.onResult?.(current);
      return 'unchanged';
    }
    const resourceVersion = current.metadata?.resourceVersion;
    let set: JsonPatchOp;
    try {
      set = setAtPointerOp(current, pointer, revision);
    } catch (err) {
      throw new PromotionError(`${connection.name} ${namespace}/${name}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
    const ops: JsonPatchOp[] = [{ op: 'test', path: '/metadata/resourceVersion', value: resourceVersion }, set];
    try {
      const patched = (await connection.request({ method: 'PATCH', path, gvk, body: ops, contentType: 'application/json-patch+json', ...signal })) as KubeObject;
      options.onResult?.(patched);
      return 'patched';
    } catch (err) {
      if (!isConflict(err)) throw err;
      if (attempt >= maxAttempts) {
        throw new PromotionError(`${connection.name} ${namespace}/${name}: still conflicting after ${attempt} attempts`, { cause: err });
      }
    }
  }
}
