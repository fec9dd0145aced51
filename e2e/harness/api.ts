import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { setTimeout as delay } from 'node:timers/promises';
import { kubeconfigJson } from '../../fixtures/support/kubeconfig.ts';

/** An HTTP answer from {@link AdminApi.request}. */
export interface AdminResponse {
  readonly statusCode: number;
  readonly body: unknown;
}

/** What the harness does with admin rights on any cluster, local or external (kind). */
export interface AdminApi {
  /** An admin request (JSON in, JSON out) that never throws on HTTP status. */
  request(method: string, path: string, body?: unknown): Promise<AdminResponse>;
  /**
   * A kubeconfig for a ServiceAccount (namespace and account created when missing) with a token
   * from the TokenRequest API. No RBAC is granted: tests grant what they need.
   */
  restrictedKubeconfig(subject: { readonly namespace: string; readonly serviceAccount: string }): Promise<string>;
  /** Creates or updates CustomResourceDefinitions and waits until each is Established and discoverable. */
  installCRDs(crds: readonly object[]): Promise<void>;
}

export interface RawResponse { readonly statusCode: number; readonly text: string }

export interface RawRequestInit {
  readonly method?: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: string;
  readonly ca?: string;
  readonly cert?: string | Buffer;
  readonly key?: string | Buffer;
  readonly insecure?: boolean;
  readonly timeoutMs?: number;
}

/** One HTTP(S) request, body read whole. */
export function rawRequest(url: string, init: RawRequestInit): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
    const req = send(target, {
      method: init.method ?? 'GET',
      headers: init.headers,
      ...(target.protocol === 'https:' ? { ca: init.ca, cert: init.cert, key: init.key, rejectUnauthorized: init.insecure !== true } : {}),
      timeout: init.timeoutMs ?? 30_000,
    }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => { resolve({ statusCode: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }); });
      res.on('error', reject);
    });
    req.on('timeout', () => { req.destroy(new Error(`timeout: ${init.method ?? 'GET'} ${url}`)); });
    req.on('error', reject);
    req.end(init.body);
  });
}

interface CrdShape {
  readonly metadata: { readonly name: string };
  readonly spec: { readonly group: string; readonly names: { readonly plural: string }; readonly versions: readonly { readonly name: string; readonly served: boolean }[] };
}

/** The admin API over `send`, which performs one authenticated JSON request. */
export function adminApi(
  name: string,
  server: string,
  caData: string,
  send: (method: string, path: string, body: unknown) => Promise<RawResponse>,
): AdminApi {
  const request = async (method: string, path: string, body?: unknown): Promise<AdminResponse> => {
    const res = await send(method, path, body);
    let parsed: unknown = res.text;
    try { parsed = JSON.parse(res.text); } catch { /* keep the text */ }
    return { statusCode: res.statusCode, body: parsed };
  };
  const must = async (method: string, path: string, body: unknown, ok: readonly number[]): Promise<AdminResponse> => {
    const res = await request(method, path, body);
    if (!ok.includes(res.statusCode)) throw new Error(`harness: ${method} ${path} → HTTP ${res.statusCode}: ${JSON.stringify(res.body)}`);
    return res;
  };

  return {
    request,
    async restrictedKubeconfig({ namespace, serviceAccount }) {
      await must('POST', '/api/v1/namespaces', { metadata: { name: namespace } }, [201, 409]);
      await must('POST', `/api/v1/namespaces/${namespace}/serviceaccounts`, { metadata: { name: serviceAccount } }, [201, 409]);
      const res = await must('POST', `/api/v1/namespaces/${namespace}/serviceaccounts/${serviceAccount}/token`,
        { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 86_400 } }, [201]);
      const token = (res.body as { status?: { token?: string } }).status?.token;
      if (token === undefined) throw new Error('harness: TokenRequest returned no token');
      return kubeconfigJson({ name, server, caPem: caData, user: `system:serviceaccount:${namespace}:${serviceAccount}`, token });
    },
    async installCRDs(crds) {
      for (const crd of crds as readonly CrdShape[]) {
        const path = `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd.metadata.name}`;
        const created = await request('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd);
        if (created.statusCode === 409) {
          const current = await must('GET', path, undefined, [200]);
          const rv = (current.body as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
          await must('PUT', path, { ...crd, metadata: { ...crd.metadata, resourceVersion: rv } }, [200]);
        } else if (created.statusCode !== 201) {
          throw new Error(`harness: creating CRD ${crd.metadata.name} → HTTP ${created.statusCode}: ${JSON.stringify(created.body)}`);
        }
      }
      const deadline = Date.now() + 60_000;
      for (const crd of crds as readonly CrdShape[]) {
        for (;;) {
          const res = await must('GET', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd.metadata.name}`, undefined, [200]);
          const conditions = (res.body as { status?: { conditions?: readonly { type: string; status: string }[] } }).status?.conditions ?? [];
          let ready = conditions.some((c) => c.type === 'Established' && c.status === 'True');
          for (const version of crd.spec.versions.filter((v) => v.served)) {
            if (!ready) break;
            const disc = await request('GET', `/apis/${crd.spec.group}/${version.name}`);
            const resources = (disc.body as { resources?: readonly { name: string }[] }).resources ?? [];
            ready = disc.statusCode === 200 && resources.some((r) => r.name === crd.spec.names.plural);
          }
          if (ready) break;
          if (Date.now() > deadline) throw new Error(`harness: CRD ${crd.metadata.name} not established within 60 s`);
          await delay(100);
        }
      }
    },
  };
}
