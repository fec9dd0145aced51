// docs/library.md's fleet-snapshot example, kept compiling and passing: the code between the README
// markers below is that block, word for word (the test checks it). Its names come from the
// package's root entry (`../index.ts`), as an operator's `from 'fleetcache'` does.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { startSimulatedClusters, type SimulatedCluster } from '../../fixtures/index.ts';
import { FleetAccumulator, registrySource, snapshotQuery, StaticProvider, type KubeObject, type Registry } from '../index.ts';
import { registryWithKeeper } from '../registry/testing.ts';
import { eventually } from '../../fixtures/support/index.ts';

// README:begin
interface ConfigMap extends KubeObject {
  readonly data?: Record<string, string>;
}

const configMaps = { group: '', version: 'v1', kind: 'ConfigMap' };

/** Keeps ConfigMap `settings` in cluster west equal to the one in east, from consistent snapshots. */
async function mirrorSettings(registry: Registry, signal: AbortSignal): Promise<void> {
  const fleet = new FleetAccumulator({
    source: registrySource(registry), // the registry's caches: no second watch
    queries: {
      source: snapshotQuery<ConfigMap>({ cluster: { kind: 'static', name: 'east' }, gvk: configMaps, namespace: 'default', fieldSelector: 'metadata.name=settings' }),
      copy: snapshotQuery<ConfigMap>({ cluster: { kind: 'static', name: 'west' }, gvk: configMaps, namespace: 'default', fieldSelector: 'metadata.name=settings' }),
    },
    minIntervalMs: 100, // a burst of changes becomes one snapshot per 100 ms at most
  });
  try {
    // The first snapshot comes once both clusters are listed; each one holds the newest state.
    for await (const snap of fleet.snapshots(signal)) {
      const [source] = snap.objects.source;
      const [copy] = snap.objects.copy;
      if (source === undefined || JSON.stringify(source.data) === JSON.stringify(copy?.data)) continue;
      const data = source.data ?? {};
      // Writes through fleet.client are in the next snapshot: no duplicate create, no stale read.
      if (copy === undefined) await fleet.client.create('copy', { metadata: { name: 'settings' }, data });
      else await fleet.client.patch('copy', { name: 'settings' }, { data });
    }
  } finally {
    await fleet.close();
  }
}
// README:end

function settingsIn(cluster: SimulatedCluster): Record<string, string> | undefined {
  return (cluster.store.get({ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'default', name: 'settings' }) as ConfigMap | undefined)?.data;
}

describe('README: fleet snapshots', () => {
  it('mirrors settings from east to west, creating then patching', async (t) => {
    const [east, west] = await startSimulatedClusters(2, { namePrefix: 'region' });
    t.after(async () => { await Promise.all([east.close(), west.close()]); });
    east.store.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'settings', namespace: 'default' }, data: { mode: 'blue' } });
    const registry = registryWithKeeper({ provider: new StaticProvider({ clusters: { east: east.kubeconfig, west: west.kubeconfig } }), credentialCheckIntervalMs: 0 });
    t.after(() => registry.close());
    const controller = new AbortController();
    const running = mirrorSettings(registry, controller.signal);
    await eventually('west has the settings', () => settingsIn(west)?.mode === 'blue');
    const current = east.store.get({ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'default', name: 'settings' });
    east.store.update({ ...current, data: { mode: 'green' } });
    await eventually('west follows the change', () => settingsIn(west)?.mode === 'green');
    controller.abort();
    await running;
    assert.equal(west.counters.requests.create, 1, 'created once: the write was in the next snapshot');
  });

  it('is the README\'s block, word for word', () => {
    const source = readFileSync(new URL(import.meta.url), 'utf8');
    const block = source.slice(source.indexOf('// README:begin\n') + '// README:begin\n'.length, source.indexOf('// README:end'));
    const readme = readFileSync(new URL('../../docs/library.md', import.meta.url), 'utf8');
    assert.ok(block.length > 500);
    assert.ok(readme.includes(block), 'docs/library.md holds the example block of lib/snapshot/example.test.ts verbatim');
  });
});
