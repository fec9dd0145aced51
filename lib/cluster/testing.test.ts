// The fake keeper keeps the keeper's contract (generations, admission, leases, announcements), so
// that tests built on it prove something about code lent a real ClusterSet.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeResourceClient } from '../transport/testing.ts';
import { ClosedError, KubeApiError, UnknownKindError } from '../util/index.ts';
import type { ClusterChange, ClusterLease } from './index.ts';
import { FakeClusters } from './testing.ts';

const east = { kind: 'static', name: 'east' } as const;
const configMaps = { group: '', version: 'v1', kind: 'ConfigMap' };

describe('FakeClusters', () => {
  it('numbers generations, moves admissions over a rotation, and closes the old one after its last lease', async () => {
    const clients: string[] = [];
    const keeper = new FakeClusters({ client: (key, info, generation) => { clients.push(`${key}#${generation}`); return new FakeResourceClient({ info }); } });
    const heard: ClusterChange[] = [];
    let second: ClusterLease | undefined;
    // As the registry does: the listener moves its work to the new generation while it is held for it.
    keeper.subscribe((change) => { heard.push(change); second = keeper.retain(change.key); });
    const first = await keeper.acquire(east, { ownerNamespace: 'team-a' });
    assert.equal(first.key, keeper.connectionKey(east, 'team-a'));
    assert.equal(keeper.generation(first.key), 1);
    assert.equal(keeper.isAdmitted(first.key, 'team-a'), true);
    assert.equal(keeper.isAdmitted(first.key, 'team-b'), false);
    const info = await first.connection.resolve(configMaps);
    first.connection.resourceClient(info);

    await keeper.rotate(first.key);
    assert.deepEqual(heard, [{ type: 'rotated', key: first.key }]);
    assert.equal(keeper.generation(first.key), 2);
    assert.equal(first.current, false);
    assert.equal(first.signal.aborted, false, 'the old generation works until its lease is released');
    assert.equal(keeper.isAdmitted(first.key, 'team-a'), true, 'admissions carried over');
    assert.ok(second !== undefined);
    assert.equal(second.current, true);
    second.connection.resourceClient(info);
    assert.deepEqual(clients, ['static:east#1', 'static:east#2']);
    assert.equal(keeper.openGenerations(first.key), 2);
    first.release();
    first.release(); // twice is a no-op
    assert.equal(first.signal.aborted, true);
    assert.equal(keeper.openGenerations(first.key), 1);
    assert.equal(keeper.leases(first.key), 1);
    second.release();
    assert.equal(keeper.generation(first.key), undefined, 'closed with its last lease, as idleTimeoutMs 0 does');
  });

  it('removes a cluster on demand: listeners hear it, leases stop being current, the next acquire connects anew', async () => {
    const keeper = new FakeClusters({ client: (_key, info) => new FakeResourceClient({ info }) });
    const heard: string[] = [];
    keeper.subscribe((change) => { heard.push(`${change.type} ${change.key}`); });
    const lease = await keeper.acquire(east, { ownerNamespace: 'team-a' });
    await keeper.remove(lease.key);
    assert.deepEqual(heard, ['removed static:east']);
    assert.equal(lease.current, false);
    assert.equal(keeper.retain(lease.key), undefined);
    lease.release();
    const again = await keeper.acquire(east, { ownerNamespace: 'team-a' });
    assert.equal(keeper.generation(again.key), 2);
    again.release();
  });

  it('admits each caller through `admit`; a refusal is not remembered', async () => {
    let refuse = true;
    const keeper = new FakeClusters({
      client: (_key, info) => new FakeResourceClient({ info }),
      admit: (_key, ownerNamespace) => {
        if (refuse && ownerNamespace === 'team-b') throw new KubeApiError({ cluster: 'east', statusCode: 403 });
      },
    });
    const a = await keeper.acquire(east, { ownerNamespace: 'team-a' });
    await assert.rejects(keeper.acquire(east, { ownerNamespace: 'team-b' }), (err: unknown) => err instanceof KubeApiError && err.statusCode === 403);
    assert.equal(keeper.leases(a.key), 1, 'the refused caller holds nothing');
    refuse = false;
    const b = await keeper.acquire(east, { ownerNamespace: 'team-b' });
    assert.equal(keeper.isAdmitted(a.key, 'team-b'), true);
    a.release();
    b.release();
  });

  it('discovers what `discover` serves, refuses requests it has no answer for, and refuses everything once closed', async () => {
    const keeper = new FakeClusters({ client: (_key, info) => new FakeResourceClient({ info }), discover: () => undefined });
    const lease = await keeper.acquire(east, { ownerNamespace: 'team-a' });
    await assert.rejects(lease.connection.resolve(configMaps), UnknownKindError);
    await assert.rejects(lease.connection.request({ method: 'GET', path: '/api/v1/namespaces' }), /no answer for GET \/api\/v1\/namespaces/);
    await keeper.close();
    assert.equal(lease.signal.aborted, true);
    await assert.rejects(keeper.acquire(east, { ownerNamespace: 'team-a' }), ClosedError);
  });
});
