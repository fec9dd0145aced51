// The controller sharded across replicas, on a simulated management cluster with a fake ownership:
// a replica reconciles and writes only the Pipelines of the shard keys it owns, reconciles a key it
// gains at once, forgets a key it loses, and a promotion handed over in the middle (Pending written,
// the action done, the outcome not yet recorded) is completed exactly once by the new owner.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { SimulatedCluster } from '../../fixtures/index.ts';
import { eventually } from '../../e2e/harness/index.ts';
import { StaticProvider } from '../cluster/index.ts';
import type { Registry } from '../registry/index.ts';
import { registryWithKeeper } from '../registry/testing.ts';
import { PipelineController } from './controller.ts';
import { NotShardOwnerError, pipelineShardKey, type PipelineShardBy, type PipelineShardChange, type PipelineShardOrphans, type PipelineShardOwnership } from './shard.ts';

const HR = { apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease' } as const;
const HR_GVK = { group: 'helm.toolkit.fluxcd.io', version: 'v2', kind: 'HelmRelease' } as const;
const PIPELINE = { apiVersion: 'fleetcache.dev/v1alpha1', kind: 'Pipeline' } as const;
const EVENT = { apiVersion: 'v1', kind: 'Event' } as const;

/**
 * Ownership decided by the test: `gain` and `lose` change it at once, as a Sharder does once a fence
 * is taken or given up. Like the Sharder, `lose` aborts the key's work and its promise resolves
 * when every `whileOwned` of the key in flight has settled (when the fence would be released).
 */
class FakeOwnership implements PipelineShardOwnership {
  /** Keys owned, each with the controller its `whileOwned` signals come from. */
  readonly #owned = new Map<string, AbortController>();
  /** `whileOwned` calls running, per key; a key's entry goes when its last call settles. */
  readonly #running = new Map<string, Set<Promise<unknown>>>();
  readonly #listeners = new Set<(change: PipelineShardChange) => void>();
  /** `whileOwned` calls per key, owned or not. */
  readonly asked = new Map<string, number>();

  owns(key: string): boolean {
    return this.#owned.has(key);
  }

  async whileOwned<T>(key: string, fn: (signal: AbortSignal) => Promise<T>): Promise<{ readonly owned: true; readonly value: T } | { readonly owned: false }> {
    this.asked.set(key, (this.asked.get(key) ?? 0) + 1);
    const owned = this.#owned.get(key);
    if (owned === undefined) return { owned: false };
    const work = fn(owned.signal);
    const running = this.#running.get(key) ?? new Set<Promise<unknown>>();
    this.#running.set(key, running);
    running.add(work);
    try {
      return { owned: true, value: await work };
    } finally {
      running.delete(work);
      if (running.size === 0) this.#running.delete(key);
    }
  }

  subscribe(listener: (change: PipelineShardChange) => void): () => void {
    this.#listeners.add(listener);
    return () => { this.#listeners.delete(listener); };
  }

  readonly #orphanListeners = new Set<(orphans: PipelineShardOrphans) => void>();

  subscribeOrphans(listener: (orphans: PipelineShardOrphans) => void): () => void {
    this.#orphanListeners.add(listener);
    return () => { this.#orphanListeners.delete(listener); };
  }

  /** As a Sharder's report after a read of the group: `keys` orphaned past `boundMs` since `since`, reported by this replica. */
  reportOrphaned(keys: readonly string[], since: number, boundMs = 37_200): void {
    for (const listener of this.#orphanListeners) listener({ reported: keys.map((key) => ({ key, since, boundMs })) });
  }

  gain(...keys: string[]): void {
    for (const key of keys) this.#owned.set(key, new AbortController());
    for (const listener of this.#listeners) listener({ gained: keys, lost: [] });
  }

  /** Stops owning `keys` now (synchronously); resolves once their work in flight has settled. */
  lose(...keys: string[]): Promise<void> {
    const settling: Promise<unknown>[] = [];
    for (const key of keys) {
      this.#owned.get(key)?.abort(new Error(`shard ${key} moved`));
      this.#owned.delete(key);
      settling.push(...(this.#running.get(key) ?? []));
    }
    for (const listener of this.#listeners) listener({ gained: [], lost: keys });
    return Promise.allSettled(settling).then(() => undefined);
  }
}

interface Ref { readonly namespace: string; readonly name: string }

/** The app a Pipeline promotes: the HelmRelease `<namespace>-<name>` in namespaces dev and prod. */
function appOf(p: Ref): string {
  return `${p.namespace}-${p.name}`;
}

interface Fleet {
  readonly sim: SimulatedCluster;
  /** The chart version of the Pipeline's app in `environment`. */
  readonly version: (p: Ref, environment: 'dev' | 'prod') => string | undefined;
  readonly status: (p: Ref) => { readonly promotions?: readonly { readonly environment: string; readonly revision: string; readonly state: string; readonly message?: string }[] } | undefined;
  /** PATCH requests that reached the Pipeline's app in prod. */
  readonly prodPatches: (p: Ref) => number;
  /** Requests that wrote the Pipeline's status. */
  readonly statusWrites: (p: Ref) => number;
  /** Event reasons recorded on the Pipeline. */
  readonly events: (p: Ref) => string[];
}

/** Pipelines promoting their app from dev (1.1.0, Ready) to prod (1.0.0, Ready): each one's next step is promoting 1.1.0 to prod. */
async function fleet(t: TestContext, pipelines: readonly Ref[], options: { readonly webhook?: string } = {}): Promise<Fleet> {
  const namespaces = [...new Set(pipelines.map((p) => p.namespace))];
  const sim = await SimulatedCluster.start({
    namespaces: [...namespaces, 'dev', 'prod'],
    requestLogSize: 10_000,
    kinds: [
      { group: 'fleetcache.dev', version: 'v1alpha1', kind: 'Pipeline', plural: 'pipelines', namespaced: true, status: true },
      { group: 'helm.toolkit.fluxcd.io', version: 'v2', kind: 'HelmRelease', plural: 'helmreleases', namespaced: true, status: true },
      { group: '', version: 'v1', kind: 'Event', plural: 'events', namespaced: true },
    ],
  });
  t.after(() => sim.close());
  for (const p of pipelines) {
    for (const [namespace, version] of [['dev', '1.1.0'], ['prod', '1.0.0']] as const) {
      sim.store.create({ ...HR, metadata: { namespace, name: appOf(p) }, spec: { chart: { spec: { chart: 'podinfo', version } } } });
      sim.store.patch({ ...HR, namespace, name: appOf(p) }, { status: { observedGeneration: 1, conditions: [{ type: 'Ready', status: 'True' }], history: [{ chartVersion: version }] } }, { subresource: 'status' });
    }
    if (options.webhook !== undefined) {
      sim.store.create({ apiVersion: 'v1', kind: 'Secret', metadata: { namespace: p.namespace, name: `${p.name}-hook` }, data: { url: Buffer.from(options.webhook).toString('base64') } });
    }
    sim.store.create({
      ...PIPELINE,
      metadata: { namespace: p.namespace, name: p.name },
      spec: {
        appRef: { ...HR, name: appOf(p) },
        promotion: options.webhook === undefined
          ? { strategy: 'patch', patch: { path: '/spec/chart/spec/version' } }
          : { strategy: 'webhook', webhook: { secretRef: { name: `${p.name}-hook` } } },
        environments: [{ name: 'dev', targets: [{ namespace: 'dev' }] }, { name: 'prod', targets: [{ namespace: 'prod' }] }],
      },
    });
  }
  const requests = (method: string, path: string): number => sim.recentRequests().filter((r) => r.method === method && r.path === path).length;
  return {
    sim,
    version: (p, environment) => (sim.store.get({ ...HR, namespace: environment, name: appOf(p) })?.spec as { chart?: { spec?: { version?: string } } } | undefined)?.chart?.spec?.version,
    status: (p) => sim.store.get({ ...PIPELINE, ...p })?.status as ReturnType<Fleet['status']>,
    prodPatches: (p) => requests('PATCH', `/apis/helm.toolkit.fluxcd.io/v2/namespaces/prod/helmreleases/${appOf(p)}`),
    statusWrites: (p) => requests('PUT', `/apis/fleetcache.dev/v1alpha1/namespaces/${p.namespace}/pipelines/${p.name}/status`),
    events: (p) => sim.store.list(EVENT, { namespace: p.namespace })
      .filter((e) => (e as { involvedObject?: { name?: string } }).involvedObject?.name === p.name)
      .map((e) => String((e as { reason?: unknown }).reason)),
  };
}

interface Replica {
  readonly controller: PipelineController;
  readonly registry: Registry;
  readonly ownership: FakeOwnership;
  /** Reconciles this replica finished (any outcome). */
  readonly reconciles: () => number;
  readonly stop: () => Promise<void>;
}

/** One replica of the service: its own registry and controller, sharded on its own fake ownership. */
function replica(t: TestContext, sim: SimulatedCluster, by: PipelineShardBy, options: { readonly start?: boolean } = {}): Replica & { readonly start: () => void } {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromString(sim.kubeconfig);
  const registry = registryWithKeeper({ provider: new StaticProvider({ clusters: {} }), local: kubeConfig, credentialCheckIntervalMs: 0 });
  t.after(() => registry.close());
  const ownership = new FakeOwnership();
  let reconciles = 0;
  const controller = new PipelineController({ registry, workers: 2, allowCrossNamespaceTargets: true, allowPrivateWebhooks: true, shard: { ownership, by }, onReconcile: () => { reconciles += 1; } });
  const abort = new AbortController();
  let running: Promise<void> | undefined;
  const start = (): void => { running ??= controller.run(abort.signal); };
  const stop = async (): Promise<void> => {
    abort.abort();
    await running;
  };
  t.after(stop);
  if (options.start !== false) start();
  return { controller, registry, ownership, reconciles: () => reconciles, stop, start };
}

/** Owner keys of the registry's cluster-wide HelmRelease cache on the management cluster. */
function hrOwners(registry: Registry): string[] {
  return registry.ownersOf({ kind: 'local' }, 'dev', HR_GVK).sort();
}

const A1: Ref = { namespace: 'team-a', name: 'one' };
const A2: Ref = { namespace: 'team-a', name: 'two' };
const B1: Ref = { namespace: 'team-b', name: 'one' };
const B2: Ref = { namespace: 'team-b', name: 'two' };

describe('PipelineController sharded', () => {
  it('names a Pipeline\'s shard key by namespace or by namespace/name, and refuses a malformed shard option', (t) => {
    assert.equal(pipelineShardKey('namespace', A1), 'team-a');
    assert.equal(pipelineShardKey('pipeline', A1), 'team-a/one');
    const registry = registryWithKeeper({ provider: new StaticProvider({ clusters: {} }) });
    t.after(() => registry.close());
    const ownership = new FakeOwnership();
    assert.throws(() => new PipelineController({ registry, shard: { ownership, by: 'cluster' as PipelineShardBy } }), /option shard.by must be one of namespace, pipeline, got "cluster"/);
    assert.throws(() => new PipelineController({ registry, shard: { ownership: {} as PipelineShardOwnership, by: 'namespace' } }), /option shard.ownership must have owns, whileOwned and subscribe/);
    assert.deepEqual([...new PipelineController({ registry, shard: { ownership, by: 'namespace' } }).shardKeys()], [], 'no keys before the Pipeline cache exists');
  });

  for (const by of ['namespace', 'pipeline'] as const) {
    describe(`by ${by}`, () => {
      const key = (p: Ref): string => pipelineShardKey(by, p);

      it('reconciles and writes only the Pipelines whose shard it owns; a gain reconciles the others at once', async (t) => {
        const { sim, version, status, prodPatches, statusWrites, events } = await fleet(t, [A1, A2, B1, B2]);
        const a = replica(t, sim, by);
        a.ownership.gain(...new Set([A1, A2].map(key)));
        await eventually('team-a promoted to 1.1.0', () => version(A1, 'prod') === '1.1.0' && version(A2, 'prod') === '1.1.0' && status(A1)?.promotions?.[0]?.state === 'Succeeded' && status(A2)?.promotions?.[0]?.state === 'Succeeded');
        assert.deepEqual(new Set(a.controller.shardKeys()), new Set([A1, A2, B1, B2].map(key)), 'shardKeys: every Pipeline in the cache, owned or not');
        // Every Pipeline was queued by the initial list: team-b's were looked at and left alone.
        await eventually('every Pipeline went through the queue', () => a.reconciles() >= 4);
        for (const p of [B1, B2]) {
          assert.equal(status(p), undefined, `${p.name}: no status written`);
          assert.equal(statusWrites(p), 0);
          assert.equal(prodPatches(p), 0, `${p.name}: nothing promoted`);
          assert.deepEqual(events(p), [], `${p.name}: no Event`);
          assert.equal(version(p, 'prod'), '1.0.0');
        }
        assert.deepEqual(hrOwners(a.registry), [A1, A2].map((p) => `fleetcache.dev/Pipeline/${p.namespace}/${p.name}`), 'no caches registered for team-b');

        // No resync, no event on team-b's objects: only the gain can start their reconciles.
        a.ownership.gain(...new Set([B1, B2].map(key)));
        await eventually('team-b promoted once gained', () => [B1, B2].every((p) => version(p, 'prod') === '1.1.0' && status(p)?.promotions?.[0]?.state === 'Succeeded' && events(p).length > 0), 10_000);
        for (const p of [B1, B2]) assert.deepEqual(events(p), ['Promoted'], `${p.name}: its Event`);
      });

      it('forgets the Pipelines of a shard it loses: their owners go from the registry and nothing is written for them any more', async (t) => {
        const { sim, version, status, statusWrites } = await fleet(t, [A1, A2]);
        const a = replica(t, sim, by);
        a.ownership.gain(...new Set([A1, A2].map(key)));
        await eventually('team-a promoted', () => [A1, A2].every((p) => status(p)?.promotions?.[0]?.state === 'Succeeded'));
        assert.equal(hrOwners(a.registry).length, 2);
        await a.ownership.lose(key(A1));
        const gone = by === 'namespace' ? [A1, A2] : [A1];
        const kept = by === 'namespace' ? [] : [A2];
        assert.deepEqual(hrOwners(a.registry), kept.map((p) => `fleetcache.dev/Pipeline/${p.namespace}/${p.name}`), 'the lost Pipelines are forgotten by the registry');
        // A new revision in dev: the Pipelines still owned promote it, the lost ones are not touched.
        const writes = gone.map(statusWrites);
        for (const p of [A1, A2]) {
          sim.store.patch({ ...HR, namespace: 'dev', name: appOf(p) }, { spec: { chart: { spec: { version: '1.2.0' } } } });
          sim.store.patch({ ...HR, namespace: 'dev', name: appOf(p) }, { status: { observedGeneration: 2, history: [{ chartVersion: '1.2.0' }] } }, { subresource: 'status' });
        }
        // Edits to the lost Pipelines queue them (their cache is the controller's own): they must be refused.
        const asked = a.ownership.asked.get(key(A1)) ?? 0;
        for (const p of gone) sim.store.patch({ ...PIPELINE, ...p }, { metadata: { labels: { touched: 'yes' } } });
        for (const p of kept) await eventually(`${p.name} promoted 1.2.0`, () => version(p, 'prod') === '1.2.0');
        await eventually('the edits were looked at', () => (a.ownership.asked.get(key(A1)) ?? 0) >= asked + gone.length);
        assert.deepEqual(gone.map(statusWrites), writes, 'no status written for a lost Pipeline');
        for (const p of gone) assert.equal(version(p, 'prod'), '1.1.0', `${p.name}: not promoted`);
      });
    });
  }

  for (const by of ['namespace', 'pipeline'] as const) {
    it(`hands a patch promotion over in the middle (by ${by}): the old owner does not record the outcome, the new owner completes it exactly once`, async (t) => {
      const { sim, version, status, prodPatches, events } = await fleet(t, [A1]);
      const old = replica(t, sim, by);
      const fresh = replica(t, sim, by, { start: false });
      // The shard moves while the old owner's PATCH is on its way: its action completes, its fence is gone.
      let handedOver: Promise<void> | undefined;
      const removeHook = sim.faults.beforeServe((request) => {
        if (request.method === 'PATCH' && request.path.endsWith(`/namespaces/prod/helmreleases/${appOf(A1)}`)) handedOver ??= old.ownership.lose(pipelineShardKey(by, A1));
      });
      t.after(removeHook);
      old.ownership.gain(pipelineShardKey(by, A1));
      await eventually('the old owner acted', () => handedOver !== undefined);
      await handedOver; // its reconcile has ended (a Sharder releases the fence only then)
      assert.equal(version(A1, 'prod'), '1.1.0', 'the action the old owner started completed');
      assert.deepEqual(status(A1)?.promotions?.map((r) => [r.environment, r.revision, r.state]), [['prod', '1.1.0', 'Pending']], 'the outcome was not recorded by the old owner');
      assert.deepEqual(events(A1), [], 'nor its Event');
      assert.equal(old.controller.stats().reconcileErrors, 0, 'a refused write is not a reconcile error');

      fresh.start();
      fresh.ownership.gain(pipelineShardKey(by, A1));
      await eventually('the new owner completed the promotion', () => status(A1)?.promotions?.find((r) => r.environment === 'prod')?.state === 'Succeeded' && events(A1).length > 0);
      assert.equal(prodPatches(A1), 1, 'prod was patched once, by the old owner: the new owner found it done');
      assert.match(status(A1)?.promotions?.[0]?.message ?? '', /0 target\(s\), 1 already at it/);
      assert.deepEqual(events(A1), ['Promoted'], 'one Event, from the new owner');
      assert.equal(old.controller.stats().promotions.succeeded, 0);
      assert.equal(fresh.controller.stats().promotions.succeeded, 1);
    });
  }

  it('hands a webhook promotion over in the middle: the new owner sends it again with the same Idempotency-Key, and records it once', async (t) => {
    const deliveries: string[] = [];
    let handedOver: Promise<void> | undefined;
    const holder: { old?: Replica } = {};
    // The shard moves while the old owner's webhook is being answered: its delivery completes, its fence is gone.
    const receiver = createServer((req, res) => {
      deliveries.push(String(req.headers['idempotency-key']));
      handedOver ??= holder.old?.ownership.lose('team-a');
      req.resume();
      res.writeHead(200).end();
    });
    receiver.listen(0, '127.0.0.1');
    await once(receiver, 'listening');
    t.after(() => new Promise<void>((resolve) => { receiver.closeAllConnections(); receiver.close(() => { resolve(); }); }));
    const { sim, status, events } = await fleet(t, [A1], { webhook: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook` });
    const old = replica(t, sim, 'namespace');
    holder.old = old;
    const fresh = replica(t, sim, 'namespace', { start: false });
    old.ownership.gain('team-a');
    await eventually('the old owner delivered', () => handedOver !== undefined);
    await handedOver;
    assert.deepEqual(status(A1)?.promotions?.map((r) => r.state), ['Pending'], 'the outcome was not recorded by the old owner');
    assert.deepEqual(events(A1), []);

    fresh.start();
    fresh.ownership.gain('team-a');
    await eventually('the new owner completed the promotion', () => status(A1)?.promotions?.[0]?.state === 'Succeeded' && events(A1).length > 0);
    assert.equal(deliveries.length, 2, 'the old owner\'s delivery, and the new owner\'s resume');
    assert.equal(new Set(deliveries).size, 1, `one Idempotency-Key: a receiver carries the promotion out once (${deliveries.join(', ')})`);
    assert.ok(deliveries[0]?.endsWith('/prod/1.1.0'), deliveries[0]);
    assert.deepEqual(events(A1), ['Promoted']);
    assert.equal(old.controller.stats().promotions.succeeded + fresh.controller.stats().promotions.succeeded, 1);
  });

  it('marks the Pipelines of a shard reported orphaned ShardOwned=False with an Event, without clobbering a newer status; the owner that takes it sets True', async (t) => {
    const { sim, status, statusWrites, events } = await fleet(t, [A1, A2]);
    const conditionOf = (p: Ref): { status?: string; reason?: string; message?: string } | undefined =>
      ((sim.store.get({ ...PIPELINE, ...p })?.status as { conditions?: { type: string; status: string; reason: string; message: string }[] } | undefined)?.conditions ?? []).find((c) => c.type === 'ShardOwned');
    // b owns nothing and reports team-a's shard(s) orphaned, as the Sharder's runner-up does.
    const b = replica(t, sim, 'pipeline');
    await eventually('b\'s Pipeline cache', () => [...b.controller.shardKeys()].length === 2);
    // Someone else writes A1's status just before b's first PUT lands: b's PUT must fail, not clobber it.
    let raced = false;
    const removeHook = sim.faults.beforeServe((request) => {
      if (raced || request.method !== 'PUT' || !request.path.endsWith(`/pipelines/${A1.name}/status`)) return;
      raced = true;
      sim.store.patch({ ...PIPELINE, ...A1 }, { status: { promotions: [{ environment: 'prod', revision: '9.9.9', state: 'Pending' }] } }, { subresource: 'status' });
    });
    t.after(removeHook);
    const since = Date.UTC(2026, 0, 2, 3, 4, 5);
    b.ownership.reportOrphaned([A1, A2].map((p) => pipelineShardKey('pipeline', p)), since);
    await eventually('A2 marked orphaned, with its Event', () => conditionOf(A2)?.status === 'False' && events(A2).length > 0);
    assert.equal(conditionOf(A2)?.reason, 'Orphaned');
    assert.match(conditionOf(A2)?.message ?? '', /shard "team-a\/two" since 2026-01-02T03:04:05Z, longer than the bound of 37\.2 s/);
    assert.deepEqual(events(A2), ['ShardOrphaned']);
    assert.equal(raced, true);
    assert.equal(conditionOf(A1), undefined, 'the PUT on the stale resourceVersion failed');
    assert.deepEqual(status(A1)?.promotions?.map((r) => r.revision), ['9.9.9'], 'the other writer\'s status survived');

    // The next report (level-triggered) marks A1 on its newer copy, and leaves A2 alone.
    const writesA2 = statusWrites(A2);
    b.ownership.reportOrphaned([A1, A2].map((p) => pipelineShardKey('pipeline', p)), since);
    await eventually('A1 marked orphaned, with its Event', () => conditionOf(A1)?.status === 'False' && events(A1).length > 0);
    assert.deepEqual(status(A1)?.promotions?.map((r) => r.revision), ['9.9.9'], 'only the condition changed');
    b.ownership.reportOrphaned([pipelineShardKey('pipeline', A2)], since);
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(statusWrites(A2), writesA2, 'a Pipeline that already says so is not written again');
    assert.deepEqual(events(A2), ['ShardOrphaned'], 'nor a second Event');
    assert.equal(b.controller.stats().promotions.succeeded, 0, 'b acted for nothing');

    // A replica takes A2's shard: its reconcile, behind the fence, sets the condition True.
    const a = replica(t, sim, 'pipeline');
    a.ownership.gain(pipelineShardKey('pipeline', A2));
    await eventually('A2 owned again', () => conditionOf(A2)?.status === 'True' && status(A2)?.promotions?.[0]?.state === 'Succeeded');
    assert.equal(conditionOf(A2)?.reason, 'Owned');
    assert.equal(conditionOf(A1)?.status, 'False', 'A1 still has no owner');
  });

  it('refuses a write with NotShardOwnerError naming the shard', () => {
    const err = new NotShardOwnerError('team-a', 'the status');
    assert.equal(err.code, 'ERR_NOT_SHARD_OWNER');
    assert.equal(err.shardKey, 'team-a');
    assert.match(err.message, /not writing the status: this replica no longer owns shard "team-a"/);
  });
});
