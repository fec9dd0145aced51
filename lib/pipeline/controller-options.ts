import type { GitPromoterOptions } from '../gitops/index.ts';
import { CommitStatusReader, GitPromoter } from '../gitops/index.ts';
import type { ReconcileObservation } from '../queue/index.ts';
import type { Registry } from '../registry/index.ts';
import { booleanOption, functionOption, invalidOption, isObjectName, nonNegativeNumber, noopLogger, positiveInteger, positiveNumber, realClock, type Clock, type Logger } from '../util/index.ts';
import type { PromotionRequest } from './act.ts';
import { AppKinds } from './app-kinds.ts';
import { DEFAULT_COMMIT_STATUS_POLL_MS } from './commit-status-gate.ts';
import { DEFAULT_APPLY_TIMEOUT_MS } from './decide.ts';
import { DEFAULT_PROGRESSING_GRACE_MS, ProgressingGrace } from './grace.ts';
import { loopPolicy, type LoopPolicy } from './guard.ts';
import { PipelineShard, type PipelineShardOptions } from './shard.ts';

/** Options of {@link PipelineController}. */
export interface PipelineControllerOptions {
  /**
   * The registry whose caches hold the targets and whose queue carries the Pipeline keys. Owned by
   * the caller, who closes it after `run` resolves. Required.
   */
  readonly registry: Registry;
  /** Child loggers per pipeline. Default: discards everything. */
  readonly logger?: Logger;
  /** Default: the wall clock. */
  readonly clock?: Clock;
  /** Pipelines reconciled at once (never the same one twice at once). Default 4. */
  readonly workers?: number;
  /** Bound on one webhook delivery, answer included. Default 10 000. */
  readonly webhookTimeoutMs?: number;
  /**
   * Let webhooks reach loopback and private addresses (RFC 1918, CGNAT, IPv6 ULA); link-local,
   * unspecified, multicast and reserved addresses stay refused. Default false.
   */
  readonly allowPrivateWebhooks?: boolean;
  /**
   * The git strategy's settings: URL policy (`allowPrivateNetworks`, `allowHttp` for tests and
   * demos), commit author, bounds. Default: {@link GitPromoter}'s defaults.
   */
  readonly git?: GitPromoterOptions;
  /** How often an open pull request is looked at for its merge. Default 30 000. */
  readonly gitPollIntervalMs?: number;
  /**
   * How often a commit-status gate (`environments[].commitStatuses`) reads its commit's statuses
   * while it waits; doubled after each failed read, up to 5 minutes. Default 30 000. The reads use
   * `git`'s URL policy, `providerTimeoutMs` and `maxResponseBytes`.
   */
  readonly commitStatusPollIntervalMs?: number;
  /**
   * Called once a promotion has been recorded `Pending` in the Pipeline's status, just before it
   * acts: an approval gate or audit hook. Rejecting leaves the promotion Pending: the reconcile
   * fails and the promotion is resumed by a later one. `signal` aborts when `run` is stopping.
   * Default: none.
   */
  readonly beforePromotion?: (promotion: PromotionRequest, signal: AbortSignal) => Promise<void>;
  /** Told how each reconcile ended (controller `pipeline`), for metrics. Default: none. */
  readonly onReconcile?: (observation: ReconcileObservation) => void;
  /**
   * Let targets on the management cluster (no `clusterRef`) live outside their Pipeline's
   * namespace. Default false: such a Pipeline is Ready=False `InvalidSpec`.
   */
  readonly allowCrossNamespaceTargets?: boolean;
  /**
   * Kind patterns `spec.appRef` may name (`Kind.group`, `*.group`, `Kind` for core, `*`); a
   * Pipeline naming another kind is Ready=False `InvalidSpec`. Default: `DEFAULT_APP_KINDS`.
   */
  readonly appKinds?: readonly string[];
  /**
   * A ServiceAccount name: a Pipeline without `spec.serviceAccountName` acts on the management
   * cluster as this account of its own namespace, so impersonation is mandatory. Default none:
   * such a Pipeline acts with the service's own identity.
   */
  readonly defaultServiceAccount?: string;
  /**
   * Let a fleet's `clusterSelector` list and watch Secrets (or Cluster API Clusters) with the
   * service's own identity, for Pipelines that act as no ServiceAccount. Default false: such a
   * fleet is Ready=False `TargetNotReadable`, the message saying what to grant the Pipeline's
   * account (a selector needs list/watch on Secrets, which a shared management cluster should not
   * give the service in every namespace). Clusters listed by name work either way.
   */
  readonly allowFleetSelectorsAsService?: boolean;
  /**
   * How long a target ready at a revision still counts as ready at it while Flux reconciles it
   * (Ready=Unknown/Progressing at the observed generation). Default 30 000; 0: no grace.
   */
  readonly progressingGraceMs?: number;
  /**
   * How long a git promotion stays `Committed` waiting for its environment to run the revision
   * before it is `Failed`. Default 600 000 (10 minutes).
   */
  readonly applyTimeoutMs?: number;
  /**
   * When promotions of one environment are a loop that stops the Pipeline (`PromotionLoop`):
   * more than `maxPerEnvironment` carried out within `windowMs`. Default 6 within 600 000.
   */
  readonly promotionLoop?: Partial<LoopPolicy>;
  /**
   * Share the Pipelines with other replicas (shard.ts): a Pipeline is reconciled only while
   * `ownership` owns its shard key (its namespace, or `namespace/name`), every status write and
   * Event is refused once it does not, a key gained is reconciled at once and a key lost
   * forgotten. Default: none, every Pipeline is this controller's.
   */
  readonly shard?: PipelineShardOptions;
}

