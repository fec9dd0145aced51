// Owner keys: unambiguous across the two forms, and inverted by parseOwnerKey.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ownerKey, parseOwnerKey, type OwnerKey, type OwnerRef } from './index.ts';

describe('owner keys', () => {
  it('encode group, kind, namespace and name, and parseOwnerKey inverts them', () => {
    const owners: OwnerRef[] = [
      { namespace: 'team-a', name: 'web' },
      { namespace: '', name: 'cluster-wide' },
      { group: 'example.com', kind: 'Pipeline', namespace: 'team-a', name: 'web' },
      { group: '', kind: 'ConfigMap', namespace: 'team-a', name: 'web' },
      { group: 'example.com', kind: 'Fleet', namespace: '', name: 'all' },
    ];
    const keys = owners.map(ownerKey);
    assert.equal(new Set(keys).size, owners.length, 'no two owners share a key');
    assert.deepEqual(keys.map(parseOwnerKey), owners);
    assert.equal(ownerKey({ namespace: 'team-a', name: 'web' }), 'team-a/web', 'keys without a kind are unchanged');
  });

  it('are made only by ownerKey (checked by the compiler: npm run typecheck)', () => {
    // @ts-expect-error -- a hand-built key is not an OwnerKey, however right it looks.
    const byHand: OwnerKey = 'team-a/web';
    const made: OwnerKey = ownerKey({ namespace: 'team-a', name: 'web' });
    assert.equal(made, byHand, 'the brand is the compiler\'s alone: the key is the same string at run time');
  });

  it('refuse what would be ambiguous', () => {
    assert.throws(() => ownerKey({ group: 'a/b', kind: 'K', namespace: 'n', name: 'x' }), TypeError);
    assert.throws(() => ownerKey({ group: 'g', namespace: 'n', name: 'x' }), TypeError);
    // The compiler lets only ownerKey() make a key; a caller without it (plain JavaScript) may pass anything.
    for (const bad of ['x', 'a/b/c', 'n/', 'g//n/x', 'a/b/c/d/e']) assert.throws(() => parseOwnerKey(bad as OwnerKey), TypeError, bad);
  });
});
