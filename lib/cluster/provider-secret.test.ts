// SecretProvider over an in-memory SecretReader: key conventions, rotation fingerprints, missing
// Secrets and keys, and the refusals (cross-namespace, exec, local files) with clear errors.
import assert from 'node:assert/strict';
import { inspect } from 'node:util';
import { describe, it } from 'node:test';
import { KubeconfigInvalidError, KubeconfigRefusedError } from '../util/index.ts';
import { SimulatedCluster } from '../../fixtures/index.ts';
import { serviceAccountIdentity, type Identity } from './identity.ts';
import { loadKubeconfig } from './kubeconfig.ts';
import { CoreV1SecretReader, KubeconfigSecretNotFoundError, SecretProvider, type SecretData, type SecretReader } from './provider-secret.ts';
import { InvalidClusterRefError, type ClusterRef } from './providers.ts';

const TOKEN = 'sekrit-token-fedcba9876543210';

function kubeconfig(server: string, user = `{ token: ${TOKEN} }`): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    'current-context: main',
    `clusters: [{ name: remote, cluster: { server: "${server}" } }]`,
    `users: [{ name: admin, user: ${user} }]`,
    'contexts: [{ name: main, context: { cluster: remote, user: admin } }, { name: alt, context: { cluster: remote } }]',
  ].join('\n');
}

const b64 = (text: string): string => Buffer.from(text).toString('base64');

/** Secrets by `namespace/name`, recording every read. */
class MemorySecrets implements SecretReader {
  readonly secrets = new Map<string, SecretData>();
  readonly reads: { namespace: string; name: string; signal: AbortSignal | undefined; identity: Identity | undefined }[] = [];

  put(namespace: string, name: string, data: Record<string, string>): void {
    this.secrets.set(`${namespace}/${name}`, { data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, b64(v)])) });
  }

  getSecret(namespace: string, name: string, signal?: AbortSignal, identity?: Identity): Promise<SecretData | undefined> {
    this.reads.push({ namespace, name, signal, identity });
    return Promise.resolve(this.secrets.get(`${namespace}/${name}`));
  }
}

const ctx = { ownerNamespace: 'team-a' };

