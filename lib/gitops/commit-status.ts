import { functionOption, positiveInteger, positiveNumber } from '../util/index.ts';
import { ProviderClient, type ProviderKind } from './provider.ts';
import type { CommitStatus } from './statuses.ts';
import { checkUrl, type UrlPolicy } from './url.ts';

/** Options of {@link CommitStatusReader}: the same names and defaults as the pull-request calls of `GitPromoterOptions`. */
export interface CommitStatusReaderOptions extends UrlPolicy {
  /** Bound on one provider API call, answer included. Default 10 000. */
  readonly providerTimeoutMs?: number;
  /** Bound on one provider API answer. Default 1 MiB. */
  readonly maxResponseBytes?: number;
  /** Pages of 100 read per listing (statuses, check runs) at most. Default 10. */
  readonly maxStatusPages?: number;
}

/** Which commit of which repository, and how to reach its provider. */
export interface CommitStatusRequest {
  /** The repository URL (as the git strategy has it): names the project and, unless `apiUrl` is set, the API host. */
  readonly url: string;
  readonly provider: ProviderKind;
  /** API root. Default from the repository host, as for pull requests. */
  readonly apiUrl?: string | undefined;
  /** The API token (the git Secret's `token` or `password`); never logged or put in a message. */
  readonly token?: string | undefined;
  /** The commit's SHA. */
  readonly commit: string;
  readonly signal?: AbortSignal | undefined;
}

/**
 * Reads a commit's statuses from GitHub or GitLab for a commit-status gate, under the rules of the
 * pull-request calls: URLs checked and pinned (no second resolution), no redirects, every answer
 * bounded (`maxResponseBytes`, `maxStatusPages`, `providerTimeoutMs`), failures as `GitOpsError`s
 * that quote nothing the provider sent. Holds no state between reads.
 */
export class CommitStatusReader {
  readonly #policy: UrlPolicy;
  readonly #timeoutMs: number;
  readonly #maxResponseBytes: number;
  readonly #maxPages: number;

  constructor(options: CommitStatusReaderOptions = {}) {
    if (options.lookup !== undefined) functionOption('CommitStatusReader', 'lookup', options.lookup);
    this.#policy = { allowHttp: options.allowHttp === true, allowPrivateNetworks: options.allowPrivateNetworks === true, ...(options.lookup === undefined ? {} : { lookup: options.lookup }) };
    this.#timeoutMs = positiveNumber('CommitStatusReader', 'providerTimeoutMs', options.providerTimeoutMs ?? 10_000);
    this.#maxResponseBytes = positiveNumber('CommitStatusReader', 'maxResponseBytes', options.maxResponseBytes ?? 1_048_576);
    this.#maxPages = positiveInteger('CommitStatusReader', 'maxStatusPages', options.maxStatusPages ?? 10);
  }

  /** The commit's statuses, newest per context (see `ProviderClient.commitStatuses`); rejects with a `GitOpsError`. */
  async read(request: CommitStatusRequest): Promise<CommitStatus[]> {
    const repository = checkUrl(request.url, { ...this.#policy, allowSsh: true });
    const client = new ProviderClient({
      kind: request.provider,
      apiUrl: request.apiUrl,
      repositoryUrl: repository.url,
      token: request.token,
      policy: this.#policy,
      timeoutMs: this.#timeoutMs,
      maxResponseBytes: this.#maxResponseBytes,
      maxPages: this.#maxPages,
      signal: request.signal,
    });
    return client.commitStatuses(request.commit);
  }
}
