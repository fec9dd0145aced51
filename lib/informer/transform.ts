import type { KubeObject } from '../transport/index.ts';

/**
 * Applied to every object at ingest, before it is stored, frozen and handed to handlers. It receives
 * a freshly decoded object that nothing else references, so it may change it in place and return it
 * (the cheapest), or return a new object. Keep it pure and fast: it runs once per event.
 */
export type Transform<T extends KubeObject = KubeObject> = (obj: KubeObject) => T;

/** The annotation `kubectl apply` writes: a full copy of the object, useless to a cache. */
export const LAST_APPLIED_ANNOTATION = 'kubectl.kubernetes.io/last-applied-configuration';

interface MutableMeta {
  managedFields?: unknown;
  annotations?: Record<string, string>;
}

/**
 * The default transform: drops `metadata.managedFields` and the last-applied-configuration
 * annotation, which together are often most of an object's bytes and which no cache reader needs.
 */
export function stripManagedFields(obj: KubeObject): KubeObject {
  const meta = obj.metadata as MutableMeta | undefined;
  if (meta === undefined) return obj;
  if (meta.managedFields !== undefined) delete meta.managedFields;
  const annotations = meta.annotations;
  if (annotations !== undefined && LAST_APPLIED_ANNOTATION in annotations) {
    // eslint-disable-next-line @typescript-eslint/no-dynamic-delete -- a fixed, well-known key
    delete annotations[LAST_APPLIED_ANNOTATION];
  }
  return obj;
}

/** Keeps objects exactly as the server sent them. */
export function identityTransform(obj: KubeObject): KubeObject {
  return obj;
}

/**
 * Freezes a JSON value and everything reachable from it, so that a reader or handler cannot change
 * an object every other reader shares. Already frozen parts are not walked again. The walk keeps
 * its own stack instead of recursing: the API server accepts objects nested thousands deep (a
 * HelmRelease's free-form `spec.values`), and the call stack would overflow on them.
 */
export function deepFreeze<T>(value: T): T {
  if (typeof value !== 'object' || value === null || Object.isFrozen(value)) return value;
  // Invariant: everything on `stack` is frozen and its children not yet visited; freezing on push
  // means a part reachable twice is walked once.
  Object.freeze(value);
  const stack: object[] = [value];
  const visit = (child: unknown): void => {
    if (typeof child !== 'object' || child === null || Object.isFrozen(child)) return;
    Object.freeze(child);
    stack.push(child);
  };
  for (let current = stack.pop(); current !== undefined; current = stack.pop()) {
    if (Array.isArray(current)) {
      for (const item of current as unknown[]) visit(item);
    } else {
      const record = current as Record<string, unknown>;
      for (const key in record) visit(record[key]);
    }
  }
  return value;
}
