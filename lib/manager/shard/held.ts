// A fence this replica holds, with the work running under it.

/**
 * One held fence. Invariants: `inFlight` counts the `whileOwned` calls for the key that have
 * started and not settled; once `leaving` is set `ownership` is aborted and stays so, and a key
 * that is leaving is never acted for again (a new take makes a new HeldFence).
 */
export class HeldFence {
  readonly name: string;
  /** Of our last successful write of the fence. */
  resourceVersion: string;
  /** Aborts when this replica stops acting for the key: the signal whileOwned hands out. */
  readonly ownership = new AbortController();
  inFlight = 0;
  /** Ownership has ended; the fence is released once `inFlight` is 0. */
  leaving = false;
  /** A release request is running (so a tick does not start a second one). */
  releasing = false;
  #idle: (() => void)[] = [];

  constructor(name: string, resourceVersion: string) {
    this.name = name;
    this.resourceVersion = resourceVersion;
  }

  /** Ends ownership: whileOwned's signal aborts with `reason`. */
  leave(reason: Error): void {
    this.leaving = true;
    this.ownership.abort(reason);
  }

  enter(): void {
    this.inFlight += 1;
  }

  exit(): void {
    this.inFlight -= 1;
    if (this.inFlight > 0) return;
    const waiters = this.#idle;
    this.#idle = [];
    for (const resolve of waiters) resolve();
  }

  /** Resolves once no whileOwned is in flight (at once when none is). */
  idle(): Promise<void> {
    if (this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => { this.#idle.push(resolve); });
  }
}
