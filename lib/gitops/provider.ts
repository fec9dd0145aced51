import { isIP } from 'node:net';
import { OutboundError, sendOutbound, type OutboundAnswer } from '../transport/index.ts';
import { GitOpsError } from './errors.ts';
import { githubCheckRuns, githubCombinedStatuses, gitlabStatuses, newestPerContext, type CommitStatus } from './statuses.ts';
import { addressRefused, checkUrl, pinUrl, type PinnedUrl, type UrlPolicy } from './url.ts';

/** A pull (GitHub) or merge (GitLab) request, as fleetcache reports it. */
export interface PullRequest {
  /** GitHub's `number`, GitLab's `iid`: the number people see. */
  readonly number: number;
  /** The web page of the request (no credentials: the provider builds it). */
  readonly url: string;
  readonly state: 'open' | 'merged' | 'closed';
}

export type ProviderKind = 'github' | 'gitlab';

/** What a provider client needs. */
export interface ProviderSettings {
  readonly kind: ProviderKind;
  /** API root; default from the repository host (api.github.com, `https://<host>/api/v3`, `https://<host>/api/v4`). */
  readonly apiUrl: string | undefined;
  readonly repositoryUrl: URL;
  readonly token: string | undefined;
  readonly policy: UrlPolicy;
  readonly timeoutMs: number;
  /** Bound on an answer's body. */
  readonly maxResponseBytes: number;
  /** Bound on the pages one listing reads (commit statuses: 100 a page). Default 10. */
  readonly maxPages?: number | undefined;
  readonly signal?: AbortSignal | undefined;
}

/** Entries per page of a listing (the most both providers give). */
const PER_PAGE = 100;
const DEFAULT_MAX_PAGES = 10;
/** A commit as both APIs take it: a full or abbreviated object name (SHA-1 or SHA-256). */
const COMMIT_PATTERN = /^[0-9a-f]{7,64}$/;

function defaultApiUrl(kind: ProviderKind, repository: URL): string {
  if (kind === 'github') return repository.hostname === 'github.com' ? 'https://api.github.com' : `https://${repository.host}/api/v3`;
  return `https://${repository.host}/api/v4`;
}

const PROVIDER_API = 'the provider API URL';
const NAMES = { github: 'GitHub', gitlab: 'GitLab' } as const;

/** A web URL from an answer, kept only when it is a plain http(s) URL without credentials. */
function webUrl(value: unknown): string | undefined {
  // eslint-disable-next-line no-control-regex
  if (typeof value !== 'string' || value.length > 1_000 || /[\s\u0000-\u001f\u007f]/.test(value)) return undefined;
  try {
    const url = new URL(value);
    return (url.protocol === 'https:' || url.protocol === 'http:') && url.username === '' && url.password === '' ? url.href : undefined;
  } catch {
    return undefined;
  }
}

