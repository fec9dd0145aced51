// Weighted rendezvous (highest random weight) hashing: which live peer owns a key.
import { createHash } from 'node:crypto';

/** A peer as the assignment sees it. */
export interface WeightedPeer {
  /** Unique among peers. */
  readonly identity: string;
  /** A positive integer; a peer of weight 2 gets twice the keys of a peer of weight 1. */
  readonly weight: number;
}

const TWO_POW_52 = 2 ** 52;

/**
 * u(key, peer) in (0, 1): the first 52 bits of sha256 of the JSON pair (unambiguous whatever the
 * strings hold), centred in their interval so that neither 0 nor 1 is reached.
 */
function unitHash(key: string, identity: string): number {
  const digest = createHash('sha256').update(JSON.stringify([key, identity]), 'utf8').digest();
  const high = digest.readUInt32BE(0);
  const low = digest.readUInt32BE(4) >>> 12; // 20 bits: 32 + 20 = 52
  return (high * 2 ** 20 + low + 0.5) / TWO_POW_52;
}

/**
 * The score of `peer` for `key`: −weight / ln(u). The largest score over the peers wins; with
 * u uniform, P(peer wins) = weight / Σ weights (the exponential-race form of weighted HRW).
 */
export function rendezvousScore(key: string, peer: WeightedPeer): number {
  return -peer.weight / Math.log(unitHash(key, peer.identity));
}

/**
 * The owner of `key` among `peers` (undefined when there are none): the highest score, ties to
 * the smallest identity, so the answer does not depend on the peers' order.
 *
 * COMPATIBILITY: every replica must compute the same owner. Changing the hash, the encoding of
 * (key, identity) or the score is a breaking change: replicas of two versions would disagree
 * (each waits for fences the other holds) until the rollout completes. V8's Math.log is one
 * fdlibm port on every platform, so processes on different machines agree.
 */
export function rendezvousOwner(key: string, peers: Iterable<WeightedPeer>): string | undefined {
  let best: string | undefined;
  let bestScore = -Infinity;
  for (const peer of peers) {
    const score = rendezvousScore(key, peer);
    if (best === undefined || score > bestScore || (score === bestScore && peer.identity < best)) {
      best = peer.identity;
      bestScore = score;
    }
  }
  return best;
}
