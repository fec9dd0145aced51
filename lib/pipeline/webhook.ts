import { OutboundError, sendOutbound, type HostResolver } from '../transport/index.ts';
import type { Clock } from '../util/index.ts';
import { PromotionError, WebhookRefusedError } from './errors.ts';
import { nonNegativeInteger } from '../util/index.ts';

export type { ResolvedAddress } from '../transport/index.ts';

/** Resolves a host name to every address it has, as `dns.lookup(name, { all: true })` does. */
export type WebhookResolver = HostResolver;

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
  const maxAnswerBytes = nonNegativeInteger('webhook', 'maxAnswerBytes', delivery.maxAnswerBytes ?? DEFAULT_WEBHOOK_ANSWER_BYTES);
  const url = parseWebhookUrl(delivery.url);
  const shown = webhookOrigin(url);
  let status: number;
  try {
    ({ status } = await sendOutbound({
      url,
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': delivery.idempotencyKey, 'user-agent': 'fleetcache' },
      body: Buffer.from(JSON.stringify(delivery.body), 'utf8'),
      policy: { allowPrivateNetworks: delivery.allowPrivateNetworks === true, resolve: delivery.resolve },
      timeoutMs: delivery.timeoutMs,
      clock: delivery.clock,
      signal: delivery.signal,
      maxBodyBytes: maxAnswerBytes,
      // Success is the whole answer arriving: a receiver that sends 200 and hangs has not answered.
      keepBody: false,
      readBody: isSuccess,
    }));
  } catch (err) {
    if (!(err instanceof OutboundError)) throw err;
    if (err.failure === 'refused') {
      throw new WebhookRefusedError({ refusal: 'address', url: shown, category: err.category ?? 'reserved', address: err.address ?? '', relaxable: err.relaxable });
    }
    // The outbound module's words are fixed and name nothing of the URL: prefixed with the origin only.
    throw new PromotionError(`the webhook ${shown} ${err.message}`, { cause: err.cause, ...(err.statusCode === undefined ? {} : { statusCode: err.statusCode }) });
  }
  if (!isSuccess(status)) throw new PromotionError(`the webhook ${shown} answered HTTP ${status}${status >= 300 && status < 400 ? ' (redirects are not followed)' : ''}`, { statusCode: status });
  return status;
}

function isSuccess(status: number): boolean {
  return status >= 200 && status < 300;
}
