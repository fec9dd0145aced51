// The demo's narration of a rollout in waves (--fleet), from the Pipeline's status: each wave's
// promotion record (`wave`, `state`, `startedAt`, `readyAt`) and its counts in
// `status.environments[].waves`. Pure, so that the order of what is told is unit-tested.

/** The parts of a fleet environment's status the narration reads. */
export interface WaveStatusView {
  readonly environments?: readonly {
    readonly name: string;
    readonly waves?: readonly { readonly name: string; readonly ready: boolean; readonly revision?: string; readonly total: number; readonly readyTargets: number; readonly soakSeconds?: number }[];
  }[];
  readonly promotions?: readonly { readonly environment: string; readonly wave?: string; readonly revision: string; readonly state: string; readonly startedAt?: string; readonly readyAt?: string; readonly message?: string }[];
}

/** Where one wave of a rollout stands: told once each, in this order. */
type Phase = 'started' | 'ready' | 'failed';

/**
 * What happened to the waves of `environment`'s rollout of `revision` since the last call with the
 * same `told` (which it updates): a wave starting, becoming ready (and soaking before the next), or
 * failing. A phase skipped between two polls is still told, in order.
 */
export function waveChanges(told: Map<string, Phase>, status: WaveStatusView | undefined, environment: string, revision: string): string[] {
  const waves = status?.environments?.find((e) => e.name === environment)?.waves ?? [];
  const lines: string[] = [];
  for (const [i, wave] of waves.entries()) {
    const record = status?.promotions?.find((p) => p.environment === environment && p.wave === wave.name && p.revision === revision);
    if (record === undefined) continue;
    const before = told.get(wave.name);
    const clusters = `${wave.total} cluster${wave.total === 1 ? '' : 's'}`;
    if (before === undefined) {
      lines.push(`wave ${wave.name} starts: ${revision} patched into its ${clusters} (promotion ${record.state})`);
      told.set(wave.name, 'started');
    }
    if (record.state === 'Failed' && told.get(wave.name) !== 'failed') {
      lines.push(`wave ${wave.name} failed: ${record.message ?? '?'}`);
      told.set(wave.name, 'failed');
    } else if (record.state === 'Succeeded' && told.get(wave.name) === 'started') {
      const next = waves[i + 1];
      const soak = wave.soakSeconds !== undefined && wave.soakSeconds > 0 && next !== undefined ? `; soaking ${wave.soakSeconds} s before wave ${next.name} starts` : '';
      const counts = wave.revision === revision ? ` (${wave.readyTargets} of ${clusters} ready)` : '';
      lines.push(`wave ${wave.name} ready at ${revision}${counts}${soak}`);
      told.set(wave.name, 'ready');
    }
  }
  return lines;
}

/**
 * The summary's lines: each wave of `environment`'s rollout of `revision`, when it started and was
 * ready (seconds after `since`, ms since the epoch), and how long after the previous wave was ready
 * it started.
 */
export function waveSummary(status: WaveStatusView | undefined, environment: string, revision: string, since: number, members: (wave: string) => readonly string[]): string[] {
  const waves = status?.environments?.find((e) => e.name === environment)?.waves ?? [];
  const at = (iso: string | undefined): number | undefined => (iso === undefined ? undefined : Date.parse(iso));
  const secs = (ms: number | undefined): string => (ms === undefined ? '—' : `${(ms / 1000).toFixed(1)} s`);
  let previousReady: number | undefined;
  return waves.map((wave) => {
    const record = status?.promotions?.find((p) => p.environment === environment && p.wave === wave.name && p.revision === revision);
    const started = at(record?.startedAt);
    const ready = at(record?.readyAt);
    const after = started !== undefined && previousReady !== undefined ? `, ${secs(started - previousReady)} after the previous wave was ready` : '';
    previousReady = ready;
    return `wave ${wave.name.padEnd(8)} ${members(wave.name).join(', ').padEnd(26)} started ${secs(started === undefined ? undefined : started - since)}, ready ${secs(ready === undefined ? undefined : ready - since)}${after} (${record?.state ?? 'not started'})`;
  });
}

/**
 * What the rollout of `revision` into `environment` waits for now: the first wave not yet ready
 * at it, or the soak of the last ready one before the next starts; undefined before any wave started.
 */
export function waveAwaited(status: WaveStatusView | undefined, environment: string, revision: string): string | undefined {
  const waves = status?.environments?.find((e) => e.name === environment)?.waves ?? [];
  let previous: { readonly name: string; readonly soakSeconds?: number } | undefined;
  for (const wave of waves) {
    const record = status?.promotions?.find((p) => p.environment === environment && p.wave === wave.name && p.revision === revision);
    if (record === undefined) {
      if (previous === undefined) return undefined;
      const soak = previous.soakSeconds !== undefined && previous.soakSeconds > 0 ? ` (${previous.soakSeconds} s soak after it was ready)` : '';
      return `wave ${wave.name} to start once wave ${previous.name} has soaked${soak}`;
    }
    if (record.state !== 'Succeeded') {
      const count = wave.revision === revision ? `${wave.readyTargets} of ${wave.total}` : `0 of ${wave.total}`;
      return `wave ${wave.name} to be ready at ${revision} (${count} clusters so far; promotion ${record.state})`;
    }
    previous = wave;
  }
  return undefined;
}
