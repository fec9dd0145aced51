import type { CommitStatus, ProviderKind } from '../gitops/index.ts';
import { sanitizeForDisplay } from '../util/index.ts';

// The commit-status gate's rules: what `environments[].commitStatuses` may say (schema and
// validation, kept in step as crd.ts and validate.ts do), and the gate's decision as a pure
// function of the statuses read, the contexts required, the time and the deadline — the one piece
// a caller (a promotion, a wave) needs to decide "pending / passed / failed, and why".

/** An environment's gate, defaults applied. */
export interface ResolvedCommitStatusGate {
  /** Contexts (GitHub status contexts or check-run names, GitLab job names) that must pass; empty: every status reported. */
  readonly contexts: readonly string[];
  /** From the commit: past it, a gate not passed is failed. */
  readonly timeoutMs: number;
  /** Unset: the pull request's provider (`spec.promotion.git.pullRequest`). */
  readonly provider: ProviderKind | undefined;
  readonly apiUrl: string | undefined;
}

export const MAX_REQUIRED_CONTEXTS = 20;
export const MAX_CONTEXT_NAME_LENGTH = 255;
/** Default `timeout`: 30 minutes, for a CI run after the commit. */
export const DEFAULT_COMMIT_STATUS_TIMEOUT_MS = 1_800_000;
const MIN_TIMEOUT_MS = 1_000;
const MAX_TIMEOUT_MS = 86_400_000;
/** Printable text: what GitHub and GitLab show as a context or job name. */
export const CONTEXT_PATTERN = '^[^\\x00-\\x1f\\x7f]+$';
/** A Go / Kubernetes duration such as `30m`, `1h30m`, `90s`. */
export const DURATION_PATTERN = '^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$';
const contextRe = new RegExp(CONTEXT_PATTERN);
const durationRe = new RegExp(DURATION_PATTERN);
const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };

/** Milliseconds of a duration matching {@link DURATION_PATTERN}, or undefined. */
export function parseDuration(text: string): number | undefined {
  if (text.length > 64 || !durationRe.test(text)) return undefined;
  let total = 0;
  for (const [, number, , unit] of text.matchAll(/([0-9]+(\.[0-9]+)?)(ms|s|m|h)/g)) total += Number(number) * (UNIT_MS[unit ?? ''] ?? Number.NaN);
  return Number.isFinite(total) ? total : undefined;
}

/** `1h30m`, `30m`, `90s`, `250ms`: how a duration is shown in messages. */
export function formatDuration(ms: number): string {
  if (ms < 1_000) return `${Math.round(ms)}ms`;
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor((ms % 3_600_000) / 60_000);
  const s = Math.round((ms % 60_000) / 1_000);
  return `${h > 0 ? `${h}h` : ''}${m > 0 ? `${m}m` : ''}${s > 0 ? `${s}s` : ''}` || '0s';
}

/** The schema of `environments[].commitStatuses` in the Pipeline CRD. */
export const commitStatusesSchema = {
  type: 'object',
  description: 'Git strategy: the promotion into this environment counts as done (Succeeded, and the next environment may take the revision) only once the commit that carried it has passing commit statuses; until then it stays Committed with status.promotions[].commitStatuses saying what it waits for. A failing status fails it, naming the context; so does the timeout.',
  properties: {
    contexts: {
      type: 'array',
      description: 'Status contexts (GitHub: a commit status context or a check run name; GitLab: a job name) that must be success. Empty or unset: every status reported, and at least one.',
      maxItems: MAX_REQUIRED_CONTEXTS,
      items: str({ pattern: CONTEXT_PATTERN, minLength: 1, maxLength: MAX_CONTEXT_NAME_LENGTH }),
    },
    timeout: str({ pattern: DURATION_PATTERN, maxLength: 64, description: 'How long after the commit the statuses may take to pass (1s to 24h), e.g. 30m. Default 30m.' }),
    provider: str({ enum: ['github', 'gitlab'], description: 'The API to read statuses from. Default: spec.promotion.git.pullRequest.provider.' }),
    apiUrl: str({ pattern: '^https?://[^\\s]+$', maxLength: 2048, description: 'API root. Default: the pull request\'s apiUrl when the provider is the same, else from the repository host.' }),
  },
};

