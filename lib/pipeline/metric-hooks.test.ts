// The metric hooks the controller and the registry forward are checked when constructed, not
// when the first reconcile or request would call them.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ClusterSet, StaticProvider } from '../cluster/index.ts';
import { Registry } from '../registry/index.ts';
import { PipelineController } from './index.ts';

describe('metric hook options', () => {
  it('refuse what is not a function, naming the option', async () => {
    const provider = new StaticProvider({ clusters: {} });
    assert.throws(() => new Registry({ provider, onRequest: 42 as never }), { name: 'TypeError', message: 'registry option onRequest must be a function' });
    assert.throws(() => new ClusterSet({ provider, onRequest: 42 as never }), { name: 'TypeError', message: 'ClusterSet option onRequest must be a function' });
    const shared = new ClusterSet({ provider, credentialCheckIntervalMs: 0 });
    assert.throws(() => new Registry({ clusters: shared, onRequest: () => undefined }), /registry option onRequest configures the registry's own keeper/);
    await shared.close();
    const registry = new Registry({ provider, credentialCheckIntervalMs: 0, onRequest: () => undefined });
    try {
      assert.throws(() => new PipelineController({ registry, onReconcile: 'yes' as unknown as () => void }), { name: 'TypeError', message: 'PipelineController option onReconcile must be a function' });
      assert.doesNotThrow(() => new PipelineController({ registry, onReconcile: () => undefined }));
    } finally {
      await registry.close();
    }
  });
});
