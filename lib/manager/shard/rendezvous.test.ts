import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { seededRandom } from '../../util/seeded-random.ts';
import { rendezvousOwner, type WeightedPeer } from './rendezvous.ts';

const keys = (n: number, prefix = 'ns'): string[] => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);

function owners(list: readonly string[], peers: readonly WeightedPeer[]): Map<string, string | undefined> {
  return new Map(list.map((k) => [k, rendezvousOwner(k, peers)]));
}

function shuffled<T>(items: readonly T[], random: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

describe('weighted rendezvous assignment', () => {
  it('gives the same owner for the same peers in any order', () => {
    const random = seededRandom(25);
    const peers: WeightedPeer[] = [{ identity: 'a', weight: 1 }, { identity: 'b', weight: 2 }, { identity: 'c', weight: 1 }, { identity: 'd', weight: 3 }];
    const list = keys(2_000);
    const reference = owners(list, peers);
    for (let round = 0; round < 5; round++) assert.deepEqual(owners(list, shuffled(peers, random)), reference, `seed 25, round ${round}`);
    assert.equal(rendezvousOwner('k', []), undefined);
  });

  it('spreads 100k keys within a few per cent of the weights (1, 1, 2)', () => {
    const peers: WeightedPeer[] = [{ identity: 'replica-a', weight: 1 }, { identity: 'replica-b', weight: 1 }, { identity: 'replica-c', weight: 2 }];
    const counts = new Map<string, number>();
    const n = 100_000;
    for (const key of keys(n, 'tenant')) {
      const owner = rendezvousOwner(key, peers) ?? '';
      counts.set(owner, (counts.get(owner) ?? 0) + 1);
    }
    for (const peer of peers) {
      const share = (counts.get(peer.identity) ?? 0) / n;
      const expected = peer.weight / 4;
      assert.ok(Math.abs(share - expected) / expected < 0.03, `${peer.identity}: share ${share.toFixed(4)}, expected ${expected}`);
    }
  });

  it('moves only keys to a new peer when one joins, about 1/(N+1) of them', () => {
    const before: WeightedPeer[] = [{ identity: 'a', weight: 1 }, { identity: 'b', weight: 1 }, { identity: 'c', weight: 1 }];
    const after = [...before, { identity: 'd', weight: 1 }];
    const list = keys(20_000);
    const was = owners(list, before);
    const now = owners(list, after);
    let moved = 0;
    for (const key of list) {
      if (was.get(key) === now.get(key)) continue;
      moved += 1;
      assert.equal(now.get(key), 'd', `${key} moved from ${was.get(key)} to ${now.get(key)}, not to the new peer`);
    }
    assert.ok(Math.abs(moved / list.length - 1 / 4) < 0.02, `moved ${moved} of ${list.length}`);
  });

  it('moves only the keys of a peer that leaves', () => {
    const before: WeightedPeer[] = [{ identity: 'a', weight: 2 }, { identity: 'b', weight: 1 }, { identity: 'c', weight: 1 }, { identity: 'd', weight: 1 }];
    const after = before.filter((p) => p.identity !== 'b');
    const list = keys(20_000);
    const was = owners(list, before);
    const now = owners(list, after);
    for (const key of list) {
      if (was.get(key) === 'b') assert.notEqual(now.get(key), 'b');
      else assert.equal(now.get(key), was.get(key), `${key} moved though its owner stayed`);
    }
  });

  it('follows a change of weight with only the keys the weight calls for', () => {
    const before: WeightedPeer[] = [{ identity: 'a', weight: 1 }, { identity: 'b', weight: 1 }];
    const after: WeightedPeer[] = [{ identity: 'a', weight: 3 }, { identity: 'b', weight: 1 }];
    const list = keys(20_000);
    const was = owners(list, before);
    const now = owners(list, after);
    for (const key of list) if (was.get(key) === 'a') assert.equal(now.get(key), 'a', 'a heavier peer keeps its keys');
    const share = [...now.values()].filter((o) => o === 'a').length / list.length;
    assert.ok(Math.abs(share - 0.75) < 0.02, `a owns ${share}`);
  });
});
