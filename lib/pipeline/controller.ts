import { isDeepStrictEqual } from 'node:util';
import { serviceAccountIdentity } from '../cluster/index.ts';
import { runWorkers, type RequeueAfter, type WorkContext } from '../queue/index.ts';
import { ownerKey, parseOwnerKey, watchOwners, type HeldReader, type OwnerKey, type OwnerRef, type Registry } from '../registry/index.ts';
import { isAbortError, sanitizeForDisplay, sleep, toError, type Clock, type Logger } from '../util/index.ts';
import { DRIFTED, driftedCondition, invalidSpecCondition, MAX_STATUS_TEXT, plain, readyCondition, sameStatus, type ConditionInput } from './conditions.ts';
import { decidePromotion, DEFAULT_RETRY, findRecord, retryDueAt, settleCommitted, withRecord, type PromotionDecision } from './decide.ts';
import type { ProgressingGrace } from './grace.ts';
import { activeHalt, checkPromotion, PromotionRefusedError } from './guard.ts';
import { PIPELINE_GVK, type CommittedPromotion, type EnvironmentStatus, type Pipeline, type PromotionHalt, type PromotionRecord } from './types.ts';
import { validatePipelineSpec, type ResolvedTarget, type ValidPipelineSpec } from './validate.ts';
import { PromotionActor, type PromotionRequest } from './act.ts';
import { CommitStatusGates, type GatedSettlement } from './commit-status-gate.ts';
import { resolveControllerOptions, type PipelineControllerOptions, type PipelineControllerStats, type ResolvedControllerOptions } from './controller-options.ts';
import { TargetObserver, type PatchedMemory } from './target-observer.ts';
import { FleetMembers } from './fleet-members.ts';
import { lateJoinCandidates } from './late-join.ts';
import { kubeTime, StatusConflict, StatusWriter } from './status-writer.ts';
import { approvedFields, findApproval, howToApprove, legacyAnnotationNote } from './approval.ts';
import { NotShardOwnerError, type PipelineName, type PipelineShard } from './shard.ts';

export type { PromotionRequest } from './act.ts';
export type { PipelineControllerOptions, PipelineControllerStats } from './controller-options.ts';

/** Backoff while the Pipeline cache cannot be built (the CRD not installed yet, say). */
const PIPELINE_CACHE_RETRY_MS: { readonly initial: number; readonly max: number } = { initial: 1_000, max: 30_000 };

/**
 * How often a Pipeline with an unreadable target is looked at again. A cache that recovers wakes
 * its owners itself; a target whose cache could not be built at all (credentials missing or
 * refused, a kind not served) has no cache to say when that changes.
 */
const UNREADABLE_RECHECK_MS = 30_000;
/** How the controller's own per-Pipeline memory (grace, patched generations) is keyed. */
function pipelineKey(ref: { readonly namespace: string; readonly name: string }): string {
  return `${ref.namespace}/${ref.name}`;
}

/**
 * The pipeline-promotion controller: watches Pipelines on the management cluster, reads every
 * target through the registry's caches, reports status level-triggered, and promotes a revision
 * from each environment to the next once it is ready everywhere in the first.
 *
 * Restart safety: a promotion is written `Pending` to the Pipeline's status (with the
 * resourceVersion read, so a concurrent writer makes it fail) before it acts, and its outcome
 * after. A controller that finds a `Pending` record resumes it idempotently: the patch strategy
 * skips objects already at the revision, the webhook is sent again with the same
 * `Idempotency-Key`, the git strategy finds its commit or pull request. An open pull request
 * keeps the promotion Pending (polled); an environment that requires approval records
 * `AwaitingApproval` until `status.approvals` (written by the service's approval endpoint, see
 * approval.ts) names the revision. Status is written only when it changed.
 *
 * Under Flux: a git promotion is `Committed` until its environment runs the revision (then
 * `Succeeded`, or `Failed` past `applyTimeoutMs`), and Flux is asked to reconcile now; a commit
 * reference is never promoted, each ⟨environment, revision⟩ is carried out once, and a loop stops
 * the Pipeline's promotions until its spec changes (guard.ts); a brief Progressing does not count
 * as not ready (grace.ts); a patched value Flux puts back is reported (`Drifted`).
 *
 * Sharded (option `shard`): a reconcile runs only inside the ownership of its Pipeline's shard key
 * and every status write, Event and promotion start re-checks it first, so once a key moved the old
 * replica writes nothing more; a promotion already acting finishes its action, and the new owner
 * resumes its Pending record idempotently (as after a restart).
 *
 * Concurrency: the queue never hands one Pipeline to two workers, so each reconcile owns its
 * Pipeline's status; `#stats` counters are only incremented.
 */
