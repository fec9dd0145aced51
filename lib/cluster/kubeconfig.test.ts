// Safe kubeconfig loading: every safety rule refuses with a precise subject, broken kubeconfigs
// give clear errors, and no error ever carries a credential.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { inspect } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { KubeconfigInvalidError, KubeconfigRefusedError, type KubeconfigRule } from '../util/index.ts';
import { loadKubeconfig, localKubeConfig, type LoadKubeconfigOptions } from './kubeconfig.ts';

const TOKEN = 'sekrit-token-0123456789abcdef';
const CA = Buffer.from('-----BEGIN CERTIFICATE-----\nnot a real one\n-----END CERTIFICATE-----\n').toString('base64');

/** A kubeconfig with one context `main` → cluster `prod` → user `ci`, plus whatever `extra` adds. */
function kubeconfig(parts: { cluster?: string; user?: string; extraUsers?: string; extraClusters?: string; current?: string } = {}): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    `current-context: ${parts.current ?? 'main'}`,
    'clusters:',
    '- name: prod',
    '  cluster:',
    ...(parts.cluster ?? `    server: https://prod.example:6443\n    certificate-authority-data: ${CA}`).split('\n'),
    ...(parts.extraClusters ?? '').split('\n').filter((l) => l !== ''),
    'users:',
    '- name: ci',
    '  user:',
    ...(parts.user ?? `    token: ${TOKEN}`).split('\n'),
    ...(parts.extraUsers ?? '').split('\n').filter((l) => l !== ''),
    'contexts:',
    '- name: main',
    '  context: { cluster: prod, user: ci, namespace: apps }',
    '- name: other',
    '  context: { cluster: prod, user: ci }',
    '',
  ].join('\n');
}

const opts: LoadKubeconfigOptions = { cluster: 'secret:team-a/prod' };

/** Asserts a refusal and that nothing about it leaks the token, even through `cause` or inspect(). */
function assertRefused(fn: () => unknown, rule: KubeconfigRule, subject: string): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof KubeconfigRefusedError, `expected KubeconfigRefusedError, got ${inspect(err)}`);
    assert.equal(err.code, 'ERR_KUBECONFIG_REFUSED');
    assert.equal(err.rule, rule);
    assert.equal(err.subject, subject);
    assert.equal(err.cluster, 'secret:team-a/prod');
    assert.match(err.message, new RegExp(`^cluster secret:team-a/prod: refused ${subject.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}: rule "${rule}"; `));
    assert.ok(!inspect(err).includes(TOKEN), 'the error leaks the token');
    return true;
  });
}

function assertInvalid(fn: () => unknown, message: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof KubeconfigInvalidError, `expected KubeconfigInvalidError, got ${inspect(err)}`);
    assert.equal(err.code, 'ERR_KUBECONFIG_INVALID');
    assert.equal(err.cluster, 'secret:team-a/prod');
    assert.match(err.message, message);
    assert.ok(!inspect(err).includes(TOKEN), `the error leaks the token: ${err.message}`);
    return true;
  });
}

