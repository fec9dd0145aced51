// What a request carries is what client-node's applyToHTTPSOptions would give it, for every kind of
// user, without the https.Agent that call keeps in the KubeConfig for good (issue 12's per-cluster cost).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type * as https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { SIM_CERT_PEM } from '../../fixtures/sim/index.ts';
import { applyCredentials } from './credentials.ts';
import { kubeConfigFrom } from '../../fixtures/support/index.ts';

const dir = mkdtempSync(join(tmpdir(), 'fleetcache-credentials-'));
after(() => { rmSync(dir, { recursive: true, force: true }); });
const tokenFile = join(dir, 'token');
writeFileSync(tokenFile, 'token-from-file');
const b64 = (text: string): string => Buffer.from(text).toString('base64');
const execCredential = JSON.stringify({ apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential', status: { token: 'token-from-exec' } });

function kubeconfig(user: string, cluster = ''): string {
  return `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: ${b64(SIM_CERT_PEM)}
    tls-server-name: api.example
${cluster}contexts:
- name: ctx
  context: { cluster: c, user: u }
current-context: ctx
users:
- name: u
  user:
${user}
`;
}

const USERS: readonly (readonly [string, string])[] = [
  ['a bearer token', '    token: static-token'],
  ['a username and password', '    username: ci\n    password: secret'],
  ['a client certificate', `    client-certificate-data: ${b64('cert')}\n    client-key-data: ${b64('key')}`],
  ['an impersonated user', '    token: t\n    as: someone'],
  ['an exec plugin', `    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: ${JSON.stringify(process.execPath)}\n      args: ["-e", ${JSON.stringify(`console.log(${JSON.stringify(execCredential)})`)}]`],
  ['a token file', `    auth-provider:\n      name: tokenFile\n      config: { tokenFile: ${JSON.stringify(tokenFile)} }`],
];

/** client-node's agent cache (private): present, and how many agents it keeps. */
function cachedAgents(kc: KubeConfig): number {
  const cache: unknown = (kc as unknown as { agentCache?: unknown }).agentCache;
  assert.ok(cache instanceof Map, 'client-node keeps its agents in agentCache: if this changed, see credentials.ts');
  return cache.size;
}

describe('applyCredentials', () => {
  it('takes the agentless path in this client-node', () => {
    assert.equal(typeof (KubeConfig.prototype as unknown as { applyOptions?: unknown }).applyOptions, 'function');
  });

  for (const [what, user] of USERS) {
    it(`gives a request with ${what} what applyToHTTPSOptions gives, and leaves no agent in the KubeConfig`, async () => {
      const ours = kubeConfigFrom(kubeconfig(user));
      const theirs = kubeConfigFrom(kubeconfig(user));
      const got: https.RequestOptions = {};
      await applyCredentials(ours, got, false);
      const want: https.RequestOptions = {};
      await theirs.applyToHTTPSOptions(want);
      assert.ok(want.agent !== undefined);
      delete want.agent;
      assert.deepEqual(got, want);
      const headers = got.headers as Readonly<Record<string, unknown>> | undefined;
      assert.ok(headers?.Authorization !== undefined || got.auth !== undefined || got.cert !== undefined, 'some credential was applied');
      assert.equal(cachedAgents(ours), 0);
      assert.equal(cachedAgents(theirs), 1, 'applyToHTTPSOptions caches an agent: the saving is real');
    });
  }

  it('behind a proxy, gives the kubeconfig\'s proxy agent (kept, and reused)', async () => {
    const kc = kubeConfigFrom(kubeconfig('    token: t', '    proxy-url: http://127.0.0.1:3128\n'));
    const first: https.RequestOptions = {};
    await applyCredentials(kc, first, true);
    assert.ok(first.agent !== undefined);
    const second: https.RequestOptions = {};
    await applyCredentials(kc, second, true);
    assert.equal(second.agent, first.agent);
  });
});
