// Test support, not exported from the package root: a keeper of clusters in memory, for the tests
// of every room that is lent a `Clusters` (the registry, the snapshot writer, the manager).
import { KubeConfig } from '@kubernetes/client-node';
import { ClusterConnection, type RequestOptions, type ResourceClient, type ResourceInfo } from '../transport/index.ts';
import { ClosedError, functionOption, raceAbort, UnknownKindError, type GroupVersionKind } from '../util/index.ts';
import { admissionKey, ClusterSet } from './cluster-set.ts';
import { GenerationLease } from './lease.ts';
import type { AcquireOptions, ClusterChange, ClusterLease, Clusters, ConnectionKey } from './clusters.ts';
import { OWN_IDENTITY, type Identity } from './identity.ts';
import { canonicalClusterRef, clusterKey, type ClusterRef } from './providers.ts';

/** Options of {@link FakeClusters}. */
export interface FakeClustersOptions {
  /** The LIST/WATCH client of one resource on generation `generation` (1, 2, …) of the connection `key`. Required. */
  readonly client: (key: string, info: ResourceInfo, generation: number) => ResourceClient;
  /**
   * What discovery on generation `generation` of `key` finds: the resource of a kind, or undefined
   * when the cluster does not serve it (`UnknownKindError`); a promise holds discovery (and so the
   * build) until the test settles it. Default: every kind, namespaced, resource = lower-case kind + `s`.
   */
  readonly discover?: ((key: string, gvk: GroupVersionKind, generation: number) => ResourceInfo | undefined | Promise<ResourceInfo | undefined>) | undefined;
  /**
   * The provider's admission of one caller (owner namespace and identity) to `key`: throw or
   * reject to refuse it. Runs once per generation and caller, as the real keeper's does (carried
   * over a rotation). Default: everyone is admitted at once.
   */
  readonly admit?: ((key: string, ownerNamespace: string, identity: Identity) => void | Promise<void>) | undefined;
  /** Answers `connection.request` (the owners' writes). Default: rejects, naming the request. */
  readonly request?: ((key: string, options: RequestOptions) => Promise<unknown>) | undefined;
}

/** One generation of a fake cluster: replaced whole by {@link FakeClusters.rotate}. */
interface FakeGeneration {
  readonly key: ConnectionKey;
  readonly cluster: string;
  readonly identity: Identity;
  readonly number: number;
  readonly connection: FakeConnection;
  readonly life: AbortController;
  readonly admitted: Set<string>;
  refs: number;
  retired: boolean;
  closed: boolean;
}

const NOWHERE = (() => {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: 'fake', server: 'https://fake.invalid' }],
    users: [{ name: 'fake' }],
    contexts: [{ name: 'fake', cluster: 'fake', user: 'fake' }],
    currentContext: 'fake',
  });
  return kubeConfig;
})();

/**
 * A connection that never opens a socket: discovery and resource clients come from the
 * {@link FakeClusters} options. A `ClusterConnection` so that what the registry hands out
 * (`connectionFor`) has the real type.
 */
class FakeConnection extends ClusterConnection {
  readonly #options: FakeClustersOptions;
  readonly #generation: number;

  constructor(key: string, generation: number, options: FakeClustersOptions) {
    super({ name: key, kubeConfig: NOWHERE });
    this.#options = options;
    this.#generation = generation;
  }

