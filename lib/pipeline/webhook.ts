import { abortReason, type Clock } from '../util/index.ts';
import { PromotionError } from './errors.ts';

/** One webhook delivery. */
export interface WebhookDelivery {
  /** http(s) URL; it may embed a token, so it never appears in errors or logs. */
  readonly url: string;
  /** Serialized as JSON. */
  readonly body: unknown;
  /** Same for every attempt of one promotion, so the receiver can drop duplicates. */
  readonly idempotencyKey: string;
  readonly timeoutMs: number;
  readonly clock: Clock;
  readonly signal?: AbortSignal | undefined;
}

/** How much of an error answer is kept for the status message. */
const EXCERPT = 200;

/** Checks a webhook URL read from a Secret; the message never repeats the URL itself. */
export function parseWebhookUrl(raw: string): URL {
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    throw new PromotionError('the webhook URL in the Secret is not a valid URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new PromotionError(`the webhook URL must be http or https, not ${url.protocol}`);
  return url;
}

/**
 * POSTs `body` as JSON with an `Idempotency-Key` header. Resolves with the status of a 2xx answer;
 * rejects with a {@link PromotionError} for any other answer (its status and the start of its
 * body in the message), for a redirect (not followed: the URL is the one the Secret names), a
 * connection failure or a timeout.
 */
export async function deliverWebhook(delivery: WebhookDelivery): Promise<number> {
  const url = parseWebhookUrl(delivery.url);
  const controller = new AbortController();
  const timer = delivery.clock.setTimer(delivery.timeoutMs, () => {
    controller.abort(new PromotionError(`the webhook did not answer within ${delivery.timeoutMs} ms`));
  });
  const onAbort = (): void => { if (delivery.signal !== undefined) controller.abort(abortReason(delivery.signal)); };
  delivery.signal?.addEventListener('abort', onAbort, { once: true });
  if (delivery.signal?.aborted === true) onAbort();
  try {
    let response: Response;
    try {
      response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': delivery.idempotencyKey, 'user-agent': 'fleetcache' },
        body: JSON.stringify(delivery.body),
        redirect: 'manual',
        signal: controller.signal,
      });
    } catch (err) {
      if (controller.signal.aborted) throw abortReason(controller.signal);
      const cause = err instanceof Error && err.cause instanceof Error ? err.cause.message : String(err);
      throw new PromotionError(`the webhook could not be reached: ${cause}`, { cause: err });
    }
    const text = await response.text().catch(() => '');
    if (response.status >= 200 && response.status < 300) return response.status;
    const excerpt = text.length > EXCERPT ? `${text.slice(0, EXCERPT)}…` : text;
    throw new PromotionError(`the webhook answered HTTP ${response.status}${excerpt === '' ? '' : `: ${excerpt}`}`, { statusCode: response.status });
  } finally {
    timer.cancel();
    delivery.signal?.removeEventListener('abort', onAbort);
  }
}
