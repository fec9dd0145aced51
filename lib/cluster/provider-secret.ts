import { ApiException, CoreV1Api, Observable } from '@kubernetes/client-node';
import type { KubeConfig, ObservableMiddleware } from '@kubernetes/client-node';
import {
  abortReason,
  booleanOption,
  FleetcacheError,
  KubeApiError,
  KubeconfigInvalidError,
  KubeconfigRefusedError,
  nonEmptyString,
  stringOption,
  TransportError,
  type KubeStatus,
} from '../util/index.ts';
import { impersonationOf, type Identity } from './identity.ts';
import { loadKubeconfig } from './kubeconfig.ts';
import {
  canonicalClusterRef,
  clusterKey,
  fingerprintOf,
  InvalidClusterRefError,
  objectRefOf,
  type ClusterAccess,
  type ClusterProvider,
  type ClusterRef,
  type ResolveContext,
} from './providers.ts';

/** The part of a Secret a {@link SecretReader} returns; a client-node `V1Secret` satisfies it. */
export interface SecretData {
  /** Base64-encoded values by key, as the API serves them. */
  readonly data?: Readonly<Record<string, string>> | undefined;
}

/**
 * Reads Secrets of the cluster that holds the owners. The default reads through the API
 * ({@link CoreV1SecretReader}); the registry may back it with an informer cache instead.
 */
export interface SecretReader {
  /**
   * The Secret, or undefined when it (or its namespace) does not exist. Other failures reject (a
   * `KubeApiError` with status 403 when `identity` may not read it). `identity` is who reads:
   * default the reader's own credentials.
   */
  getSecret(namespace: string, name: string, signal?: AbortSignal, identity?: Identity): Promise<SecretData | undefined>;
}

/** Options of {@link CoreV1SecretReader}. */
export interface CoreV1SecretReaderOptions {
  /** Credentials of the cluster holding the Secrets (usually the local one); required. */
  readonly kubeConfig: KubeConfig;
  /** Name of that cluster in errors. Default `local`. */
  readonly cluster?: string | undefined;
}

const secretGvk = { group: '', version: 'v1', kind: 'Secret' } as const;

/** A {@link SecretReader} that GETs each Secret through client-node's `CoreV1Api`. */
export class CoreV1SecretReader implements SecretReader {
  readonly #api: CoreV1Api;
  readonly #cluster: string;

  constructor(options: CoreV1SecretReaderOptions) {
    const cluster = options.cluster ?? 'local';
    nonEmptyString('CoreV1SecretReader', 'cluster', cluster);
    // Building the client does no I/O.
    this.#api = options.kubeConfig.makeApiClient(CoreV1Api);
    this.#cluster = cluster;
  }

