// What the demo tells of a sharded run, from the replicas' /debug/shards: who owns what, and when
// the split has settled (every Pipeline owned by exactly one replica, every peer seen, no handoff).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { describeSplit, parseReplicas, shortIdentity, TEAM_PIPELINES, type ReplicaShards } from './replicas.ts';

const peers = [{ identity: 'host_a', live: true }, { identity: 'host_b', live: true }];
function shards(identity: string, owned: string[], extra: Partial<ReplicaShards> = {}): ReplicaShards {
  return { identity, joined: true, peers, owned, handoff: [], unowned: [], orphaned: [], ...extra };
}
const keys = ['delivery/podinfo', 'team-a/api', 'team-a/web'];

describe('the demo with --replicas', () => {
  it('tells each replica\'s Pipelines once every one is owned by exactly one replica', () => {
    const split = describeSplit(['replica-1', 'replica-2'], [shards('host_a', ['team-a/web', 'delivery/podinfo']), shards('host_b', ['team-a/api'])], keys);
    assert.equal(split.settled, true);
    assert.deepEqual(split.lines, ['replica-1 (host_a): 2 Pipelines: delivery/podinfo, team-a/web', 'replica-2 (host_b): 1 Pipeline: team-a/api']);
  });

  it('waits while a Pipeline has no owner or two, a handoff runs, or a replica does not see every peer live', () => {
    const cases: [ReplicaShards[], string][] = [
      [[shards('host_a', ['team-a/web']), shards('host_b', ['team-a/api'])], '1 Pipeline(s) to be owned'],
      [[shards('host_a', keys), shards('host_b', ['team-a/api'])], '1 Pipeline(s) claimed twice to settle'],
      [[shards('host_a', ['delivery/podinfo', 'team-a/web'], { handoff: ['team-a/api'] }), shards('host_b', ['team-a/api'])], '1 handoff(s) to finish'],
      [[shards('host_a', ['delivery/podinfo', 'team-a/web'], { peers: peers.slice(0, 1) }), shards('host_b', ['team-a/api'])], '1 replica(s) to see all 2 peers live'],
    ];
    for (const [answers, waiting] of cases) {
      const split = describeSplit(['replica-1', 'replica-2'], answers, keys);
      assert.equal(split.settled, false, waiting);
      assert.equal(split.waitingFor, waiting);
    }
  });

  it('takes 1 to 5 replicas, names replicas by the end of their identity, and runs 12 more Pipelines in three namespaces', () => {
    assert.equal(parseReplicas('3'), 3);
    for (const bad of ['0', '6', '2.5', 'three', '']) assert.throws(() => parseReplicas(bad), /--replicas must be an integer from 1 to 5/);
    assert.equal(shortIdentity('demo-host_1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed'), '…fbbd4bed');
    assert.equal(shortIdentity('replica-a'), 'replica-a');
    assert.equal(TEAM_PIPELINES.length, 12);
    assert.equal(new Set(TEAM_PIPELINES.map((p) => p.namespace)).size, 3);
    assert.equal(new Set(TEAM_PIPELINES.map((p) => p.release)).size, 12, 'each its own HelmRelease');
  });
});
