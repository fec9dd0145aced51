import type { ClusterConnection } from '../transport/index.ts';
import { KubeApiError, nonEmptyString, noopLogger, realClock, sleep, toError, type Clock, type Logger } from '../util/index.ts';
import { JITTER_FACTOR, leaseTimings, type LeaseTimingOptions } from './lease-timings.ts';

/** The part of a coordination.k8s.io/v1 Lease's spec leader election reads and writes. */
export interface LeaseRecord {
  /** Who holds the lease; '' once released. */
  readonly holderIdentity: string;
  readonly leaseDurationSeconds: number;
  /** MicroTime (RFC 3339 with microseconds). */
  readonly acquireTime: string | undefined;
  readonly renewTime: string | undefined;
  readonly leaseTransitions: number;
}

/** A Lease as stored, with the resourceVersion that makes updates optimistic. */
export interface StoredLease {
  readonly resourceVersion: string;
  readonly record: LeaseRecord;
}

/**
 * The subset of the Lease API leader election uses, for one Lease. Failures reject (a conflict
 * on create or update is a failure like any other: someone else wrote first).
 */
export interface LeaseClient {
  /** `namespace/name`, for logs. */
  readonly description: string;
  /** The Lease, or undefined when it does not exist. */
  get(signal: AbortSignal): Promise<StoredLease | undefined>;
  create(record: LeaseRecord, signal: AbortSignal): Promise<StoredLease>;
  /** Replaces the spec if the Lease is still at `resourceVersion` (else a 409 conflict). */
  update(record: LeaseRecord, resourceVersion: string, signal: AbortSignal): Promise<StoredLease>;
}

interface LeaseObject {
  readonly metadata?: { readonly resourceVersion?: string };
  readonly spec?: {
    readonly holderIdentity?: string | null;
    readonly leaseDurationSeconds?: number | null;
    readonly acquireTime?: string | null;
    readonly renewTime?: string | null;
    readonly leaseTransitions?: number | null;
  };
}

export function storedLease(body: unknown): StoredLease {
  const lease = (typeof body === 'object' && body !== null ? body : {}) as LeaseObject;
  const spec = lease.spec ?? {};
  return {
    resourceVersion: lease.metadata?.resourceVersion ?? '',
    record: {
      holderIdentity: spec.holderIdentity ?? '',
      leaseDurationSeconds: spec.leaseDurationSeconds ?? 0,
      acquireTime: spec.acquireTime ?? undefined,
      renewTime: spec.renewTime ?? undefined,
      leaseTransitions: spec.leaseTransitions ?? 0,
    },
  };
}

export function leaseBody(namespace: string, name: string, record: LeaseRecord, resourceVersion?: string): object {
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { namespace, name, ...(resourceVersion === undefined ? {} : { resourceVersion }) },
    spec: {
      holderIdentity: record.holderIdentity,
      leaseDurationSeconds: record.leaseDurationSeconds,
      ...(record.acquireTime === undefined ? {} : { acquireTime: record.acquireTime }),
      ...(record.renewTime === undefined ? {} : { renewTime: record.renewTime }),
      leaseTransitions: record.leaseTransitions,
    },
  };
}

/** Options of {@link KubeLeaseClient}. */
export interface KubeLeaseClientOptions {
  /** The cluster holding the Lease (the management cluster). Required. */
  readonly connection: ClusterConnection;
  /** Required. */
  readonly namespace: string;
  /** Required. */
  readonly name: string;
}

/** {@link LeaseClient} over a {@link ClusterConnection}: GET, POST and PUT on one Lease. */
export class KubeLeaseClient implements LeaseClient {
  readonly #connection: ClusterConnection;
  readonly #namespace: string;
  readonly #name: string;

  constructor(options: KubeLeaseClientOptions) {
    this.#connection = options.connection;
    this.#namespace = nonEmptyString('KubeLeaseClient', 'namespace', options.namespace);
    this.#name = nonEmptyString('KubeLeaseClient', 'name', options.name);
  }

  get description(): string {
    return `${this.#namespace}/${this.#name}`;
  }

