import type { KubeConfig } from '@kubernetes/client-node';
import { ClusterConnection, createListLimiter, readLimitsOf, type ConcurrencyLimiter, type ReadLimits, type RequestObservation } from '../transport/index.ts';
import {
  childController,
  ClosedError,
  FleetcacheError,
  functionOption,
  isDnsLabel,
  KubeApiError,
  nonNegativeNumber,
  noopLogger,
  positiveNumber,
  raceAbort,
  realClock,
  toError,
  TransportError,
  type Clock,
  type Logger,
  type Timer,
} from '../util/index.ts';
import { connectionOptionsOf, type ConnectionOptions } from './connection-options.ts';
import { identityKey, impersonationOf, OWN_IDENTITY, type Identity } from './identity.ts';
import { KubeconfigSecretNotFoundError, type SecretData, type SecretReader } from './provider-secret.ts';
import { canonicalClusterRef, clusterKey, LocalProvider, type ClusterAccess, type ClusterProvider, type ClusterRef } from './providers.ts';
import type { AcquireOptions, ClusterChange, ClusterLease, Clusters, ConnectionKey } from './clusters.ts';
import { GenerationLease } from './lease.ts';

/**
 * The cluster changed under a caller (its credentials rotated, or it was dropped and reconnected)
 * while the caller was using it, and the caller's work could not be moved over. Retryable: the
 * next call uses the cluster as it is now. Never means "closed": that is `ClosedError`.
 */
export class ClusterChangedError extends FleetcacheError {
  /** Always true: calling again is the remedy. */
  readonly retryable = true;
  /** The connection key of the cluster (see {@link ClusterSet.connectionKey}). */
  readonly cluster: string;

  constructor(cluster: string, message: string, options?: ErrorOptions) {
    super('ERR_CLUSTER_CHANGED', `cluster ${cluster}: ${message}; try again`, options);
    this.cluster = cluster;
  }
}

/** Options of {@link ClusterSet}. */
export interface ClusterSetOptions {
  /**
   * Turns cluster references into credentials; required. The function form receives the set's
   * own {@link ClusterSet.secrets} reader (Secrets of the management cluster, read as the caller's
   * identity), for a `SecretProvider` built on the set's connections.
   */
  readonly provider: ClusterProvider | ((secrets: SecretReader) => ClusterProvider);
  /**
   * The management cluster (where owners, their Secrets and the service's Lease live): the set
   * resolves `{ kind: 'local' }` to it without asking `provider`, and reads Secrets there. Default:
   * none; `local` references then go to `provider`, and {@link ClusterSet.secrets} refuses.
   */
  readonly local?: KubeConfig | undefined;
  /** Per-connection request limits. Default 20 qps, burst 30 (controller-runtime's). */
  readonly qps?: number;
  readonly burst?: number;
  /** Bounds on what one answer of an API server may make the process hold (see `ReadLimits` for the defaults). */
  readonly readLimits?: ReadLimits;
  /**
   * Settings of every connection the set opens: `http2` (default true), `requestTimeoutMs`
   * (default 60 000), `maxListsPerCluster` (default 5), `pingIntervalMs` (default 30 000) and
   * `pingTimeoutMs` (default 15 000), `socketBudget` and `onWatchChunk` (default none); see
   * `ClusterConnectionOptions`. Default: all defaults.
   */
  readonly connection?: ConnectionOptions | undefined;
  /** Limiter on concurrent LISTs across every connection. Default: a new one of 50, stopped by `close()`. */
  readonly listLimiter?: ConcurrencyLimiter;
  /**
   * How often each cluster's credentials are resolved again to notice rotation or a deleted
   * Secret. 0 turns periodic checks off (call {@link ClusterSet.check}). Default 60 000.
   */
  readonly credentialCheckIntervalMs?: number;
  /**
   * How long a cluster nobody holds stays connected before it is closed, so that short uses in a
   * row (Secret reads) share one connection. 0 closes it as its last lease is released. Default 0.
   */
  readonly idleTimeoutMs?: number;
  /** Bound on connecting one cluster (its first resolution). Default 30 000. */
  readonly connectTimeoutMs?: number;
  /** Default: discards everything. */
  readonly logger?: Logger;
  /** Default: the wall clock. */
  readonly clock?: Clock;
  /**
   * Told of every request on every connection of the set, for metrics (`ClusterConnectionOptions.onRequest`),
   * with `cluster` the cluster's key (`clusterKey`): connections of an impersonated identity or of a
   * purpose report under their cluster, so tenants do not multiply series. Default: none.
   */
  readonly onRequest?: ((observation: RequestObservation) => void) | undefined;
}

