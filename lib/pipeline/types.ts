import type { GroupVersionKind } from '../util/index.ts';

/** `fleetcache.dev/v1alpha1, Kind=Pipeline`. */
export const PIPELINE_GVK: GroupVersionKind = Object.freeze({ group: 'fleetcache.dev', version: 'v1alpha1', kind: 'Pipeline' });

/**
 * Where a target lives. Omitted on a target: the local (management) cluster.
 * - `Secret`: a kubeconfig in a Secret, under `key` (default `value`, else `kubeconfig`).
 * - `Cluster`: a Cluster API `Cluster`; its kubeconfig is the `<name>-kubeconfig` Secret.
 * `namespace` defaults to the Pipeline's; other namespaces only where the service allows it.
 */
export interface PipelineClusterRef {
  readonly kind: 'Secret' | 'Cluster';
  readonly name: string;
  readonly namespace?: string;
  /** Only for `Secret`. */
  readonly key?: string;
}

/** One place the application runs in an environment. */
export interface PipelineTarget {
  readonly namespace: string;
  readonly clusterRef?: PipelineClusterRef;
}

/**
 * When a set of targets counts as ready: `All` of them, a `Quorum` of `count`, or `Percent` of them
 * (`percent` of the total, rounded up). Default `All`.
 */
export interface ReadinessPolicy {
  readonly policy: 'All' | 'Quorum' | 'Percent';
  /** With `Quorum`: how many targets must be ready (more than exist: all of them). */
  readonly count?: number;
  /** With `Percent`: 1 to 100. */
  readonly percent?: number;
}

