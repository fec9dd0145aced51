// The names, labels and annotations of a shard group's Leases: every replica must derive the same
// name for the same peer or key, so these are part of the wire contract.
import { createHash } from 'node:crypto';
import { isDnsLabel } from '../../util/index.ts';

/** Every Lease of a group carries it: one LIST by label selector reads the group's whole state. */
export const SHARD_GROUP_LABEL = 'fleetcache.io/shard-group';
/** `peer` or `fence`. */
export const SHARD_ROLE_LABEL = 'fleetcache.io/shard-role';
/** On a peer Lease: its weight, a positive integer. */
export const SHARD_WEIGHT_ANNOTATION = 'fleetcache.io/shard-weight';
/** On a fence Lease: the shard key it fences (the name holds only a hash of it). */
export const SHARD_KEY_ANNOTATION = 'fleetcache.io/shard-key';

function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/**
 * Most characters in a group name, so that `<group>-peer-<10 hex>` (16 more) and
 * `<group>-key-<16 hex>` (21 more) stay within a DNS label's 63.
 */
export const SHARD_GROUP_MAX_LENGTH = 40;

/** A group name: a DNS label (it is a label value and a prefix of Lease names) of at most {@link SHARD_GROUP_MAX_LENGTH} characters. */
export function isShardGroup(value: unknown): value is string {
  return isDnsLabel(value) && value.length <= SHARD_GROUP_MAX_LENGTH;
}

/** `group` when it {@link isShardGroup is a group name}, else a TypeError. */
export function checkGroup(group: unknown): string {
  if (!isShardGroup(group)) throw new TypeError(`shard group must be a DNS label of at most ${SHARD_GROUP_MAX_LENGTH} characters, got ${JSON.stringify(group)}`);
  return group;
}

/** `<group>-peer-<first 10 hex of sha256(identity)>`. */
export function peerLeaseName(group: string, identity: string): string {
  return `${group}-peer-${sha256Hex(identity).slice(0, 10)}`;
}

/** `<group>-key-<first 16 hex of sha256(key)>`. */
export function fenceLeaseName(group: string, key: string): string {
  return `${group}-key-${sha256Hex(key).slice(0, 16)}`;
}
