// Two real clusters: the kubeconfig of cluster B stored in Secrets of cluster A, resolved by the
// SecretProvider through the default CoreV1SecretReader, reaches B (and not A).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CoreV1Api } from '@kubernetes/client-node';
import { useClusters } from '../../e2e/harness/index.ts';
import { KubeApiError } from '../util/index.ts';
import { CoreV1SecretReader, KubeconfigSecretNotFoundError, SecretProvider } from './provider-secret.ts';

const b64 = (text: string): string => Buffer.from(text).toString('base64');

describe('SecretProvider against real clusters', () => {
  const env = useClusters(2, { namePrefix: 'secrets' });
  const owner = { ownerNamespace: 'fleet' };

  function clusters(): { a: (typeof env.clusters)[number]; b: (typeof env.clusters)[number] } {
    const [a, b] = env.clusters;
    return { a, b };
  }

  it('reaches cluster B through its kubeconfig stored in cluster A (key `value` and Cluster API naming)', async () => {
    const { a, b } = clusters();
    const coreA = a.kubeConfig().makeApiClient(CoreV1Api);
    await coreA.createNamespace({ body: { metadata: { name: 'fleet' } } });
    await coreA.createNamespacedSecret({ namespace: 'fleet', body: { metadata: { name: 'cluster-b' }, data: { value: b64(b.adminKubeconfig) } } });
    await coreA.createNamespacedSecret({
      namespace: 'fleet',
      body: { metadata: { name: 'b-kubeconfig', labels: { 'cluster.x-k8s.io/cluster-name': 'b' } }, type: 'cluster.x-k8s.io/secret', data: { value: b64(b.adminKubeconfig) } },
    });
    await b.kubeConfig().makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: 'only-in-b' } } });

    const provider = new SecretProvider({ secrets: new CoreV1SecretReader({ kubeConfig: a.kubeConfig() }) });
    for (const ref of [{ kind: 'secret', name: 'cluster-b' }, { kind: 'cluster-api', name: 'b' }] as const) {
      const access = await provider.resolve(ref, owner);
      assert.equal(access.kubeConfig.getCurrentCluster()?.server, b.server);
      const names = (await access.kubeConfig.makeApiClient(CoreV1Api).listNamespace()).items.map((ns) => ns.metadata?.name);
      assert.ok(names.includes('only-in-b'), `${access.name} lists B's namespaces: ${names.join(', ')}`);
      assert.ok(!names.includes('fleet'), `${access.name} is not cluster A`);
    }
  });

  it('shows rotation in the fingerprint and deletion as a not-found error', async () => {
    const { a, b } = clusters();
    const coreA = a.kubeConfig().makeApiClient(CoreV1Api);
    await coreA.createNamespacedSecret({ namespace: 'fleet', body: { metadata: { name: 'rotating' }, data: { value: b64(b.adminKubeconfig) } } });
    const provider = new SecretProvider({ secrets: new CoreV1SecretReader({ kubeConfig: a.kubeConfig() }) });
    const before = await provider.resolve({ kind: 'secret', name: 'rotating' }, owner);
    assert.equal((await provider.resolve({ kind: 'secret', name: 'rotating' }, owner)).fingerprint, before.fingerprint);

    await coreA.replaceNamespacedSecret({ namespace: 'fleet', name: 'rotating', body: { metadata: { name: 'rotating' }, data: { value: b64(`${b.adminKubeconfig}\n# rotated\n`) } } });
    assert.notEqual((await provider.resolve({ kind: 'secret', name: 'rotating' }, owner)).fingerprint, before.fingerprint);

    await coreA.deleteNamespacedSecret({ namespace: 'fleet', name: 'rotating' });
    await assert.rejects(provider.resolve({ kind: 'secret', name: 'rotating' }, owner), (err: unknown) =>
      err instanceof KubeconfigSecretNotFoundError && err.secretMissing && err.message === 'cluster secret:fleet/rotating: Secret fleet/rotating not found');
  });

  it('reports a forbidden read as a KubeApiError, and honours an aborted signal', async () => {
    const { a } = clusters();
    const restricted = a.kubeConfig();
    restricted.loadFromString(await a.restrictedKubeconfig({ namespace: 'fleet', serviceAccount: 'nobody' }));
    const reader = new CoreV1SecretReader({ kubeConfig: restricted, cluster: 'hub' });
    await assert.rejects(reader.getSecret('fleet', 'cluster-b'), (err: unknown) => {
      assert.ok(err instanceof KubeApiError, String(err));
      assert.deepEqual([err.cluster, err.statusCode, err.reason], ['hub', 403, 'Forbidden']);
      assert.match(err.message, /^cluster hub, v1, Kind=Secret: HTTP 403 Forbidden: secrets "cluster-b" is forbidden: .* \(GET \/api\/v1\/namespaces\/fleet\/secrets\/cluster-b\)$/);
      return true;
    });

    const admin = new CoreV1SecretReader({ kubeConfig: a.kubeConfig() });
    assert.equal(await admin.getSecret('fleet', 'no-such-secret'), undefined);
    assert.equal(await admin.getSecret('no-such-namespace', 'x'), undefined);
    await a.kubeConfig().makeApiClient(CoreV1Api).createNamespacedSecret({ namespace: 'fleet', body: { metadata: { name: 'abort-me' }, data: { value: b64('x') } } });
    assert.deepEqual((await admin.getSecret('fleet', 'abort-me', new AbortController().signal))?.data, { value: b64('x') });
    // Aborted before the response arrives: the request itself is cancelled, or this would resolve.
    const controller = new AbortController();
    const pending = admin.getSecret('fleet', 'abort-me', controller.signal);
    controller.abort(new Error('stop now'));
    await assert.rejects(pending, /stop now/);
  });
});
