/**
 * Promotion through Git: set a revision on the YAML lines a marker comment names, commit, and push
 * to the branch a GitOps tool reconciles from, or open a pull request (GitHub, GitLab) — with the
 * `git` command, under the rules for tenant input (checked and pinned URLs, bounded everything).
 * Internal: the pipeline controller is its one user, and `fleetcache/pipeline` names only the
 * options it takes for Git.
 */
export { GitOpsError } from './errors.ts';
export type { GitOpsReason } from './errors.ts';
export { checkUrl, describeUrl, pinUrl } from './url.ts';
export type { CheckedUrl, PinnedUrl, UrlPolicy } from './url.ts';
export { checkRepositoryPath, DEFAULT_MAX_SCAN_BYTES, imagePolicyFor, markerFor, resolveInside, REVISION_PATTERN, setMarkedValues, setterValue, updateMarkers } from './marker.ts';
export type { MarkedText, MarkerSelector, MarkerUpdate, ScanContext, ScanLimits, Setter } from './marker.ts';
export { checkBranch, GitPromoter, pullRequestBranch } from './promote.ts';
export type { GitCredentials, GitPromoterOptions, GitPromotionRequest, GitPromotionResult } from './promote.ts';
export type { ProviderKind, PullRequest } from './provider.ts';
export { CommitStatusReader } from './commit-status.ts';
export type { CommitStatusReaderOptions, CommitStatusRequest } from './commit-status.ts';
export type { CommitStatus, CommitStatusOutcome, CommitStatusWord } from './statuses.ts';
