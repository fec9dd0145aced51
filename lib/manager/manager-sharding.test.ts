import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { simulatedClusterForSuite } from '../../fixtures/support/index.ts';
import { eventually } from '../../e2e/harness/index.ts';
import { parseExposition } from '../../cmd/exposition.test-util.ts';
import { ClusterSet, LocalProvider } from '../cluster/index.ts';
import { defaultControllerRateLimiter, RateLimitingWorkQueue } from '../queue/index.ts';
import { Registry } from '../registry/index.ts';
import { noopLogger } from '../util/index.ts';
import { Manager, rendezvousOwner, SHARD_GROUP_LABEL, ShutdownTimeoutError, type ManagerOptions } from './index.ts';

const leaseKind = { group: 'coordination.k8s.io', version: 'v1', kind: 'Lease', plural: 'leases' } as const;
const loopback = { host: '127.0.0.1', port: 0 };
const shardTiming = { leaseDurationMs: 2_000, renewDeadlineMs: 1_500, retryPeriodMs: 200 } as const;

describe('Manager with sharding', () => {
  const suite = simulatedClusterForSuite({ namespaces: ['ops'], kinds: [{ ...leaseKind, namespaced: true }] });
  const { kubeConfig } = suite;

  const clusters: ManagerOptions['clusters'] = ({ onRequest }) => new ClusterSet({ local: kubeConfig, provider: new LocalProvider({ kubeConfig }), onRequest, logger: noopLogger });
  const registry: ManagerOptions['registry'] = ({ queue, clusters: keeper }) => new Registry({ clusters: keeper, queue, logger: noopLogger });
  const keys = Array.from({ length: 12 }, (_, i) => `team-${i}`);

  it('refuses sharding with leader election, and shardKeyOf without sharding', () => {
    const sharding = { group: 'widgets', namespace: 'ops', keys: () => keys };
    assert.throws(() => new Manager({ clusters, registry, sharding, leaderElection: { name: 'l', namespace: 'ops' } }), TypeError);
    assert.doesNotThrow(() => new Manager({ clusters, registry, sharding, leaderElection: { name: 'l', enabled: false } }));
    assert.throws(() => new Manager({ clusters, registry, sharding: { ...sharding, group: 'Not A Label' } }), TypeError);
    assert.throws(() => new Manager({ clusters, registry, sharding: { ...sharding, renewDeadlineMs: 40_000 } }), TypeError);
    const plain = new Manager({ clusters, registry });
    assert.throws(() => { plain.add({ name: 'c', reconcile: () => Promise.resolve(), shardKeyOf: (k) => k }); }, TypeError);
  });

  it('splits the keys between two replicas: each reconciles only what it owns, is ready once joined, and exports the shard metrics', async () => {
    const reconciled: string[] = [];
    const violations: string[] = [];
    const replicas = ['r1', 'r2'].map((identity) => {
      const manager = new Manager({
        clusters,
        registry,
        healthProbeBindAddress: loopback,
        metricsServer: { bindAddress: loopback, secure: false },
        metrics: { defaultMetrics: false },
        sharding: { group: 'widgets', namespace: 'ops', identity, keys: () => keys, ...shardTiming },
      });
      const queue = new RateLimitingWorkQueue<string>({ name: `teams-${identity}`, rateLimiter: defaultControllerRateLimiter() });
      const sharder = manager.sharder;
      assert.ok(sharder !== undefined);
      // What the docs ask of an embedder: enqueue the keys of every shard key gained.
      sharder.subscribe((change) => { for (const key of change.gained) queue.add(key); });
      // Every replica is also offered every key, as informer events would: the non-owner drops them.
      for (const key of keys) queue.add(key);
      manager.add({ name: 'teams', queue, shardKeyOf: (key) => key, reconcile: (key, context) => {
        if (context.signal.aborted || !sharder.owns(key)) violations.push(`${identity} reconciled ${key} without owning it`);
        reconciled.push(`${identity}:${key}`);
        return Promise.resolve();
      } });
      const controller = new AbortController();
      return { identity, manager, controller, done: manager.start(controller.signal) };
    });
    try {
      const [one, two] = replicas;
      assert.ok(one !== undefined && two !== undefined);
      const probe = await eventually('the probe server', () => one.manager.probeUrl);
      const ready = await eventually('r1 to be ready', async () => ((await fetch(`${probe}/readyz`)).status === 200 ? true : undefined));
      assert.equal(ready, true);
      const peers = [{ identity: 'r1', weight: 1 }, { identity: 'r2', weight: 1 }];
      const expected = keys.map((k) => `${rendezvousOwner(k, peers) ?? ''}:${k}`).sort();
      await eventually('every key reconciled by its owner', () => (expected.every((e) => reconciled.includes(e)) ? true : undefined), 20_000);
      // Keys may be reconciled while the replicas joined (one replica owned all for a moment); once both are in,
      // each key is owned by its rendezvous owner, and each replica's next read of the group sees none unowned.
      const ownerOf = (key: string): string => replicas.filter((r) => r.manager.sharder?.owns(key) === true).map((r) => r.identity).join();
      await eventually('each key owned by its rendezvous owner alone, as both replicas see it', () => keys.every((k) => ownerOf(k) === rendezvousOwner(k, peers))
        && replicas.every((r) => r.manager.sharder?.status().unowned.length === 0), 20_000);
      for (const key of keys) {
        const owners = replicas.filter((r) => r.manager.sharder?.owns(key) === true).map((r) => r.identity);
        assert.deepEqual(owners, [rendezvousOwner(key, peers)], key);
      }
      let owned = 0;
      for (const r of replicas) {
        const url = await eventually('the metrics server', () => r.manager.metricsUrl);
        const m = parseExposition(await (await fetch(`${url}/metrics`)).text());
        assert.equal(m.value('fleetcache_shard_peers', {}), 2);
        assert.equal(m.value('fleetcache_shard_unowned_keys', {}), 0);
        assert.equal(m.value('fleetcache_shard_orphaned_keys', {}), 0);
        owned += m.value('fleetcache_shard_owned_keys', {}) ?? 0;
        assert.ok((m.value('fleetcache_shard_handoffs_total', { direction: 'gained' }) ?? 0) >= 1);
        assert.notEqual(m.value('fleetcache_shard_handoffs_total', { direction: 'lost' }), undefined);
      }
      assert.equal(owned, keys.length);
      assert.deepEqual(violations, []);
    } finally {
      for (const r of replicas) r.controller.abort();
      await Promise.all(replicas.map((r) => r.done));
    }
    const left = suite.cluster.store.list({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease' }, { namespace: 'ops', labelSelector: `${SHARD_GROUP_LABEL}=widgets` });
    assert.deepEqual(left, [], 'a clean stop leaves no Lease behind');
  });

  it('stops after the grace period with a reconcile that ignores its signal, keeping that key\'s fence while the work runs', async () => {
    const manager = new Manager({
      clusters,
      registry,
      gracefulShutdownTimeoutMs: 300,
      sharding: { group: 'stuck', namespace: 'ops', identity: 'only', keys: () => ['k'], ...shardTiming },
    });
    const queue = new RateLimitingWorkQueue<string>({ name: 'stuck', rateLimiter: defaultControllerRateLimiter() });
    const sharder = manager.sharder;
    assert.ok(sharder !== undefined);
    sharder.subscribe((change) => { for (const key of change.gained) queue.add(key); });
    let started = false;
    let finish = (): void => undefined;
    manager.add({ name: 'stuck', queue, shardKeyOf: (key) => key, reconcile: () => new Promise<void>((resolve) => { started = true; finish = resolve; }) });
    const controller = new AbortController();
    const done = manager.start(controller.signal);
    await eventually('the reconcile to start', () => (started ? true : undefined), 20_000);
    controller.abort();
    const hung = new Promise<never>((_, reject) => { setTimeout(() => { reject(new Error('start did not resolve after the grace period')); }, 10_000).unref(); });
    await assert.rejects(Promise.race([done, hung]), ShutdownTimeoutError);
    const fence = (): unknown => suite.cluster.store.list({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease' }, { namespace: 'ops', labelSelector: `${SHARD_GROUP_LABEL}=stuck,fleetcache.io/shard-role=fence` })[0];
    assert.ok(fence() !== undefined, 'the fence stays while the work it guards runs');
    finish();
  });
});
