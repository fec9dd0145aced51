// An in-memory shard Lease store with the API server's optimistic concurrency, for tests: many
// replicas share one MemoryLeases, each through its own client, which a test can cut off.
import { abortReason, KubeApiError, onAbort } from '../../util/index.ts';
import type { ShardLease, ShardLeaseDraft, ShardLeaseStore } from './store.ts';

/** How a client's requests fare: answered, failing at once (503), or hanging until their signal aborts. */
export type PartitionMode = 'connected' | 'failing' | 'hanging';

/** One write that reached the store, for tests that count them. */
export interface MemoryWrite {
  readonly verb: 'create' | 'update' | 'delete';
  readonly name: string;
  /** Which client wrote. */
  readonly by: string;
}

function apiError(statusCode: number, reason: string): KubeApiError {
  return new KubeApiError({ cluster: 'memory', statusCode, status: { reason } });
}

/**
 * The Leases of one group, shared by every client like an API server's storage. Invariant: every
 * stored Lease has a distinct resourceVersion, and each write bumps the store's counter once.
 */
export class MemoryLeases {
  readonly #leases = new Map<string, ShardLease>();
  readonly writes: MemoryWrite[] = [];
  #revision = 0;

  /** A client for one replica, named `by` in {@link writes}. */
  client(by: string): MemoryLeaseClient {
    return new MemoryLeaseClient(this, by);
  }

  /** The stored Leases now (no partition applies). */
  snapshot(): readonly ShardLease[] {
    return [...this.#leases.values()];
  }

  get(name: string): ShardLease | undefined {
    return this.#leases.get(name);
  }

  create(draft: ShardLeaseDraft, by: string): ShardLease {
    if (this.#leases.has(draft.name)) throw apiError(409, 'AlreadyExists');
    return this.#write(draft, 'create', by);
  }

  update(draft: ShardLeaseDraft, resourceVersion: string, by: string): ShardLease {
    const current = this.#leases.get(draft.name);
    if (current === undefined) throw apiError(404, 'NotFound');
    if (current.resourceVersion !== resourceVersion) throw apiError(409, 'Conflict');
    return this.#write(draft, 'update', by);
  }

  delete(name: string, resourceVersion: string, by: string): void {
    const current = this.#leases.get(name);
    if (current === undefined) return;
    if (current.resourceVersion !== resourceVersion) throw apiError(409, 'Conflict');
    this.#leases.delete(name);
    this.writes.push({ verb: 'delete', name, by });
  }

  #write(draft: ShardLeaseDraft, verb: 'create' | 'update', by: string): ShardLease {
    const lease: ShardLease = { ...draft, record: { ...draft.record }, resourceVersion: String(++this.#revision) };
    this.#leases.set(draft.name, lease);
    this.writes.push({ verb, name: draft.name, by });
    return lease;
  }
}

/** One replica's view of a {@link MemoryLeases}: answers asynchronously, unless partitioned. */
export class MemoryLeaseClient implements ShardLeaseStore {
  readonly description: string;
  /** Set by tests to cut this replica off. */
  mode: PartitionMode = 'connected';
  /** Set by tests to refuse some writes (with a 403) while others go through. */
  refuse: ((verb: MemoryWrite['verb'], name: string) => boolean) | undefined;
  readonly #leases: MemoryLeases;
  readonly #by: string;

  constructor(leases: MemoryLeases, by: string) {
    this.#leases = leases;
    this.#by = by;
    this.description = `memory/${by}`;
  }

  /** Runs `op` a microtask later as a connected client, or fails or hangs as partitioned. */
  #answer<T>(signal: AbortSignal, op: () => T, write?: { readonly verb: MemoryWrite['verb']; readonly name: string }): Promise<T> {
    if (signal.aborted) return Promise.reject(abortReason(signal));
    if (write !== undefined && this.refuse?.(write.verb, write.name) === true) return Promise.reject(apiError(403, 'Forbidden'));
    if (this.mode === 'failing') return Promise.reject(apiError(503, 'ServiceUnavailable'));
    if (this.mode === 'hanging') {
      return new Promise<T>((_, reject) => { onAbort(signal, () => { reject(abortReason(signal)); }); });
    }
    return Promise.resolve().then(op);
  }

  list(signal: AbortSignal): Promise<readonly ShardLease[]> {
    return this.#answer(signal, () => this.#leases.snapshot());
  }

  create(draft: ShardLeaseDraft, signal: AbortSignal): Promise<ShardLease> {
    return this.#answer(signal, () => this.#leases.create(draft, this.#by), { verb: 'create', name: draft.name });
  }

  update(draft: ShardLeaseDraft, resourceVersion: string, signal: AbortSignal): Promise<ShardLease> {
    return this.#answer(signal, () => this.#leases.update(draft, resourceVersion, this.#by), { verb: 'update', name: draft.name });
  }

  delete(name: string, resourceVersion: string, signal: AbortSignal): Promise<void> {
    return this.#answer(signal, () => { this.#leases.delete(name, resourceVersion, this.#by); }, { verb: 'delete', name });
  }
}