/** Counters for metrics. */
export interface PipelineControllerStats {
  readonly reconciles: number;
  readonly reconcileErrors: number;
  readonly promotions: { readonly succeeded: number; readonly failed: number };
}

/** The component every option error names. */
const OWNER = 'PipelineController';

/** {@link PipelineControllerOptions} checked, defaults merged, and the collaborators they configure built. */
export interface ResolvedControllerOptions {
  readonly registry: Registry;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly workers: number;
  readonly webhookTimeoutMs: number;
  readonly allowPrivateWebhooks: boolean;
  readonly git: GitPromoter;
  readonly gitPollIntervalMs: number;
  readonly commitStatuses: CommitStatusReader;
  readonly commitStatusPollIntervalMs: number;
  readonly beforePromotion: PipelineControllerOptions['beforePromotion'];
  readonly onReconcile: PipelineControllerOptions['onReconcile'];
  readonly allowCrossNamespaceTargets: boolean;
  readonly appKinds: AppKinds;
  readonly defaultServiceAccount: string | undefined;
  readonly allowFleetSelectorsAsService: boolean;
  readonly grace: ProgressingGrace;
  readonly applyTimeoutMs: number;
  readonly loop: LoopPolicy;
  readonly shard: PipelineShard | undefined;
}

/**
 * Checks the options in a fixed order (the first invalid one throws a TypeError naming it) and
 * returns a new object: the caller's is never written.
 */
export function resolveControllerOptions(options: PipelineControllerOptions): ResolvedControllerOptions {
  const registry: unknown = options.registry;
  if (typeof registry !== 'object' || registry === null || typeof (registry as { watchTargetAndGetReader?: unknown }).watchTargetAndGetReader !== 'function') {
    throw new TypeError('PipelineController option registry must be a Registry');
  }
  const allowPrivateWebhooks = booleanOption(OWNER, 'allowPrivateWebhooks', options.allowPrivateWebhooks ?? false);
  if (options.beforePromotion !== undefined) functionOption(OWNER, 'beforePromotion', options.beforePromotion);
  if (options.onReconcile !== undefined) functionOption(OWNER, 'onReconcile', options.onReconcile);
  const account: unknown = options.defaultServiceAccount;
  if (account !== undefined && !isObjectName(account)) invalidOption(OWNER, 'defaultServiceAccount', account, 'a ServiceAccount name');
  const logger = options.logger ?? noopLogger;
  const clock = options.clock ?? realClock;
  const workers = positiveInteger(OWNER, 'workers', options.workers ?? 4);
  const webhookTimeoutMs = positiveNumber(OWNER, 'webhookTimeoutMs', options.webhookTimeoutMs ?? 10_000);
  const git = new GitPromoter({ clock, ...options.git });
  const gitPollIntervalMs = positiveNumber(OWNER, 'gitPollIntervalMs', options.gitPollIntervalMs ?? 30_000);
  const { allowHttp, allowPrivateNetworks, lookup, providerTimeoutMs, maxResponseBytes } = options.git ?? {};
  const commitStatuses = new CommitStatusReader({
    ...(allowHttp === undefined ? {} : { allowHttp }),
    ...(allowPrivateNetworks === undefined ? {} : { allowPrivateNetworks }),
    ...(lookup === undefined ? {} : { lookup }),
    ...(providerTimeoutMs === undefined ? {} : { providerTimeoutMs }),
    ...(maxResponseBytes === undefined ? {} : { maxResponseBytes }),
  });
  const commitStatusPollIntervalMs = positiveNumber(OWNER, 'commitStatusPollIntervalMs', options.commitStatusPollIntervalMs ?? DEFAULT_COMMIT_STATUS_POLL_MS);
  const appKinds = options.appKinds === undefined ? AppKinds.defaults : AppKinds.parse(options.appKinds, 'PipelineController option appKinds');
  const graceMs = nonNegativeNumber(OWNER, 'progressingGraceMs', options.progressingGraceMs ?? DEFAULT_PROGRESSING_GRACE_MS);
  const grace = new ProgressingGrace({ windowMs: graceMs });
  const applyTimeoutMs = positiveNumber(OWNER, 'applyTimeoutMs', options.applyTimeoutMs ?? DEFAULT_APPLY_TIMEOUT_MS);
  const loop = loopPolicy('PipelineController option promotionLoop', options.promotionLoop);
  const shard = options.shard === undefined ? undefined : new PipelineShard(options.shard);
  return {
    registry: options.registry,
    logger,
    clock,
    workers,
    webhookTimeoutMs,
    allowPrivateWebhooks,
    git,
    gitPollIntervalMs,
    commitStatuses,
    commitStatusPollIntervalMs,
    beforePromotion: options.beforePromotion,
    onReconcile: options.onReconcile,
    allowCrossNamespaceTargets: options.allowCrossNamespaceTargets === true,
    appKinds,
    defaultServiceAccount: options.defaultServiceAccount,
    allowFleetSelectorsAsService: options.allowFleetSelectorsAsService === true,
    grace,
    applyTimeoutMs,
    loop,
    shard,
  };
}
