// Kubeconfig leniencies closed: insecure-skip-tls-verify is refused unless allowInsecureTls (the
// service's --insecure-kubeconfig-tls), proxy-url is limited to http, https and socks5 URLs with a
// host, and no credential (token, password, client key, proxy password) appears in any error, its
// cause chain included, whether the kubeconfig is refused at load or its proxy fails at request time.
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { inspect } from 'node:util';
import { ClusterConnection, createListLimiter } from '../transport/index.ts';
import { KubeconfigInvalidError, KubeconfigRefusedError, TransportError } from '../util/index.ts';
import { loadKubeconfig, SecretProvider, type SecretReader } from './index.ts';

const TOKEN = 'tok-7f3a9c-never-shown';
const PASSWORD = 'pw-hunter2-never-shown';
const PROXY_PASSWORD = 'proxy-pw-never-shown';
const KEY_DATA = Buffer.from('-----BEGIN PRIVATE KEY-----\nkey-material-never-shown\n-----END PRIVATE KEY-----\n').toString('base64');
const SECRETS = [TOKEN, PASSWORD, PROXY_PASSWORD, 'key-material-never-shown', KEY_DATA];
const listLimiter = createListLimiter();

interface Parts {
  readonly cluster?: string;
  readonly user?: string;
  readonly extraClusters?: string;
}

/** A kubeconfig whose cluster body and user body are given as indented YAML lines. */
function kubeconfig(parts: Parts = {}): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '- name: prod',
    '  cluster:',
    parts.cluster ?? '    server: https://prod.example:6443',
    parts.extraClusters ?? '',
    'users:',
    '- name: ci',
    '  user:',
    parts.user ?? `    token: ${TOKEN}`,
    'contexts:',
    '- name: prod',
    '  context: {cluster: prod, user: ci}',
    'current-context: prod',
    '',
  ].join('\n');
}

/** Fails if any credential appears anywhere in the error, its fields and its cause chain. */
function assertNoCredential(err: unknown): void {
  const text = inspect(err, { depth: 10, showHidden: true });
  for (const secret of SECRETS) assert.ok(!text.includes(secret), `credential ${secret.slice(0, 12)}… leaked:\n${text}`);
}

function caught(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  return assert.fail('expected a throw');
}

const opts = { cluster: 'secret:team/prod' } as const;

describe('insecure-skip-tls-verify', () => {
  it('is refused by default, naming the cluster entry and the option that allows it', () => {
    const err = caught(() => loadKubeconfig(kubeconfig({ cluster: '    server: https://prod.example:6443\n    insecure-skip-tls-verify: true' }), opts));
    assert.ok(err instanceof KubeconfigRefusedError, inspect(err));
    assert.equal(err.code, 'ERR_KUBECONFIG_REFUSED');
    assert.equal(err.rule, 'insecure-tls');
    assert.equal(err.cluster, 'secret:team/prod');
    assert.match(err.message, /cluster "prod" insecure-skip-tls-verify/);
    assert.match(err.message, /allowInsecureTls \(flag --insecure-kubeconfig-tls\)/);
    assertNoCredential(err);
  });

  it('is refused in a cluster entry the context does not use', () => {
    const extra = '- name: other\n  cluster:\n    server: https://other.example\n    insecure-skip-tls-verify: true';
    const err = caught(() => loadKubeconfig(kubeconfig({ extraClusters: extra }), opts));
    assert.ok(err instanceof KubeconfigRefusedError && err.rule === 'insecure-tls' && err.message.includes('"other"'), inspect(err));
  });

  it('is accepted with allowInsecureTls, and false stays accepted without it', () => {
    const yaml = kubeconfig({ cluster: '    server: https://prod.example:6443\n    insecure-skip-tls-verify: true' });
    assert.equal(loadKubeconfig(yaml, { ...opts, allowInsecureTls: true }).getCurrentCluster()?.skipTLSVerify, true);
    assert.equal(loadKubeconfig(kubeconfig({ cluster: '    server: https://prod.example:6443\n    insecure-skip-tls-verify: false' }), opts).getCurrentCluster()?.skipTLSVerify, false);
  });

  it('SecretProvider refuses it unless allowInsecureTls', async () => {
    const yaml = kubeconfig({ cluster: '    server: https://prod.example:6443\n    insecure-skip-tls-verify: true' });
    const secrets: SecretReader = { getSecret: () => Promise.resolve({ data: { value: Buffer.from(yaml).toString('base64') } }) };
    const ref = { kind: 'secret', name: 'prod' } as const;
    const context = { ownerNamespace: 'team' };
    await assert.rejects(new SecretProvider({ secrets }).resolve(ref, context), (err: unknown) => err instanceof KubeconfigRefusedError && err.rule === 'insecure-tls');
    const access = await new SecretProvider({ secrets, allowInsecureTls: true }).resolve(ref, context);
    assert.equal(access.kubeConfig.getCurrentCluster()?.skipTLSVerify, true);
    assert.throws(() => new SecretProvider({ secrets, allowInsecureTls: 'yes' as unknown as boolean }), (err: unknown) => err instanceof TypeError && err.message.includes('allowInsecureTls'));
  });
});

