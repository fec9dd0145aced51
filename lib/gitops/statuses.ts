// What a provider says about a commit's checks, read into one shape: GitHub's combined status
// (the Statuses API, one entry per context) and check runs (the Checks API, GitHub Actions and
// apps), GitLab's commit statuses (one per job name). Pure functions of the parsed JSON: the
// provider's answer is untrusted, so only names and a fixed vocabulary of states survive.

/** How a status counts for a gate. */
export type CommitStatusOutcome = 'success' | 'pending' | 'failure';

/**
 * The provider's own word for the state, kept only when it is one the providers document (else
 * `unknown`, which counts as pending): safe to show as is.
 */
export type CommitStatusWord =
  // GitHub statuses
  | 'success' | 'pending' | 'failure' | 'error'
  // GitHub check runs (status, then conclusion)
  | 'queued' | 'in_progress' | 'waiting' | 'requested' | 'neutral' | 'skipped' | 'cancelled' | 'timed_out' | 'action_required' | 'stale' | 'startup_failure'
  // GitLab
  | 'created' | 'running' | 'failed' | 'canceled' | 'manual' | 'scheduled' | 'preparing' | 'waiting_for_resource' | 'allowed_failure'
  | 'unknown';

/** One status of a commit. */
export interface CommitStatus {
  /**
   * GitHub: a status's `context` or a check run's `name`; GitLab: the status's `name`. As the
   * provider sent it (at most {@link MAX_CONTEXT_LENGTH} characters), compared exactly with the
   * contexts a gate requires; peer text, so sanitize before showing it.
   */
  readonly context: string;
  readonly outcome: CommitStatusOutcome;
  readonly state: CommitStatusWord;
  /** Which API reported it. */
  readonly source: 'status' | 'check-run';
}

/** Longer names are not statuses anyone can require (GitHub caps a context at 255). */
export const MAX_CONTEXT_LENGTH = 255;

function record(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

function name(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' && value.length <= MAX_CONTEXT_LENGTH ? value : undefined;
}

function id(value: unknown): number {
  return typeof value === 'number' && Number.isSafeInteger(value) ? value : -1;
}

const GITHUB_STATUS: Readonly<Record<string, CommitStatusOutcome>> = { success: 'success', pending: 'pending', failure: 'failure', error: 'failure' };

/**
 * Check run conclusions: `neutral` and `skipped` pass (GitHub's own branch protection counts them
 * as passing); every other conclusion fails — `action_required` included, since it waits for a
 * person the gate cannot stand in for.
 */
const CHECK_CONCLUSION: Readonly<Record<string, CommitStatusOutcome>> = {
  success: 'success', neutral: 'success', skipped: 'success',
  failure: 'failure', cancelled: 'failure', timed_out: 'failure', action_required: 'failure', stale: 'failure', startup_failure: 'failure',
};
const CHECK_RUNNING = new Set(['queued', 'in_progress', 'waiting', 'requested', 'pending']);

/** GitLab: `skipped` passes as on GitHub; `failed` and `canceled` fail (unless the job may fail); the rest is still to come. */
const GITLAB_STATUS: Readonly<Record<string, CommitStatusOutcome>> = {
  success: 'success', skipped: 'success', failed: 'failure', canceled: 'failure',
  pending: 'pending', created: 'pending', running: 'pending', manual: 'pending', scheduled: 'pending', preparing: 'pending', waiting_for_resource: 'pending',
};

/** The statuses of one page of GitHub's combined status (`GET /repos/{o}/{r}/commits/{ref}/status`). */
export function githubCombinedStatuses(answer: unknown): { readonly statuses: CommitStatus[]; readonly entries: number; readonly total: number | undefined } {
  const body = record(answer);
  const list = Array.isArray(body.statuses) ? (body.statuses as unknown[]) : [];
  const statuses: CommitStatus[] = [];
  for (const entry of list) {
    const s = record(entry);
    const context = name(s.context);
    if (context === undefined) continue;
    const word = typeof s.state === 'string' && Object.hasOwn(GITHUB_STATUS, s.state) ? (s.state as CommitStatusWord) : 'unknown';
    statuses.push({ context, outcome: GITHUB_STATUS[word] ?? 'pending', state: word, source: 'status' });
  }
  return { statuses, entries: list.length, total: typeof body.total_count === 'number' ? body.total_count : undefined };
}

/** One page of check runs (`GET /repos/{o}/{r}/commits/{ref}/check-runs`), each with its id for {@link newestPerContext}. */
export function githubCheckRuns(answer: unknown): { readonly runs: (CommitStatus & { readonly id: number })[]; readonly entries: number; readonly total: number | undefined } {
  const body = record(answer);
  const list = Array.isArray(body.check_runs) ? (body.check_runs as unknown[]) : [];
  const runs: (CommitStatus & { readonly id: number })[] = [];
  for (const entry of list) {
    const r = record(entry);
    const context = name(r.name);
    if (context === undefined) continue;
    let state: CommitStatusWord = 'unknown';
    let outcome: CommitStatusOutcome = 'pending';
    if (r.status === 'completed') {
      if (typeof r.conclusion === 'string' && Object.hasOwn(CHECK_CONCLUSION, r.conclusion)) {
        state = r.conclusion as CommitStatusWord;
        outcome = CHECK_CONCLUSION[r.conclusion] ?? 'pending';
      }
    } else if (typeof r.status === 'string' && CHECK_RUNNING.has(r.status)) {
      state = r.status as CommitStatusWord;
    }
    runs.push({ context, outcome, state, source: 'check-run', id: id(r.id) });
  }
  return { runs, entries: list.length, total: typeof body.total_count === 'number' ? body.total_count : undefined };
}

/** One page of GitLab's `GET /projects/:id/repository/commits/:sha/statuses`, each with its id. */
export function gitlabStatuses(answer: unknown): { readonly statuses: (CommitStatus & { readonly id: number })[]; readonly entries: number } {
  const list = Array.isArray(answer) ? (answer as unknown[]) : [];
  const statuses: (CommitStatus & { readonly id: number })[] = [];
  for (const entry of list) {
    const s = record(entry);
    const context = name(s.name);
    if (context === undefined) continue;
    let state: CommitStatusWord = typeof s.status === 'string' && Object.hasOwn(GITLAB_STATUS, s.status) ? (s.status as CommitStatusWord) : 'unknown';
    let outcome = GITLAB_STATUS[state] ?? 'pending';
    // A job allowed to fail does not hold the pipeline (GitLab's own rule); a manual one of those neither.
    if (s.allow_failure === true && (state === 'failed' || state === 'canceled' || state === 'manual')) {
      state = 'allowed_failure';
      outcome = 'success';
    }
    statuses.push({ context, outcome, state, source: 'status', id: id(s.id) });
  }
  return { statuses, entries: list.length };
}

/**
 * The newest entry per ⟨source, context⟩ (highest id): a re-run check or a second pipeline on the
 * same commit replaces the first, as the providers' own views do.
 */
export function newestPerContext(entries: readonly (CommitStatus & { readonly id: number })[]): CommitStatus[] {
  const newest = new Map<string, CommitStatus & { readonly id: number }>();
  for (const entry of entries) {
    const key = `${entry.source}\u0000${entry.context}`;
    const seen = newest.get(key);
    if (seen === undefined || entry.id > seen.id) newest.set(key, entry);
  }
  return [...newest.values()].map(({ context, outcome, state, source }) => ({ context, outcome, state, source }));
}
