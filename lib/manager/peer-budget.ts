// A budget of costly attempts per network peer: the metrics server charges each TokenReview it
// makes for a peer and refunds it when the token turns out valid, so only failed reviews use the
// budget up, and a peer guessing tokens is refused before it reaches the management cluster.
import { isIP } from 'node:net';
import { positiveInteger, positiveNumber, realClock, type Clock } from '../util/index.ts';

/** Options of {@link PeerBudget}. */
export interface PeerBudgetOptions {
  /** Attempts a peer may spend at once after a quiet spell (the bucket's size). Default 10. */
  readonly burst?: number | undefined;
  /** Attempts a peer regains per second, up to `burst`. Default 0.5 (one every 2 s). */
  readonly perSecond?: number | undefined;
  /**
   * Peers remembered at most; past it the least recently seen is forgotten (a forgotten peer
   * starts again with a full bucket, so an attacker needs this many addresses to gain anything).
   * Default 4 096.
   */
  readonly maxPeers?: number | undefined;
  /** Default: the wall clock. */
  readonly clock?: Clock | undefined;
}

interface Bucket {
  tokens: number;
  /** When `tokens` was exact (our clock). */
  at: number;
}

/**
 * The key a peer is budgeted under: an IPv4 address as is (IPv4-mapped IPv6 included), an IPv6
 * address by its /64 prefix (one host usually holds a whole /64), anything else as given.
 */
export function peerKey(address: string | undefined): string {
  if (address === undefined || address === '') return 'unknown';
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped?.[1] !== undefined) return mapped[1];
  if (isIP(address) !== 6) return address;
  const bare = address.replace(/%.*$/, '');
  const [head = '', tail] = bare.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups = tail === undefined ? left : [...left, ...Array<string>(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right];
  return `${groups.slice(0, 4).map((g) => Number.parseInt(g, 16).toString(16)).join(':')}::/64`;
}

/**
 * Token buckets per peer, refilled lazily from the clock (no timer: an idle budget costs nothing).
 *
 * Invariants: `#buckets` holds at most `#maxPeers` entries, in order of last use (the first is
 * forgotten next); a bucket's `tokens` is in [0, burst] as of its `at`.
 */
export class PeerBudget {
  readonly #burst: number;
  readonly #perSecond: number;
  readonly #maxPeers: number;
  readonly #clock: Clock;
  readonly #buckets = new Map<string, Bucket>();

  constructor(options: PeerBudgetOptions = {}) {
    this.#burst = positiveInteger('PeerBudget', 'burst', options.burst ?? 10);
    this.#perSecond = positiveNumber('PeerBudget', 'perSecond', options.perSecond ?? 0.5);
    this.#maxPeers = positiveInteger('PeerBudget', 'maxPeers', options.maxPeers ?? 4_096);
    this.#clock = options.clock ?? realClock;
  }

  /** Takes one attempt from `peer`'s budget: true when there was one, false when it is spent. */
  take(peer: string): boolean {
    const bucket = this.#bucket(peer);
    if (bucket.tokens < 1) return false;
    bucket.tokens -= 1;
    return true;
  }

  /** Gives back an attempt taken by {@link take} (it succeeded). */
  refund(peer: string): void {
    const bucket = this.#bucket(peer);
    bucket.tokens = Math.min(this.#burst, bucket.tokens + 1);
  }

  /** Whole seconds until `peer` has an attempt again (0 when it has one now). */
  retryAfterSeconds(peer: string): number {
    const bucket = this.#buckets.get(peer);
    if (bucket === undefined) return 0;
    this.#refill(bucket);
    return bucket.tokens >= 1 ? 0 : Math.ceil((1 - bucket.tokens) / this.#perSecond);
  }

  /** Peers remembered now. */
  get size(): number {
    return this.#buckets.size;
  }

  #refill(bucket: Bucket): void {
    const now = this.#clock.now();
    if (now > bucket.at) bucket.tokens = Math.min(this.#burst, bucket.tokens + ((now - bucket.at) * this.#perSecond) / 1000);
    bucket.at = now;
  }

  #bucket(peer: string): Bucket {
    let bucket = this.#buckets.get(peer);
    if (bucket === undefined) {
      bucket = { tokens: this.#burst, at: this.#clock.now() };
      while (this.#buckets.size >= this.#maxPeers) {
        const oldest = this.#buckets.keys().next();
        if (oldest.done === true) break;
        this.#buckets.delete(oldest.value);
      }
    } else {
      this.#buckets.delete(peer); // re-inserted below: last used goes last
      this.#refill(bucket);
    }
    this.#buckets.set(peer, bucket);
    return bucket;
  }
}
