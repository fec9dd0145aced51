import type { CommitStatus, CommitStatusRequest } from '../gitops/index.ts';
import { isAbortError, sanitizeForDisplay, toError, type Clock } from '../util/index.ts';
import { decideCommitStatusGate, type ResolvedCommitStatusGate } from './commit-status.ts';
import { MAX_STATUS_TEXT } from './conditions.ts';
import type { SettledPromotion } from './decide.ts';
import type { PromotionRecord } from './types.ts';
import type { ValidPipelineSpec } from './validate.ts';

/** Default time between two reads of one commit's statuses. */
export const DEFAULT_COMMIT_STATUS_POLL_MS = 30_000;
/** Cap of the backoff after reads that failed. */
const MAX_POLL_BACKOFF_MS = 300_000;

/** What {@link CommitStatusGates} is built with. */
export interface CommitStatusGatesOptions {
  /** Reads a commit's statuses (`CommitStatusReader`). */
  readonly reader: { read(request: CommitStatusRequest): Promise<CommitStatus[]> };
  readonly clock: Clock;
  /** Time between two reads of one commit; doubled per failed read in a row, up to 5 minutes. */
  readonly pollIntervalMs: number;
}

/** What the gates need of one reconcile. */
export interface GateReconcile {
  /** The Pipeline's memory key (`namespace/name`). */
  readonly pipeline: string;
  readonly spec: ValidPipelineSpec;
  readonly records: readonly PromotionRecord[];
  /** What `settleCommitted` made of the `Committed` records. */
  readonly settled: readonly SettledPromotion[];
  /** `now` as status writes times. */
  readonly nowText: string;
  /** The API token from the git Secret (read as the Pipeline's identity), or undefined without one. */
  readonly token: () => Promise<string | undefined>;
  readonly signal: AbortSignal;
}

/** A settlement, with the Event reason a gate failure is reported under. */
export interface GatedSettlement extends SettledPromotion {
  /** Set when the commit-status gate failed the record. */
  readonly event?: 'CommitStatusFailed';
}

/** What the gates made of a reconcile's `Committed` records. */
export interface GateOutcome {
  /**
   * `settled` with gated records held back (still `Committed`) until their statuses pass, failed
   * ones added, and `Committed` records whose gate standing changed (written, no Event).
   */
  readonly settled: readonly GatedSettlement[];
  /** When a gate wants its statuses read again (the controller's requeue); undefined when none waits. */
  readonly pollInMs: number | undefined;
}

/** The last read of one commit's statuses. */
interface Polled {
  /** Clock ms of the last read attempt. */
  readonly at: number;
  /** From the last read that worked. */
  readonly statuses: readonly CommitStatus[] | undefined;
  /** Why the last read failed (sanitized), undefined when it worked. */
  readonly error: string | undefined;
  /** Failed reads in a row: the poll interval doubles with each. */
  readonly failures: number;
}

/**
 * The commit-status gates of `Committed` git promotions (environments with `commitStatuses`): reads
 * each commit's statuses from the provider at most once per poll interval (the controller requeues
 * the Pipeline for the next read: no loop of its own), backs off after failed reads, and decides
 * with {@link decideCommitStatusGate}. A record whose environment runs the revision is `Succeeded`
 * only once its gate passed; a failing status (or the timeout) fails it, whether or not the
 * environment runs it yet. A gate that passed is recorded (`commitStatuses.state: Passed`) and not
 * read again, so a restart does not re-open it.
 *
 * `#polled` is keyed `pipeline \0 environment \0 revision \0 commit`; it holds entries only for
 * `Committed` gated records of the Pipeline last reconciled under that key (each reconcile drops
 * the rest of its Pipeline's entries) and {@link forget} drops a Pipeline's. The queue never
 * reconciles one Pipeline twice at once, so one Pipeline's entries have one writer at a time.
 */
export class CommitStatusGates {
  readonly #reader: CommitStatusGatesOptions['reader'];
  readonly #clock: Clock;
  readonly #pollIntervalMs: number;
  readonly #polled = new Map<string, Polled>();

  constructor(options: CommitStatusGatesOptions) {
    this.#reader = options.reader;
    this.#clock = options.clock;
    this.#pollIntervalMs = options.pollIntervalMs;
  }

