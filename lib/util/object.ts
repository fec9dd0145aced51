/**
 * Object metadata as the API server sends it, as JSON: fleetcache hands out the JSON it received
 * (after the informer's transform), never client-node's class instances. Timestamps therefore stay
 * RFC 3339 strings; client-node's models type them as `Date`, so give those as `Wire<V1Pod>`.
 */
export interface ObjectMeta {
  readonly name?: string;
  readonly namespace?: string;
  readonly uid?: string;
  readonly resourceVersion?: string;
  readonly generation?: number;
  /** RFC 3339, as sent (client-node's `V1ObjectMeta` says `Date`: it is a string here). */
  readonly creationTimestamp?: string;
  /** RFC 3339, as sent. */
  readonly deletionTimestamp?: string;
  readonly labels?: Readonly<Record<string, string>>;
  readonly annotations?: Readonly<Record<string, string>>;
  readonly ownerReferences?: readonly Readonly<Record<string, unknown>>[];
  readonly finalizers?: readonly string[];
  readonly managedFields?: readonly unknown[];
  readonly [field: string]: unknown;
}

/**
 * Any Kubernetes object, as JSON. The one object type of every entry point (`fleetcache`,
 * `fleetcache/testing`…): read-only, because the objects a cache hands out are frozen and shared.
 * Declare a kind's shape by extending it, or take client-node's model through {@link Wire}.
 */
export interface KubeObject {
  readonly apiVersion?: string;
  readonly kind?: string;
  readonly metadata?: ObjectMeta;
  readonly [field: string]: unknown;
}

/**
 * A type as it arrives over the API, as JSON: `Date` becomes the RFC 3339 `string` it is on the
 * wire, class instances plain read-only objects. Use it to take `@kubernetes/client-node`'s models
 * as the object type of a reader: `watchTargetAndGetReader<Wire<V1ConfigMap>>(…)`. client-node
 * types `metadata.creationTimestamp` as `Date` because its own deserializer makes one; fleetcache
 * never runs that deserializer, so `V1ConfigMap` itself would promise a `Date` that is a string at
 * run time (and is refused by the `KubeObject` constraint for that reason).
 */
export type Wire<T> =
  T extends Date ? string
    : T extends readonly (infer E)[] ? readonly Wire<E>[]
      : T extends object ? { readonly [K in keyof T]: Wire<T[K]> }
        : T;
