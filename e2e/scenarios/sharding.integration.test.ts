// Scenario: three fleetcache replicas (their own processes, `--shard`) share 30 Pipelines over
// three clusters through Leases on the management cluster. Every Pipeline is promoted exactly once
// per revision while replicas are killed (SIGKILL), added, removed and paused (SIGSTOP) past their
// lease; an invariant checker samples the Leases and each replica's claims throughout: no key is
// acted for by two replicas, none is owned by no live replica for longer than the bound.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { helmReleaseCrd, kustomizationCrd } from '../../fixtures/crds/index.ts';
import { pipelineCrd } from '../../lib/pipeline/index.ts';
import { APP_NAMESPACE, FLEET_SERVICE_ARGS, startFlux, updateObject } from '../fleet.ts';
import { eventually, startCluster, useClusters, type TestCluster } from '../harness/index.ts';
import { startService, type ServiceProcess } from '../service.ts';
import { ensureNamespace, must, putKubeconfigSecret } from '../../fixtures/support/index.ts';

const TEAMS = 10;
const PER_TEAM = 3;
const ENVS = ['dev', 'staging', 'prod'] as const;
const LEASE_S = 8;
const RETRY_S = 1;
// Timings short enough for a test, a renew deadline long enough for a loaded 2-core machine.
const replicaArgs = [...FLEET_SERVICE_ARGS, '--shard', '--shard-by=pipeline', `--leader-elect-lease-duration=${LEASE_S}s`, '--leader-elect-renew-deadline=6s', `--leader-elect-retry-period=${RETRY_S}s`, '--cache-gc-grace-period=1s', '--log-level=info'];
/**
 * lease duration + 2 retry periods (the documented bound), plus slack for a loaded 2-core machine
 * running three replicas, three apiservers and the stand-in (a SIGSTOP's keys took 16.3 s once,
 * with a benchmark running beside the test).
 */
const BOUND_MS = (LEASE_S + 2 * RETRY_S) * 1000 + 10_000;
const GROUP = 'fleetcache-shard';
const LEASES = '/apis/coordination.k8s.io/v1/namespaces/default/leases';

interface PipelineRef { readonly namespace: string; readonly name: string }
const pipelines: PipelineRef[] = [];
for (let t = 0; t < TEAMS; t++) for (let i = 0; i < PER_TEAM; i++) pipelines.push({ namespace: `team-${t}`, name: `app-${t}-${i}` });
const keyOf = (p: PipelineRef): string => `${p.namespace}/${p.name}`;

const releasePath = (p: PipelineRef): string => `/apis/helm.toolkit.fluxcd.io/v2/namespaces/${APP_NAMESPACE}/helmreleases/${p.name}`;

// staging and prod record every PATCH of a HelmRelease (the promotions' writes) in an audit log:
// the count of promotions carried out, whoever carried them out.
const AUDIT_POLICY = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [patch]
  resources: [{ group: helm.toolkit.fluxcd.io, resources: [helmreleases] }]
