// docs/manager.md's manager-kit example, kept compiling and passing on a real kube-apiserver: the code
// between the README markers below is that block, word for word (the test checks it). Its
// names come from the package's root entry (`../index.ts`) and the manager kit's (`./index.ts`), as
// an operator's `from 'fleetcache'` and `from 'fleetcache/manager'` do.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import type { KubeConfig } from '@kubernetes/client-node';
import { eventually, useClusters } from '../../e2e/harness/index.ts';
import { openCrd } from '../../fixtures/crds/index.ts';
import { ClusterSet, CompositeProvider, LocalProvider, noopLogger, parseOwnerKey, Registry, SecretProvider, watchOwners, type ClusterRef, type KubeObject, type Logger } from '../index.ts';
import { Manager, syncedCheck } from './index.ts';

// README:begin
interface Pipeline extends KubeObject {
  readonly spec: { readonly release: { readonly cluster: ClusterRef; readonly namespace: string; readonly name: string } };
}

const pipelines = { group: 'example.com', version: 'v1', kind: 'Pipeline' };               // the owner kind
const helmReleases = { group: 'helm.toolkit.fluxcd.io', version: 'v2', kind: 'HelmRelease' };

/** One replica of an HA controller of Pipelines: run several, the Lease's holder reconciles. Until `signal` aborts. */
async function runReplica(kubeConfig: KubeConfig, logger: Logger, signal: AbortSignal, seen: (pipeline: string, release?: KubeObject) => void, ports = { probes: 8081, metrics: 8443 }): Promise<void> {
  const manager = new Manager({
    clusters: ({ onRequest }) => new ClusterSet({                          // the keeper: its requests counted in /metrics
      local: kubeConfig,
      provider: (secrets) => new CompositeProvider({ byKind: { local: new LocalProvider({ kubeConfig }), secret: new SecretProvider({ secrets }) } }),
      onRequest, logger,
    }),
    registry: ({ queue, clusters }) => new Registry({ clusters, queue, logger }), // lent the keeper; its queue counted too
    leaderElection: { name: 'pipeline-controller', namespace: 'default' }, // opt-in, as in controller-runtime
    healthProbeBindAddress: { host: '', port: ports.probes },              // /healthz, /readyz
    metricsServer: { bindAddress: { host: '', port: ports.metrics } },     // HTTPS, TokenReview + SubjectAccessReview
    logger,
  });
  const { registry } = manager;
  // Every replica caches the Pipelines (a new leader starts warm); their keys wait in the queue.
  const owners = await watchOwners<Pipeline>(registry, { gvk: pipelines, signal });
  manager.addReadyzCheck('pipelines', syncedCheck(owners));
  manager.add({
    name: 'pipelines', workers: 4,                                        // runs on the leader only
    reconcile: async (ownerKey, { signal }) => {
      await owners.waitForSync(signal);                                   // now "not in the cache" means "deleted"
      const owner = parseOwnerKey(ownerKey);
      const pipeline = owners.get(owner);
      if (pipeline === undefined) return;                                 // deleted: watchOwners forgot it
      const { cluster, namespace, name } = pipeline.spec.release;
      const target = { gvk: helmReleases, namespace, name };
      registry.setOwnerTargets(owner, [{ cluster, target }]);             // everything it uses now, before any await
      const reader = await registry.watchTargetAndGetReader(cluster, target, owner, signal);
      if (!reader.synced) return;                                         // requeued once the cache has synced
      seen(ownerKey, reader.get({ namespace, name }));                    // a throw would retry with backoff, forever
    },
  });
  try {
    await manager.start(signal);          // until aborted: drains reconciles, releases the Lease, closes everything
  } finally {
    owners.release();
  }
}
// README:end

