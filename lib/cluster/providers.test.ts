// Cluster references, their stable keys, and the local, static and composite providers.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import {
  clusterKey,
  clusterRefOf,
  CompositeProvider,
  fingerprintOf,
  InvalidClusterRefError,
  LocalProvider,
  StaticProvider,
  type ClusterAccess,
  type ClusterProvider,
  type ClusterRef,
} from './providers.ts';
import { kubeConfigFor } from '../../fixtures/support/index.ts';

const ctx = { ownerNamespace: 'team-a' };

function yamlFor(server: string, token: string): string {
  return [
    'current-context: c',
    `clusters: [{ name: x, cluster: { server: "${server}" } }]`,
    `users: [{ name: admin, user: { token: ${token} } }]`,
    'contexts: [{ name: c, context: { cluster: x, user: admin } }]',
  ].join('\n');
}

describe('clusterKey', () => {
  it('spells out the namespace, so an implicit and an explicit one give the same key', () => {
    assert.equal(clusterKey({ kind: 'local' }, 'team-a'), 'local');
    assert.equal(clusterKey({ kind: 'static', name: 'kind-1' }, 'team-a'), 'static:kind-1');
    assert.equal(clusterKey({ kind: 'secret', name: 'prod' }, 'team-a'), 'secret:team-a/prod');
    assert.equal(clusterKey({ kind: 'secret', namespace: 'team-a', name: 'prod' }, 'team-a'), 'secret:team-a/prod');
    assert.equal(clusterKey({ kind: 'secret', namespace: '', name: 'prod' }, 'team-a'), 'secret:team-a/prod');
    assert.equal(clusterKey({ kind: 'secret', namespace: 'fleet', name: 'prod', key: 'admin.conf' }, 'team-a'), 'secret:fleet/prod#admin.conf');
    assert.equal(clusterKey({ kind: 'cluster-api', name: 'prod' }, 'team-a'), 'cluster-api:team-a/prod');
  });

  it('refuses malformed references with the field at fault', () => {
    const cases: [ClusterRef, RegExp][] = [
      [{ kind: 'secret', name: 'Not_A_Name' }, /name is not a valid object name/],
      [{ kind: 'secret', namespace: 'a/b', name: 'prod' }, /namespace is not a valid namespace name/],
      [{ kind: 'secret', name: 'prod', key: 'a/b' }, /key is not a valid Secret data key/],
      [{ kind: 'cluster-api', name: 'x'.repeat(243) }, /name is not a valid object name/],
      [{ kind: 'static', name: '' }, /name must be a non-empty string/],
      [{ kind: 'gke' } as unknown as ClusterRef, /^cluster reference \{kind="gke"\}: unknown kind "gke"; valid kinds: "local", "secret" \(or "Secret"\), "cluster-api" \(or "Cluster"\), "static"$/],
      [{ kind: 'SECRET', name: 'prod' } as unknown as ClusterRef, /unknown kind "SECRET"; valid kinds: .*"secret" \(or "Secret"\)/],
      [{ name: 'prod' } as unknown as ClusterRef, /unknown kind undefined; valid kinds: "local"/],
      [null as unknown as ClusterRef, /^cluster reference null: must be an object with a kind, one of "local"/],
    ];
    for (const [ref, message] of cases) {
      assert.throws(() => clusterKey(ref, 'team-a'), (err: unknown) => err instanceof InvalidClusterRefError && err.code === 'ERR_CLUSTER_REF_INVALID' && message.test(err.message) && err.ref === ref);
    }
    assert.throws(() => clusterKey({ kind: 'secret', name: 'prod' }, ''), TypeError);
  });

  it('accepts the CRD’s spelling of a kind (Secret, Cluster) as the same cluster', () => {
    const crd = (ref: object): ClusterRef => ref as ClusterRef; // as parsed from a resource
    assert.equal(clusterKey(crd({ kind: 'Secret', name: 'prod' }), 'team-a'), 'secret:team-a/prod');
    assert.equal(clusterKey(crd({ kind: 'Secret', namespace: 'fleet', name: 'prod', key: 'admin.conf' }), 'team-a'), 'secret:fleet/prod#admin.conf');
    assert.equal(clusterKey(crd({ kind: 'Cluster', name: 'prod' }), 'team-a'), 'cluster-api:team-a/prod');
  });
});

