// Test support, not exported from the package root: a registry on a keeper of its own, for tests
// (of every room) whose subject is not who builds the keeper.
import { ClusterSet, type ClusterSetOptions } from '../cluster/index.ts';
import { createListLimiter, type ConcurrencyLimiter } from '../transport/index.ts';
import { Registry, type RegistryOptions } from './registry.ts';

/** Options of the keeper {@link registryWithKeeper} builds (see `ClusterSetOptions`). */
export interface KeeperOptions extends Pick<ClusterSetOptions, 'provider' | 'local' | 'qps' | 'burst' | 'readLimits' | 'connection' | 'credentialCheckIntervalMs' | 'onRequest'> {
  /** Concurrent LISTs across the keeper's connections. Default 50 (the keeper's). */
  readonly maxConcurrentLists?: number;
}

export type RegistryWithKeeperOptions = Omit<RegistryOptions, 'clusters'> & KeeperOptions;

/** A registry that closes the keeper it was built with once it has closed itself. */
class RegistryOwningKeeper extends Registry {
  readonly #keeper: ClusterSet;
  readonly #lists: ConcurrencyLimiter | undefined;
  #closed: Promise<void> | undefined;

  constructor(options: RegistryOptions & { readonly clusters: ClusterSet }, lists: ConcurrencyLimiter | undefined) {
    super(options);
    this.#keeper = options.clusters;
    this.#lists = lists;
  }

  override close(): Promise<void> {
    this.#closed ??= super.close().then(() => this.#keeper.close()).then(() => this.#lists?.stop());
    return this.#closed;
  }
}

/**
 * A registry on a new `ClusterSet` built from the keeper's options (its connect timeout is the
 * registry's `buildTimeoutMs`, its clock and logger the registry's); `close()` closes both.
 */
export function registryWithKeeper(options: RegistryWithKeeperOptions): Registry {
  const { provider, local, qps, burst, readLimits, connection, credentialCheckIntervalMs, onRequest, maxConcurrentLists, ...rest } = options;
  const lists = maxConcurrentLists === undefined ? undefined : createListLimiter(maxConcurrentLists);
  const keeper = new ClusterSet({
    provider,
    local,
    ...(qps === undefined ? {} : { qps }),
    ...(burst === undefined ? {} : { burst }),
    ...(readLimits === undefined ? {} : { readLimits }),
    connection,
    ...(credentialCheckIntervalMs === undefined ? {} : { credentialCheckIntervalMs }),
    onRequest,
    ...(lists === undefined ? {} : { listLimiter: lists }),
    ...(rest.buildTimeoutMs === undefined ? {} : { connectTimeoutMs: rest.buildTimeoutMs }),
    ...(rest.logger === undefined ? {} : { logger: rest.logger }),
    ...(rest.clock === undefined ? {} : { clock: rest.clock }),
  });
  try {
    return new RegistryOwningKeeper({ ...rest, clusters: keeper }, lists);
  } catch (err) {
    void keeper.close();
    void lists?.stop();
    throw err;
  }
}