  /**
   * @throws TypeError for an identity with groups the API server would not derive itself: one
   *   request header per group is what impersonation needs, and client-node sets one value per
   *   header. Read through the `ClusterSet`'s reader for those.
   */
  async getSecret(namespace: string, name: string, signal?: AbortSignal, identity?: Identity): Promise<SecretData | undefined> {
    signal?.throwIfAborted();
    const impersonate = impersonationOf(identity);
    if (impersonate !== undefined && impersonate.groups.length > 0) throw new TypeError('CoreV1SecretReader cannot impersonate groups; read through ClusterSet.secrets instead');
    const request = { method: 'GET', path: `/api/v1/namespaces/${namespace}/secrets/${name}` };
    try {
      const middleware = requestMiddleware(signal, impersonate?.user);
      const options = middleware === undefined ? undefined : { middleware: [middleware], middlewareMergeStrategy: 'append' as const };
      return await this.#api.readNamespacedSecret({ namespace, name }, options);
    } catch (err) {
      if (signal?.aborted === true) throw abortReason(signal);
      if (err instanceof ApiException) {
        if (err.code === 404) return undefined;
        const status = parseStatus(err.body);
        throw new KubeApiError({ cluster: this.#cluster, gvk: secretGvk, statusCode: err.code, status, request });
      }
      throw new TransportError({ cluster: this.#cluster, gvk: secretGvk }, `GET Secret ${namespace}/${name} failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
  }
}

/** Passes the caller's signal, and who to act as, to the request client-node is about to send. */
function requestMiddleware(signal: AbortSignal | undefined, impersonateUser: string | undefined): ObservableMiddleware | undefined {
  if (signal === undefined && impersonateUser === undefined) return undefined;
  return {
    pre: (context) => {
      if (signal !== undefined) context.setSignal(signal);
      if (impersonateUser !== undefined) context.setHeaderParam('Impersonate-User', impersonateUser);
      return new Observable(Promise.resolve(context));
    },
    post: (context) => new Observable(Promise.resolve(context)),
  };
}

/** The Status body of a failed request: client-node hands it over as the raw response text. */
function parseStatus(body: unknown): KubeStatus | undefined {
  let parsed: unknown = body;
  if (typeof body === 'string') {
    try {
      parsed = JSON.parse(body);
    } catch {
      return undefined;
    }
  }
  if (typeof parsed !== 'object' || parsed === null || (parsed as { kind?: unknown }).kind !== 'Status') return undefined;
  return parsed;
}

/**
 * The kubeconfig Secret of a cluster reference, or the key in it, does not exist. When a Secret
 * that backed a running cluster disappears, this is what resolving it again reports: the
 * registry then stops that cluster's caches.
 */
export class KubeconfigSecretNotFoundError extends FleetcacheError {
  /** The cluster's {@link clusterKey}. */
  readonly cluster: string;
  readonly secretNamespace: string;
  /** The Secret's name (for a Cluster API reference, `<cluster>-kubeconfig`). */
  readonly secretName: string;
  /** The keys looked for, in order of preference. */
  readonly keys: readonly string[];
  /** The keys the Secret has (names only, sorted), or undefined when the Secret does not exist. */
  readonly availableKeys: readonly string[] | undefined;

  constructor(scope: {
    readonly cluster: string;
    readonly namespace: string;
    readonly name: string;
    readonly keys: readonly string[];
    readonly availableKeys: readonly string[] | undefined;
  }) {
    const secret = `Secret ${scope.namespace}/${scope.name}`;
    const wanted = scope.keys.map((k) => JSON.stringify(k)).join(' or ');
    const message = scope.availableKeys === undefined
      ? `${secret} not found`
      : `${secret} has no key ${wanted} (${scope.availableKeys.length === 0 ? 'it has no keys' : `its keys: ${scope.availableKeys.map((k) => JSON.stringify(k)).join(', ')}`})`;
    super('ERR_KUBECONFIG_SECRET_NOT_FOUND', `cluster ${scope.cluster}: ${message}`);
    this.cluster = scope.cluster;
    this.secretNamespace = scope.namespace;
    this.secretName = scope.name;
    this.keys = scope.keys;
    this.availableKeys = scope.availableKeys;
  }

  /** True when the Secret itself is missing; false when it exists without the key. */
  get secretMissing(): boolean {
    return this.availableKeys === undefined;
  }
}

/** Options of {@link SecretProvider}. Every `allow*` option relaxes one safety rule; all default to false. */
export interface SecretProviderOptions {
  /** Where Secrets are read from; required. */
  readonly secrets: SecretReader;
  /** Accept `exec` credential plugins and auth-provider `cmd-path`s: they run commands on this host. Default false. */
  readonly allowExec?: boolean | undefined;
  /** Accept `auth-provider` entries. Default false. */
  readonly allowAuthProvider?: boolean | undefined;
  /** Accept references to files on this host (CA, client certificate and key, token files). Default false. */
  readonly allowLocalFiles?: boolean | undefined;
  /** Accept `insecure-skip-tls-verify: true` (no TLS verification). Default false. */
  readonly allowInsecureTls?: boolean | undefined;
  /** Let an owner reference a Secret in a namespace other than its own. Default false. */
  readonly allowCrossNamespace?: boolean | undefined;
  /** Context to use in every kubeconfig. Default: each kubeconfig's `current-context`; empty means that default. */
  readonly contextName?: string | undefined;
}

interface SecretProviderSettings {
  readonly secrets: SecretReader;
  readonly allowExec: boolean;
  readonly allowAuthProvider: boolean;
  readonly allowLocalFiles: boolean;
  readonly allowInsecureTls: boolean;
  readonly allowCrossNamespace: boolean;
  readonly contextName: string | undefined;
}

function flag(name: string, value: unknown): boolean {
  return value === undefined ? false : booleanOption('SecretProvider', name, value);
}

const decoder = new TextDecoder('utf-8', { fatal: true });

/**
 * Resolves `secret` and `cluster-api` references to the kubeconfig stored in a Secret. Secrets
 * are untrusted: the kubeconfig passes {@link loadKubeconfig}'s safety rules, and an owner may only
 * name Secrets in its own namespace unless `allowCrossNamespace` is set. Every call reads the
 * Secret again; the fingerprint covers the key and the stored bytes.
 */
export class SecretProvider implements ClusterProvider {
  readonly #settings: SecretProviderSettings;

  constructor(options: SecretProviderOptions) {
    const secrets: unknown = options.secrets;
    if (typeof secrets !== 'object' || secrets === null || typeof (secrets as { getSecret?: unknown }).getSecret !== 'function') {
      throw new TypeError('SecretProvider option secrets must be a SecretReader');
    }
    const contextName = options.contextName;
    if (contextName !== undefined) stringOption('SecretProvider', 'contextName', contextName);
    this.#settings = {
      secrets: options.secrets,
      allowExec: flag('allowExec', options.allowExec),
      allowAuthProvider: flag('allowAuthProvider', options.allowAuthProvider),
      allowLocalFiles: flag('allowLocalFiles', options.allowLocalFiles),
      allowInsecureTls: flag('allowInsecureTls', options.allowInsecureTls),
      allowCrossNamespace: flag('allowCrossNamespace', options.allowCrossNamespace),
      contextName: contextName === '' ? undefined : contextName,
    };
  }

  /**
   * @throws InvalidClusterRefError for a malformed reference or one of another kind.
   * @throws KubeconfigRefusedError (rule `cross-namespace`, or a kubeconfig safety rule).
   * @throws KubeconfigSecretNotFoundError when the Secret or its key is missing.
   * @throws KubeconfigInvalidError when the stored kubeconfig is unusable.
   * Errors of the SecretReader (a `KubeApiError` for a 403, say) pass through.
   */
  async resolve(given: ClusterRef, context: ResolveContext): Promise<ClusterAccess> {
    const ref = canonicalClusterRef(given);
    if (ref.kind !== 'secret' && ref.kind !== 'cluster-api') throw new InvalidClusterRefError(ref, 'SecretProvider does not resolve references of this kind');
    const s = this.#settings;
    const cluster = clusterKey(ref, context.ownerNamespace);
    const { namespace, name } = objectRefOf(ref, context.ownerNamespace);
    const secretName = ref.kind === 'cluster-api' ? `${name}-kubeconfig` : name;
    if (namespace !== context.ownerNamespace && !s.allowCrossNamespace) {
      throw new KubeconfigRefusedError({
        cluster,
        rule: 'cross-namespace',
        subject: `Secret ${namespace}/${secretName} referenced from namespace ${context.ownerNamespace}`,
        hint: 'an owner may only use kubeconfig Secrets of its own namespace; set allowCrossNamespace to lift that',
      });
    }
    const keys = ref.kind === 'cluster-api' ? ['value'] : ref.key === undefined || ref.key === '' ? ['value', 'kubeconfig'] : [ref.key];

    const secret = await s.secrets.getSecret(namespace, secretName, context.signal, context.identity);
    if (secret === undefined) throw new KubeconfigSecretNotFoundError({ cluster, namespace, name: secretName, keys, availableKeys: undefined });
    const data = secret.data ?? {};
    const key = keys.find((k) => Object.hasOwn(data, k));
    const encoded = key === undefined ? undefined : data[key];
    if (key === undefined || encoded === undefined) {
      throw new KubeconfigSecretNotFoundError({ cluster, namespace, name: secretName, keys, availableKeys: Object.keys(data).sort() });
    }
    const bytes = Buffer.from(encoded, 'base64');
    let text: string;
    try {
      text = decoder.decode(bytes);
    } catch {
      throw new KubeconfigInvalidError(cluster, `Secret ${namespace}/${secretName} key ${JSON.stringify(key)} is not UTF-8 text`);
    }
    const kubeConfig = loadKubeconfig(text, {
      cluster,
      context: s.contextName,
      allowExec: s.allowExec,
      allowAuthProvider: s.allowAuthProvider,
      allowLocalFiles: s.allowLocalFiles,
      allowInsecureTls: s.allowInsecureTls,
    });
    return { name: cluster, kubeConfig, fingerprint: fingerprintOf(key, bytes) };
  }
}