/** A label selector in the API's usual form (both parts ANDed; neither matches every object). */
export interface PipelineLabelSelector {
  readonly matchLabels?: Readonly<Record<string, string>>;
  readonly matchExpressions?: readonly { readonly key: string; readonly operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist'; readonly values?: readonly string[] }[];
}

/**
 * One wave of a rollout into a fleet environment: the clusters whose Secret (or Cluster) labels
 * match `selector`, or the next `count` clusters, or the next `percent` of the fleet (rounded up),
 * in cluster-name order. Exactly one of the three. The last wave also takes every cluster no
 * earlier wave took.
 */
export interface PipelineWave {
  readonly name: string;
  readonly selector?: PipelineLabelSelector;
  readonly count?: number;
  readonly percent?: number;
  /** When this wave counts as ready. Default: the environment's `readiness`. */
  readonly readiness?: ReadinessPolicy;
  /** How long this wave must have been ready before the next wave starts, from when it first was. Default 0. */
  readonly soakSeconds?: number;
  /** This wave waits for an approval of `<environment>/<wave>` (as `requireApproval` does for an environment). */
  readonly requireApproval?: boolean;
}

/**
 * An environment of many clusters: the same `namespace` in every cluster whose kubeconfig Secret
 * (or Cluster API Cluster) in the Pipeline's namespace matches `clusterSelector`, plus those listed
 * in `clusters`. Membership follows the labels (watched, as the Pipeline's identity).
 */
export interface PipelineFleet {
  readonly namespace: string;
  readonly clusterSelector?: PipelineLabelSelector & { readonly kind?: 'Secret' | 'Cluster' };
  readonly clusters?: readonly PipelineClusterRef[];
  /** When the environment counts as ready (as a source of promotions, and done as a target). Default `All`. */
  readonly readiness?: ReadinessPolicy;
  /** Promotions into the environment go wave after wave. Unset: all clusters at once. */
  readonly waves?: readonly PipelineWave[];
}

export interface PipelineEnvironment {
  readonly name: string;
  /** The environment's targets; or `fleet`, not both. */
  readonly targets?: readonly PipelineTarget[];
  /** A fleet environment (instead of `targets`). */
  readonly fleet?: PipelineFleet;
  /**
   * Promotions into this environment wait until someone allowed the verb `approve` on this
   * Pipeline (group fleetcache.dev, resource pipelines) approves the revision through the
   * service's approval endpoint, which records it in `status.approvals`. Default false.
   */
  readonly requireApproval?: boolean;
  /**
   * Git strategy: a promotion into this environment is done only once the commit that carried it
   * has passing commit statuses (GitHub statuses and check runs, GitLab job statuses): it stays
   * `Committed` until then, `Failed` on a failing status or at `timeout` (see commit-status.ts).
   */
  /**
   * Git strategy: the Flux ImagePolicy (in the Pipeline's namespace) whose image-automation setters
   * (`# {"$imagepolicy": "<namespace>:<name>[:tag]"}`) a promotion into this environment writes,
   * beside its `$promotion` markers. Default: `<pipeline>-<environment>` (a naming convention).
   * Not with waves (each wave has its own `$promotion` markers).
   */
  readonly imagePolicy?: string;
  readonly commitStatuses?: {
    /** Contexts that must be success. Unset or empty: every status reported (at least one). */
    readonly contexts?: readonly string[];
    /** A duration from the commit, `1s` to `24h`. Default `30m`. */
    readonly timeout?: string;
    /** Default: `spec.promotion.git.pullRequest.provider`. */
    readonly provider?: 'github' | 'gitlab';
    readonly apiUrl?: string;
  };
}

/** Set the revision at a JSON pointer in each target object of the next environment. */
export interface PatchPromotion {
  readonly strategy: 'patch';
  readonly patch: { readonly path: string };
}

/** POST a description of the promotion to the URL held in a Secret beside the Pipeline. */
export interface WebhookPromotion {
  readonly strategy: 'webhook';
  readonly webhook: { readonly secretRef: { readonly name: string; readonly key?: string } };
}

/**
 * Commit the revision to the Git repository a GitOps tool reconciles from: every YAML line under
 * `path` marked `# {"$promotion": "<namespace>:<pipeline>:<environment>"}` gets the revision, then
 * a commit is pushed to `branch`, or to a branch of its own with a pull request into `branch`.
 */
export interface GitPromotion {
  readonly strategy: 'git';
  readonly git: {
    /** https:// (or ssh:// with an SSH key in the Secret). */
    readonly url: string;
    /** Default `main`. */
    readonly branch?: string;
    /** Directory to look for markers in. Default: the whole repository. */
    readonly path?: string;
    /**
     * Secret beside the Pipeline: `username` + `password`, or `token` (HTTPS, and the provider
     * API with pull requests); or `identity` + `known_hosts` (SSH). Unset: no credentials.
     */
    readonly secretRef?: { readonly name: string };
    /** Open a pull request (committed when merged, done when the environment runs it) instead of pushing to `branch`. */
    readonly pullRequest?: { readonly provider: 'github' | 'gitlab'; readonly apiUrl?: string };
  };
}

export type PipelinePromotion = PatchPromotion | WebhookPromotion | GitPromotion;

export interface PipelineSpec {
  /** The application object, the same name in every target namespace. */
  readonly appRef: { readonly apiVersion: string; readonly kind: string; readonly name: string };
  /** In promotion order: a revision moves from each environment to the next. */
  readonly environments: readonly PipelineEnvironment[];
  readonly promotion: PipelinePromotion;
  /**
   * JSON pointer to the revision in a target object. Default: `/status/lastAppliedRevision`, else
   * the newest `status.history[].chartVersion` (Flux keeps the newest first).
   */
  readonly revisionPath?: string;
  /**
   * A ServiceAccount in the Pipeline's namespace: everything the service reads and writes for this
   * Pipeline on the management cluster (targets, kubeconfig and webhook Secrets) is done as that
   * account (Kubernetes impersonation), so its RBAC decides. Unset: the service's
   * `--default-service-account` when it has one, else the service's own identity.
   */
  readonly serviceAccountName?: string;
}

/** A condition in the usual Kubernetes form. */
export interface Condition {
  readonly type: string;
  readonly status: 'True' | 'False' | 'Unknown';
  readonly reason: string;
  readonly message: string;
  /** RFC 3339; changes only when `status` changes. */
  readonly lastTransitionTime: string;
  readonly observedGeneration: number;
}

/**
 * Why an existing target is not ready, in a fixed vocabulary (a value from the object is never
 * echoed): `Suspended` (`spec.suspend: true`: Flux keeps Ready and observedGeneration current
 * while it applies nothing), `Progressing` (Ready=Unknown/Progressing: a reconcile is running,
 * past the grace window), `NotObserved` (`status.observedGeneration` behind `metadata.generation`),
 * `NotReady` (any other Ready condition, or none).
 */
export type NotReadyReason = 'Suspended' | 'Progressing' | 'NotObserved' | 'NotReady';

/** What the controller saw of one target. */
export interface TargetStatus {
  /** The cluster's key (`local`, `secret:ns/name`, `cluster-api:ns/name`). */
  readonly cluster: string;
  readonly namespace: string;
  /** Unset while the cache is still loading (not known yet); false with `error` when it cannot be read. */
  readonly readable?: boolean;
  /** Unset when not known. */
  readonly exists?: boolean;
  /**
   * Not suspended, `status.observedGeneration` equal to `metadata.generation`, and a `Ready`
   * condition that is True — or, within the Progressing grace window, Progressing at the revision
   * it was ready at.
   */
  readonly ready: boolean;
  /** Only a value that looks like a revision (see `isRevision`); otherwise `error` says "not a revision". */
  readonly revision?: string;
  /** Why an existing target is not ready: one of {@link NotReadyReason}. Unset when ready. */
  readonly reason?: NotReadyReason;
  /**
   * Set with the patch strategy when the promoted value was put back after the patch by the Flux
   * Kustomization that manages the object (it carries `kustomize.toolkit.fluxcd.io/name`).
   */
  readonly drifted?: boolean;
  /**
   * Why the target cannot be read (`readable` false): the cluster's error (cluster, GVK, HTTP
   * status); or, with `readable` true, "not a revision" when the value at the revision path does
   * not look like one (never echoed).
   */
  readonly error?: string;
}

export interface EnvironmentStatus {
  readonly name: string;
  /** Every target ready at one revision; for a fleet, its readiness policy met at one revision. */
  readonly ready: boolean;
  /** The revision every target reports, when they agree; for a fleet, the one most targets are ready at. */
  readonly revision?: string;
  /** When not ready at that revision: the first not-ready target's {@link NotReadyReason}. */
  readonly reason?: NotReadyReason;
  /**
   * Every target; for a fleet environment, in status, only the first {@link MAX_FLEET_TARGETS_SHOWN}
   * not ready (the counts are in `fleet`).
   */
  readonly targets: readonly TargetStatus[];
  /** A fleet environment's counts. */
  readonly fleet?: FleetStatus;
  /** A fleet environment's waves, in order. */
  readonly waves?: readonly WaveStatus[];
}

/** Why a fleet's target does not count as ready: a {@link NotReadyReason}, or where it stands instead. */
export type FleetNotReadyReason = NotReadyReason | 'Unreadable' | 'Loading' | 'Missing' | 'OtherRevision';

/** A fleet environment's (or wave's) readiness in counts: bounded whatever the fleet's size. */
export interface FleetStatus {
  /** The readiness policy, e.g. `Quorum 5`. */
  readonly policy: string;
  readonly total: number;
  /** Targets ready at the environment's revision. */
  readonly readyTargets: number;
  /** How many ready targets the policy needs (`total` for All). */
  readonly required: number;
  /** Targets that can be read (readiness is decided once `required` of them can). */
  readonly readable: number;
  /** How many targets are not ready, by reason. */
  readonly notReady: Readonly<Partial<Record<FleetNotReadyReason, number>>>;
  /** Why the membership could not be read (the Secret or Cluster list), when it cannot. */
  readonly error?: string;
  /**
   * `Loading` while the member list (the Secret or Cluster cache) has not completed its first
   * LIST: the counts are not the fleet's yet, and nothing is decided or timed out on them.
   */
  readonly membership?: 'Loading';
}

/** One wave of a fleet environment. */
export interface WaveStatus {
  readonly name: string;
  /** The wave's readiness policy met at `revision`. */
  readonly ready: boolean;
  readonly revision?: string;
  readonly total: number;
  readonly readyTargets: number;
  readonly required: number;
  /** The wave's `soakSeconds`, when set. */
  readonly soakSeconds?: number;
  /** The wave requires its own approval (`<environment>/<wave>`). */
  readonly requireApproval?: boolean;
}

/** How many not-ready targets a fleet environment's status lists (the rest are only counted). */
export const MAX_FLEET_TARGETS_SHOWN = 10;

/**
 * `AwaitingApproval`: the environment requires approval and the revision has none yet.
 * `Committed` (git strategy): the commit is in the branch, the environment does not run the
 * revision yet; `Succeeded` once every target is observed ready at it, `Failed` past the apply
 * timeout. With the environment's `commitStatuses`, `Committed` lasts until the commit's statuses
 * passed too (`Failed` on a failing status or past the gate's timeout; see `commitStatuses` on the record).
 */
export type PromotionState = 'AwaitingApproval' | 'Pending' | 'Committed' | 'Succeeded' | 'Failed';

/**
 * One promotion of a revision into an environment. Written `Pending` before anything is done, so
 * a controller that restarts mid-promotion resumes it rather than starting another.
 */
export interface PromotionRecord {
  /** The environment promoted into. */
  readonly environment: string;
  /**
   * The wave of a fleet environment promoted into. A wave's record is `Committed` once carried out
   * (whatever the strategy) until the wave is ready at the revision (`Succeeded`, `readyAt` set)
   * or the apply timeout passed (`Failed`: the rollout stops at this wave).
   */
  readonly wave?: string;
  /** When the wave was first seen ready at the revision: its soak counts from here. */
  readonly readyAt?: string;
  readonly revision: string;
  readonly strategy: 'patch' | 'webhook' | 'git';
  readonly state: PromotionState;
  /** Attempts begun (each is recorded before it acts). */
  readonly attempts: number;
  readonly message?: string;
  readonly startedAt: string;
  /** When the last attempt ended (set with `Succeeded` and `Failed`). */
  readonly finishedAt?: string;
  /** The commit that carried it (git strategy). */
  readonly commit?: string;
  /** When the commit reached the branch (git strategy): the apply timeout counts from here. */
  readonly committedAt?: string;
  /** The pull request that carries it (git strategy with pull requests); committed when merged. */
  readonly pullRequest?: { readonly number: number; readonly url: string };
  /** The commit-status gate of a `Committed` record (environments with `commitStatuses`): where it stands and why. */
  readonly commitStatuses?: { readonly state: 'Pending' | 'Passed' | 'Failed'; readonly message: string };
  /** Set when the environment requires approval and an approval named this revision. */
  readonly approved?: boolean;
  /** Who approved it (with `approved`), as the approval in `status.approvals` says. */
  readonly approvedBy?: Approver;
  /** When it was approved (with `approved`). */
  readonly approvedAt?: string;
  /**
   * Set on a wave's record carried out again because a person asked (`status.retries`): who, when,
   * and `of`, the attempt that had failed (a retry is one new attempt, keyed by it).
   */
  readonly retry?: RetryMark;
  /**
   * Clusters that joined this wave (or fleet) after it was carried out and were given its revision
   * then (patch: patched; webhook: a call of their own), by cluster key: each at most once per
   * ⟨environment, wave, revision, cluster⟩; at most {@link MAX_LATE_JOINERS} per record.
   */
  readonly joined?: readonly string[];
}

/** How many late joiners one wave's rollout gives its revision; more wait for the next revision. */
export const MAX_LATE_JOINERS = 20;

/** A retry of a stopped wave, as its record carries it. */
export interface RetryMark {
  readonly by: Approver;
  readonly at: string;
  /** The failed attempt retried. */
  readonly of: number;
}

/**
 * A person's request to carry out again a wave whose rollout of `revision` stopped there (its
 * record `Failed` after it was carried out). Written only by the service, as approvals are,
 * after a SubjectAccessReview allowed the verb `approve` on the Pipeline. One retry is one new
 * attempt: it names the failed attempt, and applies only while the wave's record is that attempt.
 */
export interface WaveRetry {
  readonly environment: string;
  readonly wave: string;
  readonly revision: string;
  /** The failed attempt (the wave record's `attempts` when it was asked for). */
  readonly attempt: number;
  readonly requestedBy: Approver;
  /** RFC 3339. */
  readonly requestedAt: string;
}

/** The person (or ServiceAccount) behind an approval, as the API server's TokenReview named them. */
export interface Approver {
  readonly username: string;
  /** Unset when the authenticator gives none. */
  readonly uid?: string;
}

/**
 * One approval of a revision for an environment that requires approval. Written only by the
 * service, on the status subresource, after a SubjectAccessReview allowed the verb `approve` on
 * the Pipeline to the person whose token a TokenReview authenticated.
 */
export interface Approval {
  readonly environment: string;
  readonly revision: string;
  readonly approver: Approver;
  /** RFC 3339. */
  readonly approvedAt: string;
}

export interface PipelineStatus {
  readonly observedGeneration?: number;
  readonly conditions?: readonly Condition[];
  readonly environments?: readonly EnvironmentStatus[];
  /** Oldest first; the newest {@link MAX_PROMOTIONS_PER_ENVIRONMENT} per environment are kept. */
  readonly promotions?: readonly PromotionRecord[];
  /**
   * What this Pipeline has carried out (a commit pushed, objects patched, a webhook delivered),
   * oldest first, the newest {@link MAX_COMMITTED_PER_ENVIRONMENT} revisions per environment (a
   * fleet's newest rollout one entry per wave, an older rollout folded into one entry without a
   * wave, which covers every wave): the memory of
   * the commit-rate guard (never twice per ⟨environment, revision⟩; a loop stops promotions).
   */
  readonly committed?: readonly CommittedPromotion[];
  /**
   * The guard's last stop of promotions. In force while `generation` is the Pipeline's; a change
   * of the spec lifts it (kept as a record: the loop count restarts from `at`).
   */
  readonly halted?: PromotionHalt;
  /** Oldest first; the newest {@link MAX_APPROVALS_PER_ENVIRONMENT} per environment are kept. */
  readonly approvals?: readonly Approval[];
  /** Retries of stopped waves, oldest first; the newest {@link MAX_RETRIES_PER_ENVIRONMENT} per environment are kept. */
  readonly retries?: readonly WaveRetry[];
}

/** One ⟨environment, revision⟩ carried out. */
export interface CommittedPromotion {
  readonly environment: string;
  /** The wave (fleet environments with waves). */
  readonly wave?: string;
  readonly revision: string;
  /** RFC 3339. */
  readonly at: string;
  /** The commit (git strategy). */
  readonly commit?: string;
}

/**
 * Why promotions stopped: `PromotionLoop` (one environment promoted too often, or an
 * ⟨environment, revision⟩ carried out once already), `CommitReference` (the revision is a Git
 * commit or artifact reference, never written into a manifest).
 */
export interface PromotionHalt {
  readonly reason: 'PromotionLoop' | 'CommitReference';
  readonly message: string;
  /** The Pipeline's generation when it stopped: a newer one resumes promotions. */
  readonly generation: number;
  /** RFC 3339. */
  readonly at: string;
}

/** How many revisions' {@link CommittedPromotion}s are kept per environment. */
export const MAX_COMMITTED_PER_ENVIRONMENT = 20;

/** How many approvals are kept per environment (older ones are dropped). */
export const MAX_APPROVALS_PER_ENVIRONMENT = 10;

/** How many wave retries are kept per environment (older ones are dropped). */
export const MAX_RETRIES_PER_ENVIRONMENT = 10;

/** How many promotion records are kept per environment (older ones are dropped). */
export const MAX_PROMOTIONS_PER_ENVIRONMENT = 10;

/** A Pipeline object as the API server sends it. */
export interface Pipeline {
  readonly apiVersion?: string;
  readonly kind?: string;
  readonly metadata?: {
    readonly name?: string;
    readonly namespace?: string;
    readonly uid?: string;
    readonly resourceVersion?: string;
    readonly generation?: number;
    readonly deletionTimestamp?: string;
    readonly [field: string]: unknown;
  };
  /** Unknown until validated: a Pipeline may predate the schema, or come through a looser API. */
  readonly spec?: unknown;
  readonly status?: PipelineStatus;
  readonly [field: string]: unknown;
}
