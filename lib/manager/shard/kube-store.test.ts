import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { SimulatedCluster } from '../../../fixtures/index.ts';
import { ClusterConnection } from '../../transport/index.ts';
import { KubeApiError } from '../../util/index.ts';
import { KubeShardLeaseStore } from './kube-store.ts';
import { SHARD_GROUP_LABEL, SHARD_KEY_ANNOTATION, SHARD_ROLE_LABEL } from './names.ts';
import type { ShardLeaseDraft } from './store.ts';

const leaseKind = { group: 'coordination.k8s.io', version: 'v1', kind: 'Lease', plural: 'leases' } as const;
const record = { holderIdentity: 'a', leaseDurationSeconds: 30, acquireTime: undefined, renewTime: undefined, leaseTransitions: 0 };
const signal = new AbortController().signal;

describe('KubeShardLeaseStore', () => {
  let cluster: SimulatedCluster;
  let connection: ClusterConnection;
  before(async () => {
    cluster = await SimulatedCluster.start({ namespaces: ['ops'], kinds: [{ ...leaseKind, namespaced: true }] });
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromString(cluster.kubeconfig);
    connection = new ClusterConnection({ name: 'sim', kubeConfig });
  });
  after(async () => {
    await connection.close();
    await cluster.close();
  });

  it('lists the group\'s peers and fences over pages, and writes with resourceVersion preconditions', async () => {
    const store = new KubeShardLeaseStore({ connection, namespace: 'ops', group: 'g', pageSize: 2 });
    const other = new KubeShardLeaseStore({ connection, namespace: 'ops', group: 'other' });
    const drafts: ShardLeaseDraft[] = [
      { role: 'peer', name: 'g-peer-1', weight: 3, record },
      ...Array.from({ length: 4 }, (_, i): ShardLeaseDraft => ({ role: 'fence', name: `g-key-${i}`, key: `ns/${i} with spaces`, record })),
    ];
    for (const draft of drafts) await store.create(draft, signal);
    await other.create({ role: 'peer', name: 'other-peer-1', weight: 1, record }, signal);
    cluster.store.create({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: 'unlabelled-role', namespace: 'ops', labels: { [SHARD_GROUP_LABEL]: 'g', [SHARD_ROLE_LABEL]: 'mystery' } }, spec: {} });

    const listed = await store.list(signal);
    assert.deepEqual(listed.map((l) => l.name).sort(), drafts.map((d) => d.name).sort(), 'every page, only the group, only peers and fences');
    const pages = cluster.recentRequests().filter((r) => r.method === 'GET' && r.query.labelSelector === `${SHARD_GROUP_LABEL}=g`);
    assert.equal(pages.length, 3, 'six Leases of the group (one of no role) in pages of 2');
    assert.ok(pages.every((r) => r.query.limit === '2'));
    const peer = listed.find((l) => l.role === 'peer');
    assert.equal(peer?.role === 'peer' ? peer.weight : undefined, 3);
    const fence = listed.find((l) => l.name === 'g-key-1');
    assert.ok(fence?.role === 'fence');
    assert.equal(fence.key, 'ns/1 with spaces');
    const stored = cluster.store.get({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', namespace: 'ops', name: 'g-key-1' });
    assert.equal(stored?.metadata?.annotations?.[SHARD_KEY_ANNOTATION], 'ns/1 with spaces');

    const updated = await store.update({ ...fence, record: { ...record, holderIdentity: 'b' } }, fence.resourceVersion, signal);
    assert.equal(updated.record.holderIdentity, 'b');
    await assert.rejects(store.update({ ...fence, record }, fence.resourceVersion, signal), (err) => err instanceof KubeApiError && err.statusCode === 409);
    await assert.rejects(store.delete('g-key-1', fence.resourceVersion, signal), (err) => err instanceof KubeApiError && err.statusCode === 409, 'a stale resourceVersion does not delete');
    await store.delete('g-key-1', updated.resourceVersion, signal);
    await store.delete('g-key-1', updated.resourceVersion, signal); // already gone: resolves
    assert.equal((await store.list(signal)).length, drafts.length - 1);
  });

  it('refuses a group that is not a short DNS label', () => {
    assert.throws(() => new KubeShardLeaseStore({ connection, namespace: 'ops', group: 'Bad_Group' }), TypeError);
    assert.throws(() => new KubeShardLeaseStore({ connection, namespace: 'ops', group: 'g', pageSize: 0 }), TypeError);
  });
});
