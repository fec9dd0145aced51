import { createHash } from 'node:crypto';
import { KubeConfig } from '@kubernetes/client-node';
import { DNS_SUBDOMAIN_MAX_LENGTH, FleetcacheError, isNamespaceName, isObjectName, isSecretKey, toError } from '../util/index.ts';
import type { Identity } from './identity.ts';
import { loadKubeconfig } from './kubeconfig.ts';

/**
 * Which cluster an owner (a Pipeline target) means. `namespace` defaults to the owner's own
 * namespace; unset and empty mean the same.
 *
 * - `local`: the cluster the service itself runs against.
 * - `secret`: a kubeconfig stored in a Secret, under `key`, or when `key` is unset under `value`
 *   (the Cluster API convention) or else `kubeconfig`.
 * - `cluster-api`: a Cluster API `Cluster`; its kubeconfig is the `value` key of the
 *   `<name>-kubeconfig` Secret beside it.
 * - `static`: a cluster the embedder registered by name (tests, embedding).
 *
 * The type names each kind once. References that arrive as data (read from a resource, or from
 * JavaScript) may also spell them as the Pipeline CRD and the README do: `Secret` for `secret`,
 * `Cluster` for `cluster-api`. Every entry point (`clusterKey`, the keepers, the providers) accepts
 * both; {@link clusterRefOf} turns such data into a typed reference. Any other kind is refused with
 * an `InvalidClusterRefError` listing the valid ones.
 */
export type ClusterRef =
  | { readonly kind: 'local' }
  | { readonly kind: 'secret'; readonly namespace?: string | undefined; readonly name: string; readonly key?: string | undefined }
  | { readonly kind: 'cluster-api'; readonly namespace?: string | undefined; readonly name: string }
  | { readonly kind: 'static'; readonly name: string };

const clusterRefKinds: readonly string[] = ['local', 'secret', 'cluster-api', 'static'] satisfies readonly ClusterRef['kind'][];

/** Every accepted spelling of a kind: the type's own, and the Pipeline CRD's `Secret` and `Cluster`. */
const kindBySpelling: ReadonlyMap<string, ClusterRef['kind']> = new Map([
  ['local', 'local'],
  ['secret', 'secret'],
  ['Secret', 'secret'],
  ['cluster-api', 'cluster-api'],
  ['Cluster', 'cluster-api'],
  ['static', 'static'],
]);

const VALID_KINDS = '"local", "secret" (or "Secret"), "cluster-api" (or "Cluster"), "static"';

/**
 * `ref` with its kind in the type's spelling: `ref` itself when it already is, a copy when it used
 * the CRD's (`Secret`, `Cluster`).
 *
 * @throws InvalidClusterRefError when `ref` is not an object or its kind is none of the valid ones.
 */
export function canonicalClusterRef(ref: ClusterRef): ClusterRef {
  const untyped: unknown = ref;
  if (typeof untyped !== 'object' || untyped === null) throw new InvalidClusterRefError(ref, `must be an object with a kind, one of ${VALID_KINDS}`);
  const given: unknown = ref.kind;
  const kind = typeof given === 'string' ? kindBySpelling.get(given) : undefined;
  if (kind === undefined) throw new InvalidClusterRefError(ref, `unknown kind ${describeValue(given)}; valid kinds: ${VALID_KINDS}`);
  // The spread keeps the other fields as given; clusterKey and the providers check them.
  return kind === given ? ref : ({ ...ref, kind } as ClusterRef);
}

/**
 * A typed {@link ClusterRef} from data: a reference read from a resource (`{ kind: Secret, name:
 * staging-kubeconfig }` as in the Pipeline CRD) or given by JavaScript. The kind may be spelled
 * either way (`Secret` or `secret`, `Cluster` or `cluster-api`); `namespace`, `name` and `key`, when
 * present, must be strings. The result holds only the fields of its kind. Names are checked later,
 * by `clusterKey` and the providers, against the owner's namespace.
 *
 * @throws InvalidClusterRefError naming the valid kinds, or the field that is not a string.
 */
