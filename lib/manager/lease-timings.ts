// The timing rules every Lease holder here follows (leader election and sharding alike), written once.
import { positiveNumber } from '../util/index.ts';

/** Each wait between attempts is the retry period plus up to this fraction of it, so candidates do not move in step. */
export const JITTER_FACTOR = 0.2;

/** The three durations of a Lease holder, in milliseconds: lease > renew deadline > 1.2 × retry (client-go's rules). */
export interface LeaseTimingOptions {
  /** How long a Lease not seen to change stays valid for the others. Whole seconds (the Lease stores seconds). Default 30 000. */
  readonly leaseDurationMs?: number | undefined;
  /** The holder stops acting once it has not renewed for this long. Default 10 000. */
  readonly renewDeadlineMs?: number | undefined;
  /** Between attempts to acquire or renew (plus up to 20 % jitter). Default 2 000. */
  readonly retryPeriodMs?: number | undefined;
}

/** The three durations, defaults applied and checked. */
export type LeaseTimings = { readonly [K in keyof LeaseTimingOptions]-?: number };

/**
 * The timings with their defaults, checked: each a positive number, the lease duration whole
 * seconds, and the renew deadline between 1.2 × the retry period (the longest jittered wait) and
 * the lease duration, so a holder stops acting before another may take over. Throws a TypeError
 * naming `owner` (`LeaderElector`, `Sharder`) and the option.
 */
export function leaseTimings(owner: string, options: LeaseTimingOptions): LeaseTimings {
  const lease = positiveNumber(owner, 'leaseDurationMs', options.leaseDurationMs ?? 30_000);
  const renew = positiveNumber(owner, 'renewDeadlineMs', options.renewDeadlineMs ?? 10_000);
  const retry = positiveNumber(owner, 'retryPeriodMs', options.retryPeriodMs ?? 2_000);
  if (lease < 1000 || lease % 1000 !== 0) throw new TypeError(`${owner} option leaseDurationMs must be a whole number of seconds (the Lease stores seconds), got ${lease}`);
  if (lease <= renew) throw new TypeError(`${owner} option leaseDurationMs (${lease}) must be greater than renewDeadlineMs (${renew})`);
  if (renew <= retry * (1 + JITTER_FACTOR)) throw new TypeError(`${owner} option renewDeadlineMs (${renew}) must be greater than 1.2 × retryPeriodMs (${retry})`);
  return { leaseDurationMs: lease, renewDeadlineMs: renew, retryPeriodMs: retry };
}
