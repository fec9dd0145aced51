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
    assert.throws(() => new ClusterSet({ provider, onRequest: 42 as never }), { name: 'TypeError', message: 'ClusterSet option onRequest must be a function' });
    const shared = new ClusterSet({ provider, credentialCheckIntervalMs: 0 });
    // The keeper counts requests: given to the registry, the hook is refused by name, not ignored.
    assert.throws(() => new Registry({ clusters: shared, onRequest: () => undefined } as never), /^TypeError: registry option onRequest configures the keeper: set it on the ClusterSet passed as clusters$/);
    const registry = new Registry({ clusters: shared });
    try {
      assert.throws(() => new PipelineController({ registry, onReconcile: 'yes' as unknown as () => void }), { name: 'TypeError', message: 'PipelineController option onReconcile must be a function' });
      assert.doesNotThrow(() => new PipelineController({ registry, onReconcile: () => undefined }));
    } finally {
      await registry.close();
      await shared.close();
    }
  });
});
