// The re-check under the lock, counted on the server's side (the in-memory keeper, no sockets): a
// build that outlived a credential rotation must take the cache the rotation published, not
// publish its own over it. Overwriting would leave the rotation's informer watching, detached
// from the table and owned by no one, for the life of the process: recheck.test.ts sees the
// reader and the owners, this test sees the watches and leases left open.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ClusterRef } from '../cluster/index.ts';
import { FakeClusters } from '../cluster/testing.ts';
import { eventually } from '../../e2e/harness/index.ts';
import { FakeResourceClient } from '../transport/testing.ts';
import { FakeClock, type GroupVersionKind } from '../util/index.ts';
import { Registry } from './index.ts';

const configMaps: GroupVersionKind = { group: '', version: 'v1', kind: 'ConfigMap' };
const east: ClusterRef = { kind: 'static', name: 'east' };
const target = { gvk: configMaps, namespace: 'apps', name: 'settings' };

describe('Registry re-check under the lock: watches on the server', () => {
  it('leaves exactly one watch and one lease when a build outlived the rotation that published its cache', async (t) => {
    let admitLate = (): void => undefined;
    const lateAdmitted = new Promise<void>((resolve) => { admitLate = resolve; });
    const asked: string[] = [];
    // Each client serves `apps/settings` naming the client, so the test sees which cache the table publishes.
    const clients: FakeResourceClient[] = [];
    const keeper = new FakeClusters({
      client: (_key, info) => {
        const client = new FakeResourceClient({ info });
        client.upsert({ metadata: { name: 'settings', namespace: 'apps' }, data: { client: String(clients.length) } });
        clients.push(client);
        return client;
      },
      // team-b's admission is held (on every generation) until the test lets it go.
      admit: (_key, ownerNamespace) => {
        asked.push(ownerNamespace);
        return ownerNamespace === 'team-b' ? lateAdmitted : undefined;
      },
    });
    const registry = new Registry({ clusters: keeper, clock: new FakeClock(Date.now()) });
    t.after(async () => {
      await registry.close();
      await keeper.close();
    });
    const key = keeper.connectionKey(east, 'team-a');
    const openWatches = (): number => clients.reduce((sum, client) => sum + client.streams.length, 0);

    const first = await registry.watchTargetAndGetReader(east, target, { namespace: 'team-a', name: 'first' });
    await first.waitForSync(AbortSignal.timeout(10_000));

    // team-b's build holds a lease on generation 1 while it waits for its admission.
    const late = registry.watchTargetAndGetReader(east, target, { namespace: 'team-b', name: 'late' });
    await eventually('team-b is being admitted', () => asked.includes('team-b'));
    // The rotation rebuilds the cache on generation 2 (client 1) and publishes it; its watch opens.
    await keeper.rotate(key);
    await eventually('the rotated cache watches', () => clients[1]?.streams.length === 1);
    assert.equal(clients[0]?.streams.length, 0, 'the generation-1 cache stopped');

    // Now the build goes on: it finds its generation replaced, builds on generation 2 (client 2)
    // and reaches the lock after the rotation published the key.
    admitLate();
    const reader = await late;
    assert.equal(reader, first, 'the late caller gets the one reader of the key');
    await reader.waitForSync(AbortSignal.timeout(10_000));
    assert.equal(clients.length, 3, 'the late build made a cache of its own');
    const served = reader.get('apps', 'settings') as { readonly data?: { readonly client?: string } } | undefined;
    const published = clients[Number(served?.data?.client)];
    assert.ok(published !== undefined);
    await eventually('the published cache watches', () => published.streams.length === 1);
    assert.equal(openWatches(), 1, 'exactly one watch open on the server: no informer left running outside the table');
    assert.equal(keeper.leases(key), 1, "exactly one lease held: the published cache's");
    assert.equal(clients.indexOf(published), 1, "the table still holds the rotation's cache");
    assert.equal(registry.caches().length, 1);
    assert.equal(registry.caches()[0]?.owners, 2);
  });
});
