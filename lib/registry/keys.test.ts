// Owner keys: unambiguous across the two forms, and inverted by parseOwnerKey.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ownerKey, parseOwnerKey, type OwnerRef } from './index.ts';

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

  it('refuse what would be ambiguous', () => {
    assert.throws(() => ownerKey({ group: 'a/b', kind: 'K', namespace: 'n', name: 'x' }), TypeError);
    assert.throws(() => ownerKey({ group: 'g', namespace: 'n', name: 'x' }), TypeError);
    for (const bad of ['x', 'a/b/c', 'n/', 'g//n/x', 'a/b/c/d/e']) assert.throws(() => parseOwnerKey(bad), TypeError, bad);
  });
});
