import { FleetcacheError } from '../util/index.ts';

/** This process held the Lease and could not renew it within the renew deadline: another replica may lead now. */
export class LeadershipLostError extends FleetcacheError {
  /** `namespace/name` of the Lease. */
  readonly lease: string;

  constructor(lease: string) {
    super('ERR_LEADERSHIP_LOST', `leader election lost: the Lease ${lease} could not be renewed in time`);
    this.lease = lease;
  }
}

/** A controller or runnable the manager ran failed (rejected), which stops the manager. */
export class RunnableFailedError extends FleetcacheError {
  /** The controller's or runnable's name. */
  readonly runnable: string;

  constructor(runnable: string, cause: Error) {
    super('ERR_RUNNABLE_FAILED', `${runnable} failed: ${cause.message}`, { cause });
    this.runnable = runnable;
  }
}

/** Shutting down, controllers and runnables did not finish within the grace period; the manager stopped without them. */
export class ShutdownTimeoutError extends FleetcacheError {
  /** Names of what was still running. */
  readonly pending: readonly string[];
  readonly gracePeriodMs: number;

  constructor(pending: readonly string[], gracePeriodMs: number) {
    super('ERR_SHUTDOWN_TIMEOUT', `${pending.join(', ')} did not stop within the ${gracePeriodMs} ms grace period`);
    this.pending = pending;
    this.gracePeriodMs = gracePeriodMs;
  }
}

/** This replica's peer Lease could not be renewed within the renew deadline: it stopped acting for every shard key, and others take them. */
export class ShardGroupLostError extends FleetcacheError {
  /** `namespace/group` of the shard group. */
  readonly group: string;

  constructor(group: string) {
    super('ERR_SHARD_GROUP_LOST', `sharding lost: the peer Lease in ${group} could not be renewed in time`);
    this.group = group;
  }
}
