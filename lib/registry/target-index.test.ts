import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { cacheKeyOf, objectKeyOf } from './keys.ts';
import { TargetIndex } from './target-index.ts';

const ks = cacheKeyOf('secret:ns/prod', '', { group: 'kustomize.toolkit.fluxcd.io', version: 'v1', kind: 'Kustomization' });
const hr = cacheKeyOf('secret:ns/prod', '', { group: 'helm.toolkit.fluxcd.io', version: 'v2', kind: 'HelmRelease' });
const target = (cacheKey: string, namespace: string, name: string) => ({ cacheKey, objectKey: objectKeyOf(cacheKey, namespace, name) });

describe('TargetIndex', () => {
  it('answers which owners use an object, across namespaces of owners', () => {
    const index = new TargetIndex();
    index.add('team-a/pipe', target(ks, 'apps', 'web'));
    index.add('team-b/pipe', target(ks, 'apps', 'web'));
    index.add('team-b/pipe', target(ks, 'apps', 'web')); // idempotent
    assert.deepEqual([...index.ownersOf(objectKeyOf(ks, 'apps', 'web'))].sort(), ['team-a/pipe', 'team-b/pipe']);
    assert.equal(index.ownersOf(objectKeyOf(ks, 'apps', 'other')).size, 0);
    assert.equal(index.ownerCount(ks), 2);
  });

  it('counts distinct owners per cache, however many targets each has there', () => {
    const index = new TargetIndex();
    index.add('a/p', target(ks, 'apps', 'web'));
    index.add('a/p', target(ks, 'apps', 'api'));
    assert.equal(index.ownerCount(ks), 1);
    assert.deepEqual(index.set('a/p', [target(ks, 'apps', 'api')]), [], 'still uses the cache through api');
    assert.equal(index.ownerCount(ks), 1);
  });

  it('releases the targets an owner no longer declares, and reports caches left unused', () => {
    const index = new TargetIndex();
    index.set('a/p', [target(ks, 'apps', 'web'), target(hr, 'apps', 'web')]);
    index.set('b/p', [target(ks, 'apps', 'web')]);
    assert.deepEqual(index.set('a/p', [target(ks, 'apps', 'web')]), [hr], 'dropping the HelmRelease leaves its cache unused');
    assert.equal(index.ownerCount(hr), 0);
    assert.deepEqual(index.forget('a/p'), [], 'b/p still uses the Kustomization cache');
    assert.deepEqual(index.forget('b/p'), [ks]);
    assert.equal(index.owners, 0);
    assert.equal(index.ownersOf(objectKeyOf(ks, 'apps', 'web')).size, 0);
    assert.deepEqual(index.targetsOf('a/p'), []);
  });

  it('keeps cluster-scoped targets apart from namespaced ones', () => {
    const index = new TargetIndex();
    index.add('a/p', target(ks, '', 'web'));
    assert.equal(index.ownersOf(objectKeyOf(ks, undefined, 'web')).size, 1);
    assert.equal(index.ownersOf(objectKeyOf(ks, 'apps', 'web')).size, 0);
  });
});