export class PipelineController {
  readonly #registry: Registry;
  readonly #logger: Logger;
  readonly #clock: Clock;
  /** The options checked, defaults merged (controller-options.ts). */
  readonly #settings: ResolvedControllerOptions;
  readonly #beforePromotion: PipelineControllerOptions['beforePromotion'];
  readonly #grace: ProgressingGrace;
  /** What patch promotions left (the actor writes, the observer reads); a Pipeline's entries go when it is forgotten. */
  readonly #patched: PatchedMemory = new Map();
  readonly #stats = { reconciles: 0, reconcileErrors: 0, succeeded: 0, failed: 0 };
  /** The registry's held reader of Pipelines (never collected while held); set for the duration of `run`. */
  #pipelines: HeldReader | undefined;
  #running = false;
  readonly #shard: PipelineShard | undefined;
  /** Status PUTs and Events on the management cluster, each behind the shard fence. */
  readonly #writer: StatusWriter;
  /** Reads the targets through the registry's caches. */
  readonly #observer: TargetObserver;
  /** Carries out promotions as the Pipeline's identity. */
  readonly #actor: PromotionActor;
  /** Holds `Committed` git promotions until their commit's statuses pass (environments with `commitStatuses`). */
  readonly #gates: CommitStatusGates;
  /** Fleet environments' members, read through the registry; a Pipeline's memory goes when it is forgotten. */
  readonly #members: FleetMembers;