  get #collection(): string {
    return `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(this.#namespace)}/leases`;
  }

  async get(signal: AbortSignal): Promise<StoredLease | undefined> {
    try {
      return storedLease(await this.#connection.request({ method: 'GET', path: `${this.#collection}/${encodeURIComponent(this.#name)}`, signal }));
    } catch (err) {
      if (err instanceof KubeApiError && err.statusCode === 404) return undefined;
      throw err;
    }
  }

  async create(record: LeaseRecord, signal: AbortSignal): Promise<StoredLease> {
    return storedLease(await this.#connection.request({ method: 'POST', path: this.#collection, body: leaseBody(this.#namespace, this.#name, record), signal }));
  }

  async update(record: LeaseRecord, resourceVersion: string, signal: AbortSignal): Promise<StoredLease> {
    const path = `${this.#collection}/${encodeURIComponent(this.#name)}`;
    return storedLease(await this.#connection.request({ method: 'PUT', path, body: leaseBody(this.#namespace, this.#name, record, resourceVersion), signal }));
  }
}

/** Kubernetes MicroTime: RFC 3339 with exactly six fractional digits. */
export function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

/** Options of {@link LeaderElector}. Durations in milliseconds; client-go's rules apply: lease > renew deadline > 1.2 × retry. */
export interface LeaderElectorOptions extends LeaseTimingOptions {
  /** The Lease. Required. */
  readonly leases: LeaseClient;
  /** This candidate's unique identity (`hostname_uuid`). Required, non-empty. */
  readonly identity: string;
  /** Release the lease (empty holder) when `run`'s signal aborts while leading. Default true. */
  readonly releaseOnCancel?: boolean | undefined;
  /** Default: discards everything. */
  readonly logger?: Logger | undefined;
  /** Default: the wall clock. */
  readonly clock?: Clock | undefined;
  /** Jitter source in [0, 1). Default Math.random. */
  readonly random?: (() => number) | undefined;
}

/** What {@link LeaderElector.run} notifies. Callbacks must return promptly; throwing is logged. */
export interface LeaderCallbacks {
  /** This candidate became the leader. */
  readonly onStartedLeading?: () => void;
  /** This candidate stopped leading (lost the lease, or released it on shutdown). */
  readonly onStoppedLeading?: () => void;
  /** The observed holder changed ('' when nobody holds the lease). */
  readonly onNewLeader?: (identity: string) => void;
}

/** How {@link LeaderElector.run} ended. */
export type ElectionOutcome =
  /** The signal aborted before this candidate led. */
  | 'stopped'
  /** The signal aborted while leading; the lease was released (or left to expire without releaseOnCancel). */
  | 'released'
  /** Renewal failed for longer than the renew deadline: leadership is gone. */
  | 'lost';

/** Where this candidate stands. 'unknown' until the Lease was read once. */
export type LeadershipState = 'unknown' | 'leading' | 'following';

/** The Lease's integer fields are int32: a value past this fails the API server's validation. */
const MAX_INT32 = 2_147_483_647;

/** `leaseTransitions` as it may be written back: a whole number in [0, 2³¹ − 1] (else 0). */
function validTransitions(value: number): number {
  return Number.isSafeInteger(value) && value >= 0 && value <= MAX_INT32 ? value : 0;
}

/**
 * One more transition. The counter wraps to 0 past 2³¹ − 1 (client-go's int32 would go negative
 * and the update would fail validation forever, leaving the lease untakeable); it counts
 * hand-overs for humans, nothing orders by it.
 */
export function nextTransitions(value: number): number {
  const current = validTransitions(value);
  return current === MAX_INT32 ? 0 : current + 1;
}

/**
 * Leader election on a coordination.k8s.io/v1 Lease with client-go's semantics: acquire when the
 * lease is free, ours, or not renewed for the duration its holder recorded in it (measured on this
 * candidate's clock from when it last saw the record change, so clock skew between candidates does
 * not matter);
 * renew every retry period with optimistic concurrency; give leadership up when renewal fails
 * past the renew deadline; release on shutdown by emptying the holder.
 *
 * One `run` at a time. `#observed` / `#observedAt` are written only by the single running loop.
 */
export class LeaderElector {
  readonly #leases: LeaseClient;
  readonly #identity: string;
  readonly #leaseDurationMs: number;
  readonly #renewDeadlineMs: number;
  readonly #retryPeriodMs: number;
  readonly #releaseOnCancel: boolean;
  readonly #logger: Logger;
  readonly #clock: Clock;
  readonly #random: () => number;
  #state: LeadershipState = 'unknown';
  /** The last record read or written, and when (our clock) it was first seen as it is. */
  #observed: StoredLease | undefined;
  #observedAt = 0;
  #running = false;
  #callbacks: LeaderCallbacks = {};

  constructor(options: LeaderElectorOptions) {
    const leases: unknown = options.leases;
    if (typeof leases !== 'object' || leases === null || typeof (leases as Partial<LeaseClient>).update !== 'function') {
      throw new TypeError('LeaderElector option leases must be a LeaseClient');
    }
    const identity = nonEmptyString('LeaderElector', 'identity', options.identity);
    const settings = leaseTimings('LeaderElector', options);
    this.#leases = options.leases;
    this.#identity = identity;
    this.#leaseDurationMs = settings.leaseDurationMs;
    this.#renewDeadlineMs = settings.renewDeadlineMs;
    this.#retryPeriodMs = settings.retryPeriodMs;
    this.#releaseOnCancel = options.releaseOnCancel ?? true;
    this.#logger = (options.logger ?? noopLogger).child({ lease: options.leases.description, identity: options.identity });
    this.#clock = options.clock ?? realClock;
    this.#random = options.random ?? Math.random;
  }

  get identity(): string {
    return this.#identity;
  }

  get state(): LeadershipState {
    return this.#state;
  }

  get isLeader(): boolean {
    return this.#state === 'leading';
  }

  /** The holder last seen on the Lease ('' when free), undefined before the first read. */
  get holder(): string | undefined {
    return this.#observed?.record.holderIdentity;
  }

  /**
   * Campaigns until this candidate leads, then renews until `signal` aborts (→ release, resolves
   * 'released') or renewal fails past the deadline (→ resolves 'lost'). Never rejects.
   */
  async run(signal: AbortSignal, callbacks: LeaderCallbacks = {}): Promise<ElectionOutcome> {
    if (this.#running) throw new Error('LeaderElector.run is already running');
    this.#running = true;
    this.#callbacks = callbacks;
    try {
      if (!(await this.#acquire(signal))) return 'stopped';
      this.#setState('leading');
      this.#logger.info('became leader');
      this.#notify('onStartedLeading');
      const lost = await this.#renew(signal);
      if (!lost && this.#releaseOnCancel) await this.#release();
      this.#setState(lost ? 'unknown' : 'following');
      this.#logger[lost ? 'error' : 'info'](lost ? `lost leadership: could not renew the lease within ${this.#renewDeadlineMs} ms` : 'stopped leading');
      this.#notify('onStoppedLeading');
      return lost ? 'lost' : 'released';
    } finally {
      this.#running = false;
    }
  }

  #setState(state: LeadershipState): void {
    this.#state = state;
  }

  #notify(name: 'onStartedLeading' | 'onStoppedLeading'): void {
    try {
      this.#callbacks[name]?.();
    } catch (err) {
      this.#logger.error(`${name} callback failed: ${toError(err).message}`, { error: toError(err) });
    }
  }

  /** True once leading; false when the signal aborted first. */
  async #acquire(signal: AbortSignal): Promise<boolean> {
    while (!signal.aborted) {
      if (await this.#tryAcquireOrRenew(this.#renewDeadlineMs, signal)) return true;
      try {
        await sleep(this.#retryPeriodMs * (1 + JITTER_FACTOR * this.#random()), signal, this.#clock);
      } catch {
        return false;
      }
    }
    return false;
  }

  /** Renews until the signal aborts (false) or the deadline passes without a renewal (true). */
  async #renew(signal: AbortSignal): Promise<boolean> {
    let renewedAt = this.#clock.now();
    for (;;) {
      try {
        await sleep(this.#retryPeriodMs, signal, this.#clock);
      } catch {
        return false;
      }
      const remaining = renewedAt + this.#renewDeadlineMs - this.#clock.now();
      // The request runs to its own timeout even when `signal` aborts: a renewal cut halfway would
      // leave us unsure of the resourceVersion the release needs (which re-reads anyway).
      if (remaining > 0 && (await this.#tryAcquireOrRenew(remaining, undefined))) {
        renewedAt = this.#clock.now();
        continue;
      }
      if (this.#clock.now() - renewedAt >= this.#renewDeadlineMs) return true;
      this.#logger.warn('failed to renew the lease; retrying', { sinceLastRenewalMs: this.#clock.now() - renewedAt });
    }
  }

  /** A signal that aborts after `ms` on our clock, or with `parent`. */
  #bounded(ms: number, parent: AbortSignal | undefined): { readonly signal: AbortSignal; readonly done: () => void } {
    const controller = new AbortController();
    const timer = this.#clock.setTimer(ms, () => { controller.abort(new Error(`lease request timed out after ${Math.round(ms)} ms`)); });
    const onAbort = (): void => { controller.abort(parent?.reason); };
    parent?.addEventListener('abort', onAbort, { once: true });
    return {
      signal: controller.signal,
      done: () => {
        timer.cancel();
        parent?.removeEventListener('abort', onAbort);
      },
    };
  }

  #observe(lease: StoredLease): void {
    const before = this.#observed;
    const changed = before?.resourceVersion !== lease.resourceVersion;
    if (changed) this.#observedAt = this.#clock.now();
    this.#observed = lease;
    if (before?.record.holderIdentity !== lease.record.holderIdentity) {
      this.#logger.info('lease holder changed', { holder: lease.record.holderIdentity });
      try {
        this.#callbacks.onNewLeader?.(lease.record.holderIdentity);
      } catch (err) {
        this.#logger.error(`onNewLeader callback failed: ${toError(err).message}`, { error: toError(err) });
      }
    }
  }

  /**
   * How long the holder's record stays valid, as the holder wrote it (client-go reads the Lease's
   * `leaseDurationSeconds`, not its own setting): a holder with a longer lease than ours is not
   * robbed after ours. A record without a usable duration (absent, zero, not a number) falls back
   * to our own, so a malformed Lease is neither taken at once nor held forever.
   */
  #recordedDurationMs(record: LeaseRecord): number {
    const seconds = record.leaseDurationSeconds;
    return Number.isFinite(seconds) && seconds > 0 ? Math.min(seconds, MAX_INT32) * 1000 : this.#leaseDurationMs;
  }

  async #tryAcquireOrRenew(timeoutMs: number, parent: AbortSignal | undefined): Promise<boolean> {
    const bound = this.#bounded(timeoutMs, parent);
    try {
      const now = this.#clock.now();
      const current = await this.#leases.get(bound.signal);
      if (current === undefined) {
        const record = { holderIdentity: this.#identity, leaseDurationSeconds: this.#leaseDurationMs / 1000, acquireTime: microTime(now), renewTime: microTime(now), leaseTransitions: 0 };
        this.#observe(await this.#leases.create(record, bound.signal));
        return true;
      }
      this.#observe(current);
      const holder = current.record.holderIdentity;
      const ours = holder === this.#identity;
      if (holder !== '' && !ours && this.#observedAt + this.#recordedDurationMs(current.record) > this.#clock.now()) {
        if (this.#state === 'unknown') this.#setState('following');
        return false;
      }
      const record: LeaseRecord = {
        holderIdentity: this.#identity,
        leaseDurationSeconds: this.#leaseDurationMs / 1000,
        acquireTime: ours ? current.record.acquireTime ?? microTime(now) : microTime(now),
        renewTime: microTime(this.#clock.now()),
        leaseTransitions: ours ? validTransitions(current.record.leaseTransitions) : nextTransitions(current.record.leaseTransitions),
      };
      this.#observe(await this.#leases.update(record, current.resourceVersion, bound.signal));
      return true;
    } catch (err) {
      this.#logger.debug(`lease attempt failed: ${toError(err).message}`, { error: toError(err) });
      return false;
    } finally {
      bound.done();
    }
  }

  /** Empties the holder if we still hold the lease, so a successor need not wait for it to expire. */
  async #release(): Promise<void> {
    const bound = this.#bounded(this.#renewDeadlineMs, undefined);
    try {
      const current = await this.#leases.get(bound.signal);
      if (current?.record.holderIdentity !== this.#identity) return;
      const now = microTime(this.#clock.now());
      this.#observe(await this.#leases.update({ holderIdentity: '', leaseDurationSeconds: 1, acquireTime: now, renewTime: now, leaseTransitions: validTransitions(current.record.leaseTransitions) }, current.resourceVersion, bound.signal));
      this.#logger.info('released the lease');
    } catch (err) {
      this.#logger.warn(`could not release the lease; it will expire: ${toError(err).message}`, { error: toError(err) });
    } finally {
      bound.done();
    }
  }
}
