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
interface HelmRelease extends KubeObject {
  readonly spec?: { readonly version?: string };
}

const pipelines = { group: 'example.com', version: 'v1', kind: 'Pipeline' };               // the owner kind
const helmReleases = { group: 'helm.toolkit.fluxcd.io', version: 'v2', kind: 'HelmRelease' };

/** Reconciles Pipelines, each naming a HelmRelease in some cluster, until `signal` aborts. */
async function runController(kubeConfig: KubeConfig, logger: Logger, signal: AbortSignal, seen: (pipeline: string, release?: KubeObject) => void): Promise<void> {
  // The keeper of connections, built first and lent to the registry (and to anything else that talks to clusters).
  const clusters = new ClusterSet({
    provider: new CompositeProvider({ byKind: {
      local: new LocalProvider({ kubeConfig }),
      secret: new SecretProvider({ secrets: new CoreV1SecretReader({ kubeConfig }) }),
    } }),
    logger, // fromWinston(winstonLogger) or fromPino(pinoLogger): every field arrives
  });
  const registry = new Registry({ clusters, logger });
  // Pipelines' keys go into registry.queue when they appear or change; deleted ones are forgotten.
  const owners = await watchOwners<Pipeline>(registry, { gvk: pipelines, signal });
  try {
    await owners.waitForSync(signal);                        // now "not in the cache" means "deleted"
    await runWorkers(registry.queue, {
      signal, workers: 4, logger,                            // a failed reconcile: 'Reconciler error' at error level
      handler: async (ownerKey) => {
        const owner = parseOwnerKey(ownerKey);
        const pipeline = owners.get(owner.namespace, owner.name);
        if (pipeline === undefined) return;                  // deleted: watchOwners forgot it
        const { cluster, namespace, name } = pipeline.spec.release;
        const target = { gvk: helmReleases, namespace, name };
        registry.setOwnerTargets(owner, [{ cluster, target }]);   // everything it uses now, before any await
        const reader = await registry.watchTargetAndGetReader<HelmRelease>(cluster, target, owner);
        if (!reader.synced) return;                          // requeued once the cache has synced
        const release = reader.get({ namespace, name });     // from memory; any change requeues the owner
        seen(ownerKey, release);
        // Decide, then write the owner's status: a merge patch on /status, refused (409) if the
        // Pipeline changed since it was read; then re-read, decided again, retried (5 attempts).
        await writeStatus({
          connection: await registry.connectionFor({ kind: 'local' }, owner, signal),
          gvk: pipelines, object: pipeline, signal,
          status: () => ({ releaseVersion: release?.spec?.version ?? 'missing' }),
        });
      },
    });
  } finally {
    owners.release();
    await registry.close();
    await clusters.close();                                  // after the registry it was lent to
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
    const versions: string[] = [];
    const controller = new AbortController();
    const running = runController(kubeConfigFrom(cluster.kubeconfig), noopLogger, controller.signal, (pipeline, release) => {
      versions.push(`${pipeline} ${String(release?.spec && (release.spec as { version?: string }).version)}`);
    });
    // Stopped however the test ends: a failed wait must not leave the workers running.
    t.after(async () => {
      controller.abort();
      await running;
    });
    const showing = (what: string) => (): string => `${what}; seen ${JSON.stringify(versions)}`;
    cluster.store.create({ apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease', metadata: { name: 'podinfo', namespace: 'apps' }, spec: { version: '1.0' } });
    cluster.store.create({ apiVersion: 'example.com/v1', kind: 'Pipeline', metadata: { name: 'web', namespace: 'team-a' }, spec: { release: { cluster: { kind: 'local' }, namespace: 'apps', name: 'podinfo' } } });
    await eventually(showing('the new Pipeline was reconciled'), () => versions.includes('example.com/Pipeline/team-a/web 1.0'));
    const release = cluster.store.get({ apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease', namespace: 'apps', name: 'podinfo' });
    cluster.store.update({ ...release, spec: { version: '2.0' } });
    await eventually(showing('the change of its HelmRelease requeued it'), () => versions.includes('example.com/Pipeline/team-a/web 2.0'));
    // It decided and wrote: the Pipeline's status says what it saw, through the status subresource.
    const status = (): unknown => cluster.store.get({ apiVersion: 'example.com/v1', kind: 'Pipeline', namespace: 'team-a', name: 'web' })?.status;
    await eventually(() => `the Pipeline's status holds 2.0; it is ${JSON.stringify(status())}`, () => JSON.stringify(status()) === '{"releaseVersion":"2.0"}');
  });

  it('is the README\'s block, word for word', () => {
    const source = readFileSync(new URL(import.meta.url), 'utf8');
    const block = source.slice(source.indexOf('// README:begin\n') + '// README:begin\n'.length, source.indexOf('// README:end'));
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    assert.ok(block.length > 500);
    assert.ok(readme.includes(block), 'README.md holds the example block of lib/registry/example.test.ts verbatim');
  });
});
