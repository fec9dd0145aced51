import { isIP } from 'node:net';
import { OutboundError, resolveHost, type HostResolver } from '../transport/index.ts';
import { GitOpsError } from './errors.ts';

/** How tenant-supplied URLs (the repository, a provider's API) are allowed to look and where they may lead. */
export interface UrlPolicy {
  /** Accept `http://` (no TLS): for tests and demos on loopback. Default false. */
  readonly allowHttp?: boolean;
  /**
   * Accept hosts that resolve to loopback and private addresses (RFC 1918, CGNAT, IPv6 ULA);
   * link-local (cloud metadata), unspecified, multicast and reserved addresses stay refused.
   * Default false.
   */
  readonly allowPrivateNetworks?: boolean;
  /** Resolves a host name to its addresses. Default: the system resolver (`dns.lookup`, all addresses). */
  readonly lookup?: (host: string) => Promise<readonly string[]>;
}

/** A URL that passed {@link checkUrl}. */
export interface CheckedUrl {
  readonly url: URL;
  readonly scheme: 'https' | 'http' | 'ssh';
  /** Host name or IP literal, without IPv6 brackets. */
  readonly host: string;
  readonly port: number;
}

/** A checked URL with the one address every connection for it goes to. */
export interface PinnedUrl extends CheckedUrl {
  readonly address: string;
}

const MAX_URL_LENGTH = 2_048;
const DEFAULT_PORTS = { https: 443, http: 80, ssh: 22 } as const;

/** `scheme://host[:port]/path`, never user information, query or fragment: safe for messages. */
export function describeUrl(url: URL): string {
  return `${url.protocol}//${url.host}${url.pathname}`;
}

/**
 * Checks a URL a tenant wrote. Refused with a {@link GitOpsError} (`UrlRefused`, a message that
 * does not repeat the URL): anything that does not parse as an absolute URL (scp-like `host:path`
 * included), a scheme other than https (http with `allowHttp`; ssh when `allowSsh`), credentials
 * in the URL (a user name only for ssh), a query or fragment, whitespace or control characters,
 * and a leading `-` (it would be an option to git).
 */
export function checkUrl(raw: unknown, policy: UrlPolicy & { readonly allowSsh?: boolean }, what = 'the repository URL'): CheckedUrl {
  if (typeof raw !== 'string' || raw === '' || raw.length > MAX_URL_LENGTH) throw new GitOpsError('UrlRefused', `${what} must be a non-empty string of at most ${MAX_URL_LENGTH} characters`);
  // eslint-disable-next-line no-control-regex
  if (/[\s\u0000-\u001f\u007f]/.test(raw)) throw new GitOpsError('UrlRefused', `${what} contains whitespace or control characters`);
  if (raw.startsWith('-')) throw new GitOpsError('UrlRefused', `${what} starts with "-"`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new GitOpsError('UrlRefused', `${what} is not an absolute URL (scp-like host:path is not accepted; write ssh://)`);
  }
  const scheme = url.protocol.slice(0, -1);
  if (scheme !== 'https' && !(scheme === 'http' && policy.allowHttp === true) && !(scheme === 'ssh' && policy.allowSsh === true)) {
    const accepted = ['https', ...(policy.allowHttp === true ? ['http'] : []), ...(policy.allowSsh === true ? ['ssh'] : [])].join(', ');
    throw new GitOpsError('UrlRefused', `${what} has scheme ${JSON.stringify(scheme.slice(0, 20))}; accepted: ${accepted}`);
  }
  if (url.password !== '' || (url.username !== '' && scheme !== 'ssh')) throw new GitOpsError('UrlRefused', `${what} carries credentials; put them in the Secret`);
  if (url.search !== '' || url.hash !== '') throw new GitOpsError('UrlRefused', `${what} has a query or fragment`);
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  if (host === '' || host.startsWith('-')) throw new GitOpsError('UrlRefused', `${what} has no usable host`);
  if (url.pathname === '/' || url.pathname === '') throw new GitOpsError('UrlRefused', `${what} names no repository path`);
  const port = url.port === '' ? DEFAULT_PORTS[scheme] : Number(url.port);
  return { url, scheme, host, port };
}

/**
 * Resolves the URL's host once, checks every address it has, and returns the first: the caller
 * connects to that address only (git through `http.curloptResolve`, HTTP clients through their
 * `lookup`), so a name that resolves differently a moment later (DNS rebinding) gains nothing.
 */
export async function pinUrl(checked: CheckedUrl, policy: UrlPolicy, what = 'the repository URL'): Promise<PinnedUrl> {
  const lookup = policy.lookup;
  const resolve: HostResolver | undefined = lookup === undefined ? undefined : async (host) => (await lookup(host)).map((address) => ({ address, family: isIP(address) === 6 ? 6 : 4 }));
  try {
    const [first] = await resolveHost(checked.host, { allowPrivateNetworks: policy.allowPrivateNetworks, resolve });
    return { ...checked, address: first?.address ?? '' };
  } catch (err) {
    if (!(err instanceof OutboundError)) throw err;
    if (err.failure === 'refused') throw addressRefused(err, checked.host, what);
    if (err.failure === 'no-address') throw new GitOpsError('ResolveFailed', `the host of ${what} (${checked.host}) has no address`);
    throw new GitOpsError('ResolveFailed', `the host of ${what} (${checked.host}) could not be resolved`, { cause: err.cause });
  }
}

/** An address refusal (`AddressRefused`) in GitOps words: the host and the category, never the address. */
export function addressRefused(err: OutboundError, host: string, what: string): GitOpsError {
  const relaxable = err.relaxable ? '; refused unless private networks are allowed' : '';
  return new GitOpsError('AddressRefused', `the host of ${what} (${host}) resolves to a ${err.category ?? 'reserved'} address${relaxable}`);
}