export function clusterRefOf(input: unknown): ClusterRef {
  const ref = canonicalClusterRef(input as ClusterRef);
  const fields = ref as { readonly namespace?: unknown; readonly name?: unknown; readonly key?: unknown };
  for (const field of ['namespace', 'name', 'key'] as const) {
    const value = fields[field];
    if (value !== undefined && typeof value !== 'string') throw new InvalidClusterRefError(ref, `${field} must be a string`);
  }
  switch (ref.kind) {
    case 'local':
      return { kind: 'local' };
    case 'static':
      return { kind: 'static', name: ref.name };
    case 'secret':
      return { kind: 'secret', namespace: ref.namespace, name: ref.name, key: ref.key };
    case 'cluster-api':
      return { kind: 'cluster-api', namespace: ref.namespace, name: ref.name };
  }
}

/** What resolving a {@link ClusterRef} yields. */
export interface ClusterAccess {
  /** The cluster's stable name: its {@link clusterKey}. */
  readonly name: string;
  /**
   * A KubeConfig for this cluster alone, with its context current. Never shared with another
   * cluster: client-node caches credentials per user name inside one KubeConfig.
   */
  readonly kubeConfig: KubeConfig;
  /**
   * Changes exactly when the credentials' source changes (a sha256 of the source bytes and the key
   * they came from): the registry compares it to decide whether to rebuild the cluster's
   * connection and caches. Never contains the credentials themselves.
   */
  readonly fingerprint: string;
}

/** What a provider needs to know about the caller. */
export interface ResolveContext {
  /** Namespace of the owner naming the cluster: the default for, and limit of, Secret references. */
  readonly ownerNamespace: string;
  /** Aborts the Secret read (or any other I/O) the resolution does. */
  readonly signal?: AbortSignal | undefined;
  /**
   * Who the owner acts as on the management cluster. Providers that read there (the kubeconfig
   * Secret of `SecretProvider`) read as this identity, so a tenant whose account may not read
   * the Secret gets the API server's 403 (`KubeApiError`), never the service's own rights.
   * Default: `OWN_IDENTITY`.
   */
  readonly identity?: Identity | undefined;
}

/**
 * Turns a cluster reference into credentials. Implementations do their I/O in `resolve` only and
 * may be called concurrently. A provider whose source can change (a Secret) reads it on every call,
 * so comparing fingerprints across calls detects rotation; fixed sources (local, static) return
 * the same access every time.
 */
export interface ClusterProvider {
  resolve(ref: ClusterRef, context: ResolveContext): Promise<ClusterAccess>;
}

/** A cluster reference that is malformed, or of a kind no configured provider serves. */
export class InvalidClusterRefError extends FleetcacheError {
  /** The offending reference, as given. */
  readonly ref: ClusterRef;

  constructor(ref: ClusterRef, message: string) {
    super('ERR_CLUSTER_REF_INVALID', `cluster reference ${describeRef(ref)}: ${message}`);
    this.ref = ref;
  }
}

function describeRef(ref: ClusterRef): string {
  const untyped: unknown = ref;
  if (typeof untyped !== 'object' || untyped === null) return describeValue(untyped);
  const fields = Object.entries(ref)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k}=${describeValue(v)}`);
  return `{${fields.join(', ')}}`;
}

/** A string quoted (cut at 100 characters), anything else by its type. */
function describeValue(v: unknown): string {
  return typeof v === 'string' ? JSON.stringify(v.length > 100 ? `${v.slice(0, 100)}…` : v) : v === null ? 'null' : typeof v;
}

/** A reference to a namespaced object, checked and with its namespace defaulted. */
export interface ResolvedObjectRef {
  readonly namespace: string;
  readonly name: string;
}

/**
 * Checks the namespace and name of a `secret` or `cluster-api` reference and defaults the
 * namespace to the owner's.
 */
export function objectRefOf(ref: ClusterRef & { readonly kind: 'secret' | 'cluster-api' }, ownerNamespace: string): ResolvedObjectRef {
  if (!isNamespaceName(ownerNamespace)) {
    throw new TypeError(`ownerNamespace must be a namespace name, got ${JSON.stringify(ownerNamespace)}`);
  }
  const namespace = ref.namespace === undefined || ref.namespace === '' ? ownerNamespace : ref.namespace;
  if (!isNamespaceName(namespace)) throw new InvalidClusterRefError(ref, 'namespace is not a valid namespace name');
  // A Cluster API Cluster name must leave room for the `-kubeconfig` suffix of its Secret.
  const max = ref.kind === 'cluster-api' ? DNS_SUBDOMAIN_MAX_LENGTH - '-kubeconfig'.length : DNS_SUBDOMAIN_MAX_LENGTH;
  if (!isObjectName(ref.name, max)) throw new InvalidClusterRefError(ref, 'name is not a valid object name');
  return { namespace, name: ref.name };
}

/**
 * The stable string identity of a reference, for cache keys and error messages: `local`,
 * `static:<name>`, `secret:<namespace>/<name>` (plus `#<key>` when a key is given) or
 * `cluster-api:<namespace>/<name>`. The namespace is always spelled out, so the same Secret named
 * with and without an explicit namespace gets one key.
 *
 * @throws InvalidClusterRefError when the reference is malformed.
 */
