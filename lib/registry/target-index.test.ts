import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { KubeObject } from '../transport/index.ts';
import type { ConnectionKey } from '../cluster/index.ts';
import { cacheKeyOf, objectKeyOf, ownerKey, type CacheKey, type OwnerKey } from './keys.ts';
import { indexedTarget, TargetIndex } from './target-index.ts';

const prod = 'secret:ns/prod' as ConnectionKey;
const ks = cacheKeyOf(prod, '', { group: 'kustomize.toolkit.fluxcd.io', version: 'v1', kind: 'Kustomization' });
const hr = cacheKeyOf(prod, '', { group: 'helm.toolkit.fluxcd.io', version: 'v2', kind: 'HelmRelease' });
// Owner keys as the registry makes them: `o('a/p')` is the owner p in namespace a.
const o = (namespaceName: string): OwnerKey => {
  const [namespace = '', name = ''] = namespaceName.split('/');
  return ownerKey({ namespace, name });
};
const target = (cacheKey: CacheKey, namespace: string, name: string) => ({ cacheKey, objectKey: objectKeyOf(cacheKey, namespace, name) });

describe('TargetIndex', () => {
  it('answers which owners use an object, across namespaces of owners', () => {
    const index = new TargetIndex();
    index.add(o('team-a/pipe'), target(ks, 'apps', 'web'));
    index.add(o('team-b/pipe'), target(ks, 'apps', 'web'));
    index.add(o('team-b/pipe'), target(ks, 'apps', 'web')); // idempotent
    assert.deepEqual([...index.ownersOf(objectKeyOf(ks, 'apps', 'web'))].sort(), ['team-a/pipe', 'team-b/pipe']);
    assert.equal(index.ownersOf(objectKeyOf(ks, 'apps', 'other')).size, 0);
    assert.equal(index.ownerCount(ks), 2);
  });

  it('counts distinct owners per cache, however many targets each has there', () => {
    const index = new TargetIndex();
    index.add(o('a/p'), target(ks, 'apps', 'web'));
    index.add(o('a/p'), target(ks, 'apps', 'api'));
    assert.equal(index.ownerCount(ks), 1);
    assert.deepEqual(index.set(o('a/p'), [target(ks, 'apps', 'api')]), [], 'still uses the cache through api');
    assert.equal(index.ownerCount(ks), 1);
  });

  it('releases the targets an owner no longer declares, and reports caches left unused', () => {
    const index = new TargetIndex();
    index.set(o('a/p'), [target(ks, 'apps', 'web'), target(hr, 'apps', 'web')]);
    index.set(o('b/p'), [target(ks, 'apps', 'web')]);
    assert.deepEqual(index.set(o('a/p'), [target(ks, 'apps', 'web')]), [hr], 'dropping the HelmRelease leaves its cache unused');
    assert.equal(index.ownerCount(hr), 0);
    assert.deepEqual(index.forget(o('a/p')), [], 'b/p still uses the Kustomization cache');
    assert.deepEqual(index.forget(o('b/p')), [ks]);
    assert.equal(index.owners, 0);
    assert.equal(index.ownersOf(objectKeyOf(ks, 'apps', 'web')).size, 0);
    assert.deepEqual(index.targetsOf(o('a/p')), []);
  });

  it('keeps cluster-scoped targets apart from namespaced ones', () => {
    const index = new TargetIndex();
    index.add(o('a/p'), target(ks, '', 'web'));
    assert.equal(index.ownersOf(objectKeyOf(ks, undefined, 'web')).size, 1);
    assert.equal(index.ownersOf(objectKeyOf(ks, 'apps', 'web')).size, 0);
  });

  it('files set targets per cache and namespace, and wakes their owners for objects entering or leaving them', () => {
    const index = new TargetIndex();
    const gvk = { group: 'kustomize.toolkit.fluxcd.io', version: 'v1', kind: 'Kustomization' };
    const web = indexedTarget(index, ks, { gvk, namespace: 'apps', labelSelector: 'tier=web' });
    index.set(o('a/p'), [web]);
    index.set(o('b/p'), [indexedTarget(index, ks, { gvk, namespace: 'apps', labelSelector: 'tier = web ' })]);
    index.set(o('c/p'), [indexedTarget(index, ks, { gvk })]); // every namespace
    index.set(o('d/p'), [indexedTarget(index, hr, { gvk, namespace: 'apps' })]); // another cache
    const obj = (namespace: string, labels: Record<string, string>): KubeObject => ({ metadata: { namespace, name: 'x', labels } });
    const woken = (namespace: string, now: Record<string, string>, before?: Record<string, string>): string[] => {
      const owners = new Set<OwnerKey>();
      index.wake(ks, objectKeyOf(ks, namespace, 'x'), obj(namespace, now), before === undefined ? undefined : obj(namespace, before), (o) => { owners.add(o); });
      return [...owners].sort();
    };
    assert.deepEqual(woken('apps', { tier: 'web' }), ['a/p', 'b/p', 'c/p']);
    assert.deepEqual(woken('other', { tier: 'web' }), ['c/p'], 'a namespace set sees only its namespace');
    assert.deepEqual(woken('apps', {}, { tier: 'web' }), ['a/p', 'b/p', 'c/p'], 'leaving the set wakes its owners');
    assert.deepEqual(woken('apps', { tier: 'db' }, {}), ['c/p']);
    assert.equal(index.ownerCount(ks), 3);
    assert.deepEqual([...index.namespacesOfCache(ks)].sort(), ['', 'apps']);
    assert.deepEqual(index.set(o('a/p'), []), [], 'b/p and c/p still use the cache');
    assert.deepEqual(woken('apps', { tier: 'web' }), ['b/p', 'c/p']);
    assert.deepEqual(index.forget(o('b/p')), []);
    assert.deepEqual(index.forget(o('c/p')), [ks]);
    assert.deepEqual(woken('apps', { tier: 'web' }), []);
    assert.deepEqual(index.forget(o('d/p')), [hr]);
    assert.equal(index.owners, 0);
  });

  it('never confuses a set target with an object target of the same cache', () => {
    const index = new TargetIndex();
    const gvk = { group: '', version: 'v1', kind: 'ConfigMap' };
    index.add(o('a/p'), indexedTarget(index, ks, { gvk, namespace: 'apps', name: 'web' }));
    index.add(o('a/p'), indexedTarget(index, ks, { gvk, namespace: 'apps' }));
    assert.equal(index.targetsOf(o('a/p')).length, 2);
    assert.deepEqual(index.set(o('a/p'), [indexedTarget(index, ks, { gvk, namespace: 'apps' })]), [], 'still uses the cache through the set');
    assert.equal(index.ownersOf(objectKeyOf(ks, 'apps', 'web')).size, 0);
    assert.equal(index.ownerCount(ks), 1);
  });
});
