import type { RequestObservation } from '../../lib/transport/index.ts';
import type { RequestCounts } from './model.ts';

/** Clusters whose request counts are kept at most; the one heard from least recently goes first. */
const MAX_CLUSTERS = 1_024;

/**
 * Requests made to each cluster, from the keeper's `onRequest` (what `rest_client_requests_total`
 * counts), kept for the dashboard's cluster table.
 *
 * Invariant: `#counts` holds at most {@link MAX_CLUSTERS} entries, in order of the last request
 * (the first is the one evicted next).
 */
export class RequestTally {
  readonly #counts = new Map<string, RequestCounts>();
  readonly #onChange: () => void;

  /** `onChange` is called after each observation (cheaply: it only schedules work). */
  constructor(onChange: () => void = () => undefined) {
    this.#onChange = onChange;
  }

  /** A `ClusterSetOptions.onRequest` observer. Never throws. */
  readonly observe = (o: RequestObservation): void => {
    const before = this.#counts.get(o.cluster);
    this.#counts.delete(o.cluster);
    if (before === undefined && this.#counts.size >= MAX_CLUSTERS) {
      const oldest = this.#counts.keys().next();
      if (oldest.done !== true) this.#counts.delete(oldest.value);
    }
    this.#counts.set(o.cluster, {
      requests: (before?.requests ?? 0) + 1,
      failed: (before?.failed ?? 0) + (o.code.startsWith('2') ? 0 : 1), // '200', '201', …; an error status or '<error>'
      lastCode: o.code,
    });
    this.#onChange();
  };

  /** The counts now, by cluster. */
  counts(): ReadonlyMap<string, RequestCounts> {
    return new Map(this.#counts);
  }
}