describe('SecretProvider: resolving', () => {
  it('reads key `value`, else `kubeconfig`, preferring `value` when both exist', async () => {
    const secrets = new MemorySecrets();
    secrets.put('team-a', 'both', { value: kubeconfig('https://value.example'), kubeconfig: kubeconfig('https://kubeconfig.example') });
    secrets.put('team-a', 'legacy', { kubeconfig: kubeconfig('https://legacy.example') });
    const provider = new SecretProvider({ secrets });
    const both = await provider.resolve({ kind: 'secret', name: 'both' }, ctx);
    assert.equal(both.name, 'secret:team-a/both');
    assert.equal(both.kubeConfig.getCurrentCluster()?.server, 'https://value.example');
    assert.equal(both.kubeConfig.getCurrentUser()?.token, TOKEN);
    const legacy = await provider.resolve({ kind: 'secret', name: 'legacy' }, ctx);
    assert.equal(legacy.kubeConfig.getCurrentCluster()?.server, 'https://legacy.example');
    const explicit = await provider.resolve({ kind: 'secret', name: 'both', key: 'kubeconfig' }, ctx);
    assert.equal(explicit.name, 'secret:team-a/both#kubeconfig');
    assert.equal(explicit.kubeConfig.getCurrentCluster()?.server, 'https://kubeconfig.example');
  });

  it('resolves a Cluster API Cluster to the `value` key of its `<name>-kubeconfig` Secret', async () => {
    const secrets = new MemorySecrets();
    secrets.put('team-a', 'prod-kubeconfig', { value: kubeconfig('https://capi.example') });
    const access = await new SecretProvider({ secrets }).resolve({ kind: 'cluster-api', name: 'prod' }, ctx);
    assert.equal(access.name, 'cluster-api:team-a/prod');
    assert.equal(access.kubeConfig.getCurrentCluster()?.server, 'https://capi.example');
    assert.deepEqual(secrets.reads.map((r) => `${r.namespace}/${r.name}`), ['team-a/prod-kubeconfig']);
  });

  it('accepts the Pipeline CRD’s spelling of the kind, Secret and Cluster, as written in the README', async () => {
    const secrets = new MemorySecrets();
    secrets.put('team-a', 'prod-kubeconfig', { value: kubeconfig('https://capi.example') });
    const provider = new SecretProvider({ secrets });
    const bySecret = await provider.resolve({ kind: 'Secret', name: 'prod-kubeconfig' } as unknown as ClusterRef, ctx);
    assert.equal(bySecret.name, 'secret:team-a/prod-kubeconfig');
    const byCluster = await provider.resolve({ kind: 'Cluster', name: 'prod' } as unknown as ClusterRef, ctx);
    assert.equal(byCluster.name, 'cluster-api:team-a/prod');
    assert.equal(byCluster.fingerprint, (await provider.resolve({ kind: 'cluster-api', name: 'prod' }, ctx)).fingerprint);
  });

  it('yields a new KubeConfig per call, and a fingerprint that changes exactly when the content or key does', async () => {
    const secrets = new MemorySecrets();
    secrets.put('team-a', 'c', { value: kubeconfig('https://a.example'), kubeconfig: kubeconfig('https://a.example') });
    const provider = new SecretProvider({ secrets });
    const first = await provider.resolve({ kind: 'secret', name: 'c' }, ctx);
    const again = await provider.resolve({ kind: 'secret', name: 'c' }, ctx);
    assert.notEqual(again.kubeConfig, first.kubeConfig);
    assert.equal(again.fingerprint, first.fingerprint);
    assert.notEqual((await provider.resolve({ kind: 'secret', name: 'c', key: 'kubeconfig' }, ctx)).fingerprint, first.fingerprint);
    secrets.put('team-a', 'c', { value: kubeconfig('https://a.example', '{ token: rotated }') });
    const rotated = await provider.resolve({ kind: 'secret', name: 'c' }, ctx);
    assert.notEqual(rotated.fingerprint, first.fingerprint);
    assert.ok(!rotated.fingerprint.includes('rotated'));
    assert.equal(rotated.kubeConfig.getCurrentUser()?.token, 'rotated');
  });

  it('uses contextName when set, and passes the signal to the reader', async () => {
    const secrets = new MemorySecrets();
    secrets.put('team-a', 'c', { value: kubeconfig('https://a.example') });
    const signal = new AbortController().signal;
    const access = await new SecretProvider({ secrets, contextName: 'alt' }).resolve({ kind: 'secret', name: 'c' }, { ...ctx, signal });
    assert.equal(access.kubeConfig.getCurrentContext(), 'alt');
    assert.equal(access.kubeConfig.getCurrentUser(), null);
    assert.equal(secrets.reads[0]?.signal, signal);
  });

  it('reads the Secret as the caller\'s identity', async (t) => {
    const secrets = new MemorySecrets();
    secrets.put('team-a', 'c', { value: kubeconfig('https://a.example') });
    const identity = serviceAccountIdentity('team-a', 'deployer');
    await new SecretProvider({ secrets }).resolve({ kind: 'secret', name: 'c' }, { ...ctx, identity });
    assert.equal(secrets.reads[0]?.identity, identity);

    // CoreV1SecretReader sends it as Impersonate-User (a ServiceAccount's groups are the server's to derive).
    const sim = await SimulatedCluster.start({ namespaces: ['team-a'] });
    t.after(() => sim.close());
    const reader = new CoreV1SecretReader({ kubeConfig: loadKubeconfig(sim.kubeconfig, { cluster: 'local' }) });
    assert.equal(await reader.getSecret('team-a', 'missing', undefined, identity), undefined);
    assert.equal(await reader.getSecret('team-a', 'missing'), undefined);
    assert.deepEqual(sim.recentRequests().filter((r) => r.path.endsWith('/secrets/missing')).map((r) => r.user), ['system:serviceaccount:team-a:deployer', 'sim-admin']);
    await assert.rejects(reader.getSecret('team-a', 'x', undefined, { kind: 'impersonate', user: 'alice', groups: ['devs'] }), TypeError);
  });
});

describe('SecretProvider: missing Secrets and keys', () => {
  it('reports a missing Secret with its reference', async () => {
    const provider = new SecretProvider({ secrets: new MemorySecrets() });
    await assert.rejects(provider.resolve({ kind: 'cluster-api', name: 'gone' }, ctx), (err: unknown) => {
      assert.ok(err instanceof KubeconfigSecretNotFoundError);
      assert.equal(err.code, 'ERR_KUBECONFIG_SECRET_NOT_FOUND');
      assert.equal(err.message, 'cluster cluster-api:team-a/gone: Secret team-a/gone-kubeconfig not found');
      assert.equal(err.secretMissing, true);
      assert.deepEqual([err.cluster, err.secretNamespace, err.secretName, err.keys], ['cluster-api:team-a/gone', 'team-a', 'gone-kubeconfig', ['value']]);
      return true;
    });
  });

  it('reports a missing key with the names, never the values, of the keys that exist', async () => {
    const secrets = new MemorySecrets();
    secrets.put('team-a', 'c', { 'admin.conf': kubeconfig('https://a.example'), ca: 'x' });
    await assert.rejects(new SecretProvider({ secrets }).resolve({ kind: 'secret', name: 'c' }, ctx), (err: unknown) => {
      assert.ok(err instanceof KubeconfigSecretNotFoundError);
      assert.equal(err.message, 'cluster secret:team-a/c: Secret team-a/c has no key "value" or "kubeconfig" (its keys: "admin.conf", "ca")');
      assert.equal(err.secretMissing, false);
      assert.deepEqual(err.availableKeys, ['admin.conf', 'ca']);
      assert.ok(!inspect(err).includes(TOKEN));
      return true;
    });
    secrets.secrets.set('team-a/empty', {});
    await assert.rejects(new SecretProvider({ secrets }).resolve({ kind: 'secret', name: 'empty', key: 'cfg' }, ctx), /Secret team-a\/empty has no key "cfg" \(it has no keys\)/);
  });

  it('reports content that is not text as an invalid kubeconfig', async () => {
    const secrets = new MemorySecrets();
    secrets.secrets.set('team-a/bin', { data: { value: Buffer.from([0xff, 0xfe, 0x00]).toString('base64') } });
    await assert.rejects(new SecretProvider({ secrets }).resolve({ kind: 'secret', name: 'bin' }, ctx), (err: unknown) =>
      err instanceof KubeconfigInvalidError && err.message === 'cluster secret:team-a/bin: invalid kubeconfig: Secret team-a/bin key "value" is not UTF-8 text');
  });
});

