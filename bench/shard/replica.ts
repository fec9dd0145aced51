// One replica of the sharding benchmark, in a process of its own: a Sharder on the management
// cluster's Leases whose keys are the units of work; for each key it gains it asks the registry for
// the four kinds of every cluster of the unit (one owner per pipeline) and holds the key through
// whileOwned until ownership ends, so the acting interval it reports is exactly the one during which
// it may act; on a key lost it forgets the owners (their caches are collected).
// argv: the run's JSON file (see ReplicaConfig), this replica's identity. Reports JSON lines on
// stdout (see ReplicaEvent); reads commands on stdin: `gc` (collect, then report memory), `stop`.
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { setTimeout as delay } from 'node:timers/promises';
import { KubeConfig } from '@kubernetes/client-node';
import { StaticProvider } from '../../lib/cluster/index.ts';
import { KubeShardLeaseStore, Sharder } from '../../lib/manager/index.ts';
import type { CacheReader } from '../../lib/registry/index.ts';
import { registryWithKeeper } from '../../lib/registry/testing.ts';
import { ClusterConnection, ConcurrencyLimiter } from '../../lib/transport/index.ts';
import type { Unit } from './tenants.ts';
import { FLEET_KINDS } from '../fleet-kinds.ts';

/** What the bench writes for its replicas. */
export interface ReplicaConfig {
  readonly fleet: readonly { readonly name: string; readonly kubeconfig: string }[];
  readonly management: string;
  readonly managementQps: number;
  readonly namespace: string;
  readonly group: string;
  readonly units: readonly Unit[];
  readonly leaseDurationMs: number;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
}

/** What a replica reports. Times are wall-clock milliseconds (one machine, one clock). */
export type ReplicaEvent =
  | { readonly ev: 'base'; readonly rss: number; readonly heap: number; readonly heapTotal: number; readonly external: number }
  | { readonly ev: 'acting'; readonly key: string; readonly t: number }
  | { readonly ev: 'stopped'; readonly key: string; readonly t: number }
  | { readonly ev: 'stat'; readonly t: number; readonly acting: number; readonly wanted: number; readonly synced: number; readonly failed: number; readonly caches: number; readonly joined: boolean; readonly orphaned: number; readonly unowned: number; readonly boundMs: number }
  | { readonly ev: 'mem'; readonly rss: number; readonly heap: number; readonly heapTotal: number; readonly external: number; readonly caches: number }
  | { readonly ev: 'lost'; readonly t: number }
  | { readonly ev: 'done'; readonly outcome: string };

const KINDS = FLEET_KINDS;

const config = JSON.parse(readFileSync(process.argv[2] ?? '', 'utf8')) as ReplicaConfig;
const identity = process.argv[3] ?? 'replica';
const emit = (event: ReplicaEvent): void => { process.stdout.write(`${JSON.stringify(event)}\n`); };
const gc = (): void => { (globalThis as { gc?: () => void }).gc?.(); };
const memory = (): { rss: number; heap: number; heapTotal: number; external: number } => {
  const m = process.memoryUsage();
  return { rss: m.rss, heap: m.heapUsed, heapTotal: m.heapTotal, external: m.external };
};

gc();
emit({ ev: 'base', ...memory() });

const units = new Map(config.units.map((u) => [u.key, u]));
const registry = registryWithKeeper({
  provider: new StaticProvider({ clusters: Object.fromEntries(config.fleet.map((c) => [c.name, c.kubeconfig])) }),
  credentialCheckIntervalMs: 0,
  gcInitialDelayMs: 200,
  gcMaxDelayMs: 1_000,
  gcGraceMs: 0,
});
const kubeConfig = new KubeConfig();
kubeConfig.loadFromString(config.management);
// As the Manager connects a sharded service: the group's reads and fence writes on a connection at
// the take rates (free 20/s + recovery 100/s + 10/s, burst 250), the peer Lease's renewals on one of
// their own at the management connection's rate.
const connection = new ClusterConnection({ name: 'management', kubeConfig, qps: 20 + 100 + 10, burst: 250 });
const heartbeat = new ClusterConnection({ name: 'management-heartbeat', kubeConfig, qps: config.managementQps, burst: Math.max(30, config.managementQps) });
const sharder = new Sharder({
  leases: new KubeShardLeaseStore({ connection, namespace: config.namespace, group: config.group }),
  heartbeat: new KubeShardLeaseStore({ connection: heartbeat, namespace: config.namespace, group: config.group }),
  group: config.group,
  identity,
  leaseDurationMs: config.leaseDurationMs,
  renewDeadlineMs: config.renewDeadlineMs,
  retryPeriodMs: config.retryPeriodMs,
  keys: () => units.keys(),
  logger: {
    error: (message) => { process.stderr.write(`# ${identity}: ${message}\n`); },
    warn: () => undefined,
    info: () => undefined,
    debug: () => undefined,
    child() { return this; },
  },
});

