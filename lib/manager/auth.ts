// Authentication and authorization of the metrics server's requests against the management
// cluster, as controller-runtime's filters.WithAuthenticationAndAuthorization does: the bearer
// token goes to a TokenReview, the user it names to a SubjectAccessReview for the request's
// non-resource path and verb. Answers are cached briefly, positive and negative apart.
import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { noopLogger, realClock, toError, type Clock, type Logger } from '../util/index.ts';

/** Creates one review on the management cluster: POST `path` with `body`, the parsed answer back. */
export type ReviewClient = (path: string, body: object) => Promise<unknown>;

/** What the filter decided about one request. */
export type AuthDecision =
  | { readonly allowed: true; readonly user: string }
  | { readonly allowed: false; readonly status: 401 | 403 | 500; readonly message: string };

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
  /** Entries each cache holds at most (the oldest go first): a flood of made-up tokens stays bounded. Default 1 024. */
  readonly cacheSize?: number;
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

function nonNegative(option: string, value: number): number {
  if (!Number.isFinite(value) || value < 0) throw new TypeError(`KubeAuthFilter option ${option} must be a non-negative number, got ${value}`);
  return value;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Decides whether a request to the metrics server may be answered: 401 without a bearer token or
 * with one a TokenReview does not authenticate, 403 when a SubjectAccessReview does not allow the
 * user `get` (the method, lower-cased) on the request's path, 500 when the reviews cannot be made.
 */
export class KubeAuthFilter {
  readonly #reviews: ReviewClient;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #ttl: { readonly authenticated: number; readonly unauthenticated: number; readonly allowed: number; readonly denied: number };
  /** sha256(token) → the user, or null when the token is not valid. */
  readonly #tokens: ExpiringCache<UserInfo | null>;
  /** JSON of user, path and verb → allowed. */
  readonly #decisions: ExpiringCache<boolean>;
  #reviewsMade = 0;

  constructor(options: KubeAuthFilterOptions) {
    if (typeof options.reviews !== 'function') throw new TypeError('KubeAuthFilter option reviews must be a function');
    const cacheSize = options.cacheSize ?? 1_024;
    if (!Number.isInteger(cacheSize) || cacheSize < 1) throw new TypeError(`KubeAuthFilter option cacheSize must be a positive integer, got ${cacheSize}`);
    this.#reviews = options.reviews;
    this.#clock = options.clock ?? realClock;
    this.#logger = options.logger ?? noopLogger;
    this.#ttl = {
      authenticated: nonNegative('authenticatedTtlMs', options.authenticatedTtlMs ?? 60_000),
      unauthenticated: nonNegative('unauthenticatedTtlMs', options.unauthenticatedTtlMs ?? 10_000),
      allowed: nonNegative('allowedTtlMs', options.allowedTtlMs ?? 300_000),
      denied: nonNegative('deniedTtlMs', options.deniedTtlMs ?? 30_000),
    };
    this.#tokens = new ExpiringCache(cacheSize, this.#clock);
    this.#decisions = new ExpiringCache(cacheSize, this.#clock);
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
    let user: UserInfo | null;
    try {
      user = await this.#authenticate(token);
    } catch (err) {
      this.#logger.error('authentication failed: the TokenReview could not be made', { error: toError(err) });
      return { allowed: false, status: 500, message: 'Authentication failed' };
    }
    if (user === null) return { allowed: false, status: 401, message: 'Unauthorized' };
    const verb = (req.method ?? 'GET').toLowerCase();
    let allowed: boolean;
    try {
      allowed = await this.#authorize(user, path, verb);
    } catch (err) {
      this.#logger.error('authorization failed: the SubjectAccessReview could not be made', { error: toError(err), user: user.username, path });
      return { allowed: false, status: 500, message: `Authorization for user ${user.username} failed` };
    }
    if (!allowed) return { allowed: false, status: 403, message: `Authorization denied for user ${user.username}` };
    return { allowed: true, user: user.username };
  }

  async #authenticate(token: string): Promise<UserInfo | null> {
    const key = createHash('sha256').update(token).digest('hex');
    const cached = this.#tokens.get(key);
    if (cached !== undefined) return cached;
    this.#reviewsMade += 1;
    const answer = await this.#reviews('/apis/authentication.k8s.io/v1/tokenreviews', {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenReview',
      spec: { token },
    });
    const status = isRecord(answer) && isRecord(answer.status) ? answer.status : {};
    const user = status.authenticated === true && isRecord(status.user) && typeof status.user.username === 'string' ? status.user as unknown as UserInfo : null;
    this.#tokens.set(key, user, user === null ? this.#ttl.unauthenticated : this.#ttl.authenticated);
    return user;
  }

  async #authorize(user: UserInfo, path: string, verb: string): Promise<boolean> {
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
    this.#reviewsMade += 1;
    const answer = await this.#reviews('/apis/authorization.k8s.io/v1/subjectaccessreviews', {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec,
    });
    const allowed = isRecord(answer) && isRecord(answer.status) && answer.status.allowed === true;
    this.#decisions.set(key, allowed, allowed ? this.#ttl.allowed : this.#ttl.denied);
    return allowed;
  }
}