describe('loadKubeconfig: accepted kubeconfigs', () => {
  it('yields the current context with its cluster and user only', () => {
    const kc = loadKubeconfig(kubeconfig({ extraClusters: '- name: unused\n  cluster: { server: "https://unused.example" }' }), opts);
    assert.equal(kc.getCurrentContext(), 'main');
    assert.deepEqual(kc.getContexts(), [{ name: 'main', cluster: 'prod', user: 'ci', namespace: 'apps' }]);
    assert.deepEqual(kc.getClusters().map((c) => c.name), ['prod']);
    assert.equal(kc.getCurrentCluster()?.server, 'https://prod.example:6443');
    assert.equal(kc.getCurrentCluster()?.caData, CA);
    assert.equal(kc.getCurrentCluster()?.skipTLSVerify, false);
    assert.equal(kc.getCurrentUser()?.token, TOKEN);
  });

  it('uses the chosen context instead of current-context', () => {
    const kc = loadKubeconfig(kubeconfig(), { ...opts, context: 'other' });
    assert.equal(kc.getCurrentContext(), 'other');
    assert.equal(kc.getContextObject('other')?.namespace, undefined);
  });

  it('applies the bearer token to requests', async () => {
    const kc = loadKubeconfig(kubeconfig(), opts);
    const request: { headers?: Record<string, unknown> } = {};
    await kc.applyToHTTPSOptions(request);
    assert.equal(request.headers?.Authorization, `Bearer ${TOKEN}`);
  });

  it('accepts client certificates embedded as data, and anonymous contexts', () => {
    const kc = loadKubeconfig(kubeconfig({ user: '    client-certificate-data: Y2VydA==\n    client-key-data: a2V5' }), opts);
    assert.equal(kc.getCurrentUser()?.certData, 'Y2VydA==');
    const anonymous = loadKubeconfig([
      'current-context: anon',
      'clusters: [{ name: c, cluster: { server: "https://c.example" } }]',
      'contexts: [{ name: anon, context: { cluster: c } }]',
    ].join('\n'), opts);
    assert.equal(anonymous.getCurrentUser(), null);
    assert.equal(anonymous.getCurrentCluster()?.server, 'https://c.example');
  });

  it('returns a new KubeConfig on every call', () => {
    const text = kubeconfig();
    assert.notEqual(loadKubeconfig(text, opts), loadKubeconfig(text, opts));
  });
});

describe('loadKubeconfig: safety rules', () => {
  it('refuses exec plugins, naming the user and command', () => {
    const text = kubeconfig({ user: '    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: aws\n      args: [eks, get-token, --token, x]' });
    assertRefused(() => loadKubeconfig(text, opts), 'exec', 'user "ci" exec command "aws"');
    const kc = loadKubeconfig(text, { ...opts, allowExec: true });
    assert.equal((kc.getCurrentUser()?.exec as { command?: string } | undefined)?.command, 'aws');
  });

  it('refuses an exec plugin in a user no context uses', () => {
    const text = kubeconfig({ extraUsers: '- name: spare\n  user:\n    exec: { command: /bin/sh, args: ["-c", "curl evil"] }' });
    assertRefused(() => loadKubeconfig(text, opts), 'exec', 'user "spare" exec command "/bin/sh"');
  });

  it('refuses auth-provider entries, and their commands and files unless each is allowed', () => {
    const oidc = kubeconfig({ user: `    auth-provider:\n      name: oidc\n      config: { id-token: ${TOKEN}, idp-issuer-url: "https://idp.example" }` });
    assertRefused(() => loadKubeconfig(oidc, opts), 'auth-provider', 'user "ci" auth-provider "oidc"');
    assert.equal((loadKubeconfig(oidc, { ...opts, allowAuthProvider: true }).getCurrentUser()?.authProvider as { name?: string }).name, 'oidc');

    const gcp = kubeconfig({ user: '    auth-provider:\n      name: gcp\n      config: { cmd-path: /usr/bin/gcloud, cmd-args: "config config-helper" }' });
    assertRefused(() => loadKubeconfig(gcp, { ...opts, allowAuthProvider: true }), 'exec', 'user "ci" auth-provider "gcp" cmd-path "/usr/bin/gcloud"');
    loadKubeconfig(gcp, { ...opts, allowAuthProvider: true, allowExec: true });

    const file = kubeconfig({ user: '    auth-provider:\n      name: tokenFile\n      config: { tokenFile: /etc/shadow }' });
    assertRefused(() => loadKubeconfig(file, { ...opts, allowAuthProvider: true }), 'local-file', 'user "ci" auth-provider "tokenFile" tokenFile "/etc/shadow"');
  });

  it('refuses every reference to a local file', () => {
    assertRefused(
      () => loadKubeconfig(kubeconfig({ cluster: '    server: https://prod.example\n    certificate-authority: /etc/kubernetes/pki/ca.crt' }), opts),
      'local-file', 'cluster "prod" certificate-authority file "/etc/kubernetes/pki/ca.crt"',
    );
    assertRefused(
      () => loadKubeconfig(kubeconfig({ user: '    client-certificate: /home/me/.kube/me.crt\n    client-key-data: a2V5' }), opts),
      'local-file', 'user "ci" client-certificate file "/home/me/.kube/me.crt"',
    );
    assertRefused(
      () => loadKubeconfig(kubeconfig({ user: '    client-certificate-data: Y2VydA==\n    client-key: /home/me/.kube/me.key' }), opts),
      'local-file', 'user "ci" client-key file "/home/me/.kube/me.key"',
    );
    assertRefused(() => loadKubeconfig(kubeconfig({ user: '    tokenFile: /var/run/secrets/token' }), opts), 'local-file', 'user "ci" tokenFile "/var/run/secrets/token"');
  });

  it('refuses a token file before anything reads it (client-node would read it while parsing)', () => {
    // client-node's own loader reads `token-file` at once and would fail with ENOENT here.
    assertRefused(() => loadKubeconfig(kubeconfig({ user: '    token-file: /nonexistent/token' }), opts), 'local-file', 'user "ci" token-file "/nonexistent/token"');
  });

  it('accepts absolute file references when allowed, and resolves relative ones only against a base directory', () => {
    const text = kubeconfig({ cluster: '    server: https://prod.example\n    certificate-authority: ca.crt', user: '    tokenFile: /var/run/token' });
    assertInvalid(() => loadKubeconfig(text, { ...opts, allowLocalFiles: true }), /cluster "prod" certificate-authority refers to the relative path "ca\.crt"/);
    const kc = loadKubeconfig(text, { ...opts, allowLocalFiles: true, baseDirectory: '/etc/kube' });
    assert.equal(kc.getCurrentCluster()?.caFile, '/etc/kube/ca.crt');
    // A token file is re-read through client-node's tokenFile authenticator, as tokens rotate.
    assert.deepEqual(kc.getCurrentUser()?.authProvider, { name: 'tokenFile', config: { tokenFile: '/var/run/token' } });
  });
});

