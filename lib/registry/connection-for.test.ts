import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidClusterRefError, StaticProvider, type ClusterAccess, type ClusterProvider, type ClusterRef, type ResolveContext } from '../cluster/index.ts';
import { ClosedError, FakeClock } from '../util/index.ts';
import { registryWithKeeper } from './testing.ts';
import { kubeconfigJson } from '../../fixtures/support/index.ts';

/** Counts resolutions and can hold them until released. */
class CountingProvider implements ClusterProvider {
  calls = 0;
  readonly #inner = new StaticProvider({ clusters: { east: kubeconfigJson({ name: 'c', server: 'https://127.0.0.1:6443', caPem: undefined, user: 'u', token: 'not-a-secret' }) } });
  #gate: Promise<void> = Promise.resolve();
  release: () => void = () => undefined;

  hold(): void {
    this.#gate = new Promise((resolve) => { this.release = resolve; });
  }

  async resolve(ref: ClusterRef, context: ResolveContext): Promise<ClusterAccess> {
    this.calls += 1;
    await this.#gate;
    return this.#inner.resolve(ref, context);
  }
}

const east: ClusterRef = { kind: 'static', name: 'east' };

describe('Registry.connectionFor', () => {
  it('hands out the one connection of a cluster, resolved once however many ask at once', async () => {
    const provider = new CountingProvider();
    const registry = registryWithKeeper({ provider, clock: new FakeClock(), credentialCheckIntervalMs: 0 });
    try {
      provider.hold();
      const pending = [registry.connectionFor(east, { namespace: 'team-a', name: 'p' }), registry.connectionFor(east, { namespace: 'team-a', name: 'p' })];
      provider.release();
      const [a, b] = await Promise.all(pending);
      assert.ok(a !== undefined && a === b);
      assert.equal(new URL(a.server).host, '127.0.0.1:6443');
      assert.equal(await registry.connectionFor(east, { namespace: 'team-a', name: 'p' }), a, 'a known, admitted cluster is served without resolving again');
      assert.equal(provider.calls, 1);
      // Another owner namespace runs the provider's admission again but shares the connection.
      assert.equal(await registry.connectionFor(east, { namespace: 'team-b', name: 'p' }), a);
      assert.equal(provider.calls, 2);
    } finally {
      await registry.close();
    }
  });

  it('surfaces the provider\'s refusal, and remembers nothing failed', async () => {
    const provider = new CountingProvider();
    const registry = registryWithKeeper({ provider, clock: new FakeClock(), credentialCheckIntervalMs: 0 });
    try {
      await assert.rejects(registry.connectionFor({ kind: 'static', name: 'nowhere' }, { namespace: 'team-a', name: 'p' }), InvalidClusterRefError);
      await assert.rejects(registry.connectionFor({ kind: 'static', name: 'nowhere' }, { namespace: 'team-a', name: 'p' }), InvalidClusterRefError);
      assert.equal(provider.calls, 2, 'the second call asked the provider again: the failure was not remembered');
    } finally {
      await registry.close();
    }
  });

  it('stops waiting when the caller\'s signal aborts, and refuses after close()', async () => {
    const provider = new CountingProvider();
    const registry = registryWithKeeper({ provider, clock: new FakeClock(), credentialCheckIntervalMs: 0 });
    provider.hold();
    const controller = new AbortController();
    const waiting = registry.connectionFor(east, { namespace: 'team-a', name: 'p' }, controller.signal);
    controller.abort(new Error('caller gave up'));
    await assert.rejects(waiting, /caller gave up/);
    provider.release();
    // The shared resolution carried on without the caller: the cluster is connected.
    const connection = await registry.connectionFor(east, { namespace: 'team-a', name: 'p' });
    assert.equal(provider.calls, 1);
    await registry.close();
    await assert.rejects(registry.connectionFor(east, { namespace: 'team-a', name: 'p' }), ClosedError);
    await assert.rejects(connection.request({ method: 'GET', path: '/api' }), ClosedError, 'close() closed the connection it handed out');
  });
});