/** Who was admitted: what a credential check resolves as. */
interface Admission {
  readonly ownerNamespace: string;
  readonly identity: Identity;
}

/** One generation of a cluster: replaced whole on rotation, never mutated into another. */
interface Generation {
  readonly key: ConnectionKey;
  readonly cluster: string;
  readonly ref: ClusterRef;
  readonly identity: Identity;
  readonly fingerprint: string;
  readonly connection: ClusterConnection;
  readonly life: AbortController;
  readonly detach: () => void;
  /** Callers the provider admitted, by admission key (owner namespace + identity); carried to the next generation. */
  readonly admitted: Map<string, Admission>;
  /** The single admission in flight per admission key; removed when it settles (a refusal is not remembered). */
  readonly admitting: Map<string, Promise<void>>;
  /** Leases not yet released. The generation closes when this reaches 0 and it is retired or idle. */
  refs: number;
  /** Set once it is no longer the key's current generation. */
  retired: boolean;
  closed: boolean;
  idleTimer: Timer | undefined;
  checkTimer: Timer | undefined;
  checking: Promise<void> | undefined;
}

/** Read afresh after an `await` (the compiler would narrow a direct read from before it). */
function isRetired(generation: Generation): boolean {
  return generation.retired;
}

/** The key of one admission: an owner namespace and an identity. */
export function admissionKey(ownerNamespace: string, identity: Identity | undefined): string {
  return `${ownerNamespace}\u001f${identityKey(identity)}`;
}

/**
 * The keeper of clusters: one connection per ⟨cluster, identity⟩ for the management cluster
 * (`local` references: an impersonated identity is a different connection, every request of which
 * carries `Impersonate-User`/`Impersonate-Group`) and one per cluster for remote ones (`secret`,
 * `cluster-api`, `static`: the kubeconfig's own credentials are the identity; the caller's identity
 * governs only the Secret read that admits it). It resolves a reference once (single flight),
 * admits every owner namespace through the provider, notices rotation, and closes what nobody holds.
 *
 * Invariants (JavaScript interleaves only at `await`):
 * - `#current` holds at most one generation per connection key, never a retired or closed one.
 * - `#connecting` holds the single in-flight first resolution per key and loses it when it settles.
 * - A caller is handed a generation only with its own admission key in `admitted`, and its lease
 *   is taken before any `await` of the admission, so nothing closes a generation a caller is
 *   being admitted to.
 * - A generation's connection is closed only when `refs` is 0 and it is retired, idle past
 *   `idleTimeoutMs`, or the set closes.
 */
export class ClusterSet implements Clusters {
  readonly #provider: ClusterProvider;
  readonly #local: LocalProvider | undefined;
  readonly #current = new Map<ConnectionKey, Generation>();
  readonly #connecting = new Map<ConnectionKey, Promise<Generation>>();
  /** Every generation not yet closed, for `close()`. */
  readonly #open = new Set<Generation>();
  readonly #listeners = new Set<(change: ClusterChange) => void | Promise<void>>();
  readonly #root = new AbortController();
  readonly #listLimiter: ConcurrencyLimiter;
  readonly #ownsListLimiter: boolean;
  readonly #qps: number;
  readonly #burst: number;
  /** Request limits of purpose connections that asked for their own (`AcquireOptions.limits`), by key. */
  readonly #purposeLimits = new Map<ConnectionKey, { readonly qps: number; readonly burst: number }>();
  readonly #readLimits: Required<ReadLimits>;
  readonly #connection: Readonly<ConnectionOptions>;
  readonly #checkIntervalMs: number;
  readonly #idleTimeoutMs: number;
  readonly #connectTimeoutMs: number;
  readonly #logger: Logger;
  readonly #clock: Clock;
  readonly #onRequest: ClusterSetOptions['onRequest'];
  #closed: Promise<void> | undefined;

  /** Secrets of the management cluster, read as the identity the caller names (through this set's connections). */
  readonly secrets: SecretReader = {
    getSecret: (namespace, name, signal, identity) => this.#getSecret(namespace, name, signal, identity),
  };