describe('loadKubeconfig: invalid kubeconfigs', () => {
  it('reports a YAML syntax error by position, without the source line', () => {
    const text = `apiVersion: v1\nusers:\n- name: ci\n  user: { token: [${TOKEN}\n`;
    assertInvalid(() => loadKubeconfig(text, opts), /^cluster secret:team-a\/prod: invalid kubeconfig: not valid YAML at line \d+, column \d+$/);
  });

  it('refuses documents that are not kubeconfigs', () => {
    assertInvalid(() => loadKubeconfig('', opts), /the kubeconfig is empty/);
    assertInvalid(() => loadKubeconfig('- a\n- b\n', opts), /not a YAML mapping/);
    assertInvalid(() => loadKubeconfig('kind: Secret\n', opts), /kind must be Config, got "Secret"/);
    assertInvalid(() => loadKubeconfig('clusters: {}\n', opts), /clusters must be a list/);
    assertInvalid(() => loadKubeconfig(`${kubeconfig()}\n`.replace('- name: other', '- name: main'), opts), /contexts has two entries named "main"/);
  });

  it('names the missing context, cluster or user', () => {
    assertInvalid(() => loadKubeconfig(kubeconfig().replace('current-context: main\n', ''), opts), /no current-context is set and no context was chosen/);
    assertInvalid(() => loadKubeconfig(kubeconfig({ current: 'gone' }), opts), /context "gone" does not exist/);
    assertInvalid(() => loadKubeconfig(kubeconfig().replace('{ cluster: prod, user: ci, namespace', '{ cluster: staging, user: ci, namespace'), opts), /context "main" names cluster "staging", which does not exist/);
    assertInvalid(() => loadKubeconfig(kubeconfig().replace('{ cluster: prod, user: ci, namespace', '{ cluster: prod, user: bob, namespace'), opts), /context "main" names user "bob", which does not exist/);
  });

  it('requires an https server URL without credentials in it', () => {
    assertInvalid(() => loadKubeconfig(kubeconfig({ cluster: '    insecure-skip-tls-verify: true' }), { ...opts, allowInsecureTls: true }), /cluster "prod" has no server URL/);
    const plain = kubeconfig({ cluster: '    server: http://prod.example:8080' });
    assertInvalid(() => loadKubeconfig(plain, opts), /cluster "prod" server uses http:\/\/ without TLS/);
    assert.equal(loadKubeconfig(plain, { ...opts, allowPlainHttp: true }).getCurrentCluster()?.server, 'http://prod.example:8080');
    assertInvalid(() => loadKubeconfig(kubeconfig({ cluster: `    server: https://admin:${TOKEN}@prod.example` }), opts), /server URL must not carry credentials/);
    assertInvalid(() => loadKubeconfig(kubeconfig({ cluster: `    server: "not a url ${TOKEN}"` }), opts), /cluster "prod" server is not a valid URL/);
    assertInvalid(() => loadKubeconfig(kubeconfig({ cluster: '    server: ftp://prod.example' }), opts), /must be an https:\/\/ URL, got scheme "ftp:"/);
  });

  it('refuses contradictory credentials', () => {
    assertInvalid(() => loadKubeconfig(kubeconfig({ user: `    token: ${TOKEN}\n    username: admin\n    password: ${TOKEN}` }), opts), /user "ci" sets both a token and a username\/password/);
    assertInvalid(() => loadKubeconfig(kubeconfig({ user: '    client-certificate-data: Y2VydA==' }), opts), /user "ci" has a client certificate but no client key/);
    assertInvalid(() => loadKubeconfig(kubeconfig({ cluster: `    server: https://p.example\n    insecure-skip-tls-verify: true\n    certificate-authority-data: ${CA}` }), { ...opts, allowInsecureTls: true }), /sets both insecure-skip-tls-verify and a certificate authority/);
    assertInvalid(() => loadKubeconfig(kubeconfig({ user: `    token: { value: ${TOKEN} }` }), opts), /user "ci" field token must be a string/);
  });

  it('rejects an empty cluster name as a programming error', () => {
    assert.throws(() => loadKubeconfig(kubeconfig(), { cluster: '' }), TypeError);
  });
});

