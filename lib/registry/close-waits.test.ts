// `close()` resolves only once every informer has stopped: the caller closes the keeper (and its
// sockets) right after, so a close that returned early would leave watches being torn down on a
// closed connection. The server here (the in-memory keeper) holds one cache's watch open after
// its request was aborted until the test lets it close, so that informer's stop is slow while
// the other cache's is quick: close() must wait for the slowest, not the first.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { ClusterRef } from '../cluster/index.ts';
import { FakeClusters } from '../cluster/testing.ts';
import { eventually } from '../../e2e/harness/index.ts';
import type { KubeList, ListOptions, ResourceClient, ResourceInfo, WatchEvent, WatchOptions } from '../transport/index.ts';
import { FakeResourceClient } from '../transport/testing.ts';
import { abortReason, FakeClock, type GroupVersionKind } from '../util/index.ts';
import { Registry } from './index.ts';

const configMaps: GroupVersionKind = { group: '', version: 'v1', kind: 'ConfigMap' };
const east: ClusterRef = { kind: 'static', name: 'east' };
const owner = { namespace: 'team-a', name: 'web' };
const secrets: GroupVersionKind = { group: '', version: 'v1', kind: 'Secret' };

/**
 * A resource client whose watches, when `lingering`, outlive their request's abort until
 * {@link letClose}: the abort reaches the server (`aborted` resolves), the stream ends only when
 * the test lets it. Otherwise they end on the abort, as usual.
 */
class LingeringWatches implements ResourceClient {
  readonly inner: FakeResourceClient;
  readonly aborted: Promise<void>;
  #abortSeen: () => void = () => undefined;
  #letClose: () => void = () => undefined;
  readonly #closing: Promise<void>;

  constructor(info: ResourceInfo, lingering: boolean) {
    this.inner = new FakeResourceClient({ info });
    this.aborted = new Promise((resolve) => { this.#abortSeen = resolve; });
    this.#closing = new Promise((resolve) => { this.#letClose = resolve; });
    if (!lingering) this.#letClose();
  }

  get cluster(): string {
    return this.inner.cluster;
  }

  get info(): ResourceInfo {
    return this.inner.info;
  }

  letClose(): void {
    this.#letClose();
  }

  list(options: ListOptions): Promise<KubeList> {
    return this.inner.list(options);
  }

  watch(options: WatchOptions): Promise<AsyncIterable<readonly WatchEvent[]>> {
    const held = new AbortController();
    const { signal } = options;
    const abort = (): void => {
      this.#abortSeen();
      void this.#closing.then(() => { held.abort(abortReason(signal)); });
    };
    if (signal.aborted) abort();
    else signal.addEventListener('abort', abort, { once: true });
    return this.inner.watch({ ...options, signal: held.signal });
  }
}

describe('Registry close()', () => {
  it('resolves only after every informer stopped: not while one watch is still closing, and once it has', async (t) => {
    const clients = new Map<string, LingeringWatches>();
    const keeper = new FakeClusters({
      client: (_key, info) => {
        // The Secret cache's watch lingers; the ConfigMap cache's closes at once.
        const client = new LingeringWatches(info, info.gvk.kind === 'Secret');
        client.inner.upsert({ metadata: { name: 'x', namespace: 'apps' } });
        clients.set(info.gvk.kind, client);
        return client;
      },
    });
    const registry = new Registry({ clusters: keeper, clock: new FakeClock(Date.now()) });
    t.after(() => keeper.close());
    const key = keeper.connectionKey(east, owner.namespace);
    const readers = await Promise.all([configMaps, secrets].map((gvk) => registry.watchTargetAndGetReader(east, { gvk, namespace: 'apps', name: 'x' }, owner)));
    await Promise.all(readers.map((reader) => reader.waitForSync(AbortSignal.timeout(10_000))));
    const quick = clients.get('ConfigMap');
    const slow = clients.get('Secret');
    assert.ok(quick !== undefined && slow !== undefined);
    await eventually('both watches are open', () => quick.inner.streams.length === 1 && slow.inner.streams.length === 1);

    let closed = false;
    const closing = registry.close().then(() => { closed = true; });
    // Both informers' stops reached the server: the quick one's watch closed, the slow one's is held.
    await Promise.all([quick.aborted, slow.aborted]);
    await eventually('the quick informer stopped', () => quick.inner.streams.length === 0);
    // Everything close() does besides waiting for the stops is promise continuations: one turn of
    // the event loop runs them all, so a close() that did not wait would have resolved by now.
    await nextTurn();
    assert.equal(closed, false, 'close() waits while an informer is still stopping');
    assert.equal(slow.inner.streams.length, 1, 'the slow watch is still closing');
    assert.equal(keeper.leases(key), 2, "the caches' leases are held until their informers stopped");

    slow.letClose();
    await closing;
    assert.equal(slow.inner.streams.length, 0, 'the slow watch was closed before close() resolved');
    assert.equal(keeper.leases(key), 0, 'and the leases released');
  });
});