  constructor(options: ClusterSetOptions) {
    const provider: unknown = options.provider;
    const built = typeof provider === 'function' ? (provider as (secrets: SecretReader) => ClusterProvider)(this.secrets) : provider;
    if (typeof built !== 'object' || built === null || typeof (built as { resolve?: unknown }).resolve !== 'function') {
      throw new TypeError('ClusterSet option provider must be a ClusterProvider or a function returning one');
    }
    this.#provider = built as ClusterProvider;
    this.#local = options.local === undefined ? undefined : new LocalProvider({ kubeConfig: options.local });
    this.#qps = positiveNumber('ClusterSet', 'qps', options.qps ?? 20);
    this.#burst = positiveNumber('ClusterSet', 'burst', options.burst ?? 30);
    this.#readLimits = readLimitsOf(options.readLimits ?? {}, 'ClusterSet option readLimits');
    this.#connection = connectionOptionsOf(options.connection, 'ClusterSet option connection');
    this.#checkIntervalMs = nonNegativeNumber('ClusterSet', 'credentialCheckIntervalMs', options.credentialCheckIntervalMs ?? 60_000);
    this.#idleTimeoutMs = nonNegativeNumber('ClusterSet', 'idleTimeoutMs', options.idleTimeoutMs ?? 0);
    this.#connectTimeoutMs = positiveNumber('ClusterSet', 'connectTimeoutMs', options.connectTimeoutMs ?? 30_000);
    this.#ownsListLimiter = options.listLimiter === undefined;
    this.#listLimiter = options.listLimiter ?? createListLimiter(50);
    this.#logger = options.logger ?? noopLogger;
    this.#clock = options.clock ?? realClock;
    if (options.onRequest !== undefined) functionOption('ClusterSet', 'onRequest', options.onRequest);
    this.#onRequest = options.onRequest;
  }

  /**
   * The key of the connection a caller gets: the reference's `clusterKey`, plus the identity for a
   * `local` reference acting as someone else (`local[as=system:serviceaccount:team-a:deployer]`).
   * Remote references ignore the identity: their kubeconfig is who they are. A `purpose` gets a
   * connection of its own (`local#leader-election`).
   *
   * @throws InvalidClusterRefError for a malformed reference; TypeError for a malformed purpose.
   */
  static connectionKey(ref: ClusterRef, ownerNamespace: string, identity?: Identity, purpose?: string): ConnectionKey {
    const cluster = clusterKey(ref, ownerNamespace);
    const id = ref.kind === 'local' ? identityKey(identity) : '';
    const key = id === '' ? cluster : `${cluster}[${id}]`;
    if (purpose === undefined) return key as ConnectionKey;
    if (!isDnsLabel(purpose)) throw new TypeError(`ClusterSet purpose must be a DNS label, got ${JSON.stringify(purpose)}`);
    return `${key}#${purpose}` as ConnectionKey;
  }

  /** {@link ClusterSet.connectionKey}, for consumers that know the keeper through {@link Clusters}. */
  connectionKey(ref: ClusterRef, ownerNamespace: string, identity?: Identity, purpose?: string): ConnectionKey {
    return ClusterSet.connectionKey(ref, ownerNamespace, identity, purpose);
  }

  /** Whether `ownerNamespace` (as `identity`) is admitted to the current generation of `key`. No I/O. */
  isAdmitted(key: ConnectionKey, ownerNamespace: string, identity?: Identity): boolean {
    return this.#current.get(key)?.admitted.has(admissionKey(ownerNamespace, identity)) === true;
  }