  constructor(options: PipelineControllerOptions) {
    const resolved = resolveControllerOptions(options);
    this.#registry = resolved.registry;
    this.#logger = resolved.logger;
    this.#clock = resolved.clock;
    this.#settings = resolved;
    this.#beforePromotion = resolved.beforePromotion;
    this.#grace = resolved.grace;
    this.#shard = resolved.shard;
    this.#writer = new StatusWriter({
      registry: this.#registry,
      clock: this.#clock,
      fence: (pipeline, what) => { this.#shard?.fence(pipeline, what); },
      running: () => this.#pipelines !== undefined,
    });
    this.#observer = new TargetObserver({ registry: this.#registry, clock: this.#clock, grace: this.#grace, patched: this.#patched });
    this.#members = new FleetMembers(this.#registry, { selectorsAsService: this.#settings.allowFleetSelectorsAsService });
    this.#actor = new PromotionActor({
      registry: this.#registry,
      clock: this.#clock,
      webhookTimeoutMs: resolved.webhookTimeoutMs,
      allowPrivateWebhooks: resolved.allowPrivateWebhooks,
      git: resolved.git,
      patched: this.#patched,
      observer: this.#observer,
    });
    this.#gates = new CommitStatusGates({ reader: resolved.commitStatuses, clock: this.#clock, pollIntervalMs: resolved.commitStatusPollIntervalMs });
  }

  /**
   * The shard keys of the Pipelines in the controller's cache (what a Sharder's `keys` reads);
   * empty before the cache exists and without the `shard` option.
   */
  shardKeys(): Iterable<string> {
    const pipelines = this.#pipelines;
    if (this.#shard === undefined || pipelines === undefined) return [];
    return this.#shard.keysOf(pipelines.list().map((p) => ({ namespace: p.metadata?.namespace ?? '', name: p.metadata?.name ?? '' })));
  }

  /** True once the Pipeline cache has synced (what /readyz reports); false before and after `run`. */
  get synced(): boolean {
    return this.#pipelines?.synced ?? false;
  }

  stats(): PipelineControllerStats {
    const s = this.#stats;
    return { reconciles: s.reconciles, reconcileErrors: s.reconcileErrors, promotions: { succeeded: s.succeeded, failed: s.failed } };
  }

  /**
   * Runs until `signal` aborts: watches Pipelines, reconciles them with `workers` workers, and
   * resolves after the reconciles in flight finish (a promotion already acting completes and
   * records its outcome). Rejects if already running.
   */
  async run(signal: AbortSignal): Promise<void> {
    if (this.#running) throw new Error('PipelineController is already running');
    this.#running = true;
    let pipelines: HeldReader | undefined;
    const unsubscribe = this.#followShard();
    try {
      // Pipelines are one of the registry's caches, on the keeper's management-cluster connection
      // with the service's own identity: no connection or informer of the controller's own.
      pipelines = await this.#watchPipelines(signal);
      this.#pipelines = pipelines;
      // Workers wait for a complete view of Pipelines: "not in the cache" must mean "deleted".
      await pipelines.waitForSync(signal);
      await runWorkers(this.#registry.queue, {
        signal,
        handler: (key, workerSignal, context) => this.#reconcile(key, workerSignal, context),
        workers: this.#settings.workers,
        // No maxRetries: a failing Pipeline is retried with the queue's capped backoff until it
        // reconciles, never dropped (controller-runtime's semantics).
        name: 'pipeline',
        onReconcile: this.#settings.onReconcile,
        logger: this.#logger,
        clock: this.#clock,
      });
    } catch (err) {
      if (!signal.aborted) throw err;
    } finally {
      unsubscribe();
      this.#pipelines = undefined;
      pipelines?.release();
      this.#running = false;
    }
  }

  /**
   * `watchOwners` on Pipelines: every Pipeline that appears or changes is queued, every deleted one
   * forgotten. A cache that cannot be built yet (the CRD not installed, the API server away) is
   * tried again with backoff until `signal` aborts, as an informer retries its LIST; meanwhile
   * `synced` is false, which is what /readyz reports.
   */
  async #watchPipelines(signal: AbortSignal): Promise<HeldReader> {
    for (let waitMs = PIPELINE_CACHE_RETRY_MS.initial; ; waitMs = Math.min(waitMs * 2, PIPELINE_CACHE_RETRY_MS.max)) {
      try {
        return await watchOwners(this.#registry, { gvk: PIPELINE_GVK, signal });
      } catch (err) {
        if (signal.aborted) throw err;
        this.#logger.warn('the Pipeline cache could not be built; retrying', { error: toError(err).message, retryInMs: waitMs });
      }
      await sleep(waitMs, signal, this.#clock);
    }
  }

  /**
   * With sharding, on a gain every Pipeline of the keys gained is queued now; on a loss every
   * Pipeline of the keys lost is forgotten (the registry collects its caches) with the
   * controller's memory of it. Returns the unsubscribe function.
   */
  #followShard(): () => void {
    const shard = this.#shard;
    if (shard === undefined) return () => undefined;
    const pipelinesOf = (key: string): PipelineName[] => {
      const pipelines = this.#pipelines;
      if (pipelines === undefined) return [];
      const all = shard.by === 'namespace' ? pipelines.list({ namespace: key }) : [pipelines.get(key.slice(0, key.indexOf('/')), key.slice(key.indexOf('/') + 1))].filter((p) => p !== undefined);
      return all.map((p) => ({ namespace: p.metadata?.namespace ?? '', name: p.metadata?.name ?? '' }));
    };
    const owner = (p: PipelineName): OwnerRef => ({ group: PIPELINE_GVK.group, kind: PIPELINE_GVK.kind, namespace: p.namespace, name: p.name });
    return shard.follow({
      pipelinesOf,
      enqueue: (p) => { this.#registry.queue.add(ownerKey(owner(p))); },
      forget: (p) => { this.#forget(owner(p)); },
      read: (p) => this.#pipelines?.get(p.namespace, p.name),
      markOrphaned: (pipeline, condition) => this.#writer.markOrphaned(pipeline, condition, this.#logger),
    }, this.#logger);
  }

  async #reconcile(key: OwnerKey, signal: AbortSignal, context: WorkContext): Promise<RequeueAfter | undefined> {
    const shard = this.#shard;
    if (shard === undefined) return this.#counted(signal, () => this.#reconcileOnce(key, signal, context.logger));
    // A deleted Pipeline's memory goes whoever owns it (no write): its key may have no owner any more.
    const ref = parseOwnerKey(key);
    const pipeline = this.#pipelines?.get(ref.namespace, ref.name) as Pipeline | undefined;
    if (pipeline === undefined || pipeline.metadata?.deletionTimestamp !== undefined) return this.#counted(signal, () => this.#reconcileOnce(key, signal, context.logger));
    const reconcile = { ran: false };
    const result = await shard.run(ref, signal, context.logger, (owned) => {
      reconcile.ran = true;
      return this.#counted(owned, () => this.#reconcileOnce(key, owned, context.logger));
    });
    // Lost while it ran: what the reconcile remembered after the loss was forgotten goes too.
    if (reconcile.ran && !shard.owns(ref)) this.#forget(ref);
    return result;
  }

  /** Runs a reconcile for the stats. Not async: `reconcile` starts synchronously (see PipelineShard.run). */
  #counted(signal: AbortSignal, reconcile: () => Promise<RequeueAfter | undefined>): Promise<RequeueAfter | undefined> {
    this.#stats.reconciles += 1;
    return reconcile().catch((err: unknown) => {
      if (!(signal.aborted && isAbortError(err)) && !(err instanceof NotShardOwnerError)) this.#stats.reconcileErrors += 1;
      throw err;
    });
  }

  /** Forgets a Pipeline: its registry owner (its caches are collected) and the controller's memory of it. */
  #forget(ref: OwnerRef): void {
    this.#registry.forgetOwner(ref);
    this.#grace.forget(pipelineKey(ref));
    this.#patched.delete(pipelineKey(ref));
    this.#gates.forget(pipelineKey(ref));
    this.#members.forget(pipelineKey(ref));
    this.#actor.forget(pipelineKey(ref));
  }

  async #reconcileOnce(key: OwnerKey, signal: AbortSignal, reconcileLogger: Logger): Promise<RequeueAfter | undefined> {
    const pipelines = this.#pipelines;
    if (pipelines === undefined) return undefined;
    const ref = parseOwnerKey(key);
    const pipeline = pipelines.get(ref.namespace, ref.name) as Pipeline | undefined;
    if (pipeline === undefined || pipeline.metadata?.deletionTimestamp !== undefined) {
      this.#forget(ref);
      return undefined;
    }
    const log = reconcileLogger.child({ pipeline: `${ref.namespace}/${ref.name}` });
    const generation = pipeline.metadata?.generation ?? 0;
    const records = pipeline.status?.promotions ?? [];

    const validation = validatePipelineSpec(pipeline.spec, ref.namespace, { allowCrossNamespaceTargets: this.#settings.allowCrossNamespaceTargets, appKinds: this.#settings.appKinds });
    if (!validation.valid) {
      this.#registry.setOwnerTargets(ref, []);
      this.#grace.forget(pipelineKey(ref));
      this.#members.forget(pipelineKey(ref));
      log.debug('invalid spec', { problems: validation.problems });
      await this.#writer.writeIfChanged(pipeline, this.#writer.status(pipeline, invalidSpecCondition(validation.problems, generation), [], records));
      return undefined;
    }
    const validSpec = validation.spec;
    // Who the Pipeline acts as on the management cluster, for every registry call it makes.
    const account = validSpec.serviceAccountName ?? this.#settings.defaultServiceAccount;
    const owner: OwnerRef = account === undefined ? ref : { ...ref, identity: serviceAccountIdentity(ref.namespace, account) };
    const targetRef = (t: ResolvedTarget): { readonly gvk: ValidPipelineSpec['app']['gvk']; readonly namespace: string; readonly name: string } => ({ gvk: validSpec.app.gvk, namespace: t.namespace, name: validSpec.app.name });
    const declare = (env: ValidPipelineSpec['environments'][number]): { readonly cluster: ResolvedTarget['cluster']; readonly target: ReturnType<typeof targetRef> }[] => env.targets.map((t) => ({ cluster: t.cluster, target: targetRef(t) }));
    // Fleet members are declared as last read (and each fleet's selector set), then read again.
    const memoryKey = pipelineKey(ref);
    this.#registry.setOwnerTargets(owner, [...validSpec.environments.flatMap(declare), ...this.#members.declared(memoryKey, validSpec, owner)]);
    const members = await this.#members.resolve(memoryKey, validSpec, owner, signal);
    const spec = members.spec;
    this.#members.remember(memoryKey, spec.environments.filter((env) => env.fleet !== undefined).flatMap(declare));

    const { environments, graceEndsInMs } = await this.#observer.observeAll(memoryKey, pipeline, spec, owner, signal, members.membership);
    const ready = readyCondition(environments, generation);
    await this.#reportDrift(pipeline, environments, log);
    const settled = settleCommitted(environments, records, this.#clock.now(), this.#now(), this.#settings.applyTimeoutMs);
    // A gated commit is done only once its statuses pass: the gates hold back, fail or annotate records, and say when to read again.
    const gated = await this.#gates.apply({ pipeline: pipelineKey(ref), spec, records, settled, nowText: this.#now(), token: () => this.#actor.gitApiToken(owner, spec), signal });
    const recheck = requeueAfter(ready.reason === 'TargetNotReadable' ? UNREADABLE_RECHECK_MS : undefined, graceEndsInMs, gated.pollInMs)?.requeueAfterMs;
    if (gated.settled.length > 0) return this.#settle(pipeline, spec, gated.settled, ready, environments, log, recheck);
    const decision = activeHalt(pipeline.status, generation) === undefined
      ? decidePromotion(environments, records, this.#clock.now(), DEFAULT_RETRY, { committed: pipeline.status?.committed, applyTimeoutMs: this.#settings.applyTimeoutMs, retries: pipeline.status?.retries })
      : { action: 'none' as const };

    switch (decision.action) {
      case 'none': {
        const joined = await this.#lateJoin(pipeline, owner, spec, ready, environments, log, signal, recheck);
        if (joined !== 'none') return joined;
        const written = await this.#writer.writeIfChanged(pipeline, this.#writer.status(pipeline, ready, environments, records));
        return requeueAfter(written ? undefined : 1_000, decision.retryInMs, recheck);
      }
      case 'supersede': {
        const closed: PromotionRecord = { ...decision.record, state: 'Failed', message: `superseded: ${decision.reason}`, finishedAt: this.#now() };
        const written = await this.#writer.writeIfChanged(pipeline, this.#writer.status(pipeline, ready, environments, withRecord(records, closed)));
        if (written) {
          log.info('promotion superseded', { environment: closed.environment, revision: closed.revision, reason: decision.reason });
          await this.#writer.event(pipeline, 'Warning', 'PromotionSuperseded', `promotion of ${closed.revision} to ${closed.environment} abandoned: ${decision.reason}`, log);
        }
        return requeueAfter(written ? undefined : 1_000, recheck);
      }
      case 'promote': {
        // A retry was asked for by someone with the approver's right (the verb approve): it stands for the wave's approval too.
        const missing = decision.retry === undefined ? approvalGates(spec, decision).find((gate) => findApproval(pipeline.status, gate, decision.revision) === undefined) : undefined;
        if (missing !== undefined) return this.#awaitApproval(pipeline, spec, decision, missing, ready, environments, log, recheck);
        return this.#promote(pipeline, owner, spec, decision, ready, environments, log, signal, recheck);
      }
    }
  }

  /** Records that a promotion waits for its approval; the approval's arrival in status requeues the Pipeline. */
  async #awaitApproval(
    pipeline: Pipeline,
    spec: ValidPipelineSpec,
    decision: PromotionDecision & { readonly action: 'promote' },
    gate: string,
    ready: ConditionInput,
    environments: readonly EnvironmentStatus[],
    log: Logger,
    recheck: number | undefined,
  ): Promise<RequeueAfter | undefined> {
    const records = pipeline.status?.promotions ?? [];
    const existing = findRecord(records, decision.to, decision.revision, decision.wave);
    const legacy = legacyAnnotationNote(pipeline, decision.to);
    const awaiting: PromotionRecord = {
      ...(existing?.state === 'AwaitingApproval' ? existing : { environment: decision.to, ...(decision.wave === undefined ? {} : { wave: decision.wave }), revision: decision.revision, strategy: spec.promotion.strategy, state: 'AwaitingApproval', attempts: 0, startedAt: this.#now() }),
      message: `${howToApprove(gate, decision.revision)}${legacy === undefined ? '' : `; ${legacy}`}`,
    };
    const status = this.#writer.status(pipeline, ready, environments, withRecord(records, awaiting));
    if (sameStatus(pipeline.status, status)) return requeueAfter(recheck);
    const written = await this.#writer.writeIfChanged(pipeline, status);
    if (written && existing?.state !== 'AwaitingApproval') {
      log.info('promotion awaits approval', { environment: decision.to, wave: decision.wave, revision: decision.revision });
      await this.#writer.event(pipeline, 'Normal', 'PromotionAwaitingApproval', `promoting ${decision.revision} to ${gate} waits for approval: ${awaiting.message ?? ''}`, log);
    }
    return requeueAfter(written ? undefined : 1_000, recheck);
  }

  /**
   * Gives the clusters that joined a carried-out wave after it ran the wave's revision (late-join.ts),
   * one wave per reconcile: their keys are added to the wave's record first (the conditional write
   * entitles this reconcile to act, and makes it once per ⟨environment, wave, revision, cluster⟩),
   * then they are patched (or called), with an Event. `none` when there is no joiner to serve.
   */
  async #lateJoin(pipeline: Pipeline, owner: OwnerRef, spec: ValidPipelineSpec, ready: ConditionInput, environments: readonly EnvironmentStatus[], log: Logger, signal: AbortSignal, recheck: number | undefined): Promise<RequeueAfter | undefined | 'none'> {
    const records = pipeline.status?.promotions ?? [];
    const meta = pipeline.metadata ?? {};
    const key = pipelineKey({ namespace: meta.namespace ?? '', name: meta.name ?? '' });
    for (const candidate of lateJoinCandidates(spec, environments, records)) {
      const joiners = (await this.#actor.lateJoiners(owner, spec, candidate, key, signal)).slice(0, candidate.room);
      if (joiners.length === 0) continue;
      const record: PromotionRecord = { ...candidate.record, joined: [...(candidate.record.joined ?? []), ...joiners.map((t) => t.clusterKey)] };
      let current: Pipeline;
      try {
        current = await this.#writer.putStatus(pipeline, this.#writer.status(pipeline, ready, environments, withRecord(records, record)));
      } catch (err) {
        if (err instanceof StatusConflict) return { requeueAfterMs: 1_000 };
        throw err;
      }
      this.#writer.fence(current, 'a late joiner');
      const into = candidate.wave === undefined ? candidate.environment : `${candidate.environment} wave ${candidate.wave}`;
      const from = spec.environments[spec.environments.findIndex((e) => e.name === candidate.environment) - 1]?.name ?? '?';
      const request: PromotionRequest = {
        pipeline: { namespace: meta.namespace ?? '', name: meta.name ?? '', uid: meta.uid ?? '' },
        from, to: candidate.environment, revision: candidate.revision, strategy: spec.promotion.strategy, attempt: candidate.record.attempts, resumed: false,
        ...(candidate.wave === undefined ? {} : { wave: candidate.wave }),
      };
      const outcome = await this.#actor.carryOutJoin(owner, spec, request, joiners, key);
      const names = joiners.map((t) => t.clusterKey).join(', ');
      if (outcome.ok) {
        log.info('late joiners given their wave\'s revision', { environment: candidate.environment, wave: candidate.wave, revision: candidate.revision, clusters: joiners.length });
        await this.#writer.event(current, 'Normal', 'WaveJoined', `${names} joined ${into} after it was carried out: given ${candidate.revision} (${outcome.message})`, log);
      } else {
        log.warn('late joiners could not be given their wave\'s revision', { environment: candidate.environment, wave: candidate.wave, revision: candidate.revision, error: outcome.message });
        await this.#writer.event(current, 'Warning', 'WaveJoinFailed', `${names} joined ${into} after it was carried out; giving them ${candidate.revision} failed (not tried again for this revision: the next one reaches them): ${outcome.message}`, log);
      }
      return requeueAfter(recheck);
    }
    return 'none';
  }

  /** An Event when a patched value is seen put back by Flux (the Drifted condition turning True). */
  async #reportDrift(pipeline: Pipeline, environments: readonly EnvironmentStatus[], log: Logger): Promise<void> {
    const previous = pipeline.status?.conditions ?? [];
    const drift = driftedCondition(environments, previous, pipeline.metadata?.generation ?? 0);
    if (drift?.status !== 'True' || previous.some((c) => c.type === DRIFTED && c.status === 'True')) return;
    log.warn('a patched value was put back by Flux', { message: drift.message });
    await this.#writer.event(pipeline, 'Warning', 'Drifted', drift.message, log);
  }

  /**
   * Closes `Committed` records: the environment runs the revision (Succeeded), or did not in time
   * (Failed), or a commit-status gate failed; a record still `Committed` is written without an Event.
   */
  async #settle(pipeline: Pipeline, spec: ValidPipelineSpec, settled: readonly GatedSettlement[], ready: ConditionInput, environments: readonly EnvironmentStatus[], log: Logger, recheck: number | undefined): Promise<RequeueAfter | undefined> {
    let records = pipeline.status?.promotions ?? [];
    for (const { record } of settled) records = withRecord(records, record);
    const written = await this.#writer.writeIfChanged(pipeline, this.#writer.status(pipeline, ready, environments, records));
    if (!written) return requeueAfter(1_000, recheck);
    for (const { record, event } of settled) {
      const from = spec.environments[spec.environments.findIndex((e) => e.name === record.environment) - 1]?.name ?? '?';
      const into = record.wave === undefined ? record.environment : `${record.environment} wave ${record.wave}`;
      if (record.state === 'Succeeded') {
        this.#stats.succeeded += 1;
        log.info('promoted', { environment: record.environment, wave: record.wave, revision: record.revision, commit: record.commit });
        await this.#writer.event(pipeline, 'Normal', 'Promoted', `promoted ${record.revision} from ${from} to ${into}: ${record.message ?? ''}`, log);
      } else if (record.state === 'Failed') {
        this.#stats.failed += 1;
        log.warn(event === undefined ? 'a committed promotion was not applied' : 'a committed promotion failed its commit-status gate', { environment: record.environment, wave: record.wave, revision: record.revision, commit: record.commit });
        await this.#writer.event(pipeline, 'Warning', event ?? (record.wave === undefined ? 'PromotionNotApplied' : 'WaveFailed'), `promoting ${record.revision} from ${from} to ${into}: ${record.message ?? ''}`, log);
      }
    }
    return requeueAfter(recheck);
  }

  /** Stops promotions of the Pipeline until its spec changes, saying why (condition and Event). */
  async #halt(pipeline: Pipeline, refusal: PromotionRefusedError, ready: ConditionInput, environments: readonly EnvironmentStatus[], log: Logger, recheck: number | undefined): Promise<RequeueAfter | undefined> {
    const halt: PromotionHalt = { reason: refusal.reason, message: sanitizeForDisplay(refusal.message, MAX_STATUS_TEXT), generation: pipeline.metadata?.generation ?? 0, at: this.#now() };
    const written = await this.#writer.writeIfChanged(pipeline, this.#writer.status(pipeline, ready, environments, pipeline.status?.promotions ?? [], halt));
    if (written) {
      log.warn('promotions stopped', { reason: refusal.reason, environment: refusal.environment });
      await this.#writer.event(pipeline, 'Warning', refusal.reason, halt.message, log);
    }
    return requeueAfter(written ? undefined : 1_000, recheck);
  }

  /**
   * Records the promotion Pending (winning the write is what entitles this reconcile to act), runs
   * the hook, acts, and records the outcome with an Event.
   */
  async #promote(
    pipeline: Pipeline,
    owner: OwnerRef,
    spec: ValidPipelineSpec,
    decision: PromotionDecision & { readonly action: 'promote' },
    ready: ConditionInput,
    environments: readonly EnvironmentStatus[],
    log: Logger,
    signal: AbortSignal,
    recheck: number | undefined,
  ): Promise<RequeueAfter | undefined> {
    const meta = pipeline.metadata ?? {};
    const namespace = meta.namespace ?? '';
    const name = meta.name ?? '';
    try {
      const isNew = decision.attempt === 1 && !decision.resumed;
      checkPromotion(pipeline.status?.committed, { environment: decision.to, wave: decision.wave, revision: decision.revision, isNew, haltedAt: pipeline.status?.halted?.at }, this.#clock.now(), this.#settings.loop);
    } catch (err) {
      if (err instanceof PromotionRefusedError) return this.#halt(pipeline, err, ready, environments, log, recheck);
      throw err;
    }
    const previous = findRecord(pipeline.status?.promotions ?? [], decision.to, decision.revision, decision.wave);
    const wave = decision.wave === undefined ? {} : { wave: decision.wave };
    const into = decision.wave === undefined ? decision.to : `${decision.to} wave ${decision.wave}`;
    // A look at an open pull request is not a new attempt: the record (and status) stay as they are.
    const polling = previous?.state === 'Pending' && previous.pullRequest !== undefined ? previous : undefined;
    const pending: PromotionRecord = polling ?? {
      environment: decision.to,
      ...wave,
      revision: decision.revision,
      strategy: spec.promotion.strategy,
      state: 'Pending',
      attempts: decision.attempt,
      startedAt: decision.startedAt ?? this.#now(),
      ...(decision.retry === undefined ? {} : { retry: decision.retry }),
      ...approvedFields(approvalGates(spec, decision).map((gate) => findApproval(pipeline.status, gate, decision.revision)).findLast((a) => a !== undefined)),
    };
    let current: Pipeline;
    try {
      const status = this.#writer.status(pipeline, ready, environments, withRecord(pipeline.status?.promotions ?? [], pending));
      current = polling !== undefined && sameStatus(pipeline.status, status) ? pipeline : await this.#writer.putStatus(pipeline, status);
    } catch (err) {
      if (err instanceof StatusConflict) return { requeueAfterMs: 1_000 }; // someone else acted; look again
      throw err;
    }
    log.info('promotion recorded', { environment: decision.to, wave: decision.wave, revision: decision.revision, attempt: decision.attempt, resumed: decision.resumed });
    if (decision.retry !== undefined && previous?.state === 'Failed' && previous.committedAt !== undefined) {
      log.info('wave retried', { environment: decision.to, wave: decision.wave, revision: decision.revision, attempt: decision.attempt, by: decision.retry.by.username });
      await this.#writer.event(current, 'Normal', 'WaveRetried', `carrying out ${into} at ${decision.revision} again (attempt ${decision.attempt}), as ${decision.retry.by.username} asked at ${decision.retry.at}; attempt ${decision.retry.of} was not ready in time`, log);
    }

    const request: PromotionRequest = {
      pipeline: { namespace, name, uid: meta.uid ?? '' },
      from: decision.from,
      to: decision.to,
      revision: decision.revision,
      strategy: spec.promotion.strategy,
      attempt: decision.attempt,
      resumed: decision.resumed,
      ...wave,
      ...(decision.retry === undefined ? {} : { retry: decision.retry.of }),
    };
    if (this.#beforePromotion !== undefined) await this.#beforePromotion(request, signal);
    // Not started once the shard moved: the new owner resumes the Pending record.
    this.#writer.fence(pipeline, 'a promotion');

    // Not bound to `signal`: once acting, finish and record the outcome (each step has a timeout).
    const outcome = await this.#actor.carryOut(owner, spec, request, pipelineKey({ namespace, name }));
    const carried = outcome.git === undefined ? {} : {
      ...(outcome.git.commit === undefined ? {} : { commit: outcome.git.commit }),
      ...(outcome.git.pullRequest === undefined ? {} : { pullRequest: outcome.git.pullRequest }),
    };
    if (outcome.git?.state === 'waiting') {
      // A pull request is open: still Pending; done when it merges (polled), or superseded.
      const waiting: PromotionRecord = { ...pending, ...carried, message: outcome.message };
      if (!isDeepStrictEqual(plain(waiting), plain(pending))) await this.#writer.recordOutcome(current, waiting);
      if (outcome.git.opened === true) await this.#writer.event(current, 'Normal', 'PullRequestOpened', `promoting ${decision.revision} from ${decision.from} to ${decision.to}: opened ${outcome.message}`, log);
      log.debug('promotion waits for a merge', { environment: decision.to, revision: decision.revision, pullRequest: outcome.git.pullRequest?.number });
      return requeueAfter(this.#settings.gitPollIntervalMs, recheck);
    }
    const now = this.#now();
    // A commit is done when the environment runs it, a wave when it is ready: Committed until then (settled by a later reconcile).
    const state = !outcome.ok ? 'Failed' : outcome.git === undefined && decision.wave === undefined ? 'Succeeded' : 'Committed';
    const finished: PromotionRecord = { ...pending, ...carried, state, message: outcome.message, finishedAt: now, ...(state === 'Committed' ? { committedAt: now } : {}) };
    const carriedOut: CommittedPromotion | undefined = outcome.ok ? { environment: decision.to, ...wave, revision: decision.revision, at: now, ...(outcome.git?.commit === undefined ? {} : { commit: outcome.git.commit }) } : undefined;
    await this.#writer.recordOutcome(current, finished, carriedOut);
    if (state === 'Committed') {
      log.info('committed; waiting for the environment to run it', { environment: decision.to, wave: decision.wave, revision: decision.revision, commit: outcome.git?.commit });
      await this.#writer.event(current, 'Normal', decision.wave === undefined ? 'Committed' : 'WaveStarted', `promoting ${decision.revision} from ${decision.from} to ${into}: ${outcome.message}; waiting for ${into} to ${decision.wave === undefined ? 'run it' : 'be ready'}`, log);
      if (outcome.git !== undefined) await this.#actor.requestFluxReconcile(owner, spec, decision.to, log, signal, decision.wave);
      return requeueAfter(recheck);
    }
    if (outcome.ok) {
      this.#stats.succeeded += 1;
      log.info('promoted', { environment: decision.to, wave: decision.wave, revision: decision.revision, attempt: decision.attempt });
      await this.#writer.event(current, 'Normal', 'Promoted', `promoted ${decision.revision} from ${decision.from} to ${into}: ${outcome.message}`, log);
      return requeueAfter(recheck);
    }
    this.#stats.failed += 1;
    log.warn('promotion failed', { environment: decision.to, wave: decision.wave, revision: decision.revision, attempt: decision.attempt, error: outcome.message });
    await this.#writer.event(current, 'Warning', 'PromotionFailed', `promoting ${decision.revision} from ${decision.from} to ${into} failed (attempt ${decision.attempt}): ${outcome.message}`, log);
    return requeueAfter(Math.max(0, retryDueAt(finished, DEFAULT_RETRY) - this.#clock.now()), recheck);
  }

  /** RFC 3339 with second precision, as Kubernetes writes times. */
  #now(): string {
    return kubeTime(this.#clock);
  }
}

/**
 * The approvals a promotion needs: the environment's (`requireApproval`: one approval of the
 * environment covers each of its waves) and the wave's own (`<environment>/<wave>`).
 */
function approvalGates(spec: ValidPipelineSpec, decision: PromotionDecision & { readonly action: 'promote' }): string[] {
  const env = spec.environments.find((e) => e.name === decision.to);
  const gates = env?.requireApproval === true ? [decision.to] : [];
  if (decision.wave !== undefined && env?.fleet?.waves.find((w) => w.name === decision.wave)?.requireApproval === true) gates.push(`${decision.to}/${decision.wave}`);
  return gates;
}

/** The earliest of the delays given, or undefined when none is. */
function requeueAfter(...delays: readonly (number | undefined)[]): RequeueAfter | undefined {
  const defined = delays.filter((d): d is number => d !== undefined);
  return defined.length === 0 ? undefined : { requeueAfterMs: Math.min(...defined) };
}