describe('SecretProvider: refusals', () => {
  it('refuses a Secret in another namespace without reading it, unless allowed', async () => {
    const secrets = new MemorySecrets();
    secrets.put('fleet', 'prod', { value: kubeconfig('https://a.example') });
    await assert.rejects(new SecretProvider({ secrets }).resolve({ kind: 'secret', namespace: 'fleet', name: 'prod' }, ctx), (err: unknown) => {
      assert.ok(err instanceof KubeconfigRefusedError);
      assert.equal(err.rule, 'cross-namespace');
      assert.equal(err.subject, 'Secret fleet/prod referenced from namespace team-a');
      assert.equal(err.cluster, 'secret:fleet/prod');
      assert.match(err.message, /^cluster secret:fleet\/prod: refused Secret fleet\/prod referenced from namespace team-a: rule "cross-namespace"; .*allowCrossNamespace/);
      return true;
    });
    await assert.rejects(new SecretProvider({ secrets }).resolve({ kind: 'cluster-api', namespace: 'fleet', name: 'prod' }, ctx), /refused Secret fleet\/prod-kubeconfig referenced from namespace team-a/);
    assert.equal(secrets.reads.length, 0);
    const access = await new SecretProvider({ secrets, allowCrossNamespace: true }).resolve({ kind: 'secret', namespace: 'fleet', name: 'prod' }, ctx);
    assert.equal(access.name, 'secret:fleet/prod');
    // Naming one's own namespace explicitly is no cross-namespace reference.
    secrets.put('team-a', 'own', { value: kubeconfig('https://a.example') });
    await new SecretProvider({ secrets }).resolve({ kind: 'secret', namespace: 'team-a', name: 'own' }, ctx);
  });

  it('refuses exec, auth-provider and local files in stored kubeconfigs unless each is allowed', async () => {
    const secrets = new MemorySecrets();
    secrets.put('team-a', 'exec', { value: kubeconfig('https://a.example', `{ token: ${TOKEN}, exec: { command: aws, args: [eks, get-token] } }`) });
    secrets.put('team-a', 'oidc', { value: kubeconfig('https://a.example', `{ auth-provider: { name: oidc, config: { id-token: ${TOKEN} } } }`) });
    secrets.put('team-a', 'file', { value: kubeconfig('https://a.example', '{ tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token }') });
    const strict = new SecretProvider({ secrets });
    const cases = [
      ['exec', 'exec', 'user "admin" exec command "aws"'],
      ['oidc', 'auth-provider', 'user "admin" auth-provider "oidc"'],
      ['file', 'local-file', 'user "admin" tokenFile "/var/run/secrets/kubernetes.io/serviceaccount/token"'],
    ] as const;
    for (const [name, rule, subject] of cases) {
      await assert.rejects(strict.resolve({ kind: 'secret', name }, ctx), (err: unknown) => {
        assert.ok(err instanceof KubeconfigRefusedError, inspect(err));
        assert.deepEqual([err.cluster, err.rule, err.subject], [`secret:team-a/${name}`, rule, subject]);
        assert.ok(!inspect(err).includes(TOKEN), 'the error leaks the token');
        return true;
      });
    }
    const relaxed = new SecretProvider({ secrets, allowExec: true, allowAuthProvider: true, allowLocalFiles: true });
    for (const [name] of cases) await relaxed.resolve({ kind: 'secret', name }, ctx);
  });

  it('refuses references it does not serve, and invalid options', async () => {
    const secrets = new MemorySecrets();
    await assert.rejects(new SecretProvider({ secrets }).resolve({ kind: 'local' }, ctx), InvalidClusterRefError);
    await assert.rejects(new SecretProvider({ secrets }).resolve({ kind: 'secret', name: 'UPPER' }, ctx), InvalidClusterRefError);
    assert.throws(() => new SecretProvider({ secrets, allowExec: 'yes' as unknown as boolean }), /SecretProvider option allowExec must be a boolean, got "yes"/);
    assert.throws(() => new SecretProvider({ secrets: {} as SecretReader }), /option secrets must be a SecretReader/);
  });
});
