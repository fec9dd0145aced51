// The service's own debug route on the manager's metrics server: `/debug/caches`.
import type { Route } from '../lib/manager/index.ts';
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
