// The dashboard's view of sharding (`--shard`): this replica's view of its shard group — the
// peers it sees, each one's share of the keys it knows, the keys in handoff here, and the keys no
// live replica acts for (past the bound: an error). Only this replica's own fences are facts; the
// other replicas' shares are computed here, by the same rendezvous hashing every replica runs.
import { rendezvousOwner, type ShardStatus, type WeightedPeer } from '../../lib/manager/index.ts';
import { sanitizeForDisplay } from '../../lib/util/index.ts';

/** Peers shown at most (sorted by identity); `omittedPeers` counts the rest. */
export const MAX_SHARD_PEERS = 100;
/** Keys one list of the shard view carries at most before the byte bound cuts further. */
export const MAX_SHARD_KEYS = 200;
/** Longest shard key or identity shown, in UTF-16 code units (a Pipeline's `namespace/name` fits). */
const MAX_NAME_TEXT = 320;

/** What the dashboard reads of sharding: the Sharder's status and every live shard key (group-wide). */
export interface ShardSource {
  /** This replica's view of its group (`Sharder.status()`). */
  status(): ShardStatus;
  /** Every live shard key this replica knows, whoever owns it (what the Sharder's `keys` reads). */
  keys(): Iterable<string>;
}

/** A list of keys cut to a length: `count` is how many there are, `keys` the first of them (sorted). */
export interface KeyList {
  readonly count: number;
  readonly keys: readonly string[];
}

/** A key no live replica acts for. */
export interface UnownedKeyView {
  readonly key: string;
  /** Epoch milliseconds since when (this replica's account), to the second. */
  readonly since: number;
}

export interface ShardPeerView {
  readonly identity: string;
  readonly weight: number;
  /** Its peer Lease is live as this replica sees it. */
  readonly live: boolean;
  /** This replica. */
  readonly self: boolean;
  /**
   * The keys the assignment gives it, computed by this replica (weighted rendezvous hashing over
   * the peers it sees live, of the keys it knows): what the group converges to, not a fact read
   * from the peer. Empty when not live.
   */
  readonly assigned: KeyList;
  /** This replica only: the keys it acts for now (fence held, peer Lease fresh). A fact. */
  readonly acting?: number;
}

/** The shard group as this replica sees it. */
export interface ShardView {
  /** This replica's identity. */
  readonly identity: string;
  /** Its peer Lease has been written (it takes part in the assignment). */
  readonly joined: boolean;
  /** The no-orphan bound now, in milliseconds. */
  readonly boundMs: number;
  /** Live shard keys this replica knows, group-wide. */
  readonly keys: number;
  readonly peers: readonly ShardPeerView[];
  /** Peers not shown beyond {@link MAX_SHARD_PEERS}. */
  readonly omittedPeers: number;
  /** Keys in handoff here: assigned but not fenced yet, or leaving (work settling, fence being released). */
  readonly handoff: KeyList;
  /** Keys no live replica acts for, group-wide, longest first: within the bound, a handoff in progress. */
  readonly unowned: { readonly count: number; readonly keys: readonly UnownedKeyView[] };
  /** Unowned keys past the bound: each is an error. */
  readonly orphaned: KeyList;
}

