// Tenancy: an owner reaches a remote cluster only through credentials its own namespace may use.
// The provider's checks run for each owner namespace, including one that asks for a cache while
// another namespace's build of it is still under way.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SimulatedCluster } from '../../fixtures/index.ts';
import { SecretProvider, type ClusterRef, type SecretData, type SecretReader } from '../cluster/index.ts';
import { FakeClock, KubeconfigRefusedError, type GroupVersionKind } from '../util/index.ts';
import { registryWithKeeper } from './testing.ts';

const configMaps: GroupVersionKind = { group: '', version: 'v1', kind: 'ConfigMap' };

/** Secrets held in memory; reads wait while `hold()` is in force, as a slow API server would make them. */
class GatedSecrets implements SecretReader {
  readonly #secrets = new Map<string, SecretData>();
  #gate: Promise<void> = Promise.resolve();
  release: () => void = () => undefined;
  reads = 0;

  put(namespace: string, name: string, kubeconfig: string): void {
    this.#secrets.set(`${namespace}/${name}`, { data: { value: Buffer.from(kubeconfig).toString('base64') } });
  }

  hold(): void {
    this.#gate = new Promise((resolve) => { this.release = resolve; });
  }

  async getSecret(namespace: string, name: string): Promise<SecretData | undefined> {
    this.reads += 1;
    await this.#gate;
    return this.#secrets.get(`${namespace}/${name}`);
  }
}

describe('Registry admission of owner namespaces', () => {
  it('refuses a cross-namespace reference even while the other namespace\'s build of that cache is under way', async (t) => {
    const cluster = await SimulatedCluster.start({ namespaces: ['apps'] });
    t.after(() => cluster.close());
    const secrets = new GatedSecrets();
    secrets.put('team-a', 'remote', cluster.kubeconfig);
    const registry = registryWithKeeper({ provider: new SecretProvider({ secrets }), clock: new FakeClock(Date.now()), credentialCheckIntervalMs: 0 });
    t.after(() => registry.close());
    const target = { gvk: configMaps, namespace: 'apps', name: 'x' };
    const own: ClusterRef = { kind: 'secret', name: 'remote' };
    // Names the same Secret, hence the same cluster and cache key, from another tenant's namespace.
    const foreign: ClusterRef = { kind: 'secret', namespace: 'team-a', name: 'remote' };

    secrets.hold();
    const allowed = registry.watchTargetAndGetReader(own, target, { namespace: 'team-a', name: 'owner' });
    const intruder = registry.watchTargetAndGetReader(foreign, target, { namespace: 'team-c', name: 'intruder' });
    const intruderOutcome = intruder.then(() => 'served', (err: unknown) => err);
    secrets.release();

    const reader = await allowed;
    await reader.waitForSync(AbortSignal.timeout(10_000));
    const outcome = await intruderOutcome;
    assert.ok(outcome instanceof KubeconfigRefusedError && outcome.rule === 'cross-namespace',
      `team-c must be refused team-a's Secret, got ${outcome instanceof Error ? outcome.message : String(outcome)}`);
    assert.equal(registry.caches().length, 1);
    assert.equal(registry.caches()[0]?.owners, 2, 'the refused owner is still recorded, as after any failed call');

    // And once published, the hot path does not let it in either.
    await assert.rejects(registry.watchTargetAndGetReader(foreign, target, { namespace: 'team-c', name: 'intruder' }),
      (err: unknown) => err instanceof KubeconfigRefusedError && err.rule === 'cross-namespace');
  });
});