  /** Forgets a Pipeline's reads. */
  forget(pipeline: string): void {
    for (const key of this.#polled.keys()) if (key.startsWith(`${pipeline}\u0000`)) this.#polled.delete(key);
  }

  /** Applies the gates to one reconcile's `Committed` records (see the class). Rejects only when `signal` aborts. */
  async apply(reconcile: GateReconcile): Promise<GateOutcome> {
    const { spec, records, settled, nowText } = reconcile;
    const promotion = spec.promotion;
    const out: GatedSettlement[] = [];
    const live = new Set<string>();
    let pollInMs: number | undefined;
    const settledOf = (r: PromotionRecord): SettledPromotion | undefined => settled.find((s) => s.record.environment === r.environment && s.record.revision === r.revision);
    for (const record of records) {
      if (record.state !== 'Committed') continue;
      const done = settledOf(record);
      const gate = spec.environments.find((e) => e.name === record.environment)?.commitStatuses;
      if (gate === undefined || promotion.strategy !== 'git' || done?.record.state === 'Failed') {
        if (done !== undefined) out.push(done);
        continue;
      }
      if (record.commitStatuses?.state === 'Passed') {
        if (done !== undefined) out.push(this.#succeeded(done, record.commitStatuses.message));
        continue;
      }
      if (record.commit === undefined) {
        out.push(this.#failed(record, nowText, 'no commit is known to read the statuses of'));
        continue;
      }
      const key = `${reconcile.pipeline}\u0000${record.environment}\u0000${record.revision}\u0000${record.commit}`;
      const provider = gate.provider ?? promotion.pullRequest?.provider;
      if (provider === undefined) continue; // validation requires one
      const apiUrl = gate.apiUrl ?? (provider === promotion.pullRequest?.provider ? promotion.pullRequest.apiUrl : undefined);
      const polled = await this.#poll(key, reconcile, { url: promotion.url, provider, apiUrl, commit: record.commit });
      live.add(key);
      const now = this.#clock.now();
      const decision = decideCommitStatusGate({ statuses: polled.statuses, contexts: gate.contexts, now, deadline: deadlineOf(record, gate), timeoutMs: gate.timeoutMs, readError: polled.error });
      const message = sanitizeForDisplay(decision.reason, MAX_STATUS_TEXT);
      if (decision.verdict === 'failed') {
        live.delete(key);
        out.push(this.#failed(record, nowText, message));
      } else if (decision.verdict === 'passed') {
        live.delete(key);
        out.push(done === undefined ? { applied: false, record: { ...record, commitStatuses: { state: 'Passed', message } } } : this.#succeeded(done, message));
      } else {
        // Held back: still Committed; written only when what it waits for changed.
        if (record.commitStatuses?.message !== message || record.commitStatuses.state !== 'Pending') out.push({ applied: false, record: { ...record, commitStatuses: { state: 'Pending', message } } });
        const next = Math.min(this.#dueAt(polled), deadlineOf(record, gate)) - now;
        pollInMs = Math.min(pollInMs ?? Infinity, Math.max(1_000, next));
      }
    }
    for (const key of this.#polled.keys()) if (key.startsWith(`${reconcile.pipeline}\u0000`) && !live.has(key)) this.#polled.delete(key);
    return { settled: out, pollInMs };
  }

  #succeeded(done: SettledPromotion, message: string): GatedSettlement {
    return { ...done, record: { ...done.record, message: `${done.record.message ?? ''}; ${message}`, commitStatuses: { state: 'Passed', message } } };
  }

  #failed(record: PromotionRecord, nowText: string, message: string): GatedSettlement {
    const commit = record.commit === undefined ? 'the commit' : `commit ${record.commit.slice(0, 12)}`;
    return {
      applied: false,
      event: 'CommitStatusFailed',
      record: { ...record, state: 'Failed', finishedAt: nowText, message: `${commit} was pushed, but ${message}`, commitStatuses: { state: 'Failed', message } },
    };
  }

  #dueAt(polled: Polled): number {
    const wait = polled.failures === 0 ? this.#pollIntervalMs : Math.min(this.#pollIntervalMs * 2 ** polled.failures, Math.max(MAX_POLL_BACKOFF_MS, this.#pollIntervalMs));
    return polled.at + wait;
  }

  /** The statuses of one commit: the last read while it is fresh, else a new read. */
  async #poll(key: string, reconcile: GateReconcile, target: Omit<CommitStatusRequest, 'token' | 'signal'>): Promise<Polled> {
    const last = this.#polled.get(key);
    const now = this.#clock.now();
    if (last !== undefined && now < this.#dueAt(last)) return last;
    let polled: Polled;
    try {
      const statuses = await this.#reader.read({ ...target, token: await reconcile.token(), signal: reconcile.signal });
      polled = { at: now, statuses, error: undefined, failures: 0 };
    } catch (err) {
      if (reconcile.signal.aborted && isAbortError(err)) throw err;
      // GitOpsError and PromotionError messages quote nothing a peer sent; anything else is bounded.
      polled = { at: now, statuses: last?.statuses, error: sanitizeForDisplay(toError(err).message, 512), failures: (last?.failures ?? 0) + 1 };
    }
    this.#polled.set(key, polled);
    return polled;
  }
}

/** When a gated record's statuses must have passed (clock ms): its commit time plus the gate's timeout. */
function deadlineOf(record: PromotionRecord, gate: ResolvedCommitStatusGate): number {
  const at = Date.parse(record.committedAt ?? record.finishedAt ?? record.startedAt);
  return (Number.isNaN(at) ? 0 : at) + gate.timeoutMs;
}