describe('localKubeConfig', () => {
  let dir = '';
  before(async () => { dir = await mkdtemp(path.join(tmpdir(), 'fleetcache-kubeconfig-')); });
  after(async () => { await rm(dir, { recursive: true, force: true }); });

  it('trusts a kubeconfig file: exec allowed, relative paths resolved against its directory', async () => {
    const file = path.join(dir, 'config');
    await writeFile(file, kubeconfig({
      cluster: '    server: https://prod.example\n    certificate-authority: pki/ca.crt',
      user: '    exec: { apiVersion: client.authentication.k8s.io/v1, command: kubelogin }',
    }));
    const kc = await localKubeConfig({ kubeconfigPath: file, context: 'other' });
    assert.equal(kc.getCurrentContext(), 'other');
    assert.equal(kc.getCurrentCluster()?.caFile, path.join(dir, 'pki/ca.crt'));
    assert.equal((kc.getCurrentUser()?.exec as { command?: string } | undefined)?.command, 'kubelogin');
  });

  it('builds the in-cluster config from the caller-supplied host and port, authenticating with the mounted token file', async () => {
    const sa = path.join(dir, 'sa');
    await mkdir(sa);
    await writeFile(path.join(sa, 'namespace'), 'fleet-system');
    await writeFile(path.join(sa, 'token'), 'first-token');
    await writeFile(path.join(sa, 'ca.crt'), Buffer.from(CA, 'base64'));
    const kc = await localKubeConfig({ inCluster: { host: 'fd00::1', port: '443', serviceAccountDir: sa } });
    assert.equal(kc.getCurrentCluster()?.server, 'https://[fd00::1]:443');
    assert.equal(kc.getCurrentCluster()?.caFile, path.join(sa, 'ca.crt'));
    assert.equal(kc.getContextObject(kc.getCurrentContext())?.namespace, 'fleet-system');
    const request: { headers?: Record<string, unknown> } = {};
    await kc.applyToHTTPSOptions(request);
    assert.equal(request.headers?.Authorization, 'Bearer first-token');
  });

  it('needs exactly one source, and a valid port', async () => {
    await assert.rejects(localKubeConfig({}), TypeError);
    await assert.rejects(localKubeConfig({ kubeconfigPath: '/x', inCluster: { host: 'h', port: 443 } }), TypeError);
    await assert.rejects(localKubeConfig({ inCluster: { host: '10.0.0.1', port: 'https' } }), /inCluster\.port must be a TCP port, got "https"/);
  });
});