- level: None
`;

/** Successful PATCHes of each HelmRelease (not its status) in an audit log, by name. */
function patchesIn(file: string): Map<string, number> {
  const counts = new Map<string, number>();
  let text = '';
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return counts;
  }
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const event = JSON.parse(line) as { stage?: string; verb?: string; objectRef?: { name?: string; subresource?: string }; responseStatus?: { code?: number } };
    if (event.stage !== 'ResponseComplete' || event.verb !== 'patch' || event.objectRef?.subresource !== undefined || event.responseStatus?.code !== 200) continue;
    const name = event.objectRef?.name ?? '';
    counts.set(name, (counts.get(name) ?? 0) + 1);
  }
  return counts;
}

interface PipelineStatus {
  readonly environments?: readonly { readonly ready: boolean; readonly revision?: string }[];
  readonly promotions?: readonly { readonly environment: string; readonly revision: string; readonly state: string }[];
}

interface LeaseView { readonly metadata: { readonly name: string; readonly resourceVersion: string; readonly labels?: Record<string, string>; readonly annotations?: Record<string, string> }; readonly spec: { readonly holderIdentity?: string } }
/** What /debug/shards answers. */
interface ShardsView { readonly identity: string; readonly owned: readonly string[]; readonly handoff: readonly string[] }

describe('scenario: many replicas, one fleet (sharding on Leases)', () => {
  const env = useClusters(1, { namePrefix: 'shard-management' });
  const auditDir = mkdtempSync(path.join(tmpdir(), 'fleetcache-shard-audit-'));
  const auditLog = (name: string): string => path.join(auditDir, `${name}.log`);
  let management: TestCluster;
  let staging: TestCluster;
  let prod: TestCluster;
  /** Releases asked for, per Pipeline: what each of staging and prod must have been patched to, once each. */
  const released = new Map<string, number>();
  /** staging and prod, started by this suite (the management cluster is the fixture's). */
  const targets: TestCluster[] = [];
  /** Replicas the test considers live (not killed, not paused, not stopped). */
  const live: ServiceProcess[] = [];
  const all: ServiceProcess[] = [];
  const identities = new Map<ServiceProcess, string>();
  let stopFlux: (() => Promise<void>) | undefined;
  const violations: string[] = [];
  let checking: Promise<void> | undefined;
  const checker = new AbortController();
  let seq = 0;

  async function start(): Promise<ServiceProcess> {
    const replica = await startService(`replica-${seq++}`, management.adminKubeconfig, replicaArgs);
    all.push(replica);
    identities.set(replica, (await shards(replica)).identity);
    live.push(replica);
    return replica;
  }

  async function shards(replica: ServiceProcess): Promise<ShardsView> {
    return await (await fetch(`${replica.metrics}/debug/shards`, { signal: AbortSignal.timeout(5_000) })).json() as ShardsView;
  }

  async function statusOf(p: PipelineRef): Promise<PipelineStatus | undefined> {
    return (await must(management, 'GET', `/apis/fleetcache.dev/v1alpha1/namespaces/${p.namespace}/pipelines/${p.name}`) as { status?: PipelineStatus }).status;
  }

  async function fences(): Promise<Map<string, { readonly holder: string; readonly rv: string }>> {
    const body = await must(management, 'GET', `${LEASES}?labelSelector=${encodeURIComponent(`fleetcache.io/shard-group=${GROUP},fleetcache.io/shard-role=fence`)}`) as { items: LeaseView[] };
    const out = new Map<string, { holder: string; rv: string }>();
    for (const lease of body.items) {
      const key = lease.metadata.annotations?.['fleetcache.io/shard-key'];
      if (key !== undefined) out.set(key, { holder: lease.spec.holderIdentity ?? '', rv: lease.metadata.resourceVersion });
    }
    return out;
  }

  /**
   * One sample: Leases, then every live replica's claims, then the Leases again. A replica that
   * claims a key whose fence another replica held, unchanged, on both sides of its answer, acted
   * without the fence. A key whose fence no live replica holds counts toward the orphan bound.
   */
  async function sampleOnce(unownedSince: Map<string, number>): Promise<void> {
    const before = await fences();
    const replicas = [...live];
    const claims = await Promise.all(replicas.map((r) => shards(r).catch(() => undefined)));
    const afterwards = await fences();
    replicas.forEach((replica, i) => {
      const claim = claims[i];
      if (claim === undefined) return;
      for (const key of claim.owned) {
        const a = before.get(key);
        const b = afterwards.get(key);
        if (a !== undefined && a.rv === b?.rv && a.holder !== claim.identity) violations.push(`${replica.name} acted for ${key} while ${a.holder} held its fence`);
      }
    });
    const liveIds = new Set(live.map((r) => identities.get(r)));
    const now = Date.now();
    for (const p of pipelines) {
      const holder = afterwards.get(keyOf(p))?.holder;
      if (holder !== undefined && liveIds.has(holder)) {
        unownedSince.delete(keyOf(p));
        continue;
      }
      const since = unownedSince.get(keyOf(p)) ?? now;
      unownedSince.set(keyOf(p), since);
      if (now - since > BOUND_MS) violations.push(`${keyOf(p)} owned by no live replica for ${now - since} ms (bound ${BOUND_MS} ms)`);
    }
  }

  /** Samples until stopped; a key reported once past the bound is reported once. */
  async function check(signal: AbortSignal): Promise<void> {
    const unownedSince = new Map<string, number>();
    while (!signal.aborted) {
      await sampleOnce(unownedSince).catch((err: unknown) => { if (!signal.aborted) violations.push(`sample failed: ${String(err)}`); });
      for (const [key, since] of unownedSince) if (Date.now() - since > BOUND_MS) unownedSince.set(key, Date.now()); // report each excess once
      await delay(300);
    }
  }

  /** Every key's fence held by a live replica: the handoff is over. */
  async function allOwned(): Promise<boolean> {
    const current = await fences();
    const liveIds = new Set(live.map((r) => identities.get(r)));
    return pipelines.every((p) => liveIds.has(current.get(keyOf(p))?.holder));
  }

  async function release(version: string, only: readonly PipelineRef[] = pipelines): Promise<void> {
    for (const p of only) released.set(p.name, (released.get(p.name) ?? 0) + 1);
    await Promise.all(only.map((p) => updateObject(management, releasePath(p), (object) => {
      const current = object as { spec: { chart: { spec: Record<string, unknown> } } };
      return { ...current, spec: { ...current.spec, chart: { ...current.spec.chart, spec: { ...current.spec.chart.spec, version } } } };
    })));
  }

  async function appliedEverywhere(version: string, only: readonly PipelineRef[] = pipelines): Promise<boolean> {
    for (const p of only) {
      const res = await prod.request('GET', releasePath(p));
      if ((res.body as { status?: { history?: { chartVersion?: string }[] } }).status?.history?.[0]?.chartVersion !== version) return false;
      const status = await statusOf(p);
      if (!(status?.promotions ?? []).some((r) => r.environment === 'prod' && r.revision === version && r.state === 'Succeeded')) return false;
    }
    return true;
  }

  /**
   * Each Pipeline promoted `version` exactly once into staging and once into prod: one record each,
   * one PATCH per release on each target cluster (the audit logs), never two Promoted Events (an
   * Event follows the record; a replica killed between the two leaves none).
   */
  async function assertExactlyOnce(version: string, only: readonly PipelineRef[] = pipelines): Promise<void> {
    const patched = { staging: patchesIn(auditLog('staging')), prod: patchesIn(auditLog('prod')) };
    for (const p of only) {
      for (const [name, counts] of Object.entries(patched)) assert.equal(counts.get(p.name) ?? 0, released.get(p.name) ?? 0, `${keyOf(p)}: PATCHes in ${name} after ${released.get(p.name) ?? 0} releases`);
      const status = await statusOf(p);
      const records = (status?.promotions ?? []).filter((r) => r.revision === version).map((r) => `${r.environment}:${r.state}`);
      assert.deepEqual(records, ['staging:Succeeded', 'prod:Succeeded'], `${keyOf(p)}: one promotion per environment`);
      const events = (await must(management, 'GET', `/api/v1/namespaces/${p.namespace}/events?fieldSelector=${encodeURIComponent(`involvedObject.name=${p.name},reason=Promoted`)}`) as { items: { message: string; count?: number }[] }).items;
      for (const to of ['staging', 'prod']) {
        const times = events.filter((e) => e.message.startsWith(`promoted ${version} from `) && e.message.includes(` to ${to}:`)).reduce((n, e) => n + (e.count ?? 1), 0);
        assert.ok(times <= 1, `${keyOf(p)}: ${version} reported promoted to ${to} ${times} times`);
      }
    }
  }

  before(async () => {
    [management] = env.clusters as [TestCluster];
    const policy = path.join(auditDir, 'policy.yaml');
    writeFileSync(policy, AUDIT_POLICY);
    const audited = async (name: string): Promise<TestCluster> => {
      const cluster = await startCluster({ name: `shard-${name}`, apiserverFlags: [`--audit-policy-file=${policy}`, `--audit-log-path=${auditLog(name)}`, '--audit-log-mode=blocking'] });
      targets.push(cluster);
      return cluster;
    };
    [staging, prod] = await Promise.all([audited('staging'), audited('prod')]);
    await management.installCRDs([pipelineCrd, helmReleaseCrd, kustomizationCrd]);
    for (const cluster of [staging, prod]) await cluster.installCRDs([helmReleaseCrd, kustomizationCrd]);
    for (const cluster of [management, staging, prod]) {
      await ensureNamespace(cluster, APP_NAMESPACE);
      for (const p of pipelines) {
        await must(cluster, 'POST', `/apis/helm.toolkit.fluxcd.io/v2/namespaces/${APP_NAMESPACE}/helmreleases`, {
          apiVersion: 'helm.toolkit.fluxcd.io/v2',
          kind: 'HelmRelease',
          metadata: { name: p.name, namespace: APP_NAMESPACE },
          spec: { interval: '1m', chart: { spec: { chart: p.name, version: '1.0.0', sourceRef: { kind: 'HelmRepository', name: 'charts' } } } },
        }, [409]);
      }
    }
    for (let t = 0; t < TEAMS; t++) {
      const namespace = `team-${t}`;
      await ensureNamespace(management, namespace);
      for (const [name, cluster] of [['staging', staging], ['prod', prod]] as const) await putKubeconfigSecret(management, namespace, `${name}-kubeconfig`, cluster.adminKubeconfig);
    }
    for (const p of pipelines) {
      await must(management, 'POST', `/apis/fleetcache.dev/v1alpha1/namespaces/${p.namespace}/pipelines`, {
        apiVersion: 'fleetcache.dev/v1alpha1',
        kind: 'Pipeline',
        metadata: p,
        spec: {
          appRef: { apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease', name: p.name },
          promotion: { strategy: 'patch', patch: { path: '/spec/chart/spec/version' } },
          environments: ENVS.map((name) => ({ name, targets: [name === 'dev' ? { namespace: APP_NAMESPACE } : { namespace: APP_NAMESPACE, clusterRef: { kind: 'Secret', name: `${name}-kubeconfig` } }] })),
        },
      }, [409]);
    }
    stopFlux = await startFlux([management, staging, prod]);
    for (let i = 0; i < 3; i++) await start();
  }, { timeout: 300_000 });

  after(async () => {
    checker.abort();
    await checking;
    for (const r of all) r.resume(); // a paused process does not die of SIGKILL until resumed on some systems
    await Promise.all(all.map((r) => r.kill()));
    await stopFlux?.();
    await Promise.all(targets.map((c) => c.stop()));
    rmSync(auditDir, { recursive: true, force: true });
  });

  it('three replicas split the Pipelines, each owned by exactly one, and bring every environment to 1.0.0', async () => {
    await eventually('the three replicas split the keys', async () => {
      if (!(await allOwned())) return false;
      const claims = await Promise.all(live.map(shards));
      return claims.every((c) => c.owned.length > 0 && c.handoff.length === 0);
    }, 60_000);
    checking = check(checker.signal);
    const claims = await Promise.all(live.map(shards));
    const owned = claims.flatMap((c) => c.owned).sort();
    assert.deepEqual(owned, pipelines.map(keyOf).sort(), 'each key claimed once');
    for (const claim of claims) assert.ok(claim.owned.length > 0, `${claim.identity} owns some keys (${claims.map((c) => c.owned.length).join('/')})`);
    await eventually('every environment of every Pipeline is ready at 1.0.0', async () => {
      for (const p of pipelines) {
        const status = await statusOf(p);
        const envs = status?.environments ?? [];
        if (envs.length !== 3 || !envs.every((e) => e.ready && e.revision === '1.0.0')) return false;
      }
      return true;
    }, 120_000);
    assert.deepEqual(violations, []);
  });

  it('a replica killed in the middle of a release: its Pipelines are owned again within the bound, each promoted exactly once', async (t) => {
    await release('1.1.0');
    // Some promotions are under way before the kill.
    await eventually('promotions under way', async () => {
      let started = 0;
      for (const p of pipelines) {
        const status = await statusOf(p);
        if ((status?.promotions ?? []).some((r) => r.revision === '1.1.0')) started += 1;
      }
      return started >= 5;
    }, 60_000);
    const claims = await Promise.all(live.map(shards));
    const victim = live[claims.reduce((best, c, i) => (c.owned.length > (claims[best]?.owned.length ?? 0) ? i : best), 0)];
    assert.ok(victim !== undefined);
    const killedAt = Date.now();
    live.splice(live.indexOf(victim), 1);
    await victim.kill();
    await eventually('the killed replica\'s keys are owned again', allOwned, BOUND_MS + 10_000);
    const ownedAgainMs = Date.now() - killedAt;
    await eventually('1.1.0 reaches prod everywhere', () => appliedEverywhere('1.1.0'), 180_000);
    await assertExactlyOnce('1.1.0');
    t.diagnostic(`owned again ${ownedAgainMs} ms after the SIGKILL`);
    assert.ok(ownedAgainMs <= BOUND_MS, `owned again after ${ownedAgainMs} ms`);
    assert.deepEqual(violations, []);
  });

  it('scales 2 → 4 → 2 → 1 without losing or repeating a promotion', async () => {
    await start();
    await start();
    await eventually('four replicas share the keys', async () => {
      if (!(await allOwned())) return false;
      const claims = await Promise.all(live.map(shards));
      return claims.length === 4 && claims.every((c) => c.owned.length > 0);
    }, 60_000);
    await release('1.2.0');
    await eventually('1.2.0 reaches prod everywhere', () => appliedEverywhere('1.2.0'), 180_000);
    for (const replica of live.splice(0, 2)) assert.equal(await replica.stop(), 0, replica.logs());
    await eventually('two replicas own every key', allOwned, BOUND_MS);
    const last = live.shift();
    assert.ok(last !== undefined);
    assert.equal(await last.stop(), 0, last.logs());
    await eventually('one replica owns every key', allOwned, BOUND_MS);
    // The Leases are the truth; the replica's own view follows once each take's PUT has returned.
    await eventually('the last replica claims every key', async () => (await shards(live[0]!)).owned.length === pipelines.length, 10_000);
    await release('1.3.0');
    await eventually('1.3.0 reaches prod everywhere', () => appliedEverywhere('1.3.0'), 240_000);
    await assertExactlyOnce('1.2.0');
    await assertExactlyOnce('1.3.0');
    assert.deepEqual(violations, []);
  });

  it('a replica paused past its lease does not act once its fence is gone', async (t) => {
    await start();
    await eventually('two replicas share the keys', async () => {
      if (!(await allOwned())) return false;
      const claims = await Promise.all(live.map(shards));
      return claims.every((c) => c.owned.length > 0);
    }, 60_000);
    const paused = live[live.length - 1]!;
    const itsKeys = new Set((await shards(paused)).owned);
    live.splice(live.indexOf(paused), 1);
    paused.pause();
    const pausedAt = Date.now();
    await eventually('the paused replica\'s keys are owned by the other', allOwned, BOUND_MS + 10_000);
    t.diagnostic(`owned again ${Date.now() - pausedAt} ms after the SIGSTOP`);
    const moved = pipelines.filter((p) => itsKeys.has(keyOf(p)));
    await release('1.4.0', moved);
    await eventually('1.4.0 reaches prod for the moved Pipelines', () => appliedEverywhere('1.4.0', moved), 180_000);
    paused.resume();
    // Back, it finds its peer Lease unrenewed past the renew deadline: it stops acting for every
    // key and exits (as a leader that lost its Lease does; Kubernetes restarts it), writing nothing
    // with the fences it lost — the audit logs and records checked next would show any write.
    assert.equal(await paused.exited, 1, paused.logs());
    assert.match(paused.logs(), /lost the shard group/);
    await assertExactlyOnce('1.4.0', moved);
    assert.deepEqual(violations, []);
  });
});