  /**
   * A lease on the cluster `ref` names, for `ownerNamespace` acting as `identity`: resolving and
   * connecting it on first use (one resolution however many ask at once), and running the
   * provider's admission for this caller unless this very owner namespace and identity were
   * admitted already (concurrent callers of one namespace and identity share one admission; no
   * caller ever joins another namespace's). Release the lease when done.
   *
   * @throws the provider's errors (`KubeconfigRefusedError`, `KubeconfigSecretNotFoundError`,
   *   a `KubeApiError` 403 when `identity` may not read the kubeconfig Secret, ...),
   *   `TransportError` when connecting takes longer than `connectTimeoutMs`, `ClosedError` once
   *   the set is closed (and only then), or the signal's reason.
   */
  async acquire(given: ClusterRef, options: AcquireOptions): Promise<ClusterLease> {
    const ref = canonicalClusterRef(given);
    const { ownerNamespace, signal } = options;
    const identity = options.identity ?? OWN_IDENTITY;
    const key = ClusterSet.connectionKey(ref, ownerNamespace, identity, options.purpose);
    const admission = admissionKey(ownerNamespace, identity);
    if (options.purpose !== undefined && options.limits !== undefined) {
      this.#purposeLimits.set(key, { qps: positiveNumber('ClusterSet.acquire', 'limits.qps', options.limits.qps), burst: positiveNumber('ClusterSet.acquire', 'limits.burst', options.limits.burst) });
    }
    for (;;) {
      if (this.#closed !== undefined) throw new ClosedError('cluster set');
      signal?.throwIfAborted();
      const known = this.#current.get(key);
      if (known === undefined) {
        const pending = this.#connecting.get(key);
        if (pending === undefined) {
          // Ours: the first resolution is this caller's admission.
          const connecting = this.#connect(key, ref, ownerNamespace, identity, admission);
          this.#connecting.set(key, connecting);
          const forget = (): void => { if (this.#connecting.get(key) === connecting) this.#connecting.delete(key); };
          connecting.then(forget, forget);
          const generation = await raceAbort(connecting, signal);
          // Still current unless it rotated or idled out meanwhile: a lease on it is then as good.
          if (!generation.closed) return this.#lease(generation);
          continue;
        }
        // Someone else is connecting: wait, then run our own admission on what they connected.
        await raceAbort(pending, signal).catch((err: unknown) => { if (signal?.aborted === true) throw err; });
        continue;
      }
      // Lease first, then admit: nothing closes a generation while we are being admitted to it.
      const lease = this.#lease(known);
      if (known.admitted.has(admission)) return lease;
      try {
        // Callers of the same namespace and identity share one admission (the same question has the
        // same answer); a caller of another namespace never joins it.
        let admitting = known.admitting.get(admission);
        if (admitting === undefined) {
          admitting = this.#admit(known, ref, admission, { ownerNamespace, identity });
          known.admitting.set(admission, admitting);
          const forget = (): void => { if (known.admitting.get(admission) === admitting) known.admitting.delete(admission); };
          admitting.then(forget, forget);
        }
        await raceAbort(admitting, signal);
        return lease;
      } catch (err) {
        lease.release();
        throw err;
      }
    }
  }

  /** One admission to a known generation: the provider's resolution for this namespace and identity. */
  async #admit(generation: Generation, ref: ClusterRef, admission: string, who: Admission): Promise<void> {
    // Bounded like a connection (the resolution is shared by every caller of this admission).
    const { controller, dispose } = childController(this.#root.signal);
    const deadline = this.#clock.setTimer(this.#connectTimeoutMs, () => {
      controller.abort(new TransportError({ cluster: generation.key }, `admitting namespace ${who.ownerNamespace} took longer than ${this.#connectTimeoutMs} ms`));
    });
    let access: ClusterAccess;
    try {
      access = await this.#resolve(ref, { ...who, signal: controller.signal });
    } finally {
      deadline.cancel();
      dispose();
    }
    generation.admitted.set(admission, who);
    if (access.fingerprint !== generation.fingerprint && !generation.retired) {
      void this.#check(generation).catch((err: unknown) => { this.#logCheckFailure(generation, err); });
    }
  }

  /**
   * A new lease on the current generation of an already connected cluster, without admission:
   * for holders moving work they were admitted for onto the generation that replaced theirs.
   * Undefined when the key has no current generation.
   */
  retain(key: ConnectionKey): ClusterLease | undefined {
    const generation = this.#current.get(key);
    return generation === undefined ? undefined : this.#lease(generation);
  }

  /**
   * Resolves a connected cluster's credentials again now (as its first admitted owner namespace
   * and identity): a changed fingerprint installs a new generation and announces `rotated`, a
   * deleted Secret drops the cluster and announces `removed`. Periodic checks do the same every
   * `credentialCheckIntervalMs`. Resolves after the listeners.
   */
  async check(key: ConnectionKey): Promise<void> {
    const generation = this.#current.get(key);
    if (generation !== undefined) await this.#check(generation);
  }

  /** Listens to rotations and removals; returns the unsubscribe function. */
  subscribe(listener: (change: ClusterChange) => void | Promise<void>): () => void {
    this.#listeners.add(listener);
    return () => { this.#listeners.delete(listener); };
  }

  /** Connection keys of the clusters connected now. */
  keys(): ConnectionKey[] {
    return [...this.#current.keys()];
  }

  /** Closes every connection, held or not, and the timers; resolves when released. Idempotent. */
  close(): Promise<void> {
    this.#closed ??= this.#close();
    return this.#closed;
  }

  async #close(): Promise<void> {
    this.#root.abort(new ClosedError('cluster set'));
    await Promise.allSettled([...this.#connecting.values()]);
    const all = [...this.#open];
    this.#current.clear();
    await Promise.all(all.map((generation) => this.#closeGeneration(generation)));
    if (this.#ownsListLimiter) await this.#listLimiter.stop();
  }

  #resolve(ref: ClusterRef, context: { readonly ownerNamespace: string; readonly identity: Identity; readonly signal?: AbortSignal | undefined }): Promise<ClusterAccess> {
    if (ref.kind === 'local' && this.#local !== undefined) return this.#local.resolve(ref, context);
    return this.#provider.resolve(ref, context);
  }

  async #connect(key: ConnectionKey, ref: ClusterRef, ownerNamespace: string, identity: Identity, admission: string): Promise<Generation> {
    // Shared by every caller waiting for this key: bounded, on the set's signal, not a caller's.
    const { controller, dispose } = childController(this.#root.signal);
    const deadline = this.#clock.setTimer(this.#connectTimeoutMs, () => {
      controller.abort(new TransportError({ cluster: key }, `connecting took longer than ${this.#connectTimeoutMs} ms`));
    });
    let access: ClusterAccess;
    try {
      access = await this.#resolve(ref, { ownerNamespace, identity, signal: controller.signal });
    } finally {
      deadline.cancel();
      dispose();
    }
    if (this.#closed !== undefined) throw new ClosedError('cluster set');
    const generation = this.#newGeneration(key, ref, identity, access, [[admission, { ownerNamespace, identity }]]);
    this.#current.set(key, generation);
    this.#scheduleCheck(generation);
    // Held until every waiter resumed (after the microtasks) and took its own lease, so a caller
    // that stopped waiting leaves a generation that idles out rather than one nobody closes.
    const hold = this.#lease(generation);
    setImmediate(() => { hold.release(); });
    return generation;
  }

  #newGeneration(key: ConnectionKey, ref: ClusterRef, identity: Identity, access: ClusterAccess, admitted: Iterable<readonly [string, Admission]>): Generation {
    // Metrics name the cluster, never the connection: a tenant's identity or a purpose is no new series.
    const onRequest = this.#onRequest;
    const connection = new ClusterConnection({
      name: key,
      kubeConfig: access.kubeConfig,
      impersonate: ref.kind === 'local' ? impersonationOf(identity) : undefined,
      qps: this.#purposeLimits.get(key)?.qps ?? this.#qps,
      burst: this.#purposeLimits.get(key)?.burst ?? this.#burst,
      listLimiter: this.#listLimiter,
      ...this.#readLimits,
      ...this.#connection,
      logger: this.#logger.child({ cluster: key }),
      clock: this.#clock,
      onRequest: onRequest === undefined ? undefined : (observation) => { onRequest({ ...observation, cluster: access.name }); },
    });
    const { controller, dispose } = childController(this.#root.signal);
    const generation: Generation = {
      key,
      cluster: access.name,
      ref,
      identity: ref.kind === 'local' ? identity : OWN_IDENTITY,
      fingerprint: access.fingerprint,
      connection,
      life: controller,
      detach: dispose,
      admitted: new Map(admitted),
      admitting: new Map(),
      refs: 0,
      retired: false,
      closed: false,
      idleTimer: undefined,
      checkTimer: undefined,
      checking: undefined,
    };
    this.#open.add(generation);
    return generation;
  }

  #lease(generation: Generation): ClusterLease {
    generation.refs += 1;
    generation.idleTimer?.cancel();
    generation.idleTimer = undefined;
    return new GenerationLease(generation, this.#onUnused);
  }

  /** Told by a lease that released its generation's last reference (one function for every lease). */
  readonly #onUnused = (generation: Generation): void => { this.#unused(generation); };

  /** A generation lost its last lease: close it now if retired, after the idle timeout if current. */
  #unused(generation: Generation): void {
    if (generation.closed) return;
    if (generation.retired || this.#idleTimeoutMs === 0 || this.#closed !== undefined) {
      this.#retire(generation);
      this.#closeQuietly(generation);
      return;
    }
    generation.idleTimer = this.#clock.setTimer(this.#idleTimeoutMs, () => {
      generation.idleTimer = undefined;
      if (generation.refs > 0) return;
      this.#retire(generation);
      this.#closeQuietly(generation);
    });
  }

  /** Takes a generation out of `#current` (if it is there); it keeps working for its lease holders. */
  #retire(generation: Generation): void {
    generation.retired = true;
    if (this.#current.get(generation.key) === generation) this.#current.delete(generation.key);
    generation.checkTimer?.cancel();
    generation.checkTimer = undefined;
  }

  /** Closes from a synchronous path (a release, a timer): a failure is logged, never unhandled. */
  #closeQuietly(generation: Generation): void {
    this.#closeGeneration(generation).catch((err: unknown) => {
      this.#logger.warn('closing an unused cluster connection failed', { cluster: generation.key, error: toError(err).message });
    });
  }

  async #closeGeneration(generation: Generation): Promise<void> {
    if (generation.closed) return;
    generation.closed = true;
    generation.retired = true;
    generation.idleTimer?.cancel();
    generation.checkTimer?.cancel();
    this.#open.delete(generation);
    generation.life.abort(new ClosedError(`connection to cluster ${generation.key}`));
    generation.detach();
    await generation.connection.close();
  }

