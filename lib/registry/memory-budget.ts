// The process memory budget: new caches are refused while the process's resident memory is over
// it, so that a fleet that outgrows its container fails a few new owners loudly instead of
// getting the whole process OOM-killed.
import { FleetcacheError, formatGvk, functionOption, invalidOption, positiveNumber, type GroupVersionKind } from '../util/index.ts';

const MiB = 2 ** 20;

/**
 * Options of the registry's memory budget ({@link RegistryOptions.memoryBudget}).
 *
 * The figure is the resident set size (RSS), not V8's heap: a container is OOM-killed on its
 * cgroup's memory, which RSS tracks, while the heap leaves out what the caches hold outside it
 * (each cluster's TLS socket and HTTP/2 session, about 120 KiB, buffers, code). V8's own heap
 * limit (`--max-old-space-size`) is a crash of its own, in the heap alone; keep it above the budget.
 */
export interface MemoryBudgetOptions {
  /**
   * Resident memory, in bytes, at or above which a new cache is refused. Required, positive.
   * Leave room under the container's limit for the caches already built to grow with their objects:
   * the budget refuses new caches, it does not shrink old ones (80–85 % of the limit is a start).
   */
  readonly maxRssBytes: number;
  /**
   * Reads the process's resident memory in bytes; called once per cache about to be built (never
   * on the hot path). Default `process.memoryUsage.rss` (one read of /proc, no heap walk).
   */
  readonly readRss?: (() => number) | undefined;
}

/** What {@link Registry.memoryBudget} reports. */
export interface MemoryBudgetStatus {
  readonly maxRssBytes: number;
  /** New caches refused since the registry was built. */
  readonly refusals: number;
}

/**
 * A new cache was refused: the process's resident memory is over the registry's memory budget.
 * Nothing was built or requested; caches already built carry on. The owner sees it as it sees any
 * failed build (a Pipeline's target is unreadable with this message) and the next call tries again,
 * which succeeds once memory is back under the budget (caches no owner uses are collected).
 */
export class MemoryBudgetExceededError extends FleetcacheError {
  readonly cluster: string;
  readonly gvk: GroupVersionKind;
  /** The budget, in bytes (`memoryBudget.maxRssBytes`). */
  readonly maxRssBytes: number;
  /** The resident memory read when the cache was refused, in bytes. */
  readonly rssBytes: number;

  constructor(scope: { readonly cluster: string; readonly gvk: GroupVersionKind; readonly maxRssBytes: number; readonly rssBytes: number }) {
    super('ERR_MEMORY_BUDGET_EXCEEDED', `cluster ${scope.cluster}, ${formatGvk(scope.gvk)}: new cache refused: the process's resident memory (${(scope.rssBytes / MiB).toFixed(0)} MiB) is over its budget of ${(scope.maxRssBytes / MiB).toFixed(0)} MiB; caches already built carry on`);
    this.cluster = scope.cluster;
    this.gvk = scope.gvk;
    this.maxRssBytes = scope.maxRssBytes;
    this.rssBytes = scope.rssBytes;
  }
}

/** The registry's budget: checked before each new build, counting what it refused. */
export class MemoryBudget {
  readonly #maxRssBytes: number;
  readonly #readRss: () => number;
  #refusals = 0;

  /** @throws TypeError naming the option for a budget that is not a positive number or a reader that is not a function. */
  constructor(options: MemoryBudgetOptions) {
    if (typeof options !== 'object' || (options as unknown) === null) invalidOption('registry', 'memoryBudget', options, 'an object ({ maxRssBytes })');
    this.#maxRssBytes = positiveNumber('registry', 'memoryBudget.maxRssBytes', options.maxRssBytes);
    if (options.readRss !== undefined) functionOption('registry', 'memoryBudget.readRss', options.readRss);
    this.#readRss = options.readRss ?? (() => process.memoryUsage.rss());
  }

  /** @throws MemoryBudgetExceededError when resident memory is at or over the budget. */
  check(cluster: string, gvk: GroupVersionKind): void {
    const rssBytes = this.#readRss();
    if (rssBytes < this.#maxRssBytes) return;
    this.#refusals += 1;
    throw new MemoryBudgetExceededError({ cluster, gvk, maxRssBytes: this.#maxRssBytes, rssBytes });
  }

  status(): MemoryBudgetStatus {
    return { maxRssBytes: this.#maxRssBytes, refusals: this.#refusals };
  }
}
