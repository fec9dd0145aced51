import { lookup as dnsLookup } from 'node:dns/promises';
import { request as httpRequest, type ClientRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP, type LookupFunction, type Socket } from 'node:net';
import {
  abortReason,
  classifyAddress,
  FleetcacheError,
  nonNegativeInteger,
  PRIVATE_CATEGORIES,
  realClock,
  type AddressCategory,
  type Clock,
} from '../util/index.ts';
import { readBounded } from './bounded.ts';

// Outbound HTTP to a host a tenant names (a webhook receiver, a Git provider's API): the one place
// that resolves such a host, refuses inside addresses, pins the connection to what was checked,
// bounds the answer and puts one deadline on the whole exchange. Callers turn an OutboundError into
// their own error type and words; nothing here ever repeats a URL beyond its host.

/** One address a host name resolves to. */
export interface ResolvedAddress {
  readonly address: string;
  readonly family: 4 | 6;
}

/** Resolves a host name to every address it has, as `dns.lookup(name, { all: true })` does. */
export type HostResolver = (hostname: string) => Promise<readonly ResolvedAddress[]>;

/** Where a tenant-named host may lead. */
export interface AddressPolicy {
  /**
   * Let loopback and private addresses (RFC 1918, CGNAT, IPv6 ULA) through; link-local (cloud
   * metadata), unspecified, multicast and reserved addresses stay refused. Default false.
   */
  readonly allowPrivateNetworks?: boolean | undefined;
  /** How host names are resolved. Default: `dns.lookup` with `all: true`, in the resolver's order. */
  readonly resolve?: HostResolver | undefined;
}

/** Why an outbound exchange failed. */
export type OutboundFailure =
  /** An address the host has (or the socket connected to) is not allowed: `category`, `address`. */
  | 'refused'
  /** The resolver failed (its error is the cause). */
  | 'unresolved'
  /** The resolver answered with no address (of the family asked for). */
  | 'no-address'
  /** Resolving or connecting failed, or the connection broke before the answer's headers. */
  | 'unreachable'
  /** `timeoutMs` passed, at `stage`. */
  | 'deadline'
  /** The answer's body is over `maxBodyBytes`. */
  | 'too-large'
  /** The connection broke while the body was arriving. */
  | 'broken';

/** Where an exchange is, for a deadline's message. */
export type OutboundStage = 'connecting' | 'waiting for the answer' | 'reading the answer';

/**
 * An outbound exchange failed. The message holds fixed words only (never the URL, never what the
 * peer sent): callers word their own errors from the fields.
 */
export class OutboundError extends FleetcacheError {
  readonly failure: OutboundFailure;
  /** For `refused`: the category and the address refused (the address is never in the message). */
  readonly category: AddressCategory | undefined;
  readonly address: string | undefined;
  /** For `refused`: allowing private networks would let this address through. */
  readonly relaxable: boolean;
  /** For `deadline`: where the exchange was. */
  readonly stage: OutboundStage | undefined;
  /** The answer's HTTP status, once it arrived. */
  readonly statusCode: number | undefined;
  /** The system error code of the failure (`ECONNREFUSED`), when there is one that looks like one. */
  readonly peerCode: string | undefined;

  constructor(failure: OutboundFailure, message: string, details: ErrorOptions & {
    readonly category?: AddressCategory;
    readonly address?: string;
    readonly stage?: OutboundStage;
    readonly statusCode?: number;
    readonly peerCode?: string | undefined;
  } = {}) {
    super('ERR_OUTBOUND', message, details.cause === undefined ? undefined : { cause: details.cause });
    this.failure = failure;
    this.category = details.category;
    this.address = details.address;
    this.relaxable = details.category !== undefined && PRIVATE_CATEGORIES.has(details.category);
    this.stage = details.stage;
    this.statusCode = details.statusCode;
    this.peerCode = details.peerCode;
  }
}

/** A system error's code (`ECONNREFUSED`), the one part of a peer's failure a message may repeat. */
function errnoCode(err: unknown): string | undefined {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === 'string' && /^[A-Z][A-Z0-9_]{0,39}$/.test(code) ? code : undefined;
}