export function clusterKey(given: ClusterRef, ownerNamespace: string): string {
  const ref = canonicalClusterRef(given);
  switch (ref.kind) {
    case 'local':
      return 'local';
    case 'static':
      if (typeof ref.name !== 'string' || ref.name === '') throw new InvalidClusterRefError(ref, 'name must be a non-empty string');
      return `static:${ref.name}`;
    case 'secret': {
      const { namespace, name } = objectRefOf(ref, ownerNamespace);
      if (ref.key === undefined || ref.key === '') return `secret:${namespace}/${name}`;
      if (!isSecretKey(ref.key)) throw new InvalidClusterRefError(ref, 'key is not a valid Secret data key');
      return `secret:${namespace}/${name}#${ref.key}`;
    }
    case 'cluster-api': {
      const { namespace, name } = objectRefOf(ref, ownerNamespace);
      return `cluster-api:${namespace}/${name}`;
    }
  }
}

/** `sha256:<hex>` of the parts, each length-prefixed so that no two part lists collide. */
export function fingerprintOf(...parts: readonly (string | Uint8Array)[]): string {
  const hash = createHash('sha256');
  for (const part of parts) {
    const bytes = typeof part === 'string' ? Buffer.from(part, 'utf8') : part;
    hash.update(`${bytes.byteLength}:`);
    hash.update(bytes);
  }
  return `sha256:${hash.digest('hex')}`;
}

/** The fingerprint of a KubeConfig built in memory: its clusters, users, contexts and current context. */
function fingerprintOfKubeConfig(kc: KubeConfig): string {
  return fingerprintOf(JSON.stringify({
    currentContext: kc.getCurrentContext(),
    contexts: kc.getContexts(),
    clusters: kc.getClusters(),
    users: kc.getUsers(),
  }));
}

function checkUsable(kc: KubeConfig, option: string): void {
  if (!(kc instanceof KubeConfig)) throw new TypeError(`${option} must be a @kubernetes/client-node KubeConfig`);
  if (kc.getCurrentCluster() === null) {
    throw new TypeError(`${option} has no current context naming an existing cluster (current context ${JSON.stringify(kc.getCurrentContext())})`);
  }
}

function wrongKind(provider: string, ref: ClusterRef): InvalidClusterRefError {
  return new InvalidClusterRefError(ref, `${provider} does not resolve references of this kind`);
}

/** Options of {@link LocalProvider}. */
export interface LocalProviderOptions {
  /**
   * The local cluster's KubeConfig, with its context current; required. Built by the embedder
   * (`localKubeConfig`, or client-node's own loaders) and trusted as is. It is handed out as given,
   * so custom authenticators keep working: do not use the same instance for another cluster.
   */
  readonly kubeConfig: KubeConfig;
}

/** Resolves `{ kind: 'local' }` to the KubeConfig the embedder supplied. */
export class LocalProvider implements ClusterProvider {
  readonly #access: ClusterAccess;

  constructor(options: LocalProviderOptions) {
    checkUsable(options.kubeConfig, 'LocalProvider option kubeConfig');
    // Taken once: client-node writes refreshed tokens back into the user entry, and that must not
    // look like a rotation. The local credentials' own refresh is client-node's business.
    this.#access = { name: 'local', kubeConfig: options.kubeConfig, fingerprint: fingerprintOfKubeConfig(options.kubeConfig) };
  }

