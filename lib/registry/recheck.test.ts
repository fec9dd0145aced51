// The re-check under the lock, on its own (single flight in place): a build that began on a
// cluster's old connection and reaches the lock after a credential rotation published the same
// cache on the new one must hand out that cache, not fail. With single flight, only a rotation
// can publish a key while its build is under way, and the build must get past discovery on the
// old connection before the rotation closes it: the test lets the build go on at the moment the
// new connection takes over (the first credential check scheduled on the injected clock), and
// the build's remaining steps are promise continuations, which run before the old informers'
// streams are torn down.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SimulatedCluster } from '../../fixtures/index.ts';
import { StaticProvider, type ClusterAccess, type ClusterProvider, type ClusterRef, type ResolveContext } from '../cluster/index.ts';
import { FakeClock, toError, type GroupVersionKind, type Timer } from '../util/index.ts';
import { registryWithKeeper } from './testing.ts';

const configMaps: GroupVersionKind = { group: '', version: 'v1', kind: 'ConfigMap' };
const sim: ClusterRef = { kind: 'static', name: 'sim' };
/** A credential-check interval no other timer uses: its timer marks a cluster's new connection taking over. */
const CHECK_INTERVAL_MS = 7_777_777;

/** The simulated cluster under two credential versions (same server, different source: a rotation); one namespace's resolutions can be held. */
class RotatingProvider implements ClusterProvider {
  version: 1 | 2 = 1;
  readonly #versions: Record<1 | 2, StaticProvider>;
  #held: { namespace: string; gate: Promise<void>; release: () => void } | undefined;

  constructor(kubeconfig: string) {
    this.#versions = {
      1: new StaticProvider({ clusters: { sim: kubeconfig } }),
      2: new StaticProvider({ clusters: { sim: `${kubeconfig}\n# rotated\n` } }),
    };
  }

  /** Holds resolutions for `namespace` until the returned function is called. */
  hold(namespace: string): () => void {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => { release = resolve; });
    this.#held = { namespace, gate, release };
    return release;
  }

  async resolve(ref: ClusterRef, context: ResolveContext): Promise<ClusterAccess> {
    const version = this.version;
    const held = this.#held;
    if (held?.namespace === context.ownerNamespace) {
      await new Promise<void>((resolve, reject) => {
        void held.gate.then(resolve);
        context.signal?.addEventListener('abort', () => { reject(toError(context.signal?.reason)); }, { once: true });
      });
    }
    return this.#versions[version].resolve(ref, context);
  }
}

/** A fake clock that tells the test when a timer of a given length is set. */
class WatchedClock extends FakeClock {
  onTimer: ((ms: number) => void) | undefined;

  override setTimer(ms: number, fn: () => void): Timer {
    const timer = super.setTimer(ms, fn);
    this.onTimer?.(ms);
    return timer;
  }
}

describe('Registry re-check under the lock', () => {
  it('hands a build that outlived a rotation the cache the rotation published', async (t) => {
    const cluster = await SimulatedCluster.start({ namespaces: ['apps'] });
    t.after(() => cluster.close());
    const provider = new RotatingProvider(cluster.kubeconfig);
    const clock = new WatchedClock(Date.now());
    const registry = registryWithKeeper({ provider, clock, credentialCheckIntervalMs: CHECK_INTERVAL_MS });
    t.after(() => registry.close());
    const target = { gvk: configMaps, namespace: 'apps', name: 'x' };
    const first = await registry.watchTargetAndGetReader(sim, target, { namespace: 'team-a', name: 'first' });
    await first.waitForSync(AbortSignal.timeout(10_000));

    // A team-b owner's build starts on the current connection and waits for its admission.
    const release = provider.hold('team-b');
    const late = registry.watchTargetAndGetReader(sim, target, { namespace: 'team-b', name: 'late' });
    const lateOutcome = late.then((reader) => reader, (err: unknown) => err);
    // The credentials rotate: the cache is rebuilt on a new connection, which takes over (its
    // first credential check is scheduled then), and at that very moment the admission is let go.
    clock.onTimer = (ms) => { if (ms === CHECK_INTERVAL_MS) { clock.onTimer = undefined; release(); } };
    provider.version = 2;
    await registry.checkCluster(sim, 'team-a');
    assert.equal(clock.onTimer, undefined, 'the new connection took over');

    const outcome = await lateOutcome;
    assert.ok(!(outcome instanceof Error), `the late build got the rotated cache, not: ${outcome instanceof Error ? outcome.message : ''}`);
    assert.equal(outcome, first, 'the same reader, serving the rotated cache');
    await first.waitForSync(AbortSignal.timeout(10_000));
    assert.equal(registry.caches().length, 1);
    assert.equal(registry.caches()[0]?.owners, 2);
  });
});
