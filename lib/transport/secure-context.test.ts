// One secure context per TLS material in the process (issue 12's per-cluster cost): connections
// with the same material share it, a different CA never does, and an unused context is released.
import assert from 'node:assert/strict';
import { rootCertificates } from 'node:tls';
import { describe, it, type TestContext } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { eventually } from '../../e2e/harness/index.ts';
import { SIM_CERT_PEM, SimulatedCluster } from '../../fixtures/sim/index.ts';
import { loadKubeconfig } from '../cluster/index.ts';
import { TransportError } from '../util/index.ts';
import { ClusterConnection, createListLimiter } from './index.ts';
import { materialFingerprint, sharedSecureContexts } from './secure-context.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const listLimiter = createListLimiter();
const OTHER_CA = rootCertificates[0] ?? '';

function connection(t: TestContext, kubeconfig: string, name: string): ClusterConnection {
  const conn = new ClusterConnection({ name, kubeConfig: loadKubeconfig(kubeconfig, { cluster: name }), listLimiter });
  t.after(() => conn.close());
  return conn;
}

/** The kubeconfig with its CA replaced by another (a public root that did not sign the sim's certificate). */
function withCa(kubeconfig: string, pem: string): string {
  const replaced = kubeconfig.replace(/certificate-authority-data: \S+/, `certificate-authority-data: ${Buffer.from(pem).toString('base64')}`);
  assert.notEqual(replaced, kubeconfig);
  return replaced;
}

describe('shared secure contexts', () => {
  it('gives the same material one context and different material another, whatever the split', () => {
    const a = sharedSecureContexts.get({ ca: OTHER_CA });
    assert.equal(sharedSecureContexts.get({ ca: OTHER_CA }), a, 'the same CA: the same context');
    assert.notEqual(sharedSecureContexts.get({ ca: rootCertificates[1] ?? '' }), a, 'another CA: another context');
    // Parts are delimited by their lengths: moving bytes from one part to the next is other material.
    assert.notEqual(materialFingerprint({ ca: 'ab', cert: 'c' }), materialFingerprint({ ca: 'a', cert: 'bc' }));
    assert.notEqual(materialFingerprint({ ca: 'u;' }), materialFingerprint({}));
    assert.notEqual(materialFingerprint({ ca: ['a', 'b'] }), materialFingerprint({ ca: 'ab' }));
  });

  it('lets two clusters with the same CA share a context, and never lends it to a kubeconfig with another CA', async (t) => {
    const sim = await SimulatedCluster.start({ namespaces: ['a'] });
    t.after(() => sim.close());
    const gvk = { group: '', version: 'v1', kind: 'ConfigMap' };
    const first = connection(t, sim.kubeconfig, 'first');
    const second = connection(t, sim.kubeconfig, 'second');
    const before = sharedSecureContexts.size;
    assert.equal((await first.resolve(gvk)).resource, 'configmaps');
    const after = sharedSecureContexts.size;
    // The material as the kubeconfig yields it: the CA as a Buffer, no client certificate.
    assert.ok(sharedSecureContexts.has({ ca: Buffer.from(SIM_CERT_PEM) }), 'the connection built its context through the shared cache');
    assert.equal((await second.resolve(gvk)).resource, 'configmaps');
    assert.equal(sharedSecureContexts.size, after, 'the second cluster built no context of its own');
    assert.ok(after <= before + 1);

    // Same server, same token, another CA: verification must fail, not ride on the first's context.
    const impostor = connection(t, withCa(sim.kubeconfig, OTHER_CA), 'impostor');
    const err = await impostor.resolve(gvk).then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof TransportError, `expected a TransportError, got ${String(err)}`);
    assert.match((err.cause as Error | undefined)?.message ?? err.message, /certificate/i);
  });

  it('releases a context no connection uses any more', async () => {
    const material = { ca: rootCertificates[2] ?? '' };
    const fingerprintsBefore = sharedSecureContexts.size;
    (() => { sharedSecureContexts.get(material); })();
    assert.equal(sharedSecureContexts.size, fingerprintsBefore + 1);
    assert.ok(sharedSecureContexts.has(material));
    await eventually('the unused context is released and its entry swept', () => {
      gc();
      return !sharedSecureContexts.has(material) && sharedSecureContexts.size <= fingerprintsBefore;
    });
  });
});
