// The README's library example, kept compiling and passing: the code between the README markers
// below is the README's block, word for word (the test checks it). Its names come from the
// package's root entry (`../index.ts`), as an operator's `from 'fleetcache'` does.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import type { KubeConfig } from '@kubernetes/client-node';
import { SimulatedCluster } from '../../fixtures/index.ts';
import { ClusterSet, CompositeProvider, CoreV1SecretReader, LocalProvider, noopLogger, parseOwnerKey, Registry, runWorkers, SecretProvider, watchOwners, type ClusterRef, type KubeObject, type Logger, writeStatus } from '../index.ts';
import { eventually, kubeConfigFrom } from '../../fixtures/support/index.ts';

// README:begin
interface Pipeline extends KubeObject {
  readonly spec: { readonly release: { readonly cluster: ClusterRef; readonly namespace: string; readonly name: string } };
}
interface HelmRelease extends KubeObject { readonly spec?: { readonly version?: string } }
const pipelines = { group: 'example.com', version: 'v1', kind: 'Pipeline' };               // the owner kind
const helmReleases = { group: 'helm.toolkit.fluxcd.io', version: 'v2', kind: 'HelmRelease' };

/** Reconciles Pipelines, each naming a HelmRelease in some cluster, until `signal` aborts. */
async function runController(kubeConfig: KubeConfig, logger: Logger, signal: AbortSignal): Promise<void> {
  const clusters = new ClusterSet({ logger, provider: new CompositeProvider({ byKind: {     // keeps the connections
    local: new LocalProvider({ kubeConfig }),                                                // { kind: 'local' }: this cluster
    secret: new SecretProvider({ secrets: new CoreV1SecretReader({ kubeConfig }) }),         // { kind: 'Secret', namespace, name }
  } }) });
  const registry = new Registry({ clusters, logger });
  const owners = await watchOwners<Pipeline>(registry, { gvk: pipelines, signal });           // their keys go into registry.queue
  try {
    await owners.waitForSync(signal);                                                         // now "not cached" means "deleted"
    await runWorkers(registry.queue, { signal, workers: 4, logger, handler: async (key) => {   // errors: logged, retried with backoff
      const owner = parseOwnerKey(key);
      const pipeline = owners.get(owner);
      if (pipeline === undefined) return;
      const { cluster, namespace, name } = pipeline.spec.release;
      const target = { gvk: helmReleases, namespace, name };
      registry.setOwnerTargets(owner, [{ cluster, target }]);                                 // all it uses now, before any await
      const reader = await registry.watchTargetAndGetReader<HelmRelease>(cluster, target, owner);
      if (!reader.synced) return;                                                             // requeued once synced
      const release = reader.get({ namespace, name });                                        // from memory; a change requeues
      await writeStatus({                                                                     // merge patch on /status; 409: decide again
        connection: await registry.connectionFor({ kind: 'local' }, owner, signal),
        gvk: pipelines, object: pipeline, signal,
        status: () => ({ releaseVersion: release?.spec?.version ?? 'missing' }),
      });
    } });
  } finally {
    owners.release();
    await registry.close();
    await clusters.close();                                                                   // after the registry it was lent to
  }
}
// README:end

describe('README: the library example', () => {
  it('reconciles a Pipeline when it appears and when the HelmRelease it names changes, and writes what it saw to the Pipeline\'s status', async (t) => {
    const cluster = await SimulatedCluster.start({
      namespaces: ['apps', 'team-a'],
      kinds: [
        { ...pipelines, plural: 'pipelines', namespaced: true, status: true },
        { ...helmReleases, plural: 'helmreleases', namespaced: true },
      ],
    });
    t.after(() => cluster.close());
    const controller = new AbortController();
    const running = runController(kubeConfigFrom(cluster.kubeconfig), noopLogger, controller.signal);
    // Stopped however the test ends: a failed wait must not leave the workers running.
    t.after(async () => {
      controller.abort();
      await running;
    });
    // What it decided, as it wrote it: the Pipeline's status, through the status subresource.
    const status = (): string => JSON.stringify(cluster.store.get({ apiVersion: 'example.com/v1', kind: 'Pipeline', namespace: 'team-a', name: 'web' })?.status);
    cluster.store.create({ apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease', metadata: { name: 'podinfo', namespace: 'apps' }, spec: { version: '1.0' } });
    cluster.store.create({ apiVersion: 'example.com/v1', kind: 'Pipeline', metadata: { name: 'web', namespace: 'team-a' }, spec: { release: { cluster: { kind: 'local' }, namespace: 'apps', name: 'podinfo' } } });
    await eventually(() => `the new Pipeline was reconciled; its status is ${status()}`, () => status() === '{"releaseVersion":"1.0"}');
    const release = cluster.store.get({ apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease', namespace: 'apps', name: 'podinfo' });
    cluster.store.update({ ...release, spec: { version: '2.0' } });
    await eventually(() => `the change of its HelmRelease requeued it; its status is ${status()}`, () => status() === '{"releaseVersion":"2.0"}');
    // A Pipeline naming a release that does not exist: reconciled, and it says so.
    cluster.store.create({ apiVersion: 'example.com/v1', kind: 'Pipeline', metadata: { name: 'other', namespace: 'team-a' }, spec: { release: { cluster: { kind: 'local' }, namespace: 'apps', name: 'absent' } } });
    const other = (): string => JSON.stringify(cluster.store.get({ apiVersion: 'example.com/v1', kind: 'Pipeline', namespace: 'team-a', name: 'other' })?.status);
    await eventually(() => `the second Pipeline says its release is missing; its status is ${other()}`, () => other() === '{"releaseVersion":"missing"}');
  });

  it('is the README\'s block, word for word', () => {
    const source = readFileSync(new URL(import.meta.url), 'utf8');
    const block = source.slice(source.indexOf('// README:begin\n') + '// README:begin\n'.length, source.indexOf('// README:end'));
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    assert.ok(block.length > 500);
    assert.ok(readme.includes(block), 'README.md holds the example block of lib/registry/example.test.ts verbatim');
  });
});
