import { MAX_LATE_JOINERS, type EnvironmentStatus, type PromotionRecord } from './types.ts';
import type { ResolvedTarget, ValidPipelineSpec } from './validate.ts';

// A cluster that joins a fleet's wave after the wave was carried out (a new kubeconfig Secret with
// the selector's labels, or one relabelled) is given the revision the wave carried out, as an
// ApplicationSet gives a new cluster the current target revision: it need not wait for the next one.

/** A carried-out wave (or fleet without waves) with members that do not run its revision. */
export interface LateJoinCandidate {
  readonly environment: string;
  /** Unset for a fleet without waves. */
  readonly wave: string | undefined;
  readonly revision: string;
  /** The wave's newest record (Committed or Succeeded): it lists who joined already. */
  readonly record: PromotionRecord;
  /**
   * Members readable, holding the application object, not at `revision`, and not given it as
   * joiners already. Some may have been carried out with the wave and not applied it yet: the
   * actor tells those apart (their object already holds the revision, or the delivery covered them).
   */
  readonly targets: readonly ResolvedTarget[];
  /** How many more joiners this record may take ({@link MAX_LATE_JOINERS} in all). */
  readonly room: number;
}

/**
 * Each carried-out wave of each fleet environment whose members include some not at its revision,
 * in spec order. A wave counts as carried out when its newest record is `Committed` or `Succeeded`
 * (a newer rollout that has not reached it leaves it at the older revision; a stopped wave is the
 * retry's business). Fleets whose member list is loading or unreadable, and the git strategy
 * (Flux in the new cluster reads the wave's path by itself), have none.
 */
export function lateJoinCandidates(spec: ValidPipelineSpec, environments: readonly EnvironmentStatus[], records: readonly PromotionRecord[]): LateJoinCandidate[] {
  if (spec.promotion.strategy === 'git') return [];
  const found: LateJoinCandidate[] = [];
  for (const env of spec.environments) {
    const fleet = env.fleet;
    const status = environments.find((e) => e.name === env.name);
    if (fleet === undefined || status?.fleet === undefined || status.fleet.error !== undefined || status.fleet.membership !== undefined) continue;
    const byCluster = new Map(status.targets.map((t) => [`${t.cluster}\u0000${t.namespace}`, t]));
    const waves: readonly (string | undefined)[] = fleet.waves.length === 0 ? [undefined] : fleet.waves.map((w) => w.name);
    for (const wave of waves) {
      const record = records.findLast((r) => r.environment === env.name && r.wave === wave);
      if (record === undefined || (record.state !== 'Committed' && record.state !== 'Succeeded')) continue;
      const room = MAX_LATE_JOINERS - (record.joined?.length ?? 0);
      if (room <= 0) continue;
      const joined = new Set(record.joined);
      const targets = env.targets.filter((t) => {
        if (wave !== undefined && env.waveOf?.get(t.clusterKey) !== wave) return false;
        if (joined.has(t.clusterKey)) return false;
        const seen = byCluster.get(`${t.clusterKey}\u0000${t.namespace}`);
        return seen?.readable === true && seen.exists === true && seen.revision !== record.revision;
      });
      if (targets.length > 0) found.push({ environment: env.name, wave, revision: record.revision, record, targets, room });
    }
  }
  return found;
}