/**
 * Throws an OutboundError (`refused`) when a connection to `address` is not allowed. Decided on the
 * address a socket is about to use (or used), never on a host name, so neither DNS rebinding nor an
 * odd notation of 127.0.0.1 gets in. `address` must be an IP (a TypeError otherwise).
 */
export function checkAddress(address: string, policy: AddressPolicy): void {
  const category = classifyAddress(address);
  if (category === undefined || (policy.allowPrivateNetworks === true && PRIVATE_CATEGORIES.has(category))) return;
  throw new OutboundError('refused', `the host resolves to a ${category} address`, { category, address });
}

const systemResolver: HostResolver = async (hostname) => {
  const answers = await dnsLookup(hostname, { all: true, order: 'verbatim' });
  return answers.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
};

/** `host` without IPv6 brackets. */
function bare(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}

/**
 * Resolves `host` once (an IP literal is its own answer) and checks every address it has: one
 * refused address refuses the name, so an answer that mixes a public address with an inside one
 * gets nowhere. Resolves with all of them, in the resolver's order; connect only to these.
 */
export async function resolveHost(host: string, policy: AddressPolicy): Promise<readonly ResolvedAddress[]> {
  const name = bare(host);
  const family = isIP(name);
  let answers: readonly ResolvedAddress[];
  if (family !== 0) {
    answers = [{ address: name, family: family === 6 ? 6 : 4 }];
  } else {
    try {
      answers = await (policy.resolve ?? systemResolver)(name);
    } catch (err) {
      throw new OutboundError('unresolved', 'the host could not be resolved', { cause: err, peerCode: errnoCode(err) });
    }
  }
  if (answers.length === 0) throw new OutboundError('no-address', 'the host has no address', { peerCode: 'ENOTFOUND' });
  for (const answer of answers) checkAddress(answer.address, policy);
  return answers;
}

/** One HTTP request to a tenant-named host. */
export interface OutboundRequest {
  /** http: or https:. Its user and password, if any, are sent as Basic authentication. */
  readonly url: URL;
  /** Path and query sent, as written; default the URL's. */
  readonly path?: string | undefined;
  readonly method: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: Buffer | undefined;
  /**
   * The addresses to connect to, already resolved and checked by {@link resolveHost} (pinned by
   * the caller, e.g. shared with git). Without them the host is resolved once, at connect time,
   * under the deadline.
   */
  readonly addresses?: readonly ResolvedAddress[] | undefined;
  readonly policy: AddressPolicy;
  /** Bound on the whole exchange: resolving, connecting, sending, the answer's headers and its body. */
  readonly timeoutMs: number;
  /** Default the real clock. */
  readonly clock?: Clock | undefined;
  /** Aborting fails the exchange with the signal's reason. */
  readonly signal?: AbortSignal | undefined;
  /** Bound on the answer's body. A non-negative integer. */
  readonly maxBodyBytes: number;
  /** Keep the body (default true), or read it to its end and let it go. */
  readonly keepBody?: boolean | undefined;
  /** Whether the body of an answer with this status is read at all (default: every status). */
  readonly readBody?: ((status: number) => boolean) | undefined;
}

/** An answer whose body (if read) arrived whole. */
export interface OutboundAnswer {
  readonly status: number;
  /** Undefined when `readBody` said not to read it; empty when `keepBody` is false. */
  readonly body: Buffer | undefined;
}

/**
 * Sends one request to a tenant-named host. The connection is fresh (no pooled socket skips a
 * check), goes only to checked addresses, and the address it actually connected to is checked
 * again. Redirects are never followed: a 3xx is an answer like any other. Fails with an
 * {@link OutboundError} (`refused`, `unreachable`, `deadline`, `too-large`, `broken`), or with the
 * signal's reason.
 */