describe('clusterRefOf', () => {
  it('types a reference read from a resource, in either spelling, keeping only its kind’s fields', () => {
    assert.deepEqual(clusterRefOf({ kind: 'Secret', name: 'staging-kubeconfig' }), { kind: 'secret', namespace: undefined, name: 'staging-kubeconfig', key: undefined });
    assert.deepEqual(clusterRefOf({ kind: 'secret', namespace: 'fleet', name: 'prod', key: 'value' }), { kind: 'secret', namespace: 'fleet', name: 'prod', key: 'value' });
    assert.deepEqual(clusterRefOf({ kind: 'Cluster', name: 'prod', key: 'ignored' }), { kind: 'cluster-api', namespace: undefined, name: 'prod' });
    assert.deepEqual(clusterRefOf({ kind: 'cluster-api', name: 'prod' }), { kind: 'cluster-api', namespace: undefined, name: 'prod' });
    assert.deepEqual(clusterRefOf({ kind: 'local', name: 'x' }), { kind: 'local' });
    assert.deepEqual(clusterRefOf({ kind: 'static', name: 'kind-1' }), { kind: 'static', name: 'kind-1' });
  });

  it('refuses an unknown kind listing the valid ones, and fields that are not strings', () => {
    assert.throws(() => clusterRefOf({ kind: 'Kubeconfig', name: 'x' }), (err: unknown) => err instanceof InvalidClusterRefError && err.message.endsWith('unknown kind "Kubeconfig"; valid kinds: "local", "secret" (or "Secret"), "cluster-api" (or "Cluster"), "static"'));
    assert.throws(() => clusterRefOf('secret'), /cluster reference "secret": must be an object with a kind/);
    assert.throws(() => clusterRefOf({ kind: 'Secret', name: 42 }), /name must be a string/);
  });
});

describe('fingerprintOf', () => {
  it('changes with any part and with how the parts are split', () => {
    assert.match(fingerprintOf('value', 'abc'), /^sha256:[0-9a-f]{64}$/);
    assert.equal(fingerprintOf('value', Buffer.from('abc')), fingerprintOf('value', 'abc'));
    assert.notEqual(fingerprintOf('value', 'abc'), fingerprintOf('kubeconfig', 'abc'));
    assert.notEqual(fingerprintOf('value', 'abc'), fingerprintOf('value', 'abd'));
    assert.notEqual(fingerprintOf('ab', 'c'), fingerprintOf('a', 'bc'));
  });
});

describe('LocalProvider', () => {
  it('hands out the embedder’s KubeConfig for the local reference, with a stable fingerprint', async () => {
    const kc = kubeConfigFor('https://local.example', { skipTLSVerify: false });
    const provider = new LocalProvider({ kubeConfig: kc });
    const first = await provider.resolve({ kind: 'local' }, ctx);
    assert.equal(first.name, 'local');
    assert.equal(first.kubeConfig, kc);
    // client-node writes refreshed credentials into its user entries: that is no rotation.
    (kc.users as { token?: string }[]).forEach((u) => { u.token = 'refreshed'; });
    assert.equal((await provider.resolve({ kind: 'local' }, ctx)).fingerprint, first.fingerprint);
  });

  it('refuses other kinds and a KubeConfig without a usable current context', async () => {
    const provider = new LocalProvider({ kubeConfig: kubeConfigFor('https://local.example', { skipTLSVerify: false }) });
    await assert.rejects(provider.resolve({ kind: 'secret', name: 'x' }, ctx), /LocalProvider does not resolve references of this kind/);
    assert.throws(() => new LocalProvider({ kubeConfig: new KubeConfig() }), /LocalProvider option kubeConfig has no current context/);
  });
});

