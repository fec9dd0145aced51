// Stand-ins for the two pull-request APIs a Git promotion calls, shaped after the providers'
// published descriptions: GitHub REST "Pulls" (GET/POST /repos/{owner}/{repo}/pulls; a pull has
// number, html_url, state open|closed, merged_at; create takes title, head, base, body and answers
// 201, or 422 "Validation Failed" when a pull for head→base is open already) and GitLab's Merge
// requests API (GET/POST /projects/:id/merge_requests, :id the URL-encoded path; an MR has iid,
// web_url, state opened|closed|locked|merged; create takes source_branch, target_branch, title and
// answers 201, 409 when an open MR for the branches exists). Every request is recorded, body
// included, for tests to check what fleetcache sent.
// Commit statuses, likewise: GitHub's combined status (GET /repos/{owner}/{repo}/commits/{ref}/status:
// state, sha, total_count, statuses[] with context, state error|failure|pending|success,
// description, target_url — the newest per context) and check runs (GET …/commits/{ref}/check-runs:
// total_count, check_runs[] with id, name, status queued|in_progress|completed, conclusion), both
// paged by per_page and page; GitLab's GET /projects/:id/repository/commits/:sha/statuses (a list
// of id, name, status, allow_failure, description, target_url; the latest per name unless all=true),
// paged likewise.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ProviderRequest {
  readonly method: string;
  readonly path: string;
  readonly query: Readonly<Record<string, string>>;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: unknown;
}

interface StoredPull {
  readonly number: number;
  readonly head: string;
  readonly base: string;
  readonly title: string;
  state: 'open' | 'closed' | 'merged';
}

/** One status a CI system reported on a commit. */
export interface ReportedStatus {
  /** GitHub status context, check-run name or GitLab job name. */
  readonly context: string;
  /** GitHub status state, check-run status (`queued`, `in_progress`, `completed`) or GitLab status. */
  readonly state: string;
  /** `check-run`: a GitHub check run. Default `status`. */
  readonly kind?: 'status' | 'check-run';
  /** A completed check run's conclusion. */
  readonly conclusion?: string;
  /** GitLab: the job may fail. */
  readonly allowFailure?: boolean;
  /** Free text a CI system writes (what fleetcache must never echo unbounded). */
  readonly description?: string;
}

interface StoredStatus extends ReportedStatus {
  readonly id: number;
  readonly sha: string;
}

export interface ProviderStandInOptions {
  readonly kind: 'github' | 'gitlab';
  /** GitHub "owner/repo" or GitLab "group/project". */
  readonly project: string;
  /** The token the API requires (Bearer for GitHub, PRIVATE-TOKEN for GitLab). */
  readonly token: string;
  /** Whether a branch exists in the repository (both APIs refuse a request from a missing branch). */
  readonly branchExists?: (branch: string) => Promise<boolean>;
}

export class ProviderStandIn {
  readonly requests: ProviderRequest[] = [];
  readonly pulls: StoredPull[] = [];
  /** Every status reported, oldest first. */
  readonly statuses: StoredStatus[] = [];
  readonly #options: ProviderStandInOptions;
  readonly #server: http.Server;

  private constructor(options: ProviderStandInOptions, server: http.Server) {
    this.#options = options;
    this.#server = server;
  }

  static async start(options: ProviderStandInOptions): Promise<ProviderStandIn> {
    const server = http.createServer();
    const instance = new ProviderStandIn(options, server);
    server.on('request', (req, res) => { void instance.#serve(req, res); });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return instance;
  }

  /** The API root to configure (`http://127.0.0.1:<port>/api/v3` or `/api/v4`). */
  get apiUrl(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}/api/${this.#options.kind === 'github' ? 'v3' : 'v4'}`;
  }

  /** What a person does in the web UI. */
  setState(number: number, state: 'open' | 'closed' | 'merged'): void {
    const pull = this.pulls.find((p) => p.number === number);
    if (pull === undefined) throw new Error(`no pull request #${number}`);
    pull.state = state;
  }

  /** What a CI system does: reports (or re-reports) a status on a commit. */
  reportStatus(sha: string, status: ReportedStatus): void {
    this.statuses.push({ ...status, id: this.statuses.length + 1, sha });
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => { resolve(); }));
  }

