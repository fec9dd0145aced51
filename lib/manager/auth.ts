// Authentication and authorization of the metrics server's requests against the management
// cluster, as controller-runtime's filters.WithAuthenticationAndAuthorization does: the bearer
// token goes to a TokenReview, the user it names to a SubjectAccessReview for the request's
// non-resource path and verb. Answers are cached briefly, positive and negative apart. Reviews are
// costly and made on the management cluster, so an unauthenticated peer must not be able to queue
// a valid scraper behind its guesses: failed TokenReviews are budgeted per peer address, and every
// review waits for one of a few slots shared round-robin between peers.
import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import {
  FleetcacheError,
  functionOption,
  nonNegativeNumber,
  noopLogger,
  positiveInteger,
  realClock,
  toError,
  type Clock,
  type Logger,
} from '../util/index.ts';
import { FairSlots, SlotQueueFullError } from './fair-slots.ts';
import { PeerBudget, peerKey } from './peer-budget.ts';

/** Creates one review on the management cluster: POST `path` with `body`, the parsed answer back. */
export type ReviewClient = (path: string, body: object) => Promise<unknown>;

/** What the filter decided about one request. */
export type AuthDecision =
  | { readonly allowed: true; readonly user: string }
  | { readonly allowed: false; readonly status: 401 | 403 | 500; readonly message: string }
  /** The peer spent its budget of failed reviews, or too many of its requests wait for a review. */
  | { readonly allowed: false; readonly status: 429; readonly message: string; readonly retryAfterSeconds: number };

/** Options of {@link KubeAuthFilter}. */
export interface KubeAuthFilterOptions {
  /** Where TokenReviews and SubjectAccessReviews are created. Required. */
  readonly reviews: ReviewClient;
  /** Default: the wall clock. */
  readonly clock?: Clock;
  /** Default: discards everything. */
  readonly logger?: Logger;
  /** How long a token that passed review is trusted without asking again. Default 60 000 (controller-runtime: 1 min). */
  readonly authenticatedTtlMs?: number;
  /** How long a token that failed review is refused without asking again. Default 10 000. */
  readonly unauthenticatedTtlMs?: number;
  /** How long an allowed user/path/verb stays allowed. Default 300 000 (controller-runtime: 5 min). */
  readonly allowedTtlMs?: number;
  /** How long a denied user/path/verb stays denied. Default 30 000 (controller-runtime: 30 s). */
  readonly deniedTtlMs?: number;
  /**
   * Entries each cache holds at most (the oldest go first): a flood of made-up tokens stays bounded.
   * Valid and invalid tokens are cached apart, so a flood of invalid ones never evicts a valid one.
   * Default 1 024.
   */
  readonly cacheSize?: number;
  /**
   * TokenReviews a peer (an IPv4 address, an IPv6 /64) may have fail in a row before it is refused
   * with 429 without a review; a review that authenticates gives its attempt back. Default 10.
   */
  readonly failedReviewBurst?: number;
  /** Failed TokenReviews a peer regains per second, up to `failedReviewBurst`. Default 0.5 (one every 2 s). */
  readonly failedReviewsPerSecond?: number;
  /** Peers whose budget is remembered; the least recently seen is forgotten first. Default 4 096. */
  readonly maxPeers?: number;
  /** Reviews (TokenReviews and SubjectAccessReviews) in flight at once, shared round-robin between peers. Default 4. */
  readonly maxConcurrentReviews?: number;
  /** Requests of one peer waiting for a review slot; the next is refused with 429. Default 16. */
  readonly maxWaitingReviewsPerPeer?: number;
  /** Requests of all peers waiting for a review slot; the next is refused with 429. Default 512. */
  readonly maxWaitingReviews?: number;
}

/** A request refused before its review: the peer's budget is spent, or its queue is full. Becomes a 429. */
class ThrottledError extends FleetcacheError {
  readonly retryAfterSeconds: number;

