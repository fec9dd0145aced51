import type * as https from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';

/** The step of client-node's `applyToHTTPSOptions` that builds no agent (private in its types). */
interface AgentlessKubeConfig {
  applyOptions(opts: https.RequestOptions): Promise<void>;
}

/**
 * Fills `opts` with what one request to the cluster carries, as `KubeConfig.applyToHTTPSOptions`
 * does: TLS material (CA, client certificate and key, `servername`, `rejectUnauthorized`), headers
 * (`Authorization` from the token or from the kubeconfig's authenticators: exec, auth providers,
 * token files, each refreshing as it decides, per request; `Impersonate-User`) and basic `auth`.
 * With `withAgent` (a proxy), also the kubeconfig's agent, which speaks to the proxy.
 *
 * Without a proxy no agent is asked for: `applyToHTTPSOptions` builds an https.Agent and keeps it
 * in the KubeConfig for good, with its options and the CA Buffer (a slice pinning a 64 KiB Buffer
 * pool slab), about 6.5 KiB per cluster that nothing uses (issue 12). Its first step,
 * `applyOptions`, does everything else; it is private in client-node's types, so it is reached here
 * and nowhere else, and a client-node without it gets `applyToHTTPSOptions` as before
 * (credentials.test.ts fails then, so the saving is not lost silently).
 */
export async function applyCredentials(kc: KubeConfig, opts: https.RequestOptions, withAgent: boolean): Promise<void> {
  const agentless = kc as unknown as Partial<AgentlessKubeConfig>;
  if (withAgent || typeof agentless.applyOptions !== 'function') {
    await kc.applyToHTTPSOptions(opts);
    return;
  }
  await agentless.applyOptions.call(kc, opts);
  // What applyToHTTPSOptions adds after applyOptions, agent aside (its very expression).
  const user = kc.getCurrentUser();
  if (user?.username !== undefined && user.username !== '') opts.auth = `${user.username}:${String(user.password)}`;
}
