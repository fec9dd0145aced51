// Objects the API server accepts are cached, or skipped alone: freezing walks without recursion, so
// nesting as deep as the apiserver allows is cached; an object that still cannot be taken is left
// out with an ObjectSkippedError naming cluster, GVK and object, and the rest of the cache goes on.
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { FakeResourceClient } from '../transport/testing.ts';
import type { KubeObject } from '../transport/index.ts';
import { KubeApiError, ObjectSkippedError, type GroupVersionKind } from '../util/index.ts';
import { deepFreeze, ResourceInformer, stripManagedFields, type InformerHandler } from './index.ts';
import { settle } from '../../fixtures/support/index.ts';

const HELMRELEASE: GroupVersionKind = { group: 'helm.toolkit.fluxcd.io', version: 'v2', kind: 'HelmRelease' };
const info = { gvk: HELMRELEASE, resource: 'helmreleases', namespaced: true, verbs: ['list', 'watch'] } as const;

/** `{ values: { a: { a: ... { leaf: 'bottom' } } } }`, `depth` objects deep, built without recursion. */
function nested(depth: number): Record<string, unknown> {
  let inner: Record<string, unknown> = { leaf: 'bottom' };
  for (let i = 1; i < depth; i++) inner = i % 2 === 0 ? { a: inner } : { a: [inner] };
  return inner;
}

/** The innermost object of {@link nested}, walked without recursion. */
function bottom(value: unknown): { readonly obj: Record<string, unknown>; readonly depth: number } {
  let current = value as Record<string, unknown>;
  let depth = 1;
  for (;;) {
    const next = current.a;
    if (next === undefined) return { obj: current, depth };
    current = (Array.isArray(next) ? next[0] : next) as Record<string, unknown>;
    depth++;
  }
}

function release(name: string, spec: Record<string, unknown> = { chart: 'web' }): KubeObject {
  return { metadata: { namespace: 'flux-system', name }, spec };
}

const running: ResourceInformer[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((i) => i.stop()));
});