function name(value: string): string {
  return sanitizeForDisplay(value, MAX_NAME_TEXT);
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function keyList(keys: readonly string[]): KeyList {
  return { count: keys.length, keys: keys.slice(0, MAX_SHARD_KEYS).map(name) };
}

/** The keys each live peer is assigned, sorted: one hash per key and live peer. */
function assign(known: readonly string[], live: readonly WeightedPeer[]): ReadonlyMap<string, readonly string[]> {
  const byOwner = new Map<string, string[]>();
  for (const key of known) {
    const owner = rendezvousOwner(key, live);
    if (owner === undefined) continue;
    const list = byOwner.get(owner);
    if (list === undefined) byOwner.set(owner, [key]);
    else list.push(key);
  }
  return byOwner;
}

/**
 * The last assignment computed, so that an unchanged group (same live peers and weights, same
 * keys) is not hashed again on every refresh of the page (10,000 keys × 4 peers: 60 to 100 ms
 * measured on a loaded 2-core machine). Invariant: `#owners` is `assign` of the keys and peers
 * that `#signature` spells.
 */
export class AssignmentMemo {
  #signature: string | undefined;
  #owners: ReadonlyMap<string, readonly string[]> = new Map();

  /** The keys of each live peer; the same map as last time when the group did not change. */
  owners(known: readonly string[], live: readonly WeightedPeer[]): ReadonlyMap<string, readonly string[]> {
    // JSON: unambiguous whatever the identities and keys hold.
    const signature = JSON.stringify([live.map((p) => [p.identity, p.weight]), known]);
    if (signature !== this.#signature) {
      this.#owners = assign(known, live);
      this.#signature = signature;
    }
    return this.#owners;
  }
}

/**
 * The shard view of `status` over `keys`, at `now` (epoch ms). Deterministic: the same group and
 * keys give the same JSON (times to the second). Costs one hash per key and live peer, unless
 * `memo` remembers the same group.
 */
export function shardView(status: ShardStatus, keys: Iterable<string>, now: number, memo?: AssignmentMemo): ShardView {
  const known = [...new Set(keys)].sort(compare);
  const live: WeightedPeer[] = status.peers.filter((p) => p.live).map((p) => ({ identity: p.identity, weight: p.weight }));
  const byOwner = memo === undefined ? assign(known, live) : memo.owners(known, live);
  const peers = [...status.peers].sort((a, b) => compare(a.identity, b.identity));
  return {
    identity: name(status.identity),
    joined: status.joined,
    boundMs: status.boundMs,
    keys: known.length,
    peers: peers.slice(0, MAX_SHARD_PEERS).map((p): ShardPeerView => ({
      identity: name(p.identity),
      weight: p.weight,
      live: p.live,
      self: p.self,
      assigned: keyList(p.live ? byOwner.get(p.identity) ?? [] : []),
      ...(p.self ? { acting: status.owned.length } : {}),
    })),
    omittedPeers: Math.max(0, peers.length - MAX_SHARD_PEERS),
    handoff: keyList(status.handoff),
    unowned: {
      count: status.unowned.length,
      // To the second: `forMs` grows by the millisecond, and an unchanged group should not be sent again.
      keys: status.unowned.slice(0, MAX_SHARD_KEYS).map((u) => ({ key: name(u.key), since: Math.round((now - u.forMs) / 1000) * 1000 })),
    },
    orphaned: keyList(status.orphaned),
  };
}

/** `view` with every key list cut to its first `cap` keys (counts kept). */
export function capShardView(view: ShardView, cap: number): ShardView {
  const cut = (list: KeyList): KeyList => (list.keys.length <= cap ? list : { count: list.count, keys: list.keys.slice(0, cap) });
  return {
    ...view,
    peers: view.peers.map((p) => ({ ...p, assigned: cut(p.assigned) })),
    handoff: cut(view.handoff),
    unowned: view.unowned.keys.length <= cap ? view.unowned : { count: view.unowned.count, keys: view.unowned.keys.slice(0, cap) },
    orphaned: cut(view.orphaned),
  };
}

/** The key lists of `view`, for sizing (each item as it is serialised). */
export function shardKeyLists(view: ShardView): readonly (readonly unknown[])[] {
  return [...view.peers.map((p) => p.assigned.keys), view.handoff.keys, view.unowned.keys, view.orphaned.keys];
}

/** Keys shown in `full` and not in `cut` (both of the same view). */
export function shardKeysLeftOut(full: ShardView, cut: ShardView): number {
  const shown = (v: ShardView): number => shardKeyLists(v).reduce((sum, l) => sum + l.length, 0);
  return shown(full) - shown(cut);
}
