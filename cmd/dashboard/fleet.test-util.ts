// A fleet of Pipelines whose targets are all unreachable, for the dashboard's tests of its byte bound.
import type { KubeObject } from '../../lib/transport/index.ts';

/** Pipeline number `p` (namespace team-p, named `${name}-p`), with `targets` unreachable targets in each of staging and prod. */
export function unreachablePipeline(p: number, targets: number, name = 'app'): KubeObject & { status: Record<string, unknown> } {
  return {
    metadata: { namespace: `team-${p}`, name: `${name}-${p}`, generation: 1 },
    status: {
      observedGeneration: 1,
      environments: ['staging', 'prod'].map((env) => ({
        name: env,
        ready: false,
        targets: Array.from({ length: targets }, (_, t) => ({ cluster: `secret:team-${p}/cluster-${t}`, namespace: 'apps', readable: false, ready: false, error: `cluster secret:team-${p}/cluster-${t}: connect ETIMEDOUT 10.0.${p}.${t % 250}:6443` })),
      })),
    },
  };
}