  resolve(ref: ClusterRef, _context: ResolveContext): Promise<ClusterAccess> {
    if (ref.kind !== 'local') return Promise.reject(wrongKind('LocalProvider', ref));
    return Promise.resolve(this.#access);
  }
}

/** Options of {@link StaticProvider}. */
export interface StaticProviderOptions {
  /**
   * Clusters by name: a kubeconfig YAML string, or a KubeConfig with its context current; required,
   * may be empty. The embedder's own configuration, so it is trusted: YAML may use exec,
   * auth-provider, file references (absolute paths) and http:// servers. Each name must have its
   * own KubeConfig instance. The map is copied; later changes to it are not seen.
   */
  readonly clusters: ReadonlyMap<string, string | KubeConfig> | Readonly<Record<string, string | KubeConfig>>;
}

function isReadonlyMap<K, V>(value: ReadonlyMap<K, V> | object): value is ReadonlyMap<K, V> {
  return value instanceof Map;
}

/** Resolves `{ kind: 'static', name }` from a fixed set of clusters, for tests and embedding. */
export class StaticProvider implements ClusterProvider {
  /** Filled by the constructor, read-only afterwards. */
  readonly #clusters = new Map<string, ClusterAccess>();

  constructor(options: StaticProviderOptions) {
    const clusters = options.clusters;
    const entries: readonly (readonly [string, string | KubeConfig])[] = isReadonlyMap(clusters) ? [...clusters.entries()] : Object.entries(clusters);
    for (const [name, source] of entries) {
      if (name === '') throw new TypeError('StaticProvider option clusters has an empty cluster name');
      const option = `StaticProvider option clusters[${JSON.stringify(name)}]`;
      const key = `static:${name}`;
      if (typeof source === 'string') {
        let kubeConfig: KubeConfig;
        try {
          kubeConfig = loadKubeconfig(source, { cluster: key, allowExec: true, allowAuthProvider: true, allowLocalFiles: true, allowPlainHttp: true, allowInsecureTls: true });
        } catch (err) {
          throw new TypeError(`${option}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
        }
        this.#clusters.set(name, { name: key, kubeConfig, fingerprint: fingerprintOf(source) });
      } else {
        checkUsable(source, option);
        this.#clusters.set(name, { name: key, kubeConfig: source, fingerprint: fingerprintOfKubeConfig(source) });
      }
    }
  }

  /** Names of the registered clusters. */
  get names(): readonly string[] {
    return [...this.#clusters.keys()];
  }

  resolve(ref: ClusterRef, _context: ResolveContext): Promise<ClusterAccess> {
    if (ref.kind !== 'static') return Promise.reject(wrongKind('StaticProvider', ref));
    const access = this.#clusters.get(ref.name);
    if (access === undefined) {
      return Promise.reject(new InvalidClusterRefError(ref, `no static cluster has this name (known: ${[...this.#clusters.keys()].map((n) => JSON.stringify(n)).join(', ') || 'none'})`));
    }
    return Promise.resolve(access);
  }
}

/** Options of {@link CompositeProvider}. */
export interface CompositeProviderOptions {
  /**
   * The provider for each reference kind; at least one. A kind without a provider is refused with
   * an `InvalidClusterRefError`, so a service can, for instance, serve no static clusters.
   */
  readonly byKind: Readonly<Partial<Record<ClusterRef['kind'], ClusterProvider>>>;
}

/** Routes each reference to the provider configured for its kind. */
export class CompositeProvider implements ClusterProvider {
  /** Filled by the constructor, read-only afterwards. A Map, so a kind like `constructor` finds nothing. */
  readonly #byKind = new Map<string, ClusterProvider>();

  constructor(options: CompositeProviderOptions) {
    // Typed loosely: JavaScript callers may pass `undefined` for a kind.
    const entries: readonly [string, ClusterProvider | undefined][] = Object.entries(options.byKind);
    for (const [kind, provider] of entries) {
      if (!clusterRefKinds.includes(kind)) throw new TypeError(`CompositeProvider option byKind has unknown kind ${JSON.stringify(kind)}; valid kinds: ${clusterRefKinds.join(', ')}`);
      if (provider !== undefined) this.#byKind.set(kind, provider);
    }
    if (this.#byKind.size === 0) throw new TypeError('CompositeProvider option byKind must name at least one provider');
  }

  resolve(given: ClusterRef, context: ResolveContext): Promise<ClusterAccess> {
    let ref: ClusterRef;
    try {
      ref = canonicalClusterRef(given);
    } catch (err) {
      return Promise.reject(toError(err));
    }
    const provider = this.#byKind.get(ref.kind);
    if (provider === undefined) return Promise.reject(new InvalidClusterRefError(ref, 'no provider is configured for this kind'));
    return provider.resolve(ref, context);
  }
}
