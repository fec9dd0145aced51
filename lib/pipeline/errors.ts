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
