import { lookup as dnsLookup } from 'node:dns/promises';
import { request as httpRequest, type ClientRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP, type LookupFunction, type Socket } from 'node:net';
import { abortReason, classifyAddress, PRIVATE_CATEGORIES, type Clock } from '../util/index.ts';
import { PromotionError, WebhookRefusedError } from './errors.ts';

/** One address a host name resolves to. */
export interface ResolvedAddress {
  readonly address: string;
  readonly family: 4 | 6;
}

/** Resolves a host name to every address it has, as `dns.lookup(name, { all: true })` does. */
export type WebhookResolver = (hostname: string) => Promise<readonly ResolvedAddress[]>;

/** Answer bytes read (and discarded) before a delivery gives up on the answer: 64 KiB. */
export const DEFAULT_WEBHOOK_ANSWER_BYTES = 64 * 1024;

/** One webhook delivery. */
export interface WebhookDelivery {
  /**
   * http(s) URL. It may carry credentials (sent as Basic authentication), tokens in its query, and
   * for Slack, Teams or Discord incoming webhooks the credential is the path itself: nothing of it
   * but the scheme and host is ever printed ({@link webhookOrigin}).
   */
  readonly url: string;
  /** Serialized as JSON. */
  readonly body: unknown;
  /** Same for every attempt of one promotion, so the receiver can drop duplicates. */
  readonly idempotencyKey: string;
  /** Bound on the whole delivery: resolving, connecting, sending, the answer's headers and its body. */
  readonly timeoutMs: number;
  readonly clock: Clock;
  readonly signal?: AbortSignal | undefined;
  /**
   * Let the webhook reach loopback and private addresses (RFC 1918, CGNAT, IPv6 ULA). Link-local
   * (cloud metadata), unspecified, multicast and reserved addresses stay refused. Default false.
   */
  readonly allowPrivateNetworks?: boolean | undefined;
  /** How host names are resolved, at connect time. Default: `dns.lookup` with `all: true`. */
  readonly resolve?: WebhookResolver | undefined;
  /**
   * Answer body bytes read and discarded before the delivery fails as "answer too large"; nothing
   * of the answer is ever kept. Default {@link DEFAULT_WEBHOOK_ANSWER_BYTES}.
   */
  readonly maxAnswerBytes?: number | undefined;
}

const systemResolver: WebhookResolver = async (hostname) => {
  const answers = await dnsLookup(hostname, { all: true, order: 'verbatim' });
  return answers.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
};

/** Checks a webhook URL read from a Secret; the message never repeats the URL itself. */
export function parseWebhookUrl(raw: string): URL {
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    throw new WebhookRefusedError({ refusal: 'url', detail: 'the webhook URL in the Secret is not a valid URL' });
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new WebhookRefusedError({ refusal: 'url', detail: `the webhook URL must be http or https, not ${url.protocol.slice(0, 16)}` });
  }
  return url;
}

/**
 * What a message may say of a webhook URL: its scheme and host (with port), nothing else. User,
 * password, path, query and fragment may each be the credential (an incoming webhook's secret is
 * its path), and a tenant with only `view` on Pipelines reads status and Events.
 */
export function webhookOrigin(url: URL): string {
  return `${url.protocol}//${url.host}`;
}

/** A system error's code (`ECONNREFUSED`), the one part of a peer's failure a message may repeat. */
function errnoCode(err: unknown, otherwise: string): string {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === 'string' && /^[A-Z][A-Z0-9_]{0,39}$/.test(code) ? code : otherwise;
}

/** Where a delivery is when its deadline passes, for the message. */
type Stage = 'connecting' | 'waiting for the answer' | 'reading the answer';

/**
 * POSTs `body` as JSON with an `Idempotency-Key` header and resolves with the status of a 2xx
 * answer whose body arrived whole (read and discarded). Fails with a {@link WebhookRefusedError}
 * when the URL is unusable or an address it resolves to is not allowed (checked on every DNS
 * answer and again on the connected socket), and with a {@link PromotionError} carrying only the
 * URL's scheme and host, the status code and a fixed reason otherwise: a non-2xx answer (redirects are not
 * followed), a connection failure, an answer body over `maxAnswerBytes`, or `timeoutMs` passing at
 * any stage. Nothing the receiver sends ever appears in a message.
 */
