// A lease on one generation of a cluster: what the keeper (and the in-memory keeper of tests) hands out.
import type { ClusterConnection } from '../transport/index.ts';
import type { ClusterLease, ConnectionKey } from './clusters.ts';
import type { Identity } from './identity.ts';

/** What a lease reads of its generation, and the count it keeps. */
export interface LeasedGeneration {
  readonly key: ConnectionKey;
  readonly cluster: string;
  readonly identity: Identity;
  readonly connection: ClusterConnection;
  /** Aborted when the generation closes. */
  readonly life: AbortController;
  /** Leases not yet released; the keeper counts a new lease before constructing it. */
  refs: number;
  retired: boolean;
  closed: boolean;
}

/**
 * A lease on one generation. A class, not an object literal: a literal with a getter (`current`)
 * is made a dictionary-mode object, about 600 bytes more per lease, four or more per cluster (issue 12).
 *
 * Invariant: the generation's `refs` counts this lease until `release()`, which runs once.
 */
export class GenerationLease<G extends LeasedGeneration> implements ClusterLease {
  readonly #generation: G;
  readonly #unused: (generation: G) => void;
  #released = false;

  constructor(generation: G, unused: (generation: G) => void) {
    this.#generation = generation;
    this.#unused = unused;
  }

  get key(): ConnectionKey {
    return this.#generation.key;
  }

  get cluster(): string {
    return this.#generation.cluster;
  }

  get identity(): Identity {
    return this.#generation.identity;
  }

  get connection(): ClusterConnection {
    return this.#generation.connection;
  }

  get signal(): AbortSignal {
    return this.#generation.life.signal;
  }

  get current(): boolean {
    return !this.#generation.retired && !this.#generation.closed;
  }

  release(): void {
    if (this.#released) return;
    this.#released = true;
    const generation = this.#generation;
    generation.refs -= 1;
    if (generation.refs === 0) this.#unused(generation);
  }
}