describe('deeply nested objects', () => {
  it('deepFreeze freezes 100 000 levels without recursion', () => {
    const value = nested(100_000);
    assert.equal(deepFreeze(value), value);
    const { obj, depth } = bottom(value);
    assert.equal(depth, 100_000);
    assert.ok(Object.isFrozen(obj) && Object.isFrozen(value));
    assert.throws(() => { (obj as { leaf: string }).leaf = 'changed'; }, TypeError);
  });

  it('deepFreeze walks a shared part once and stops at frozen parts', () => {
    const shared = { x: [1, 2] };
    const value = { a: shared, b: shared, c: Object.freeze({ d: { e: 1 } }) };
    deepFreeze(value);
    assert.ok(Object.isFrozen(shared) && Object.isFrozen(shared.x));
    assert.equal(Object.isFrozen(value.c.d), false, 'an already frozen part is not walked again');
  });

  it('a HelmRelease nested 9 000 deep (LIST) and 20 000 deep (watch) is cached and frozen; the others beside it too', async () => {
    const client = new FakeResourceClient({ cluster: 'deep', info });
    client.upsert(release('web'));
    client.upsert(release('deep', { chart: 'x', values: nested(9_000) }));
    client.upsert(release('zeta'));
    const errors: Error[] = [];
    const informer = new ResourceInformer({ client, transform: stripManagedFields });
    running.push(informer);
    informer.on('error', (e) => errors.push(e));
    informer.start();
    await informer.waitForSync(AbortSignal.timeout(10_000));
    assert.deepEqual(informer.store.keys().sort(), ['flux-system/deep', 'flux-system/web', 'flux-system/zeta']);
    const cached = informer.store.getByName('flux-system', 'deep') as { spec: { values: unknown } };
    const { obj, depth } = bottom(cached.spec.values);
    assert.equal(depth, 9_000);
    assert.equal(obj.leaf, 'bottom');
    assert.ok(Object.isFrozen(obj), 'frozen down to the innermost object');

    await settle();
    client.upsert(release('deeper', { values: nested(20_000) }));
    await settle();
    const deeper = informer.store.getByName('flux-system', 'deeper') as { spec: { values: unknown } } | undefined;
    assert.ok(deeper !== undefined, 'the watch event was cached');
    assert.equal(bottom(deeper.spec.values).depth, 20_000);
    assert.ok(Object.isFrozen(bottom(deeper.spec.values).obj));
    assert.deepEqual(errors, []);
    assert.equal(informer.stats().skipped, 0);
    assert.equal(informer.stats().lastError, undefined);
  });

  it('an object that cannot be taken is skipped alone with a typed error naming cluster, GVK and object', async () => {
    const client = new FakeResourceClient({ cluster: 'deep', info });
    client.upsert(release('good'));
    client.upsert(release('bad'));
    // A transform whose output cannot be frozen (a getter that throws as a stack overflow would).
    const transform = (obj: KubeObject): KubeObject => {
      if (obj.metadata?.name !== 'bad' || (obj.spec as { poison?: boolean } | undefined)?.poison !== true) return obj;
      return Object.defineProperty({ ...obj }, 'boom', { enumerable: true, get: () => { throw new RangeError('Maximum call stack size exceeded'); } });
    };
    const seen: string[] = [];
    const handler: InformerHandler = {
      add: (o) => { seen.push(`add ${o.metadata?.name ?? ''}`); },
      update: (_a, b) => { seen.push(`update ${b.metadata?.name ?? ''}`); },
      delete: (o, unknown) => { seen.push(`delete ${o.metadata?.name ?? ''} ${String(unknown)}`); },
    };
    const errors: Error[] = [];
    const informer = new ResourceInformer({ client, transform });
    running.push(informer);
    informer.addHandler(handler);
    informer.on('error', (e) => errors.push(e));
    informer.start();
    await informer.waitForSync(AbortSignal.timeout(10_000));
    await settle();

    // A watch update of `bad` that cannot be taken: the stale copy goes, the cache carries on.
    client.upsert(release('bad', { poison: true }));
    client.upsert(release('late'));
    await settle();
    assert.deepEqual(informer.store.keys().sort(), ['flux-system/good', 'flux-system/late']);
    assert.deepEqual(seen, ['add bad', 'add good', 'delete bad true', 'add late'], 'the LIST is sorted by key');
    assert.equal(errors.length, 1);
    const err = errors[0];
    assert.ok(err instanceof ObjectSkippedError);
    assert.equal(err.code, 'ERR_OBJECT_SKIPPED');
    assert.equal(err.cluster, 'deep');
    assert.deepEqual(err.gvk, HELMRELEASE);
    assert.deepEqual(err.object, { namespace: 'flux-system', name: 'bad' });
    assert.ok(err.cause instanceof RangeError);
    assert.match(err.message, /cluster deep, helm\.toolkit\.fluxcd\.io\/v2, Kind=HelmRelease: object "flux-system\/bad" left out of the cache/);
    assert.equal(informer.stats().skipped, 1);
    assert.equal(informer.stats().lastError, undefined, 'the cache itself is healthy');
    assert.ok(informer.synced);

    // A relist (after 410 Gone) that still carries the poisoned object leaves it out again, alone.
    client.upsert(release('relisted'), { quiet: true });
    client.stream?.fail(new KubeApiError({ cluster: 'deep', gvk: HELMRELEASE, statusCode: 410, status: { kind: 'Status', reason: 'Expired', code: 410 } }));
    const deadline = Date.now() + 10_000;
    while (informer.store.getByName('flux-system', 'relisted') === undefined && Date.now() < deadline) await settle();
    assert.deepEqual(informer.store.keys().sort(), ['flux-system/good', 'flux-system/late', 'flux-system/relisted']);
    assert.equal(errors.length, 2);
    assert.ok(errors[1] instanceof ObjectSkippedError && errors[1].object.name === 'bad');
  });
});