  override async resolve(gvk: GroupVersionKind, signal?: AbortSignal): Promise<ResourceInfo> {
    signal?.throwIfAborted();
    const info = this.#options.discover === undefined
      ? { gvk, resource: `${gvk.kind.toLowerCase()}s`, namespaced: true, verbs: ['list', 'watch'] }
      : await raceAbort(Promise.resolve(this.#options.discover(this.name, gvk, this.#generation)), signal);
    if (info === undefined) throw new UnknownKindError({ cluster: this.name, gvk, statusCode: 200 });
    return info;
  }

  override resourceClient(info: ResourceInfo): ResourceClient {
    return this.#options.client(this.name, info, this.#generation);
  }

  override request(options: RequestOptions): Promise<unknown> {
    if (this.#options.request !== undefined) return this.#options.request(this.name, options);
    return Promise.reject(new Error(`fake connection ${this.name}: no answer for ${options.method} ${options.path}`));
  }
}

/** A lease on a fake generation, counted before it is made (as the keeper counts its own). */
function leaseOn(generation: FakeGeneration, unused: (generation: FakeGeneration) => void): ClusterLease {
  generation.refs += 1;
  return new GenerationLease(generation, unused);
}

/**
 * A keeper of clusters in memory for tests: no sockets, no providers. Generations are numbered
 * per connection key (1, 2, …); the test rotates or removes a cluster when it chooses and sees
 * how many leases and generations are still open. Like `ClusterSet` with `idleTimeoutMs: 0`, a
 * generation closes (its signal aborts) once its last lease is released.
 *
 * Invariants: `#current` holds at most one generation per key, never a retired or closed one;
 * `#open` holds every generation not yet closed; a generation closes only when its `refs` is 0
 * (or the keeper closes).
 */
export class FakeClusters implements Clusters {
  readonly #options: FakeClustersOptions;
  readonly #current = new Map<ConnectionKey, FakeGeneration>();
  readonly #open = new Set<FakeGeneration>();
  readonly #numbers = new Map<string, number>();
  readonly #listeners = new Set<(change: ClusterChange) => void | Promise<void>>();
  #closed = false;
  /** Every `acquire` call's connection key, in order. */
  readonly acquired: ConnectionKey[] = [];
  /** Every `check` call's key, in order. */
  readonly checked: ConnectionKey[] = [];

  constructor(options: FakeClustersOptions) {
    functionOption('FakeClusters', 'client', options.client);
    this.#options = options;
  }

  connectionKey(ref: ClusterRef, ownerNamespace: string, identity?: Identity, purpose?: string): ConnectionKey {
    return ClusterSet.connectionKey(ref, ownerNamespace, identity, purpose);
  }

  async acquire(given: ClusterRef, options: AcquireOptions): Promise<ClusterLease> {
    const ref = canonicalClusterRef(given);
    const identity = options.identity ?? OWN_IDENTITY;
    const key = this.connectionKey(ref, options.ownerNamespace, identity, options.purpose);
    this.acquired.push(key);
    for (;;) {
      if (this.#closed) throw new ClosedError('cluster set');
      options.signal?.throwIfAborted();
      const generation = this.#current.get(key) ?? this.#connect(key, ref, options.ownerNamespace, identity);
      // Lease first, then admit: nothing closes the generation while the caller is being admitted.
      const lease = leaseOn(generation, this.#onUnused);
      const admission = admissionKey(options.ownerNamespace, identity);
      if (generation.admitted.has(admission)) return lease;
      try {
        await this.#options.admit?.(key, options.ownerNamespace, identity);
        options.signal?.throwIfAborted();
      } catch (err) {
        lease.release();
        throw err;
      }
      if (generation.closed) continue;
      generation.admitted.add(admission);
      return lease;
    }
  }

  retain(key: ConnectionKey): ClusterLease | undefined {
    const generation = this.#current.get(key);
    return generation === undefined ? undefined : leaseOn(generation, this.#onUnused);
  }

  isAdmitted(key: ConnectionKey, ownerNamespace: string, identity?: Identity): boolean {
    return this.#current.get(key)?.admitted.has(admissionKey(ownerNamespace, identity)) === true;
  }

  /** Records the call; the test decides what changes ({@link rotate}, {@link remove}). */
  check(key: ConnectionKey): Promise<void> {
    this.checked.push(key);
    return Promise.resolve();
  }

  subscribe(listener: (change: ClusterChange) => void | Promise<void>): () => void {
    this.#listeners.add(listener);
    return () => { this.#listeners.delete(listener); };
  }

  /** The number of the current generation of `key`, or undefined when it has none. */
  generation(key: ConnectionKey): number | undefined {
    return this.#current.get(key)?.number;
  }

  /** Leases not released on any generation of `key`. */
  leases(key: ConnectionKey): number {
    let refs = 0;
    for (const generation of this.#open) if (generation.key === key) refs += generation.refs;
    return refs;
  }

  /** Generations of `key` not closed yet (the current one and retired ones still held). */
  openGenerations(key: ConnectionKey): number {
    return [...this.#open].filter((generation) => generation.key === key).length;
  }

  /**
   * New credentials for `key`: a new generation (admissions carried over) becomes current, the
   * listeners are told `rotated` and awaited; the old generation closes once its leases are released.
   */
  async rotate(key: ConnectionKey): Promise<void> {
    const old = this.#current.get(key);
    if (old === undefined) throw new Error(`fake: ${key} has no current generation to rotate`);
    const next = this.#newGeneration(key, old.cluster, old.identity);
    for (const admission of old.admitted) next.admitted.add(admission);
    old.retired = true;
    this.#current.set(key, next);
    // Held while the listeners run, as the real keeper does: nobody holds the new generation yet.
    const hold = leaseOn(next, this.#onUnused);
    try {
      await this.#announce({ type: 'rotated', key });
    } finally {
      hold.release();
    }
    if (old.refs === 0) this.#close(old);
  }

  /** The cluster's source is gone: `key` loses its generation and the listeners are told `removed`. */
  async remove(key: ConnectionKey): Promise<void> {
    const old = this.#current.get(key);
    if (old === undefined) throw new Error(`fake: ${key} has no current generation to remove`);
    old.retired = true;
    this.#current.delete(key);
    await this.#announce({ type: 'removed', key });
    if (old.refs === 0) this.#close(old);
  }

  /** Closes every generation, held or not. Idempotent. */
  close(): Promise<void> {
    this.#closed = true;
    for (const generation of [...this.#open]) this.#close(generation);
    this.#current.clear();
    return Promise.resolve();
  }

  #connect(key: ConnectionKey, ref: ClusterRef, ownerNamespace: string, identity: Identity): FakeGeneration {
    const generation = this.#newGeneration(key, clusterKey(ref, ownerNamespace), ref.kind === 'local' ? identity : OWN_IDENTITY);
    this.#current.set(key, generation);
    return generation;
  }

  #newGeneration(key: ConnectionKey, cluster: string, identity: Identity): FakeGeneration {
    const number = (this.#numbers.get(key) ?? 0) + 1;
    this.#numbers.set(key, number);
    const generation: FakeGeneration = {
      key,
      cluster,
      identity,
      number,
      connection: new FakeConnection(key, number, this.#options),
      life: new AbortController(),
      admitted: new Set(),
      refs: 0,
      retired: false,
      closed: false,
    };
    this.#open.add(generation);
    return generation;
  }

  readonly #onUnused = (generation: FakeGeneration): void => { this.#close(generation); };

  #close(generation: FakeGeneration): void {
    if (generation.closed) return;
    generation.closed = true;
    generation.retired = true;
    if (this.#current.get(generation.key) === generation) this.#current.delete(generation.key);
    this.#open.delete(generation);
    generation.life.abort(new ClosedError(`connection to cluster ${generation.key}`));
    void generation.connection.close();
  }

  async #announce(change: ClusterChange): Promise<void> {
    for (const listener of [...this.#listeners]) await listener(change);
  }
}
