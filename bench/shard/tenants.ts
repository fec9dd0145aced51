// The tenant model of the sharding benchmark: T namespaces owning C clusters between them with
// Zipf-like sizes (the largest M clusters, the smallest 1), one pipeline per cluster. Deterministic.

/** A tenant namespace and the clusters its pipelines target (one pipeline per cluster). */
export interface Tenant {
  readonly namespace: string;
  readonly clusters: readonly string[];
}

/** Sizes round(M · r^-s) (at least 1) for ranks r = 1..T, with s found so that they sum to C; the residual goes to the largest tenants. */
export function zipfSizes(clusters: number, tenants: number, largest: number): number[] {
  if (clusters < largest + tenants - 1 || clusters > largest * tenants) throw new RangeError(`cannot split ${clusters} clusters over ${tenants} tenants of 1..${largest}`);
  const sizes = (s: number): number[] => Array.from({ length: tenants }, (_, i) => Math.max(1, Math.round(largest * (i + 1) ** -s)));
  const sum = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0);
  let lo = 0;
  let hi = 20;
  for (let i = 0; i < 60; i++) {
    const mid = (lo + hi) / 2;
    if (sum(sizes(mid)) > clusters) lo = mid;
    else hi = mid;
  }
  const out = sizes(hi);
  // Rounding leaves a few clusters over or short: spread them from the largest down, within 1..M.
  let residual = clusters - sum(out);
  for (let i = 0; residual !== 0; i = (i + 1) % tenants) {
    const size = out[i] ?? 1;
    if (residual > 0 && size < largest) { out[i] = size + 1; residual--; }
    if (residual < 0 && size > 1) { out[i] = size - 1; residual++; }
  }
  return out;
}

/** Cluster names in fleet order, dealt to tenants by their sizes (tenant-01 the largest). */
export function tenantsOf(clusterNames: readonly string[], tenants: number, largest: number): Tenant[] {
  const sizes = zipfSizes(clusterNames.length, tenants, largest);
  let next = 0;
  return sizes.map((size, i) => {
    const clusters = clusterNames.slice(next, next + size);
    next += size;
    return { namespace: `tenant-${String(i + 1).padStart(2, '0')}`, clusters };
  });
}

/** What a shard key stands for: the owners (one per pipeline) and the clusters they read. */
export interface Unit {
  readonly key: string;
  readonly namespace: string;
  readonly clusters: readonly string[];
}

/** The units of work: one per namespace, or one per pipeline (≈ cluster) keyed `namespace/cluster`. */
export function unitsOf(tenants: readonly Tenant[], by: 'namespace' | 'pipeline'): Unit[] {
  return by === 'namespace'
    ? tenants.map((t) => ({ key: t.namespace, namespace: t.namespace, clusters: t.clusters }))
    : tenants.flatMap((t) => t.clusters.map((c) => ({ key: `${t.namespace}/${c}`, namespace: t.namespace, clusters: [c] })));
}
