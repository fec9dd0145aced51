// Deep nesting against a real kube-apiserver: a HelmRelease (x-kubernetes-preserve-unknown-fields)
// whose spec.values is nested as deep as the apiserver accepts and serves back is cached by the
// informer, through LIST and WATCH, with the default transform and without it. Measured on
// v1.34.4: 9 990 levels → 201 and GET/LIST 200; 9 995 → 500 "exceeded max depth" (Go's JSON
// decoder stops at 10 000), after which that resource's LISTs answered 500 too; 10 000 → 400.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { helmReleaseCrd } from '../../fixtures/crds/index.ts';
import { eventually, useClusters, type TestCluster } from '../../e2e/harness/index.ts';
import { rawRequest } from '../../e2e/harness/api.ts';
import { ClusterConnection, createListLimiter } from '../transport/index.ts';
import type { GroupVersionKind } from '../util/index.ts';
import { identityTransform, ResourceInformer } from './index.ts';

const HELMRELEASE: GroupVersionKind = { group: 'helm.toolkit.fluxcd.io', version: 'v2', kind: 'HelmRelease' };
const DEEPEST_ACCEPTED = 9_990;
const listLimiter = createListLimiter();

/** A HelmRelease whose spec.values is `depth` objects deep, as JSON text (JSON.stringify would overflow). */
function deepRelease(name: string, depth: number): string {
  let inner = '{"leaf":"bottom"}';
  for (let i = 1; i < depth; i++) inner = `{"a":${inner}}`;
  return `{"apiVersion":"helm.toolkit.fluxcd.io/v2","kind":"HelmRelease","metadata":{"name":"${name}","namespace":"default"},"spec":{"chart":"web","values":${inner}}}`;
}

async function post(cluster: TestCluster, body: string): Promise<number> {
  const token = cluster.kubeConfig().getCurrentUser()?.token ?? '';
  const res = await rawRequest(`${cluster.server}/apis/helm.toolkit.fluxcd.io/v2/namespaces/default/helmreleases`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body,
    ca: cluster.caData,
    timeoutMs: 120_000,
  });
  return res.statusCode;
}

/** Depth of the `a` chain under `values`, walked without recursion. */
function depthOf(obj: unknown): { depth: number; frozen: boolean } {
  let current = (obj as { spec: { values: Record<string, unknown> } }).spec.values;
  let depth = 1;
  while (current.a !== undefined) {
    current = current.a as Record<string, unknown>;
    depth++;
  }
  return { depth, frozen: Object.isFrozen(current) && current.leaf === 'bottom' };
}

describe('deeply nested objects on a real kube-apiserver', () => {
  const fixture = useClusters(1);

  it(`caches a HelmRelease nested ${DEEPEST_ACCEPTED} deep through LIST and WATCH, beside ordinary ones`, async () => {
    const cluster = fixture.clusters[0];
    await cluster.installCRDs([helmReleaseCrd]);
    assert.equal(await post(cluster, deepRelease('listed', DEEPEST_ACCEPTED)), 201, 'the apiserver accepts it');
    assert.equal(await post(cluster, deepRelease('plain', 1)), 201);

    const conn = new ClusterConnection({ name: cluster.name, kubeConfig: cluster.kubeConfig(), listLimiter, qps: 200, burst: 200 });
    const informers = [
      new ResourceInformer({ connection: conn, gvk: HELMRELEASE }),
      new ResourceInformer({ connection: conn, gvk: HELMRELEASE, transform: identityTransform }),
    ];
    const errors: Error[] = [];
    try {
      for (const informer of informers) {
        informer.on('error', (e) => errors.push(e));
        informer.start();
      }
      await Promise.all(informers.map((i) => i.waitForSync(AbortSignal.timeout(60_000))));
      for (const informer of informers) {
        assert.deepEqual(informer.store.keys().sort(), ['default/listed', 'default/plain']);
        assert.deepEqual(depthOf(informer.store.getByName('default', 'listed')), { depth: DEEPEST_ACCEPTED, frozen: true });
      }

      assert.equal(await post(cluster, deepRelease('watched', DEEPEST_ACCEPTED)), 201);
      assert.equal(await post(cluster, deepRelease('after', 1)), 201);
      await eventually('the watch events arrive', () => informers.every((i) => i.store.getByName('default', 'after') !== undefined), 60_000);
      for (const informer of informers) {
        assert.deepEqual(depthOf(informer.store.getByName('default', 'watched')), { depth: DEEPEST_ACCEPTED, frozen: true });
        assert.equal(informer.stats().skipped, 0);
        assert.equal(informer.stats().lastError, undefined);
      }
      assert.deepEqual(errors, []);
    } finally {
      await Promise.all(informers.map((i) => i.stop()));
      await conn.close();
    }
  });
});
