import { FleetcacheError } from '../util/index.ts';

/**
 * A promotion could not be carried out: a webhook answered with a non-2xx status or could not be
 * reached, a target object lacks the field to set, or its Secret is unusable. Recorded as a
 * `Failed` promotion and retried with backoff.
 */
export class PromotionError extends FleetcacheError {
  /** HTTP status of a webhook's answer, when there was one. */
  readonly statusCode: number | undefined;

  constructor(message: string, options?: ErrorOptions & { readonly statusCode?: number }) {
    super('ERR_PROMOTION', message, options);
    this.statusCode = options?.statusCode;
  }
}

/** Why a webhook was refused before anything was sent. */
export type WebhookRefusal =
  /** The address connected to is loopback, private, link-local, unspecified, multicast or reserved. */
  | 'address'
  /** The URL is not an absolute http(s) URL. */
  | 'url';

/**
 * A webhook was not sent: its URL is unusable, or the address it resolves to (at connect time,
 * every DNS answer) is one a webhook must not reach. The message names the category, never the
 * address a name resolved to (a tenant must not learn the inside's addresses through status).
 * Recorded as a `Failed` promotion like any other failure.
 */
export class WebhookRefusedError extends FleetcacheError {
  readonly refusal: WebhookRefusal;
  /** For `address`: the category of the address refused (`loopback`, `private`, `link-local`, ...). */
  readonly category: string | undefined;
  /** For `address`: the address refused. Never in the message. */
  readonly address: string | undefined;

  constructor(scope: { readonly refusal: 'url'; readonly detail: string } | { readonly refusal: 'address'; readonly url: string; readonly category: string; readonly address: string; readonly relaxable: boolean }) {
    const message = scope.refusal === 'url'
      ? `refused the webhook URL: ${scope.detail}`
      : `refused the webhook ${scope.url}: it resolves to a ${scope.category} address${scope.relaxable ? ' (private networks are allowed only with --allow-private-webhooks)' : ''}`;
    super('ERR_WEBHOOK_REFUSED', message);
    this.refusal = scope.refusal;
    this.category = scope.refusal === 'address' ? scope.category : undefined;
    this.address = scope.refusal === 'address' ? scope.address : undefined;
  }
}
