// `make demo DEMO_FLAGS=--replicas=N`: what the demo adds when N fleetcache replicas share the work
// (`--shard`). More Pipelines (four per team namespace, each promoting its own HelmRelease) so that
// the split over the replicas shows, the replicas' flags, and the narration of who owns what, read
// from each replica's `/debug/shards`.
import type { Fleet, PipelineStatusView } from '../fleet.ts';
import { APP_NAMESPACE, fleetPipeline, updateObject } from '../fleet.ts';
import type { TestCluster } from '../harness/index.ts';

/**
 * The replicas' sharding flags: one shard per Pipeline (13 shards split visibly over a few
 * replicas; by namespace there would be 4), and lease timings short enough for a demo (a replica
 * stopped or killed hands its Pipelines over within 6 s + 2 retry periods) yet safe on a loaded
 * 2-core machine (a 4 s renew deadline).
 */
export const REPLICA_ARGS: readonly string[] = ['--shard', '--shard-by=pipeline', '--leader-elect-lease-duration=6s', '--leader-elect-renew-deadline=4s', '--leader-elect-retry-period=1s'];

/** The team namespaces the demo adds with more than one replica. */
export const TEAMS = ['team-a', 'team-b', 'team-c'] as const;
/** The Pipelines of each team, each promoting the HelmRelease `<team>-<app>` in `apps`. */
export const TEAM_APPS = ['web', 'api', 'worker', 'cron'] as const;

/** A Pipeline the demo runs besides delivery/podinfo. */
export interface TeamPipeline {
  readonly namespace: string;
  readonly name: string;
  /** Its HelmRelease in `apps` on every cluster. */
  readonly release: string;
}

export const TEAM_PIPELINES: readonly TeamPipeline[] = TEAMS.flatMap((team) => TEAM_APPS.map((app) => ({ namespace: team, name: app, release: `${team}-${app}` })));

/** Parses `--replicas`: an integer from 1 to 5 (the demo's machine runs them all). */
export function parseReplicas(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 5) throw new TypeError(`--replicas must be an integer from 1 to 5, got ${JSON.stringify(value)}`);
  return n;
}

async function must(cluster: TestCluster, method: string, path: string, body: unknown, ok: readonly number[]): Promise<unknown> {
  const res = await cluster.request(method, path, body);
  if (!ok.includes(res.statusCode)) throw new Error(`${cluster.name}: ${method} ${path} → HTTP ${res.statusCode}: ${JSON.stringify(res.body)}`);
  return res.body;
}

const releases = `/apis/helm.toolkit.fluxcd.io/v2/namespaces/${APP_NAMESPACE}/helmreleases`;

/**
 * Adds the teams' Pipelines to a fleet set up by `setUpFleet` (CRDs, `apps` installed): each
 * team's namespace with the kubeconfig Secrets of staging and prod, each Pipeline's HelmRelease at
 * `version` in every cluster, then the Pipelines (dev → staging → prod, patch strategy).
 */