  #github(p: StoredPull): unknown {
    const owner = this.#options.project.split('/')[0] ?? '';
    return {
      number: p.number,
      html_url: `https://github.example/${this.#options.project}/pull/${p.number}`,
      state: p.state === 'open' ? 'open' : 'closed',
      merged_at: p.state === 'merged' ? '2026-01-01T00:00:00Z' : null,
      title: p.title,
      head: { ref: p.head, label: `${owner}:${p.head}` },
      base: { ref: p.base, label: `${owner}:${p.base}` },
    };
  }

  #gitlab(p: StoredPull): unknown {
    return {
      id: 1000 + p.number,
      iid: p.number,
      web_url: `https://gitlab.example/${this.#options.project}/-/merge_requests/${p.number}`,
      state: p.state === 'open' ? 'opened' : p.state,
      title: p.title,
      source_branch: p.head,
      target_branch: p.base,
    };
  }

  async #serve(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    const url = new URL(req.url ?? '/', 'http://api.invalid');
    let body: unknown;
    try {
      body = text === '' ? undefined : JSON.parse(text);
    } catch {
      body = text;
    }
    const request: ProviderRequest = { method: req.method ?? 'GET', path: url.pathname, query: Object.fromEntries(url.searchParams), headers: req.headers, body };
    this.requests.push(request);
    const [status, answer] = await this.#route(request, url.searchParams);
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
  }

  /** The statuses endpoints (undefined for any other path). */
  #statuses(request: ProviderRequest, params: URLSearchParams): [number, unknown] | undefined {
    const { kind, project } = this.#options;
    const perPage = Math.min(Number(params.get('per_page') ?? (kind === 'github' ? 30 : 20)), 100);
    const page = Number(params.get('page') ?? 1);
    const paged = <T>(list: readonly T[]): T[] => list.slice((page - 1) * perPage, page * perPage);
    /** The newest per context, as both providers' default views show. */
    const newest = (list: readonly StoredStatus[]): StoredStatus[] => [...new Map(list.map((s) => [s.context, s])).values()];
    if (kind === 'github') {
      const match = new RegExp(`^/api/v3/repos/${project}/commits/([0-9a-f]+)/(status|check-runs)$`).exec(request.path);
      if (match === null) return undefined;
      if (request.method !== 'GET') return [404, { message: 'Not Found' }];
      const sha = match[1] ?? '';
      if (match[2] === 'status') {
        const list = newest(this.statuses.filter((s) => s.sha === sha && (s.kind ?? 'status') === 'status'));
        const state = list.some((s) => s.state === 'failure' || s.state === 'error') ? 'failure' : list.length > 0 && list.every((s) => s.state === 'success') ? 'success' : 'pending';
        return [200, { state, sha, total_count: list.length, statuses: paged(list).map((s) => ({ id: s.id, context: s.context, state: s.state, description: s.description ?? null, target_url: 'https://ci.example/run' })) }];
      }
      const runs = this.statuses.filter((s) => s.sha === sha && s.kind === 'check-run');
      return [200, { total_count: runs.length, check_runs: paged(runs).map((s) => ({ id: s.id, name: s.context, head_sha: sha, status: s.state, conclusion: s.conclusion ?? null, output: { title: s.description ?? null } })) }];
    }
    const match = new RegExp(`^/api/v4/projects/${encodeURIComponent(project)}/repository/commits/([0-9a-f]+)/statuses$`).exec(request.path);
    if (match === null) return undefined;
    if (request.method !== 'GET') return [404, { message: '404 Not Found' }];
    const all = this.statuses.filter((s) => s.sha === match[1]);
    const list = params.get('all') === 'true' ? all : newest(all);
    return [200, paged(list).map((s) => ({ id: s.id, sha: s.sha, name: s.context, status: s.state, allow_failure: s.allowFailure ?? false, description: s.description ?? null, target_url: 'https://ci.example/job' }))];
  }

  async #route(request: ProviderRequest, params: URLSearchParams): Promise<[number, unknown]> {
    const { kind, project, token } = this.#options;
    const authorized = kind === 'github' ? request.headers.authorization === `Bearer ${token}` : request.headers['private-token'] === token;
    if (!authorized) return [401, { message: kind === 'github' ? 'Bad credentials' : '401 Unauthorized' }];
    const fields = (typeof request.body === 'object' && request.body !== null ? request.body : {}) as Record<string, unknown>;
    const exists = async (branch: string): Promise<boolean> => await this.#options.branchExists?.(branch) ?? true;
    const statuses = this.#statuses(request, params);
    if (statuses !== undefined) return statuses;
    if (kind === 'github') {
      if (request.path !== `/api/v3/repos/${project}/pulls`) return [404, { message: 'Not Found' }];
      if (request.method === 'GET') {
        const state = params.get('state') ?? 'open';
        const head = params.get('head');
        const base = params.get('base');
        const owner = project.split('/')[0] ?? '';
        const list = this.pulls
          .filter((p) => state === 'all' || (state === 'open' ? p.state === 'open' : p.state !== 'open'))
          .filter((p) => head === null || head === `${owner}:${p.head}`)
          .filter((p) => base === null || base === p.base)
          .reverse();
        return [200, list.map((p) => this.#github(p))];
      }
      if (request.method !== 'POST') return [404, { message: 'Not Found' }];
      if (typeof fields.head !== 'string' || typeof fields.base !== 'string' || typeof fields.title !== 'string') {
        return [422, { message: 'Validation Failed', errors: [{ resource: 'PullRequest', code: 'missing_field' }] }];
      }
      if (!await exists(fields.head)) return [422, { message: 'Validation Failed', errors: [{ resource: 'PullRequest', field: 'head', code: 'invalid' }] }];
      if (this.pulls.some((p) => p.state === 'open' && p.head === fields.head && p.base === fields.base)) {
        return [422, { message: 'Validation Failed', errors: [{ resource: 'PullRequest', code: 'custom', message: `A pull request already exists for ${fields.head}.` }] }];
      }
      const pull: StoredPull = { number: this.pulls.length + 1, head: fields.head, base: fields.base, title: fields.title, state: 'open' };
      this.pulls.push(pull);
      return [201, this.#github(pull)];
    }
    if (request.path !== `/api/v4/projects/${encodeURIComponent(project)}/merge_requests`) return [404, { message: '404 Project Not Found' }];
    if (request.method === 'GET') {
      const state = params.get('state') ?? 'all';
      const source = params.get('source_branch');
      const target = params.get('target_branch');
      const list = this.pulls
        .filter((p) => state === 'all' || (state === 'opened' ? p.state === 'open' : p.state === state))
        .filter((p) => source === null || source === p.head)
        .filter((p) => target === null || target === p.base)
        .reverse();
      return [200, list.map((p) => this.#gitlab(p))];
    }
    if (request.method !== 'POST') return [404, { message: '404 Not Found' }];
    const missing = ['source_branch', 'target_branch', 'title'].filter((f) => typeof fields[f] !== 'string');
    if (missing.length > 0) return [400, { error: `${missing.join(', ')} is missing` }];
    const source = fields.source_branch as string;
    const target = fields.target_branch as string;
    if (!await exists(source)) return [422, { message: ['Source branch does not exist'] }];
    const open = this.pulls.find((p) => p.state === 'open' && p.head === source && p.base === target);
    if (open !== undefined) return [409, { message: [`Another open merge request already exists for this source branch: !${open.number}`] }];
    const pull: StoredPull = { number: this.pulls.length + 1, head: source, base: target, title: fields.title as string, state: 'open' };
    this.pulls.push(pull);
    return [201, this.#gitlab(pull)];
  }
}
