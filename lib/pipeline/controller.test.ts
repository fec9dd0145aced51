import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import type { ClusterProvider } from '../cluster/index.ts';
import { Registry } from '../registry/index.ts';
import { PipelineController } from './controller.ts';

describe('PipelineController options', () => {
  const provider: ClusterProvider = { resolve: () => Promise.reject(new Error('no cluster in this test')) };
  const registry = new Registry({ provider });
  after(() => registry.close());

  it('takes a ServiceAccount name as defaultServiceAccount, and refuses anything else naming the option', () => {
    assert.doesNotThrow(() => new PipelineController({ registry, localKubeConfig: new KubeConfig(), defaultServiceAccount: 'pipeline-runner' }));
    for (const bad of ['', 'Runner', 'system:serviceaccount:a:b', 'a'.repeat(254), 7]) {
      assert.throws(() => new PipelineController({ registry, localKubeConfig: new KubeConfig(), defaultServiceAccount: bad as string }), (err: unknown) => err instanceof TypeError && err.message.includes('option defaultServiceAccount must be a ServiceAccount name'), String(bad));
    }
  });
});