  #scheduleCheck(generation: Generation): void {
    if (this.#checkIntervalMs === 0 || this.#closed !== undefined || generation.retired) return;
    generation.checkTimer = this.#clock.setTimer(this.#checkIntervalMs, () => {
      generation.checkTimer = undefined;
      this.#check(generation)
        .catch((err: unknown) => { this.#logCheckFailure(generation, err); })
        .finally(() => { this.#scheduleCheck(generation); });
    });
  }

  #logCheckFailure(generation: Generation, err: unknown): void {
    if (this.#closed !== undefined) return;
    this.#logger.warn('credential check failed; keeping the current connection', { cluster: generation.key, error: toError(err).message });
  }

  /** One check at a time per generation; a retired generation has nothing to check. */
  #check(generation: Generation): Promise<void> {
    generation.checking ??= this.#checkOnce(generation).finally(() => { generation.checking = undefined; });
    return generation.checking;
  }

  async #checkOnce(generation: Generation): Promise<void> {
    const [first] = generation.admitted.values();
    if (first === undefined || generation.retired) return;
    let access: ClusterAccess;
    try {
      // As the first admitted caller: its identity's Secret read is what admitted the cluster.
      access = await this.#resolve(generation.ref, { ownerNamespace: first.ownerNamespace, identity: first.identity, signal: this.#root.signal });
    } catch (err) {
      if (err instanceof KubeconfigSecretNotFoundError || (err instanceof KubeApiError && err.statusCode === 404)) {
        if (isRetired(generation)) return;
        this.#logger.info('kubeconfig Secret is gone: dropping the cluster', { cluster: generation.key });
        this.#retire(generation);
        await this.#announce({ type: 'removed', key: generation.key });
        if (generation.refs === 0) await this.#closeGeneration(generation);
        return;
      }
      throw err;
    }
    if (access.fingerprint === generation.fingerprint || isRetired(generation) || this.#closed !== undefined) return;
    this.#logger.info('credentials changed: replacing the cluster\'s connection', { cluster: generation.key });
    const next = this.#newGeneration(generation.key, generation.ref, generation.identity, access, generation.admitted);
    this.#retire(generation);
    this.#current.set(next.key, next);
    this.#scheduleCheck(next);
    // Nobody holds the new generation yet: it would idle out without a holder.
    const hold = this.#lease(next);
    try {
      await this.#announce({ type: 'rotated', key: generation.key });
    } finally {
      hold.release();
    }
    if (generation.refs === 0) await this.#closeGeneration(generation);
  }

  async #announce(change: ClusterChange): Promise<void> {
    for (const listener of [...this.#listeners]) {
      try {
        await listener(change);
      } catch (err) {
        this.#logger.warn('cluster change listener failed', { cluster: change.key, change: change.type, error: toError(err).message });
      }
    }
  }

  async #getSecret(namespace: string, name: string, signal: AbortSignal | undefined, identity: Identity | undefined): Promise<SecretData | undefined> {
    if (this.#local === undefined) throw new TypeError('ClusterSet.secrets needs the ClusterSet option local');
    const lease = await this.acquire({ kind: 'local' }, { ownerNamespace: namespace, identity, signal });
    try {
      const body = await lease.connection.request({
        method: 'GET',
        path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets/${encodeURIComponent(name)}`,
        gvk: { group: '', version: 'v1', kind: 'Secret' },
        ...(signal === undefined ? {} : { signal }),
      });
      return body as SecretData | undefined;
    } catch (err) {
      if (err instanceof KubeApiError && err.statusCode === 404) return undefined;
      throw err;
    } finally {
      lease.release();
    }
  }
}
