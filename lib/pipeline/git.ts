import { GitOpsError, imagePolicyFor, type GitCredentials, type GitPromoter } from '../gitops/index.ts';
import { PromotionError } from './errors.ts';
import type { ResolvedGitPromotion } from './validate.ts';

/** What a promotion through Git came to. */
export interface GitActOutcome {
  /** `waiting`: a pull request is open; the promotion is done when it merges. */
  readonly state: 'done' | 'waiting';
  readonly message: string;
  readonly commit?: string;
  readonly pullRequest?: { readonly number: number; readonly url: string };
  /** True when this attempt opened the pull request. */
  readonly opened?: boolean;
}

/** The keys of a git credentials Secret: HTTPS `username`/`password` or `token`; SSH `identity` + `known_hosts`. */
export function gitCredentials(data: Readonly<Record<string, string>>, secret: string): GitCredentials {
  if (data.identity !== undefined) {
    if (data.known_hosts === undefined || data.known_hosts.trim() === '') throw new PromotionError(`the git Secret ${secret} has an SSH identity but no known_hosts`);
    return { kind: 'ssh', identity: data.identity, knownHosts: data.known_hosts };
  }
  const password = data.password ?? data.token;
  if (password === undefined || password === '') throw new PromotionError(`the git Secret ${secret} has none of the keys password, token or identity`);
  return { kind: 'basic', username: data.username ?? 'git', password };
}

/**
 * Promotes through Git and words the result for status and Events: commit SHAs, pull request
 * numbers and URLs (built by the provider, no credentials), fixed reasons — never git's output or
 * the provider's answer (GitOpsError messages are built that way already). A refusal is recorded
 * as `git: <reason>: <what>`, naming the limit passed and the option that sets it (e.g.
 * `RepositoryTooLarge: … (maxRepositoryBytes)`, `DeadlineExceeded: … (promotionTimeoutMs)`).
 */
export async function promoteThroughGit(
  promoter: GitPromoter,
  promotion: ResolvedGitPromotion,
  request: { readonly namespace: string; readonly pipeline: string; readonly environment: string; readonly revision: string; readonly imagePolicy?: string | undefined },
  readSecret: (name: string) => Promise<Readonly<Record<string, string>>>,
): Promise<GitActOutcome> {
  const credentials: GitCredentials = promotion.secretName === undefined
    ? { kind: 'none' }
    : gitCredentials(await readSecret(promotion.secretName), `${request.namespace}/${promotion.secretName}`);
  let result;
  try {
    result = await promoter.promote({
      url: promotion.url,
      branch: promotion.branch,
      path: promotion.path,
      pullRequest: promotion.pullRequest,
      marker: { namespace: request.namespace, pipeline: request.pipeline, environment: request.environment },
      // Flux's own `$imagepolicy` setters, beside `$promotion`: of the environment's `imagePolicy`, else `<namespace>:<pipeline>-<environment>`.
      imagePolicy: request.imagePolicy === undefined ? imagePolicyFor(request.namespace, request.pipeline, request.environment) : `${request.namespace}:${request.imagePolicy}`,
      revision: request.revision,
      credentials,
    });
  } catch (err) {
    if (err instanceof GitOpsError) throw new PromotionError(`git: ${err.message}`, { cause: err });
    throw err;
  }
  if (result.kind === 'commit') {
    return result.created
      ? { state: 'done', commit: result.sha, message: `committed ${result.sha} to ${promotion.branch}${result.attempts > 1 ? ` (after ${result.attempts - 1} concurrent push(es))` : ''}` }
      : { state: 'done', commit: result.sha, message: `${promotion.branch} already has ${request.revision} at every marker (at ${result.sha})` };
  }
  const pr = { number: result.pullRequest.number, url: result.pullRequest.url };
  const commit = result.sha === undefined ? {} : { commit: result.sha };
  switch (result.pullRequest.state) {
    case 'merged':
      return { state: 'done', pullRequest: pr, ...commit, message: `pull request #${pr.number} merged: ${pr.url}` };
    case 'open':
      return { state: 'waiting', pullRequest: pr, ...commit, opened: result.created, message: `pull request #${pr.number} open, waiting for its merge: ${pr.url}` };
    case 'closed':
      throw new PromotionError(`pull request #${pr.number} was closed without merging: ${pr.url}`);
  }
}