/**
 * Keys whose caches are being built at once: as the service's reconciles are bounded by its
 * workers (--concurrency, 4), so a burst of keys gained (a dead replica's, at the recovery rate)
 * does not start thousands of builds at once and starve the peer Lease's renewals.
 */
const reconciles = new ConcurrencyLimiter({ maxConcurrent: 4, what: 'bench reconciles' });

const ownersOf = (unit: Unit): { namespace: string; name: string }[] => unit.clusters.map((c) => ({ namespace: unit.namespace, name: c }));
/** Readers of the keys this replica acts for; a key's entry is deleted when it stops acting. */
const readers = new Map<string, (CacheReader | Error | undefined)[]>();

/** Holds `key` while owned: builds its caches (again after a failure), returns when ownership ends. */
async function hold(key: string, unit: Unit, signal: AbortSignal): Promise<void> {
  emit({ ev: 'acting', key, t: Date.now() });
  const slots: (CacheReader | Error | undefined)[] = unit.clusters.flatMap(() => KINDS.map(() => undefined));
  readers.set(key, slots);
  // As a reconcile starts: declare the targets. This is also what registers again an owner this
  // replica forgot when the key moved away earlier (a key can come back); watchTargetAndGetReader
  // alone records nothing for a forgotten owner, and its cache would be collected.
  for (const cluster of unit.clusters) {
    registry.setOwnerTargets({ namespace: unit.namespace, name: cluster }, KINDS.map((gvk) => ({ cluster: { kind: 'static', name: cluster }, target: { gvk, namespace: 'apps', name: 'obj-0' } })));
  }
  const build = async (i: number): Promise<void> => {
    const cluster = unit.clusters[Math.floor(i / KINDS.length)] ?? '';
    const gvk = KINDS[i % KINDS.length] ?? KINDS[0];
    while (!signal.aborted) {
      try {
        slots[i] = await registry.watchTargetAndGetReader({ kind: 'static', name: cluster }, { gvk, namespace: 'apps', name: 'obj-0' }, { namespace: unit.namespace, name: cluster }, signal);
        return;
      } catch (err) {
        slots[i] = err instanceof Error ? err : new Error(String(err));
        await delay(1_000).catch(() => undefined);
      }
    }
  };
  const builds = reconciles.run(undefined, () => Promise.all(slots.map((_, i) => build(i))));
  await new Promise<void>((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => { resolve(); }, { once: true });
  });
  emit({ ev: 'stopped', key, t: Date.now() });
  readers.delete(key);
  await builds;
  // A build that finished after the loss registered its owner again: forget it once more.
  for (const owner of ownersOf(unit)) registry.forgetOwner(owner);
}

sharder.subscribe(({ gained, lost }) => {
  for (const key of lost) {
    const unit = units.get(key);
    if (unit !== undefined) for (const owner of ownersOf(unit)) registry.forgetOwner(owner);
  }
  for (const key of gained) {
    const unit = units.get(key);
    if (unit === undefined) continue;
    void sharder.whileOwned(key, (signal) => hold(key, unit, signal)).catch((err: unknown) => {
      process.stderr.write(`# ${identity}: holding ${key} failed: ${err instanceof Error ? err.message : String(err)}\n`);
    });
  }
});

const controller = new AbortController();
const stats = setInterval(() => {
  let wanted = 0;
  let synced = 0;
  let failed = 0;
  for (const slots of readers.values()) {
    for (const r of slots) {
      wanted++;
      if (r instanceof Error) failed++;
      else if (r?.synced === true) synced++;
    }
  }
  const status = sharder.status();
  emit({ ev: 'stat', t: Date.now(), acting: readers.size, wanted, synced, failed, caches: registry.caches().length, joined: status.joined, orphaned: status.orphaned.length, unowned: status.unowned.length, boundMs: status.boundMs });
}, 250);

createInterface({ input: process.stdin }).on('line', (line) => {
  if (line === 'gc') {
    gc();
    emit({ ev: 'mem', ...memory(), caches: registry.caches().length });
  } else if (line === 'stop') {
    controller.abort();
  }
});

// A replica that lost the group (its peer Lease not renewed within the renew deadline) stopped
// acting for every key; the service would exit and be restarted: here it joins again at once.
let outcome = await sharder.run(controller.signal);
while (outcome === 'lost' && !controller.signal.aborted) {
  emit({ ev: 'lost', t: Date.now() });
  outcome = await sharder.run(controller.signal);
}
clearInterval(stats);
emit({ ev: 'done', outcome });
await registry.close();
await connection.close();
await heartbeat.close();
process.exit(0);
