import { FleetcacheError } from '../util/index.ts';

/**
 * Why a Git promotion step failed, as a fixed word: these go to status and Events, never git's
 * stderr or a provider's answer, which may quote tenant data or credentials.
 */
export type GitOpsReason =
  | 'UrlRefused'
  | 'AddressRefused'
  | 'ResolveFailed'
  | 'CloneFailed'
  /** The repository (tree size, file count, objects on disk) or git's memory is past a limit the message names. */
  | 'RepositoryTooLarge'
  /** The marker scan would read more than its bound (`maxScanBytes`). */
  | 'ScanLimitExceeded'
  /** `git.path` goes through a symbolic link (or out of the work tree). */
  | 'PathRefused'
  | 'MarkerNotFound'
  | 'MarkerInvalid'
  | 'CommitFailed'
  | 'PushFailed'
  | 'PushConflict'
  /** A marked line was changed by someone else while the promotion ran (a value pinned by hand); it is not overwritten. */
  | 'MarkerConflict'
  | 'Timeout'
  /** The promotion as a whole outlived its deadline (`promotionTimeoutMs`). */
  | 'DeadlineExceeded'
  | 'OutputTooLarge'
  | 'ProviderError'
  | 'PullRequestClosed'
  | 'InvalidInput';

/**
 * A Git promotion could not be carried out. The message is built from fixed words, the step, git's
 * exit code or the provider's HTTP status, never from what a peer sent.
 */
export class GitOpsError extends FleetcacheError {
  readonly reason: GitOpsReason;
  /** git's exit code, when a git command failed. */
  readonly exitCode: number | undefined;
  /** HTTP status of a provider API answer, when there was one. */
  readonly statusCode: number | undefined;

  constructor(reason: GitOpsReason, message: string, options?: ErrorOptions & { readonly exitCode?: number | undefined; readonly statusCode?: number | undefined }) {
    super('ERR_GITOPS', `${reason}: ${message}`, options);
    this.reason = reason;
    this.exitCode = options?.exitCode;
    this.statusCode = options?.statusCode;
  }
}