function record(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

/**
 * A small client of the two providers' REST APIs, for the calls a promotion makes: find the
 * request whose head is a branch, open one, (through the same find) see whether it merged, and
 * read a commit's statuses for a commit-status gate.
 * Connections go to the address checked once ({@link pinUrl}); redirects are not followed; the
 * answer is bounded and never quoted in errors (status code and the call only).
 */
export class ProviderClient {
  readonly #settings: ProviderSettings;
  readonly #project: string;
  #api: PinnedUrl | undefined;

  constructor(settings: ProviderSettings) {
    this.#settings = settings;
    const project = settings.repositoryUrl.pathname.replace(/^\/+/, '').replace(/\.git$/, '').replace(/\/+$/, '');
    if (settings.kind === 'github' && !/^[\w.-]+\/[\w.-]+$/.test(project)) throw new GitOpsError('InvalidInput', 'a GitHub repository URL must have the path /<owner>/<repository>');
    this.#project = project;
  }

  /** The newest request from `head` into `base`, open, merged or closed; undefined when there is none. */
  async find(head: string, base: string): Promise<PullRequest | undefined> {
    if (this.#settings.kind === 'github') {
      const owner = this.#project.split('/')[0] ?? '';
      const query = new URLSearchParams({ head: `${owner}:${head}`, base, state: 'all', sort: 'created', direction: 'desc', per_page: '10' });
      const list = await this.#call('GET', `/repos/${this.#project}/pulls?${query.toString()}`, undefined, 'listing pull requests');
      return Array.isArray(list) ? list.map((p) => this.#github(p)).find((p) => p !== undefined) : undefined;
    }
    const query = new URLSearchParams({ source_branch: head, target_branch: base, state: 'all', order_by: 'created_at', sort: 'desc', per_page: '10' });
    const list = await this.#call('GET', `/projects/${encodeURIComponent(this.#project)}/merge_requests?${query.toString()}`, undefined, 'listing merge requests');
    return Array.isArray(list) ? list.map((m) => this.#gitlab(m)).find((m) => m !== undefined) : undefined;
  }

  /** Opens a request from `head` into `base`. Resolves undefined when the provider says one exists already. */
  async create(head: string, base: string, title: string, description: string): Promise<PullRequest | undefined> {
    try {
      if (this.#settings.kind === 'github') {
        const created = await this.#call('POST', `/repos/${this.#project}/pulls`, { title, head, base, body: description, maintainer_can_modify: false }, 'opening a pull request');
        return this.#github(created) ?? this.#malformed('opening a pull request');
      }
      const created = await this.#call('POST', `/projects/${encodeURIComponent(this.#project)}/merge_requests`, { source_branch: head, target_branch: base, title, description, remove_source_branch: true }, 'opening a merge request');
      return this.#gitlab(created) ?? this.#malformed('opening a merge request');
    } catch (err) {
      // GitHub: 422 "A pull request already exists"; GitLab: 409 "Another open merge request already exists".
      if (err instanceof GitOpsError && (err.statusCode === 422 || err.statusCode === 409)) return undefined;
      throw err;
    }
  }

  /**
   * Every status of `commit`, newest per context: on GitHub the combined status (Statuses API) and
   * the check runs (Checks API, where GitHub Actions reports) both, since a gate may require either;
   * on GitLab the commit's statuses (the latest per job name). Reads at most `maxPages` pages of
   * each listing; a commit with more is a `ProviderError` rather than a partial answer.
   */
  async commitStatuses(commit: string): Promise<CommitStatus[]> {
    if (!COMMIT_PATTERN.test(commit)) throw new GitOpsError('InvalidInput', 'a commit status gate needs a commit SHA');
    if (this.#settings.kind === 'github') {
      const statuses = await this.#pages('listing commit statuses', (page) => `/repos/${this.#project}/commits/${commit}/status?per_page=${PER_PAGE}&page=${page}`, (answer) => {
        const parsed = githubCombinedStatuses(answer);
        return { items: parsed.statuses.map((s, i) => ({ ...s, id: i })), entries: parsed.entries, total: parsed.total };
      });
      const runs = await this.#pages('listing check runs', (page) => `/repos/${this.#project}/commits/${commit}/check-runs?per_page=${PER_PAGE}&page=${page}`, (answer) => {
        const parsed = githubCheckRuns(answer);
        return { items: parsed.runs, entries: parsed.entries, total: parsed.total };
      });
      // The combined status holds the newest per context already; check runs are re-run by id.
      return [...statuses.map(({ context, outcome, state, source }) => ({ context, outcome, state, source })), ...newestPerContext(runs)];
    }
    const statuses = await this.#pages('listing commit statuses', (page) => `/projects/${encodeURIComponent(this.#project)}/repository/commits/${commit}/statuses?per_page=${PER_PAGE}&page=${page}`, (answer) => {
      const parsed = gitlabStatuses(answer);
      return { items: parsed.statuses, entries: parsed.entries, total: undefined };
    });
    return newestPerContext(statuses);
  }

  /** Reads a listing page by page until a short page, the total, or the page bound (an error). */
  async #pages<T>(what: string, path: (page: number) => string, parse: (answer: unknown) => { readonly items: readonly T[]; readonly entries: number; readonly total: number | undefined }): Promise<T[]> {
    const maxPages = this.#settings.maxPages ?? DEFAULT_MAX_PAGES;
    const items: T[] = [];
    let entries = 0;
    for (let page = 1; ; page++) {
      const answer = parse(await this.#call('GET', path(page), undefined, what));
      items.push(...answer.items);
      entries += answer.entries;
      if (answer.entries < PER_PAGE || (answer.total !== undefined && entries >= answer.total)) return items;
      if (page >= maxPages) throw new GitOpsError('ProviderError', `${NAMES[this.#settings.kind]} has more than ${maxPages * PER_PAGE} entries ${what.replace(/^listing /, 'of ')} for the commit (${maxPages} pages)`);
    }
  }

  /** A failed call in GitOps words: the call and a fixed reason, never what the provider sent. */
  #failed(err: OutboundError, what: string): unknown {
    const name = NAMES[this.#settings.kind];
    switch (err.failure) {
      case 'deadline': return new GitOpsError('Timeout', `${name} did not answer ${what} within ${this.#settings.timeoutMs} ms`);
      case 'too-large': return new GitOpsError('ProviderError', `${name} answered ${what} with more than ${this.#settings.maxResponseBytes} bytes`);
      case 'refused': return addressRefused(err, this.#api?.host ?? '', PROVIDER_API);
      case 'broken': return err.cause;
      default: return new GitOpsError('ProviderError', `${name} could not be reached for ${what}`, { cause: err.cause });
    }
  }

  #malformed(what: string): never {
    throw new GitOpsError('ProviderError', `${NAMES[this.#settings.kind]} answered ${what} without a number and URL`);
  }

  #github(value: unknown): PullRequest | undefined {
    const p = record(value);
    const url = webUrl(p.html_url);
    if (!Number.isSafeInteger(p.number) || url === undefined) return undefined;
    const merged = typeof p.merged_at === 'string' || p.merged === true;
    return { number: p.number as number, url, state: merged ? 'merged' : p.state === 'open' ? 'open' : 'closed' };
  }

  #gitlab(value: unknown): PullRequest | undefined {
    const m = record(value);
    const url = webUrl(m.web_url);
    if (!Number.isSafeInteger(m.iid) || url === undefined) return undefined;
    return { number: m.iid as number, url, state: m.state === 'merged' ? 'merged' : m.state === 'opened' || m.state === 'locked' ? 'open' : 'closed' };
  }

  async #pinned(): Promise<PinnedUrl> {
    if (this.#api === undefined) {
      const raw = this.#settings.apiUrl ?? defaultApiUrl(this.#settings.kind, this.#settings.repositoryUrl);
      this.#api = await pinUrl(checkUrl(raw.replace(/\/+$/, ''), this.#settings.policy, PROVIDER_API), this.#settings.policy, PROVIDER_API);
    }
    return this.#api;
  }

  async #call(method: 'GET' | 'POST', pathAndQuery: string, body: unknown, what: string): Promise<unknown> {
    const api = await this.#pinned();
    const { token, kind, timeoutMs, maxResponseBytes, signal } = this.#settings;
    const headers: Record<string, string> = { 'user-agent': 'fleetcache', accept: kind === 'github' ? 'application/vnd.github+json' : 'application/json' };
    if (kind === 'github') headers['x-github-api-version'] = '2022-11-28';
    if (token !== undefined) {
      if (kind === 'github') headers.authorization = `Bearer ${token}`;
      else headers['private-token'] = token;
    }
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    if (payload !== undefined) headers['content-type'] = 'application/json';
    const base = api.url.pathname.replace(/\/+$/, '');
    let answer: OutboundAnswer;
    try {
      answer = await sendOutbound({
        url: api.url,
        path: `${base}${pathAndQuery}`,
        method,
        headers,
        body: payload,
        // The address checked once: no second resolution for the name to change under us.
        addresses: [{ address: api.address, family: isIP(api.address) === 6 ? 6 : 4 }],
        policy: { allowPrivateNetworks: this.#settings.policy.allowPrivateNetworks },
        // A deadline on the whole call (connect, send, answer), not only on an idle socket.
        timeoutMs,
        signal,
        maxBodyBytes: maxResponseBytes,
      });
    } catch (err) {
      if (!(err instanceof OutboundError)) throw err;
      throw this.#failed(err, what);
    }
    const status = answer.status;
    const text = answer.body?.toString('utf8') ?? '';
    if (status < 200 || status >= 300) throw new GitOpsError('ProviderError', `${NAMES[kind]} answered HTTP ${status} to ${what}`, { statusCode: status });
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw new GitOpsError('ProviderError', `${NAMES[kind]} answered ${what} with something that is not JSON`);
    }
  }
}
