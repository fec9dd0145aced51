// The service's own debug routes on the manager's metrics server: `/debug/caches`, `/debug/shards`.
import type { Route, ShardStatus } from '../lib/manager/index.ts';
import type { CacheInfo } from '../lib/registry/index.ts';
import { formatGvk } from '../lib/util/index.ts';
import { scrubText } from './logging.ts';

/** {@link CacheInfo} as `/debug/caches` shows it: JSON-ready, errors as (scrubbed) messages. */
export function describeCache(info: CacheInfo): Record<string, unknown> {
  return {
    cluster: info.cluster,
    gvk: formatGvk(info.gvk),
    group: info.gvk.group,
    version: info.gvk.version,
    kind: info.gvk.kind,
    synced: info.synced,
    objects: info.objects,
    owners: info.owners,
    ageSeconds: Math.round(info.ageMs / 1000),
    lastError: info.lastError === undefined ? null : scrubText(info.lastError.message),
    nextGcCheckInSeconds: info.nextGcCheckInMs === undefined ? null : Math.round(info.nextGcCheckInMs / 1000),
    relists: info.relists,
    watchErrors: info.watchErrors,
  };
}

/** `/debug/caches`: every cache of the registry as JSON, sorted by cluster and GVK. */
export function cachesRoute(caches: () => readonly CacheInfo[]): Route {
  return () => {
    const sorted = [...caches()]
      .sort((a, b) => a.cluster.localeCompare(b.cluster) || formatGvk(a.gvk).localeCompare(formatGvk(b.gvk)))
      .map(describeCache);
    return { status: 200, contentType: 'application/json', body: `${JSON.stringify({ caches: sorted }, null, 2)}\n` };
  };
}

/**
 * `/debug/shards`: this replica's view of its shard group as JSON — its identity, the peers it
 * sees (weight, live), the keys it acts for, those in handoff, and keys no live replica acts for
 * (with how long, and those past the bound).
 */
export function shardsRoute(status: () => ShardStatus): Route {
  return () => ({ status: 200, contentType: 'application/json', body: `${JSON.stringify(status(), null, 2)}\n` });
}
