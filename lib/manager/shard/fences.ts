// Fence Leases: taking a key's fence (create, or steal from a dead holder) and releasing it.
import type { Clock } from '../../util/index.ts';
import { microTime, nextTransitions } from '../leader.ts';
import { fenceLeaseName } from './names.ts';
import type { FenceLeaseDraft, ShardLease, ShardLeaseStore } from './store.ts';

/** A fence as stored. */
export type FenceLease = Extract<ShardLease, { readonly role: 'fence' }>;

/**
 * Writes one replica's fences. A fence is never renewed: it is valid while its holder's peer
 * Lease is live, so taking it from a holder that is not live is the same decision, on the same
 * evidence, as client-go's taking of an expired leader Lease; the resourceVersion precondition
 * makes two takers race safely (one write wins, the other gets a 409).
 */
export class FenceWriter {
  readonly #store: ShardLeaseStore;
  readonly #group: string;
  readonly #identity: string;
  readonly #leaseDurationSeconds: number;
  readonly #clock: Clock;

  constructor(options: { readonly store: ShardLeaseStore; readonly group: string; readonly identity: string; readonly leaseDurationMs: number; readonly clock: Clock }) {
    this.#store = options.store;
    this.#group = options.group;
    this.#identity = options.identity;
    this.#leaseDurationSeconds = options.leaseDurationMs / 1000;
    this.#clock = options.clock;
  }

  /**
   * Makes this replica the holder of `key`'s fence: a create when `current` is undefined (the
   * fence is free), else an update at `current`'s resourceVersion. The caller has decided that
   * `current`'s holder is '' or not live. Rejects when another writer came first.
   */
  async take(key: string, current: FenceLease | undefined, signal: AbortSignal): Promise<FenceLease> {
    const now = microTime(this.#clock.now());
    const draft: FenceLeaseDraft = {
      role: 'fence',
      name: current?.name ?? fenceLeaseName(this.#group, key),
      key,
      record: {
        holderIdentity: this.#identity,
        // Informational: validity comes from the holder's peer Lease, not from this record.
        leaseDurationSeconds: this.#leaseDurationSeconds,
        acquireTime: now,
        renewTime: now,
        leaseTransitions: current === undefined ? 0 : nextTransitions(current.record.leaseTransitions),
      },
    };
    const written = current === undefined ? await this.#store.create(draft, signal) : await this.#store.update(draft, current.resourceVersion, signal);
    if (written.role !== 'fence') throw new Error(`the store answered a fence write for ${draft.name} with a ${written.role} Lease`);
    return written;
  }

  /** Deletes the fence if it is still at `resourceVersion` (ours): a 409 means it is no longer ours to release. */
  release(fence: { readonly name: string; readonly resourceVersion: string }, signal: AbortSignal): Promise<void> {
    return this.#store.delete(fence.name, fence.resourceVersion, signal);
  }
}
