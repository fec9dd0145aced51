// The Sharder's store before the manager has a connection: `start` connects it.
import type { ShardLease, ShardLeaseDraft, ShardLeaseStore } from './store.ts';

/** A {@link ShardLeaseStore} whose backing store is given later (the manager builds the Sharder in its constructor, which does no I/O). */
export class DeferredShardLeaseStore implements ShardLeaseStore {
  readonly description: string;
  #store: ShardLeaseStore | undefined;

  constructor(description: string) {
    this.description = description;
  }

  connect(store: ShardLeaseStore): void {
    this.#store = store;
  }

  get #connected(): ShardLeaseStore {
    if (this.#store === undefined) throw new Error('the shard Lease store is not connected yet');
    return this.#store;
  }

  list(signal: AbortSignal): Promise<readonly ShardLease[]> {
    return this.#connected.list(signal);
  }

  create(draft: ShardLeaseDraft, signal: AbortSignal): Promise<ShardLease> {
    return this.#connected.create(draft, signal);
  }

  update(draft: ShardLeaseDraft, resourceVersion: string, signal: AbortSignal): Promise<ShardLease> {
    return this.#connected.update(draft, resourceVersion, signal);
  }

  delete(name: string, resourceVersion: string, signal: AbortSignal): Promise<void> {
    return this.#connected.delete(name, resourceVersion, signal);
  }
}
