// An expired continue token against the simulated API server: the server itself answers 410
// Expired (with its "inconsistent continue" token, which the informer must not use) after the
// test compacts its history between two pages. Every page, continuations and expired ones
// included, goes through the LIST limiter given to the connection.
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { eventually } from '../../e2e/harness/index.ts';
import { SimulatedCluster } from '../../fixtures/index.ts';
import { ClusterConnection, createListLimiter, type ConcurrencyLimiter, type ResourceClient } from '../transport/index.ts';
import { ResourceInformer } from './index.ts';
import { kubeConfigFrom } from '../../fixtures/support/index.ts';

const configMaps = { group: '', version: 'v1', kind: 'ConfigMap' };

/** Counts the slots asked of one limiter. */
function countSchedules(limiter: ConcurrencyLimiter): { scheduled: number } {
  const counter = { scheduled: 0 };
  const acquire = limiter.acquire.bind(limiter);
  limiter.acquire = (signal?: AbortSignal) => {
    counter.scheduled++;
    return acquire(signal);
  };
  return counter;
}

interface Setup {
  readonly sim: SimulatedCluster;
  readonly client: ResourceClient;
  readonly lists: { scheduled: number };
}

async function setup(t: TestContext, objects: number): Promise<Setup> {
  const sim = await SimulatedCluster.start({ namespaces: ['apps'] });
  t.after(() => sim.close());
  for (let i = 0; i < objects; i++) sim.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `cm-${i}`, namespace: 'apps' } });
  const kubeConfig = kubeConfigFrom(sim.kubeconfig);
  const listLimiter = createListLimiter(2);
  t.after(() => listLimiter.stop());
  const lists = countSchedules(listLimiter);
  const connection = new ClusterConnection({ name: sim.name, kubeConfig, listLimiter });
  t.after(() => connection.close());
  const client = connection.resourceClient(await connection.resolve(configMaps, AbortSignal.timeout(10_000)));
  return { sim, client, lists };
}

/**
 * As each of the next `count` continuation requests reaches the server, deletes `cm-0` (the first
 * time) and compacts the server's history, so the server answers that continuation with 410
 * Expired. On the server's side, not the client's: the transport sends a continuation as soon as
 * it reads the token (fetched ahead), before the informer asks for it.
 */
function expireContinuations(sim: SimulatedCluster, count: number): void {
  let left = count;
  sim.faults.beforeServe((request) => {
    if (request.verb !== 'list' || !request.query.has('continue') || left === 0) return;
    left--;
    if (sim.store.get({ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'apps', name: 'cm-0' }) !== undefined) {
      sim.store.delete({ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'apps', name: 'cm-0' });
    } else {
      sim.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `late-${left}`, namespace: 'apps' } });
    }
    sim.faults.compact();
  });
}

/** The LIST requests the server saw, as [limit, continued?, status], once each has its status logged. */
function listRequests(sim: SimulatedCluster): Promise<[string | undefined, boolean, number][]> {
  return eventually('the server logged the status of every LIST', () => {
    const lists = sim.recentRequests().filter((r) => r.verb === 'list');
    return lists.every((r) => r.status !== 0) && lists.map((r): [string | undefined, boolean, number] => [r.query.limit, r.query.continue !== undefined, r.status]);
  }, 10_000);
}

/** Five ConfigMaps, the first `expiries` continuations expired, and an informer paging by 2, synced. */
async function syncedWithExpiries(t: TestContext, expiries: number): Promise<{ sim: SimulatedCluster; lists: Setup['lists']; informer: ResourceInformer }> {
  const { sim, client, lists } = await setup(t, 5);
  expireContinuations(sim, expiries);
  const informer = new ResourceInformer({ client, namespace: 'apps', pageSize: 2 });
  t.after(() => informer.stop());
  informer.start();
  await informer.waitForSync(AbortSignal.timeout(10_000));
  return { sim, lists, informer };
}

describe('informer: expired continue tokens (simulated API server)', () => {
  it('restarts the LIST from the beginning when a continuation answers 410', async (t) => {
    const { sim, lists, informer } = await syncedWithExpiries(t, 1);
    assert.deepEqual(await listRequests(sim), [
      ['2', false, 200], ['2', true, 410],
      ['2', false, 200], ['2', true, 200],
    ]);
    assert.deepEqual(informer.store.keys().sort(), ['apps/cm-1', 'apps/cm-2', 'apps/cm-3', 'apps/cm-4'], 'cm-0, deleted before the restart, is not cached');
    assert.equal(informer.stats().gones, 1);
    assert.equal(lists.scheduled, 4, 'every page through the LIST limiter, the expired one included');
  });

  it('falls back to one unpaginated LIST after a second expiry', async (t) => {
    const { sim, lists, informer } = await syncedWithExpiries(t, 2);
    assert.deepEqual(await listRequests(sim), [
      ['2', false, 200], ['2', true, 410],
      ['2', false, 200], ['2', true, 410],
      [undefined, false, 200],
    ]);
    assert.deepEqual(informer.store.keys().sort(), ['apps/cm-1', 'apps/cm-2', 'apps/cm-3', 'apps/cm-4', 'apps/late-0']);
    assert.equal(informer.stats().gones, 2);
    assert.equal(informer.stats().resourceVersion, sim.store.resourceVersion, 'watching from the unpaginated LIST');
    assert.equal(lists.scheduled, 5);
  });
});