describe('README: the manager kit example', () => {
  const fixture = useClusters(1);

  it('runs two replicas: one leads and reconciles; when it stops, the other takes over the Lease and reconciles', async (t) => {
    const cluster = fixture.clusters[0];
    await cluster.installCRDs([
      openCrd({ ...pipelines, plural: 'pipelines' }),
      openCrd({ ...helmReleases, plural: 'helmreleases' }),
    ]);
    for (const name of ['apps', 'team-a']) await cluster.request('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
    const releasePath = '/apis/helm.toolkit.fluxcd.io/v2/namespaces/apps/helmreleases';
    const created = await cluster.request('POST', releasePath, { apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease', metadata: { name: 'podinfo', namespace: 'apps' }, spec: { version: '1.0' } });
    assert.equal(created.statusCode, 201, JSON.stringify(created.body));
    const pipeline = await cluster.request('POST', '/apis/example.com/v1/namespaces/team-a/pipelines', { apiVersion: 'example.com/v1', kind: 'Pipeline', metadata: { name: 'web', namespace: 'team-a' }, spec: { release: { cluster: { kind: 'local' }, namespace: 'apps', name: 'podinfo' } } });
    assert.equal(pipeline.statusCode, 201, JSON.stringify(pipeline.body));
    const setVersion = async (version: string): Promise<void> => {
      const current = await cluster.request('GET', `${releasePath}/podinfo`);
      const res = await cluster.request('PUT', `${releasePath}/podinfo`, { ...(current.body as object), spec: { version } });
      assert.equal(res.statusCode, 200, JSON.stringify(res.body));
    };
    const holder = async (): Promise<string | undefined> => {
      const res = await cluster.request('GET', '/apis/coordination.k8s.io/v1/namespaces/default/leases/pipeline-controller');
      return res.statusCode === 200 ? (res.body as { spec: { holderIdentity?: string } }).spec.holderIdentity ?? '' : undefined;
    };

    const replicas = ['a', 'b'].map((name) => {
      const stop = new AbortController();
      const seen: string[] = [];
      const done = runReplica(cluster.kubeConfig(), noopLogger, stop.signal, (key, release) => {
        seen.push(`${key} ${String((release?.spec as { version?: string } | undefined)?.version)}`);
      }, { probes: 0, metrics: 0 });
      return { name, stop, seen, done };
    });
    // Stopped however the test ends: a failed wait must not leave a replica running.
    t.after(async () => {
      for (const r of replicas) r.stop.abort();
      await Promise.allSettled(replicas.map((r) => r.done));
    });
    const saw = (version: string) => (r: (typeof replicas)[number]): boolean => r.seen.includes(`example.com/Pipeline/team-a/web ${version}`);

    const leader = await eventually('one replica reconciled the Pipeline', () => replicas.find(saw('1.0')), 60_000);
    const follower = replicas.find((r) => r !== leader);
    assert.ok(follower !== undefined);
    await setVersion('2.0');
    await eventually('the leader reconciled the change of its HelmRelease', () => saw('2.0')(leader), 60_000);
    assert.deepEqual(follower.seen, [], 'the follower reconciles nothing while the other leads');
    const first = await holder();
    assert.ok(first !== undefined && first !== '', `the Lease names its holder: ${String(first)}`);

    leader.stop.abort();
    await leader.done;
    await setVersion('3.0');
    await eventually('the other replica took over and reconciled', () => saw('3.0')(follower), 60_000);
    const second = await holder();
    assert.ok(second !== undefined && second !== '' && second !== first, `the Lease names the new holder: ${String(second)} (was ${first})`);
    assert.equal(leader.seen.some((s) => s.endsWith(' 3.0')), false, 'the stopped replica reconciles no more');

    follower.stop.abort();
    await follower.done;
    assert.equal(await holder(), '', 'released on stop: the next replica need not wait out the lease');
  });

  it('is the README\'s block, word for word', () => {
    const source = readFileSync(new URL(import.meta.url), 'utf8');
    const block = source.slice(source.indexOf('// README:begin\n') + '// README:begin\n'.length, source.indexOf('// README:end'));
    const readme = readFileSync(new URL('../../docs/manager.md', import.meta.url), 'utf8');
    assert.ok(block.length > 500);
    assert.ok(readme.includes(block), 'docs/manager.md holds the example block of lib/manager/example.integration.test.ts verbatim');
  });
});