export async function sendOutbound(request: OutboundRequest): Promise<OutboundAnswer> {
  const { url, policy, timeoutMs, signal, maxBodyBytes } = request;
  nonNegativeInteger('outbound', 'maxBodyBytes', maxBodyBytes);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new TypeError(`outbound option url must be http or https, not ${url.protocol.slice(0, 16)}`);
  // Sockets skip `lookup` for IP literals (which the URL parser has already normalised from every
  // notation: 127.1, 0x7f.0.0.1, 2130706433): check them here.
  const host = bare(url.hostname);
  if (isIP(host) !== 0) checkAddress(host, policy);
  const pinned = request.addresses;
  const lookup: LookupFunction = (hostname, options, callback) => {
    (pinned === undefined ? resolveHost(hostname, policy) : Promise.resolve(pinned)).then((answers) => {
      const usable = options.family === 4 || options.family === 6 ? answers.filter((a) => a.family === options.family) : answers;
      const [first] = usable;
      if (first === undefined) throw new OutboundError('no-address', 'the host has no address', { peerCode: 'ENOTFOUND' });
      if (options.all === true) callback(null, usable.map((a) => ({ address: a.address, family: a.family })));
      else callback(null, first.address, first.family);
    }).catch((err: unknown) => {
      callback(err instanceof Error ? err : new Error(String(err)), '', 0);
    });
  };

  if (signal?.aborted === true) throw abortReason(signal);
  const clock = request.clock ?? realClock;
  return new Promise<OutboundAnswer>((resolvePromise, reject) => {
    let stage: OutboundStage = 'connecting';
    let settled = false;
    const headers: Record<string, string | number> = { ...request.headers };
    if (request.body !== undefined) headers['content-length'] = request.body.length;
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    const req: ClientRequest = send(url, {
      method: request.method,
      ...(request.path === undefined ? {} : { path: request.path }),
      agent: false, // a fresh connection each time: no socket reused past its address check
      lookup,
      headers,
      servername: isIP(host) === 0 ? host : undefined,
    });
    const settle = (outcome: { readonly answer: OutboundAnswer } | { readonly error: Error }): void => {
      if (settled) return;
      settled = true;
      timer.cancel();
      signal?.removeEventListener('abort', onAbort);
      // Never read the rest: the socket goes, with whatever the peer still meant to send.
      req.destroy();
      if ('error' in outcome) reject(outcome.error);
      else resolvePromise(outcome.answer);
    };
    const fail = (failure: OutboundFailure, message: string, details?: ConstructorParameters<typeof OutboundError>[2]): void => {
      settle({ error: new OutboundError(failure, message, details) });
    };
    // Both are set before anything can call `settle`: the request does nothing until this tick ends.
    const timer = clock.setTimer(timeoutMs, () => { fail('deadline', `did not finish within ${timeoutMs} ms (${stage})`, { stage }); });
    const onAbort = (): void => { if (signal !== undefined) settle({ error: abortReason(signal) }); };
    signal?.addEventListener('abort', onAbort, { once: true });

    req.on('socket', (socket: Socket) => {
      socket.once('connect', () => {
        // The address actually connected to: the last word, whatever resolved it.
        try {
          checkAddress(socket.remoteAddress ?? '', policy);
          stage = 'waiting for the answer';
        } catch (err) {
          settle({ error: err instanceof Error ? err : new Error(String(err)) });
        }
      });
    });
    req.on('error', (err: Error) => {
      if (err instanceof OutboundError && err.failure === 'refused') {
        settle({ error: err });
        return;
      }
      // A resolver's failure is reported as the resolver's own error, as a socket's is.
      const cause = err instanceof OutboundError && err.failure === 'unresolved' ? err.cause : err;
      const peerCode = err instanceof OutboundError ? err.peerCode : errnoCode(err);
      fail('unreachable', `could not be reached (${peerCode ?? 'connection failed'})`, { cause, peerCode });
    });
    req.on('response', (res: IncomingMessage) => {
      stage = 'reading the answer';
      const status = res.statusCode ?? 0;
      if (request.readBody?.(status) === false) {
        settle({ answer: { status, body: undefined } });
        return;
      }
      // 'aborted' comes before the stream's error when the peer hangs up mid-body.
      let hungUp = false;
      res.once('aborted', () => { hungUp = true; });
      readBounded(res, { limit: maxBodyBytes, declaredLength: res.headers['content-length'], keep: request.keepBody !== false }).then((body) => {
        if (body === undefined) fail('too-large', `answered HTTP ${status} with a body over ${maxBodyBytes} bytes`, { statusCode: status });
        else settle({ answer: { status, body } });
      }, (err: unknown) => {
        const peerCode = errnoCode(err);
        fail('broken', hungUp ? 'broke off its answer' : `broke off its answer (${peerCode ?? 'connection reset'})`, { cause: err, statusCode: status, peerCode });
      });
    });
    req.end(request.body);
  });
}
