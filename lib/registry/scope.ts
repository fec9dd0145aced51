import type { ConnectionKey } from '../cluster/index.ts';
import type { ResourceClient } from '../transport/index.ts';
import { apiVersionOf, KubeApiError, type GroupVersionKind } from '../util/index.ts';
import type { CacheScope, TargetRef } from './keys.ts';

const SCOPES: readonly string[] = ['cluster', 'namespace', 'auto'] satisfies readonly CacheScope[];

/** Throws a TypeError naming `what` unless `scope` is a {@link CacheScope}. */
export function checkScope(what: string, scope: unknown): CacheScope {
  if (typeof scope !== 'string' || !SCOPES.includes(scope)) throw new TypeError(`${what} must be one of ${SCOPES.join(', ')}, got ${JSON.stringify(scope)}`);
  return scope as CacheScope;
}

function kindKey(gvk: GroupVersionKind): string {
  return `${apiVersionOf(gvk)}/${gvk.kind}`;
}

/**
 * The registry's namespace-scope policy: which namespace a target's cache watches, and when an
 * `auto` cache is scoped down.
 *
 * Invariant: `#narrowed` holds, per connection key, the kinds whose cluster-scope LIST was
 * forbidden while a target namespace could be listed; only those send `auto` targets to
 * namespace caches. A connection's entries go when its cluster rotates or is dropped (new
 * credentials may have other rights).
 */
export class ScopePolicy {
  readonly #narrowed = new Map<ConnectionKey, Set<string>>();

  /** '' (all namespaces) or the one namespace `target`'s cache watches under `scope`. */
  namespaceOf(connection: ConnectionKey, scope: CacheScope, target: TargetRef): string {
    const namespace = target.namespace ?? '';
    if (scope === 'cluster' || namespace === '') return '';
    if (scope === 'namespace') return namespace;
    return this.isNarrowed(connection, target.gvk) ? namespace : '';
  }

  isNarrowed(connection: ConnectionKey, gvk: GroupVersionKind): boolean {
    return this.#narrowed.get(connection)?.has(kindKey(gvk)) === true;
  }

  /**
   * After a 403 on the cluster-wide LIST: scopes the kind down on this connection when one of
   * `namespaces` can be listed (a probe of one object each, stopping at the first that can), and
   * says whether it did. Each namespace whose probe is refused with a 403 is added to `refused`,
   * so the caller can probe the namespaces that targets add later without asking again for these.
   * A namespace cache would fail as the cluster-wide one does when none can be listed, so then
   * nothing changes and the cache keeps reporting its 403. Any other error ends the probe with
   * false, leaving the namespaces not yet refused for the next one.
   */
  async scopeDown(connection: ConnectionKey, gvk: GroupVersionKind, client: ResourceClient, namespaces: Iterable<string>, refused: Set<string>, signal: AbortSignal): Promise<boolean> {
    for (const namespace of namespaces) {
      try {
        await client.list({ namespace, limit: 1, signal });
      } catch (err) {
        if (!(err instanceof KubeApiError && err.statusCode === 403)) return false;
        refused.add(namespace);
        continue;
      }
      let kinds = this.#narrowed.get(connection);
      if (kinds === undefined) {
        kinds = new Set();
        this.#narrowed.set(connection, kinds);
      }
      kinds.add(kindKey(gvk));
      return true;
    }
    return false;
  }

  /** Forgets what was learnt about a connection's rights. */
  forget(connection: ConnectionKey): void {
    this.#narrowed.delete(connection);
  }
}
