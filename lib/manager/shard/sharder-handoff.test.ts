// Mass handoffs: what the sharding benchmark found at 1,000 keys (a join releasing hundreds of
// fences starved the peer Lease's renewals; a second run under the same identity left the first
// run's fences where no one would take them).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RecordingLogger } from '../../../fixtures/support/index.ts';
import { Group, timing } from './group.test-util.ts';
import type { MemoryLeaseClient } from './memory-store.ts';
import { peerLeaseName } from './names.ts';
import { rendezvousOwner } from './rendezvous.ts';
import type { ShardLease, ShardLeaseDraft, ShardLeaseStore } from './store.ts';

const tenants = (n: number): string[] => Array.from({ length: n }, (_, i) => `tenant-${i}`);

/** A store whose DELETEs wait at a gate while it is closed, counting how many wait at once. */
class GatedDeletes implements ShardLeaseStore {
  readonly description = 'gated';
  readonly #inner: MemoryLeaseClient;
  #open = false;
  #waiting: (() => void)[] = [];
  inFlight = 0;
  maxInFlight = 0;

  constructor(inner: MemoryLeaseClient) {
    this.#inner = inner;
  }

  close(): void {
    this.#open = false;
  }

  open(): void {
    this.#open = true;
    for (const go of this.#waiting.splice(0)) go();
  }

  list(signal: AbortSignal): Promise<readonly ShardLease[]> {
    return this.#inner.list(signal);
  }

  create(draft: ShardLeaseDraft, signal: AbortSignal): Promise<ShardLease> {
    return this.#inner.create(draft, signal);
  }

  update(draft: ShardLeaseDraft, resourceVersion: string, signal: AbortSignal): Promise<ShardLease> {
    return this.#inner.update(draft, resourceVersion, signal);
  }

  async delete(name: string, resourceVersion: string, signal: AbortSignal): Promise<void> {
    this.inFlight += 1;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    try {
      if (!this.#open) await new Promise<void>((resolve) => { this.#waiting.push(resolve); });
      await this.#inner.delete(name, resourceVersion, signal);
    } finally {
      this.inFlight -= 1;
    }
  }
}

describe('Sharder in a mass handoff', () => {
  it('keeps the group while the group\'s connection is stuck: the peer Lease is renewed on its own store', async () => {
    const group = new Group(tenants(30));
    const a = group.start('a', { heartbeat: group.leases.client('a-heartbeat') });
    await group.until('convergence', () => group.converged());
    const owned = group.ownedBy('a');
    a.client.mode = 'hanging'; // reads and fence writes stuck, as behind hundreds of queued requests
    await group.advance(3 * timing.renewDeadlineMs);
    assert.equal(a.settled(), undefined, 'the run goes on: its peer Lease was renewed');
    assert.deepEqual(group.ownedBy('a'), owned, 'it still acts for its keys');
    a.client.mode = 'connected';
    a.stop(); // the stuck requests end at their own deadline, then the fences are released
    await group.until('a clean stop', () => a.settled() === 'released', 3 * timing.renewDeadlineMs);
  });

  it('without a store of its own for the peer Lease, the same stall loses the group (the control)', async () => {
    const group = new Group(tenants(30));
    const a = group.start('a');
    await group.until('convergence', () => group.converged());
    a.client.mode = 'hanging';
    group.boundMs = Infinity; // its keys are orphaned on purpose until its lease lapses
    await group.advance(3 * timing.renewDeadlineMs);
    assert.equal(a.settled(), 'lost');
  });

  it('releases at most 8 fences at once when a join moves keys away', async () => {
    const group = new Group(tenants(120));
    const gated = new GatedDeletes(group.leases.client('a'));
    const a = group.start('a', { leases: gated, heartbeat: group.leases.client('a-heartbeat'), fenceTakeBurst: 200, maxFenceTakesPerSecond: 200 });
    gated.open();
    await group.until('a holds every key', () => group.ownedBy('a').length === 120);
    gated.close();
    group.start('b', { fenceTakeBurst: 200, maxFenceTakesPerSecond: 200 });
    group.boundMs = Infinity; // the gate holds the released keys back on purpose
    await group.advance(3 * timing.retryPeriodMs);
    assert.equal(gated.inFlight, 8, 'eight releases wait at the gate, the others wait for a slot');
    gated.open();
    await group.until('convergence', () => group.converged());
    assert.equal(gated.maxInFlight, 8);
    assert.ok(group.ownedBy('b').length > 30, `b took its share (${group.ownedBy('b').length})`);
    assert.equal(a.settled(), undefined, 'a kept the group throughout');
  });

  it('renews its peer Lease until a clean stop has released every fence, however long that takes', async () => {
    const group = new Group(tenants(120));
    const gated = new GatedDeletes(group.leases.client('a'));
    const logger = new RecordingLogger();
    const a = group.start('a', { leases: gated, logger, fenceTakeBurst: 200, maxFenceTakesPerSecond: 200 });
    gated.open();
    await group.until('a holds every key', () => group.ownedBy('a').length === 120);
    gated.close();
    a.stop();
    group.boundMs = Infinity; // the gate holds the fences back on purpose
    await group.advance(3 * timing.renewDeadlineMs);
    assert.equal(a.settled(), undefined, 'still releasing');
    assert.deepEqual(logger.lines.filter((l) => l.level === 'error').map((l) => l.message), [], 'the group was not lost while releasing');
    gated.open(); // the releases stuck at the gate timed out meanwhile: they are tried again
    await group.until('a clean stop', () => a.settled() === 'released');
    assert.deepEqual(group.leases.snapshot(), [], 'every fence released, then the peer Lease deleted');
  });

  it('runs again after losing the group, though its last renewal landed after it gave up on it', async () => {
    const group = new Group(tenants(10));
    const a = group.start('a');
    await group.until('convergence', () => group.converged());
    a.client.mode = 'hanging';
    group.boundMs = Infinity;
    await group.until('the run to end', () => a.settled() === 'lost');
    // The renewal that timed out reached the store after all: the peer Lease is at a newer resourceVersion.
    const peer = group.leases.get(peerLeaseName('test', 'a'));
    assert.ok(peer !== undefined);
    group.leases.update(peer, peer.resourceVersion, 'a');
    a.client.mode = 'connected';
    const controller = new AbortController();
    const again = a.sharder.run(controller.signal);
    const joinedIn = await group.until('the second run to own every key', () => group.ownedBy('a').length === 10, 20_000);
    assert.ok(joinedIn <= 3 * timing.retryPeriodMs, `joined again ${joinedIn} ms after starting`);
    controller.abort();
    await group.advance(2_000);
    assert.equal(await again, 'released');
  });

  it('a second run under the same identity joins at once and lets go of the first run\'s fences that are not its own any more', async () => {
    const group = new Group(tenants(40));
    const first = group.start('a');
    await group.until('convergence', () => group.converged());
    first.client.mode = 'hanging'; // the first run ends without releasing anything
    group.boundMs = Infinity;
    await group.until('the first run ended', () => first.settled() === 'lost');
    first.client.mode = 'connected';
    group.start('b');
    group.start('a'); // the same identity again (a StatefulSet pod restarted under its name)
    group.boundMs = timing.leaseDurationMs + 4 * timing.retryPeriodMs;
    const peers = [{ identity: 'a', weight: 1 }, { identity: 'b', weight: 1 }];
    const ofB = [...group.keys].filter((k) => rendezvousOwner(k, peers) === 'b').sort();
    assert.ok(ofB.length > 5);
    await group.until('b acts for every key assigned to it', () => group.converged() && group.ownedBy('b').join() === ofB.join(), 30_000);
    const fences = group.leases.snapshot().filter((l) => l.role === 'fence');
    assert.equal(fences.length, 40);
    assert.ok(fences.every((f) => f.record.holderIdentity === (group.ownedBy('a').includes(f.key) ? 'a' : 'b')), 'every fence names the replica acting for its key');
  });
});