function str(extra: Record<string, unknown>): Record<string, unknown> {
  return { type: 'string', ...extra };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * `environments[i].commitStatuses` checked and defaults applied; each problem goes to `problem`
 * with its field path. Undefined when unset or invalid.
 */
export function validateCommitStatuses(value: unknown, path: string, problem: (path: string, message: string) => void): ResolvedCommitStatusGate | undefined {
  if (value === undefined) return undefined;
  if (!isRecord(value)) {
    problem(path, 'must be an object');
    return undefined;
  }
  let ok = true;
  const contexts: string[] = [];
  if (value.contexts !== undefined) {
    if (!Array.isArray(value.contexts) || value.contexts.length > MAX_REQUIRED_CONTEXTS) {
      problem(`${path}.contexts`, `must be a list of at most ${MAX_REQUIRED_CONTEXTS} names`);
      ok = false;
    } else {
      for (const [i, context] of (value.contexts as unknown[]).entries()) {
        if (typeof context !== 'string' || context.length === 0 || context.length > MAX_CONTEXT_NAME_LENGTH || !contextRe.test(context)) {
          problem(`${path}.contexts[${i}]`, `must be a name of 1 to ${MAX_CONTEXT_NAME_LENGTH} printable characters`);
          ok = false;
        } else if (!contexts.includes(context)) contexts.push(context);
      }
    }
  }
  let timeoutMs = DEFAULT_COMMIT_STATUS_TIMEOUT_MS;
  if (value.timeout !== undefined) {
    const parsed = typeof value.timeout === 'string' ? parseDuration(value.timeout) : undefined;
    if (parsed === undefined || parsed < MIN_TIMEOUT_MS || parsed > MAX_TIMEOUT_MS) {
      problem(`${path}.timeout`, 'must be a duration from 1s to 24h such as "30m" or "1h30m"');
      ok = false;
    } else timeoutMs = parsed;
  }
  const provider = value.provider;
  if (provider !== undefined && provider !== 'github' && provider !== 'gitlab') {
    problem(`${path}.provider`, `must be "github" or "gitlab", got ${JSON.stringify(typeof provider === 'string' ? sanitizeForDisplay(provider, 64) : provider)}`);
    ok = false;
  }
  const apiUrl = value.apiUrl;
  if (apiUrl !== undefined && (typeof apiUrl !== 'string' || apiUrl.length > 2_048 || !/^https?:\/\/\S+$/.test(apiUrl))) {
    problem(`${path}.apiUrl`, 'must be an https:// URL of at most 2048 characters');
    ok = false;
  }
  if (!ok) return undefined;
  return { contexts, timeoutMs, provider: provider === 'github' || provider === 'gitlab' ? provider : undefined, apiUrl: typeof apiUrl === 'string' ? apiUrl : undefined };
}

/**
 * What only the whole spec tells: a gate needs the git strategy (statuses are a commit's) and a
 * provider, its own or the pull request's.
 */
export function commitStatusProblems(
  environments: readonly { readonly name: string; readonly commitStatuses?: ResolvedCommitStatusGate | undefined }[],
  promotion: { readonly strategy: string; readonly pullRequest?: { readonly provider: ProviderKind } | undefined },
): string[] {
  const problems: string[] = [];
  for (const [i, env] of environments.entries()) {
    if (env.commitStatuses === undefined) continue;
    const path = `spec.environments[${i}].commitStatuses`;
    if (promotion.strategy !== 'git') problems.push(`${path}: commit-status gates need the git strategy`);
    else if (env.commitStatuses.provider === undefined && promotion.pullRequest === undefined) problems.push(`${path}.provider: required unless spec.promotion.git.pullRequest names the provider`);
  }
  return problems;
}

// --- The decision. ---

/** What the gate knows at one moment. */
export interface CommitStatusGateInput {
  /** The statuses last read (newest per context and source); undefined when none could be read yet. */
  readonly statuses: readonly CommitStatus[] | undefined;
  /** Contexts that must be success; empty: every status reported (and at least one). */
  readonly contexts: readonly string[];
  /** Clock milliseconds. */
  readonly now: number;
  /** Clock milliseconds: a gate not passed by then is failed. */
  readonly deadline: number;
  /** The timeout the deadline came from, for the message. */
  readonly timeoutMs?: number;
  /** Why the last read failed (a message built from fixed words); the gate retries until the deadline. */
  readonly readError?: string | undefined;
}

export type CommitStatusVerdict = 'pending' | 'passed' | 'failed';

/** The gate's answer; `reason` is safe for status and Events (peer names sanitized and bounded). */
export interface CommitStatusGateDecision {
  readonly verdict: CommitStatusVerdict;
  readonly reason: string;
  /** With `failed` because of a status: the context that failed (as the provider sent it). */
  readonly context?: string;
}

/** How many names a reason lists before counting the rest. */
const NAMES_SHOWN = 3;
const NAME_SHOWN_LENGTH = 100;

function shown(context: string): string {
  return `"${sanitizeForDisplay(context, NAME_SHOWN_LENGTH)}"`;
}

function listed(names: readonly string[]): string {
  const first = names.slice(0, NAMES_SHOWN).join(', ');
  return names.length > NAMES_SHOWN ? `${first} and ${names.length - NAMES_SHOWN} more` : first;
}

/** One context's standing: failed if any of its entries failed, passed if all passed, else pending. */
interface Standing {
  readonly outcome: 'success' | 'pending' | 'failure';
  /** The word of the entry that decided it. */
  readonly state: string;
}

function standings(statuses: readonly CommitStatus[]): Map<string, Standing> {
  const byContext = new Map<string, Standing>();
  for (const s of statuses) {
    const seen = byContext.get(s.context);
    const rank = { failure: 2, pending: 1, success: 0 } as const;
    if (seen === undefined || rank[s.outcome] > rank[seen.outcome]) byContext.set(s.context, { outcome: s.outcome, state: s.state });
  }
  return byContext;
}

/**
 * The gate: `failed` as soon as a required context (every reported one when none is required)
 * is a failure, naming it; `passed` once every required context is success (when none is
 * required: at least one status reported and all success); otherwise `pending` with what it waits
 * for — until `deadline`, from which a gate not passed is `failed` saying what never passed or
 * that nothing was reported. A failure wins over the timeout. Pure: the same input gives the same
 * decision and reason.
 */
export function decideCommitStatusGate(input: CommitStatusGateInput): CommitStatusGateDecision {
  const byContext = standings(input.statuses ?? []);
  const required = input.contexts.length > 0 ? input.contexts : [...byContext.keys()].sort();
  for (const context of required) {
    const standing = byContext.get(context);
    if (standing?.outcome === 'failure') return { verdict: 'failed', reason: `commit status ${shown(context)} is ${standing.state}`, context };
  }
  const missing = required.filter((c) => !byContext.has(c));
  const pending = required.filter((c) => byContext.get(c)?.outcome === 'pending');
  if (required.length > 0 && missing.length === 0 && pending.length === 0) {
    return { verdict: 'passed', reason: input.contexts.length > 0 ? `commit statuses passed: ${listed(required.map(shown))}` : `all ${required.length} commit status(es) passed` };
  }
  const waitingFor = [
    ...pending.map((c) => `${shown(c)} ${byContext.get(c)?.state ?? 'pending'}`),
    ...missing.map((c) => `${shown(c)} not reported`),
  ];
  const passed = required.length - missing.length - pending.length;
  const progress = input.statuses === undefined
    ? (input.readError === undefined ? 'not read yet' : `could not be read (${input.readError})`)
    : required.length === 0 ? 'none reported' : `${listed(waitingFor)} (${passed} of ${required.length} passed)`;
  if (input.now >= input.deadline) {
    const within = input.timeoutMs === undefined ? 'before the deadline' : `within ${formatDuration(input.timeoutMs)}`;
    return { verdict: 'failed', reason: `commit statuses did not pass ${within}: ${progress}` };
  }
  return { verdict: 'pending', reason: `waiting for commit statuses: ${progress}` };
}