describe('StaticProvider', () => {
  it('resolves registered clusters from YAML or a KubeConfig, each with its own instance', async () => {
    const b = kubeConfigFor('https://b.example', { skipTLSVerify: false });
    const provider = new StaticProvider({ clusters: new Map<string, string | KubeConfig>([['a', yamlFor('https://a.example', 'ta')], ['b', b]]) });
    assert.deepEqual(provider.names, ['a', 'b']);
    const a = await provider.resolve({ kind: 'static', name: 'a' }, ctx);
    assert.equal(a.name, 'static:a');
    assert.equal(a.kubeConfig.getCurrentCluster()?.server, 'https://a.example');
    assert.equal(a.fingerprint, fingerprintOf(yamlFor('https://a.example', 'ta')));
    const resolvedB = await provider.resolve({ kind: 'static', name: 'b' }, ctx);
    assert.equal(resolvedB.kubeConfig, b);
    assert.notEqual(a.kubeConfig, resolvedB.kubeConfig);
  });

  it('trusts the embedder’s YAML (exec allowed) and accepts a plain record', async () => {
    const yaml = [
      'current-context: c',
      'clusters: [{ name: x, cluster: { server: "https://x.example" } }]',
      'users: [{ name: u, user: { exec: { command: kubelogin } } }]',
      'contexts: [{ name: c, context: { cluster: x, user: u } }]',
    ].join('\n');
    const provider = new StaticProvider({ clusters: { dev: yaml } });
    assert.equal((await provider.resolve({ kind: 'static', name: 'dev' }, ctx)).name, 'static:dev');
  });

  it('names the known clusters when asked for an unknown one', async () => {
    const provider = new StaticProvider({ clusters: { a: yamlFor('https://a.example', 't') } });
    await assert.rejects(provider.resolve({ kind: 'static', name: 'zz' }, ctx), (err: unknown) => err instanceof InvalidClusterRefError && err.message.includes('no static cluster has this name (known: "a")'));
    await assert.rejects(provider.resolve({ kind: 'local' }, ctx), InvalidClusterRefError);
  });

  it('rejects an unusable entry at construction, naming it, without its token', () => {
    assert.throws(() => new StaticProvider({ clusters: { broken: yamlFor('https://a.example', 'tok-123').replace('current-context: c', 'current-context: gone') } }), (err: unknown) => {
      assert.ok(err instanceof TypeError);
      assert.match(err.message, /^StaticProvider option clusters\["broken"\]: cluster static:broken: invalid kubeconfig: context "gone" does not exist$/);
      assert.ok(!err.message.includes('tok-123'));
      return true;
    });
    assert.throws(() => new StaticProvider({ clusters: { empty: new KubeConfig() } }), /clusters\["empty"\] has no current context/);
  });
});

describe('CompositeProvider', () => {
  function fake(name: string): ClusterProvider & { calls: ClusterRef[] } {
    const calls: ClusterRef[] = [];
    return {
      calls,
      resolve(ref): Promise<ClusterAccess> {
        calls.push(ref);
        return Promise.resolve({ name, kubeConfig: new KubeConfig(), fingerprint: name });
      },
    };
  }

  it('routes each reference to the provider of its kind', async () => {
    const local = fake('local');
    const secrets = fake('secrets');
    const provider = new CompositeProvider({ byKind: { local, secret: secrets, 'cluster-api': secrets } });
    assert.equal((await provider.resolve({ kind: 'local' }, ctx)).name, 'local');
    assert.equal((await provider.resolve({ kind: 'cluster-api', name: 'c' }, ctx)).name, 'secrets');
    assert.deepEqual(secrets.calls, [{ kind: 'cluster-api', name: 'c' }]);
    assert.deepEqual(local.calls, [{ kind: 'local' }]);
    await provider.resolve({ kind: 'Secret', name: 's' } as unknown as ClusterRef, ctx);
    await provider.resolve({ kind: 'Cluster', name: 'c' } as unknown as ClusterRef, ctx);
    assert.deepEqual(secrets.calls.slice(1), [{ kind: 'secret', name: 's' }, { kind: 'cluster-api', name: 'c' }], 'the CRD’s spelling, routed and handed on as the type’s');
    await assert.rejects(provider.resolve({ kind: 'gke' } as unknown as ClusterRef, ctx), /unknown kind "gke"; valid kinds: /);
  });

  it('refuses kinds no provider serves, including names of Object.prototype members', async () => {
    const provider = new CompositeProvider({ byKind: { local: fake('local') } });
    await assert.rejects(provider.resolve({ kind: 'static', name: 'x' }, ctx), /cluster reference \{kind="static", name="x"\}: no provider is configured for this kind/);
    await assert.rejects(provider.resolve({ kind: 'constructor' } as unknown as ClusterRef, ctx), InvalidClusterRefError);
  });

  it('validates its options', () => {
    assert.throws(() => new CompositeProvider({ byKind: {} }), /at least one provider/);
    assert.throws(() => new CompositeProvider({ byKind: { gke: fake('x') } as never }), /unknown kind "gke"; valid kinds: local, secret, cluster-api, static/);
  });
});