export async function setUpTeams(fleet: Fleet, version: string): Promise<void> {
  const clusters = [fleet.management, fleet.staging, fleet.prod];
  for (const p of TEAM_PIPELINES) {
    await Promise.all(clusters.map((cluster) => must(cluster, 'POST', releases, {
      apiVersion: 'helm.toolkit.fluxcd.io/v2',
      kind: 'HelmRelease',
      metadata: { name: p.release, namespace: APP_NAMESPACE },
      spec: { interval: '1m', chart: { spec: { chart: p.release, version, sourceRef: { kind: 'HelmRepository', name: 'charts' } } } },
    }, [201, 409])));
  }
  for (const team of TEAMS) {
    await must(fleet.management, 'POST', '/api/v1/namespaces', { metadata: { name: team } }, [201, 409]);
    for (const [env, cluster] of [['staging', fleet.staging], ['prod', fleet.prod]] as const) {
      await must(fleet.management, 'POST', `/api/v1/namespaces/${team}/secrets`, {
        metadata: { name: `${env}-kubeconfig`, namespace: team },
        data: { value: Buffer.from(cluster.adminKubeconfig).toString('base64') },
      }, [201, 409]);
    }
  }
  for (const p of TEAM_PIPELINES) {
    const pipeline = fleetPipeline({
      appRef: { apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease', name: p.release },
      promotion: { strategy: 'patch', patch: { path: '/spec/chart/spec/version' } },
    }) as { metadata: object };
    await must(fleet.management, 'POST', `/apis/fleetcache.dev/v1alpha1/namespaces/${p.namespace}/pipelines`, { ...pipeline, metadata: { name: p.name, namespace: p.namespace } }, [201, 409]);
  }
}

/** Asks dev for `version` of every team's app: the same release as podinfo's. */
export async function releaseTeamsToDev(fleet: Fleet, version: string): Promise<void> {
  await Promise.all(TEAM_PIPELINES.map((p) => updateObject(fleet.management, `${releases}/${p.release}`, (object) => {
    const current = object as { spec: { chart: { spec: Record<string, unknown> } } };
    return { ...current, spec: { ...current.spec, chart: { ...current.spec.chart, spec: { ...current.spec.chart.spec, version } } } };
  })));
}

/** A Pipeline as the demo reads it. */
export interface PipelineItem {
  readonly metadata: { readonly namespace: string; readonly name: string };
  readonly status?: PipelineStatusView;
}

/** Every Pipeline on the management cluster. */
export async function readPipelines(management: TestCluster): Promise<readonly PipelineItem[]> {
  return ((await must(management, 'GET', '/apis/fleetcache.dev/v1alpha1/pipelines', undefined, [200])) as { items: PipelineItem[] }).items;
}

/** What a replica's `/debug/shards` answers (the parts the demo reads). */
export interface ReplicaShards {
  readonly identity: string;
  readonly joined: boolean;
  readonly peers: readonly { readonly identity: string; readonly live: boolean }[];
  readonly owned: readonly string[];
  readonly handoff: readonly string[];
  readonly unowned: readonly { readonly key: string; readonly forMs: number }[];
  readonly orphaned: readonly string[];
}

/** GET `/debug/shards` of a replica (plain metrics, as the demo serves them). */
export async function readShards(metricsPort: number): Promise<ReplicaShards> {
  const res = await fetch(`http://127.0.0.1:${metricsPort}/debug/shards`, { signal: AbortSignal.timeout(5_000) });
  if (!res.ok) throw new Error(`/debug/shards answered ${res.status}`);
  return await res.json() as ReplicaShards;
}

/** Who owns what, from every replica's `/debug/shards`, in the order of `labels`. */
export interface Split {
  /** Every key is acted for by exactly one replica, every replica sees all the others live, nothing in handoff. */
  readonly settled: boolean;
  /** What is still moving, when not settled. */
  readonly waitingFor: string;
  /** One line per replica: `replica-1 (…abcd): 4 Pipelines: delivery/podinfo, team-a/api, …`. */
  readonly lines: readonly string[];
}

/** The last characters of an identity (`<hostname>_<uuid>`): enough to tell replicas apart. */
export function shortIdentity(identity: string): string {
  return identity.length <= 12 ? identity : `…${identity.slice(-8)}`;
}

/** Reads the split of `keys` over the replicas from their `/debug/shards` answers. */
export function describeSplit(labels: readonly string[], shards: readonly ReplicaShards[], keys: readonly string[]): Split {
  const owners = new Map<string, string[]>();
  shards.forEach((s, i) => { for (const key of s.owned) owners.set(key, [...(owners.get(key) ?? []), labels[i] ?? s.identity]); });
  const unowned = keys.filter((k) => (owners.get(k)?.length ?? 0) === 0);
  const twice = keys.filter((k) => (owners.get(k)?.length ?? 0) > 1);
  const handoff = shards.reduce((sum, s) => sum + s.handoff.length, 0);
  const blind = shards.filter((s) => s.peers.filter((p) => p.live).length !== shards.length).length;
  const waiting = [
    ...(blind > 0 ? [`${blind} replica(s) to see all ${shards.length} peers live`] : []),
    ...(unowned.length > 0 ? [`${unowned.length} Pipeline(s) to be owned`] : []),
    ...(twice.length > 0 ? [`${twice.length} Pipeline(s) claimed twice to settle`] : []),
    ...(handoff > 0 ? [`${handoff} handoff(s) to finish`] : []),
  ];
  const lines = shards.map((s, i) => {
    const owned = [...s.owned].sort();
    return `${labels[i] ?? ''} (${shortIdentity(s.identity)}): ${owned.length} Pipeline${owned.length === 1 ? '' : 's'}${owned.length === 0 ? '' : `: ${owned.join(', ')}`}`;
  });
  return { settled: waiting.length === 0, waitingFor: waiting.join(', '), lines };
}