describe('proxy-url', () => {
  const withProxy = (proxy: string, user?: string): string => kubeconfig({ cluster: `    server: https://prod.example:6443\n    proxy-url: ${JSON.stringify(proxy)}`, ...(user === undefined ? {} : { user }) });

  for (const proxy of ['file:///etc/passwd', 'file://localhost/etc/passwd', 'ftp://proxy.example', `socks4://ci:${PROXY_PASSWORD}@proxy.example:1080`, 'unix:/var/run/proxy.sock', 'data:text/plain,x']) {
    it(`refuses ${proxy.replace(PROXY_PASSWORD, '***')}`, () => {
      const err = caught(() => loadKubeconfig(withProxy(proxy), opts));
      assert.ok(err instanceof KubeconfigRefusedError, inspect(err));
      assert.equal(err.rule, 'proxy');
      assert.match(err.message, /cluster "prod" proxy-url with scheme/);
      assertNoCredential(err);
    });
  }

  for (const proxy of ['http://', `file://ci:${PROXY_PASSWORD}@localhost/etc/passwd`, `http://ci:${PROXY_PASSWORD}@[::1`, `http://ci:${PROXY_PASSWORD}@proxy.example:99999`, `https://ci:${PROXY_PASSWORD}@proxy.example:3128/path?token=${TOKEN}`]) {
    it(`refuses a malformed one without echoing it: ${proxy.replace(PROXY_PASSWORD, '***').replace(TOKEN, '***')}`, () => {
      const err = caught(() => loadKubeconfig(withProxy(proxy), opts));
      assert.ok(err instanceof KubeconfigInvalidError || (err instanceof KubeconfigRefusedError && err.rule === 'proxy'), inspect(err));
      assert.equal((err as Error).cause, undefined, 'no cause that could hold the URL');
      assertNoCredential(err);
    });
  }

  it('accepts http, https and socks5 proxies with a host', () => {
    for (const proxy of ['http://proxy.example:3128', 'https://proxy.example', `socks5://ci:${PROXY_PASSWORD}@proxy.example:1080`, `http://ci:${PROXY_PASSWORD}@10.0.0.1:3128/`]) {
      assert.equal(loadKubeconfig(withProxy(proxy), opts).getCurrentCluster()?.proxyUrl, proxy);
    }
  });

  for (const scheme of ['http', 'socks5']) {
    it(`a ${scheme} proxy that fails at request time leaves no credential in the error`, async () => {
      // A port that refuses connections: listen, note it, close.
      const probe = createServer();
      await new Promise<void>((resolve) => { probe.listen(0, '127.0.0.1', resolve); });
      const port = (probe.address() as AddressInfo).port;
      await new Promise<void>((resolve) => { probe.close(() => { resolve(); }); });
      const kc = loadKubeconfig(withProxy(`${scheme}://ci:${PROXY_PASSWORD}@127.0.0.1:${port}`, `    username: ci\n    password: ${PASSWORD}`), opts);
      const conn = new ClusterConnection({ name: 'prod', kubeConfig: kc, listLimiter, requestTimeoutMs: 10_000 });
      try {
        const err = await conn.resolve({ group: '', version: 'v1', kind: 'ConfigMap' }).then(() => undefined, (e: unknown) => e);
        assert.ok(err instanceof TransportError, inspect(err));
        assertNoCredential(err);
      } finally {
        await conn.close();
      }
    });
  }
});

describe('no credential in load errors', () => {
  const cases: readonly [string, string][] = [
    ['YAML syntax error on the token line', kubeconfig({ user: `    token: ${TOKEN}: [` })],
    ['token and password together', kubeconfig({ user: `    token: ${TOKEN}\n    username: ci\n    password: ${PASSWORD}` })],
    ['client key without certificate', kubeconfig({ user: `    client-key-data: ${KEY_DATA}` })],
    ['server URL with a password', kubeconfig({ cluster: `    server: https://ci:${PASSWORD}@prod.example` })],
    ['malformed server URL with a password', kubeconfig({ cluster: `    server: https://ci:${PASSWORD}@[prod` })],
    ['token that is not a string', kubeconfig({ user: `    token: [${TOKEN}]` })],
  ];
  for (const [what, yaml] of cases) {
    it(what, () => {
      const err = caught(() => loadKubeconfig(yaml, opts));
      assert.ok(err instanceof KubeconfigInvalidError || err instanceof KubeconfigRefusedError, inspect(err));
      assertNoCredential(err);
    });
  }
});