export async function deliverWebhook(delivery: WebhookDelivery): Promise<number> {
  const maxAnswerBytes = delivery.maxAnswerBytes ?? DEFAULT_WEBHOOK_ANSWER_BYTES;
  if (!Number.isInteger(maxAnswerBytes) || maxAnswerBytes < 0) throw new TypeError(`webhook option maxAnswerBytes must be a non-negative integer, got ${maxAnswerBytes}`);
  const url = parseWebhookUrl(delivery.url);
  const shown = webhookOrigin(url);
  const allowPrivate = delivery.allowPrivateNetworks === true;
  const resolve = delivery.resolve ?? systemResolver;

  /** Throws when `address` is not one this delivery may connect to. */
  const check = (address: string): void => {
    const category = classifyAddress(address);
    if (category === undefined || (allowPrivate && PRIVATE_CATEGORIES.has(category))) return;
    throw new WebhookRefusedError({ refusal: 'address', url: shown, category, address, relaxable: PRIVATE_CATEGORIES.has(category) });
  };
  // The URL parser has already normalised every IPv4 notation (127.1, 0x7f.0.0.1, 2130706433,
  // 0177.0.0.1) to dotted decimal; sockets skip `lookup` for literals, so check them here.
  const literal = url.hostname.replace(/^\[(.*)\]$/, '$1');
  if (isIP(literal) !== 0) check(literal);

  // Every answer is checked at connect time: one refused address refuses the name, so a rebinding
  // answer that mixes a public address with an inside one gets nowhere.
  const lookup: LookupFunction = (hostname, options, callback) => {
    resolve(hostname).then((answers) => {
      for (const answer of answers) check(answer.address);
      const usable = options.family === 4 || options.family === 6 ? answers.filter((a) => a.family === options.family) : answers;
      const [first] = usable;
      if (first === undefined) throw Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' });
      if (options.all === true) callback(null, usable.map((a) => ({ address: a.address, family: a.family })));
      else callback(null, first.address, first.family);
    }).catch((err: unknown) => {
      callback(err instanceof Error ? err : new Error(String(err)), '', 0);
    });
  };

  if (delivery.signal?.aborted === true) throw abortReason(delivery.signal);
  return new Promise<number>((resolvePromise, reject) => {
    let stage: Stage = 'connecting';
    let settled = false;
    const payload = Buffer.from(JSON.stringify(delivery.body), 'utf8');
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    const req: ClientRequest = send(url, {
      method: 'POST',
      agent: false, // a fresh connection each time: no socket reused past its address check
      lookup,
      headers: {
        'content-type': 'application/json',
        'content-length': payload.length,
        'idempotency-key': delivery.idempotencyKey,
        'user-agent': 'fleetcache',
      },
    });
    const settle = (outcome: { readonly status: number } | { readonly error: Error }): void => {
      if (settled) return;
      settled = true;
      timer.cancel();
      delivery.signal?.removeEventListener('abort', onAbort);
      // Never read the rest: the socket goes, with whatever the receiver still meant to send.
      req.destroy();
      if ('error' in outcome) reject(outcome.error);
      else resolvePromise(outcome.status);
    };
    const fail = (reason: string, options?: ErrorOptions & { readonly statusCode?: number }): void => {
      settle({ error: new PromotionError(`the webhook ${shown} ${reason}`, options) });
    };
    // Both are set before anything can call `settle`: the request does nothing until this tick ends.
    const timer = delivery.clock.setTimer(delivery.timeoutMs, () => { fail(`did not finish within ${delivery.timeoutMs} ms (${stage})`); });
    const onAbort = (): void => { if (delivery.signal !== undefined) settle({ error: abortReason(delivery.signal) }); };
    delivery.signal?.addEventListener('abort', onAbort, { once: true });

    req.on('socket', (socket: Socket) => {
      socket.once('connect', () => {
        // The address actually connected to: the last word, whatever resolved it.
        try {
          check(socket.remoteAddress ?? '');
          stage = 'waiting for the answer';
        } catch (err) {
          settle({ error: err instanceof Error ? err : new Error(String(err)) });
        }
      });
    });
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (err instanceof WebhookRefusedError) {
        settle({ error: err });
        return;
      }
      fail(`could not be reached (${errnoCode(err, 'connection failed')})`, { cause: err });
    });
    req.on('response', (res: IncomingMessage) => {
      stage = 'reading the answer';
      const status = res.statusCode ?? 0;
      if (status < 200 || status >= 300) {
        fail(`answered HTTP ${status}${status >= 300 && status < 400 ? ' (redirects are not followed)' : ''}`, { statusCode: status });
        return;
      }
      // Success is the whole answer arriving: a receiver that sends 200 and hangs has not answered.
      let received = 0;
      res.on('data', (chunk: Buffer) => {
        received += chunk.length;
        if (received > maxAnswerBytes) fail(`answered HTTP ${status} with a body over ${maxAnswerBytes} bytes`, { statusCode: status });
      });
      res.on('end', () => { settle({ status }); });
      res.on('error', (err) => { fail(`broke off its answer (${errnoCode(err, 'connection reset')})`, { cause: err, statusCode: status }); });
      res.on('aborted', () => { fail('broke off its answer', { statusCode: status }); });
    });
    req.end(payload);
  });
}