  constructor(reason: string, retryAfterSeconds: number) {
    super('ERR_REVIEW_THROTTLED', reason);
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

interface UserInfo {
  readonly username: string;
  readonly uid?: string;
  readonly groups?: readonly string[];
  readonly extra?: Readonly<Record<string, readonly string[]>>;
}

/**
 * A map with a size bound and per-entry expiry on an injected clock. Invariant: `#entries` holds at
 * most `#max` entries, in insertion order (the first is the one evicted next).
 */
class ExpiringCache<V> {
  readonly #entries = new Map<string, { readonly value: V; readonly until: number }>();
  readonly #max: number;
  readonly #clock: Clock;

  constructor(max: number, clock: Clock) {
    this.#max = max;
    this.#clock = clock;
  }

  get(key: string): V | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    if (entry.until <= this.#clock.now()) {
      this.#entries.delete(key);
      return undefined;
    }
    return entry.value;
  }

  set(key: string, value: V, ttlMs: number): void {
    this.#entries.delete(key);
    while (this.#entries.size >= this.#max) {
      const oldest = this.#entries.keys().next();
      if (oldest.done === true) break;
      this.#entries.delete(oldest.value);
    }
    this.#entries.set(key, { value, until: this.#clock.now() + ttlMs });
  }

  get size(): number {
    return this.#entries.size;
  }
}

/** Longest bearer token considered (service-account JWTs are ~1 KiB). */
const MAX_TOKEN = 16 * 1024;

function throttled(err: ThrottledError): AuthDecision {
  return { allowed: false, status: 429, message: 'Too many requests', retryAfterSeconds: Math.max(1, err.retryAfterSeconds) };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Decides whether a request to the metrics server may be answered: 401 without a bearer token or
 * with one a TokenReview does not authenticate, 403 when a SubjectAccessReview does not allow the
 * user `get` (the method, lower-cased) on the request's path, 429 when the peer has spent its
 * budget of failed TokenReviews or has too many requests waiting for one, 500 when the reviews
 * cannot be made.
 *
 * A token (a user, path and verb) not in the caches is reviewed once however many requests carry
 * it at once (`#pending` and `#pendingDecisions` hold a review exactly while it is in flight); a
 * TokenReview is charged to the peer that asked first, and refunded when the token is valid.
 */
export class KubeAuthFilter {
  readonly #reviews: ReviewClient;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #ttl: { readonly authenticated: number; readonly unauthenticated: number; readonly allowed: number; readonly denied: number };
  /** sha256(token) → the user it authenticated as. */
  readonly #validTokens: ExpiringCache<UserInfo>;
  /** sha256(token) of tokens that did not authenticate. */
  readonly #invalidTokens: ExpiringCache<true>;
  /** sha256(token) → its TokenReview, while in flight. */
  readonly #pending = new Map<string, Promise<UserInfo | null>>();
  /** JSON of user, path and verb → allowed. */
  readonly #decisions: ExpiringCache<boolean>;
  /** JSON of user, path and verb → its SubjectAccessReview, while in flight. */
  readonly #pendingDecisions = new Map<string, Promise<boolean>>();
  readonly #budget: PeerBudget;
  readonly #slots: FairSlots;
  #reviewsMade = 0;

  constructor(options: KubeAuthFilterOptions) {
    functionOption('KubeAuthFilter', 'reviews', options.reviews);
    const cacheSize = positiveInteger('KubeAuthFilter', 'cacheSize', options.cacheSize ?? 1_024);
    this.#reviews = options.reviews;
    this.#clock = options.clock ?? realClock;
    this.#logger = options.logger ?? noopLogger;
    this.#ttl = {
      authenticated: nonNegativeNumber('KubeAuthFilter', 'authenticatedTtlMs', options.authenticatedTtlMs ?? 60_000),
      unauthenticated: nonNegativeNumber('KubeAuthFilter', 'unauthenticatedTtlMs', options.unauthenticatedTtlMs ?? 10_000),
      allowed: nonNegativeNumber('KubeAuthFilter', 'allowedTtlMs', options.allowedTtlMs ?? 300_000),
      denied: nonNegativeNumber('KubeAuthFilter', 'deniedTtlMs', options.deniedTtlMs ?? 30_000),
    };
    this.#validTokens = new ExpiringCache(cacheSize, this.#clock);
    this.#invalidTokens = new ExpiringCache(cacheSize, this.#clock);
    this.#decisions = new ExpiringCache(cacheSize, this.#clock);
    this.#budget = new PeerBudget({ burst: options.failedReviewBurst, perSecond: options.failedReviewsPerSecond, maxPeers: options.maxPeers, clock: this.#clock });
    this.#slots = new FairSlots({ maxConcurrent: options.maxConcurrentReviews, maxWaitingPerKey: options.maxWaitingReviewsPerPeer, maxWaiting: options.maxWaitingReviews });
  }

  /** TokenReviews and SubjectAccessReviews created so far (what the caches save). */
  get reviewsMade(): number {
    return this.#reviewsMade;
  }

  /** The decision for `req` on `path` (the URL's path, without the query). */
  async check(req: IncomingMessage, path: string): Promise<AuthDecision> {
    const header = req.headers.authorization ?? '';
    const match = /^Bearer +(\S+) *$/i.exec(header);
    const token = match?.[1];
    if (token === undefined || token.length > MAX_TOKEN) return { allowed: false, status: 401, message: 'Unauthorized' };
    const peer = peerKey(req.socket.remoteAddress);
    let user: UserInfo | null;
    try {
      user = await this.#authenticate(token, peer);
    } catch (err) {
      if (err instanceof ThrottledError) return throttled(err);
      this.#logger.error('authentication failed: the TokenReview could not be made', { error: toError(err) });
      return { allowed: false, status: 500, message: 'Authentication failed' };
    }
    if (user === null) return { allowed: false, status: 401, message: 'Unauthorized' };
    const verb = (req.method ?? 'GET').toLowerCase();
    let allowed: boolean;
    try {
      allowed = await this.#authorize(user, path, verb, peer);
    } catch (err) {
      if (err instanceof ThrottledError) return throttled(err);
      this.#logger.error('authorization failed: the SubjectAccessReview could not be made', { error: toError(err), user: user.username, path });
      return { allowed: false, status: 500, message: `Authorization for user ${user.username} failed` };
    }
    if (!allowed) return { allowed: false, status: 403, message: `Authorization denied for user ${user.username}` };
    return { allowed: true, user: user.username };
  }

  async #authenticate(token: string, peer: string): Promise<UserInfo | null> {
    const key = createHash('sha256').update(token).digest('hex');
    const valid = this.#validTokens.get(key);
    if (valid !== undefined) return valid;
    if (this.#invalidTokens.get(key) !== undefined) return null;
    const pending = this.#pending.get(key);
    if (pending !== undefined) return pending;
    if (!this.#budget.take(peer)) throw new ThrottledError('the peer spent its budget of failed TokenReviews', this.#budget.retryAfterSeconds(peer));
    // In the map before the first await: a second request with this token joins this review.
    const review = this.#reviewToken(token, peer).finally(() => { this.#pending.delete(key); });
    this.#pending.set(key, review);
    const user = await review;
    if (user === null) this.#invalidTokens.set(key, true, this.#ttl.unauthenticated);
    else this.#validTokens.set(key, user, this.#ttl.authenticated);
    return user;
  }

  /** One TokenReview, charged to `peer`'s budget by the caller; refunded unless it fails to authenticate. */
  async #reviewToken(token: string, peer: string): Promise<UserInfo | null> {
    let refund = false;
    try {
      const answer = await this.#inSlot(peer, () => this.#reviews('/apis/authentication.k8s.io/v1/tokenreviews', {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenReview',
        spec: { token },
      }));
      const status = isRecord(answer) && isRecord(answer.status) ? answer.status : {};
      const user = status.authenticated === true && isRecord(status.user) && typeof status.user.username === 'string' ? status.user as unknown as UserInfo : null;
      refund = user !== null;
      return user;
    } catch (err) {
      // No answer is not the peer's failure (the API server failed, or the peer's queue was full).
      refund = true;
      throw err;
    } finally {
      if (refund) this.#budget.refund(peer);
    }
  }

  /** Runs one review in one of the shared slots, waiting for `peer`'s turn. */
  async #inSlot<T>(peer: string, review: () => Promise<T>): Promise<T> {
    let release;
    try {
      release = await this.#slots.acquire(peer);
    } catch (err) {
      if (err instanceof SlotQueueFullError) throw new ThrottledError(err.message, 1);
      throw err;
    }
    try {
      this.#reviewsMade += 1;
      return await review();
    } finally {
      release();
    }
  }

  async #authorize(user: UserInfo, path: string, verb: string, peer: string): Promise<boolean> {
    const spec = {
      user: user.username,
      ...(user.uid === undefined ? {} : { uid: user.uid }),
      ...(user.groups === undefined ? {} : { groups: user.groups }),
      ...(user.extra === undefined ? {} : { extra: user.extra }),
      nonResourceAttributes: { path, verb },
    };
    const key = JSON.stringify(spec);
    const cached = this.#decisions.get(key);
    if (cached !== undefined) return cached;
    const pending = this.#pendingDecisions.get(key);
    if (pending !== undefined) return pending;
    const review = this.#inSlot(peer, () => this.#reviews('/apis/authorization.k8s.io/v1/subjectaccessreviews', {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec,
    })).then((answer) => isRecord(answer) && isRecord(answer.status) && answer.status.allowed === true)
      .finally(() => { this.#pendingDecisions.delete(key); });
    this.#pendingDecisions.set(key, review);
    const allowed = await review;
    this.#decisions.set(key, allowed, allowed ? this.#ttl.allowed : this.#ttl.denied);
    return allowed;
  }
}
