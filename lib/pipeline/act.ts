import type { ClusterConnection } from '../transport/index.ts';
import type { ClusterRef } from '../cluster/index.ts';
import type { GitPromoter } from '../gitops/index.ts';
import type { OwnerRef, Registry } from '../registry/index.ts';
import { apiVersionOf, KubeApiError, sanitizeForDisplay, toError, type Clock, type Logger } from '../util/index.ts';
import { MAX_STATUS_TEXT } from './conditions.ts';
import { PromotionError } from './errors.ts';
import { gitSourceOf, isKustomization, requestReconcile } from './flux.ts';
import { gitCredentials, promoteThroughGit, type GitActOutcome } from './git.ts';
import { getAtPointer } from './json-pointer.ts';
import type { LateJoinCandidate } from './late-join.ts';
import { setRevision } from './patch.ts';
import { requiredReady } from './fleet-policy.ts';
import { patchedTargetKey, type PatchedMemory, type TargetObserver } from './target-observer.ts';
import type { ResolvedTarget, ValidPipelineSpec } from './validate.ts';
import { deliverWebhook } from './webhook.ts';

/** A promotion about to act, as the controller option `beforePromotion` sees it. */
export interface PromotionRequest {
  readonly pipeline: { readonly namespace: string; readonly name: string; readonly uid: string };
  /** The environment the revision is ready in. */
  readonly from: string;
  /** The environment it is promoted into. */
  readonly to: string;
  readonly revision: string;
  readonly strategy: 'patch' | 'webhook' | 'git';
  /** 1 for the first attempt. */
  readonly attempt: number;
  /** True when a Pending promotion is taken up again (after a restart). */
  readonly resumed: boolean;
  /** The wave of a fleet environment promoted into (its clusters only). */
  readonly wave?: string;
  /** A person's retry of a stopped wave: the failed attempt it retries (a new webhook Idempotency-Key). */
  readonly retry?: number;
}

/** How acting ended: `message` is sanitized for status; `git` is the git strategy's outcome. */
export interface ActOutcome {
  readonly ok: boolean;
  readonly message: string;
  readonly git?: GitActOutcome;
}

/** What a {@link PromotionActor} is built with. */
export interface PromotionActorOptions {
  /** Lends connections as the Pipeline's identity (its writes and Secret reads). */
  readonly registry: Pick<Registry, 'connectionFor'>;
  readonly clock: Clock;
  /** Bound on one webhook delivery, answer included. */
  readonly webhookTimeoutMs: number;
  /** Let webhooks reach loopback and private addresses. */
  readonly allowPrivateWebhooks: boolean;
  /** Carries out the git strategy. */
  readonly git: GitPromoter;
  /** What patch promotions left, per Pipeline key (written here, read by the observer). */
  readonly patched: PatchedMemory;
  /** Reads a target's cache (a committed Kustomization's GitRepository). */
  readonly observer: TargetObserver;
}

/**
 * Carries out a promotion the controller recorded Pending — patch, webhook or git — as the
 * Pipeline's identity, and after a commit asks Flux to reconcile now. Writes no status: the
 * controller records the outcome. Each step has its own timeout; acting is not bound to the
 * reconcile's signal (once started, it finishes). Its only state is the shared {@link PatchedMemory}.
 */
export class PromotionActor {
  readonly #registry: Pick<Registry, 'connectionFor'>;
  readonly #clock: Clock;
  readonly #webhookTimeoutMs: number;
  readonly #allowPrivateWebhooks: boolean;
  readonly #git: GitPromoter;
  readonly #patched: PatchedMemory;
  readonly #observer: TargetObserver;
  /**
   * Webhook strategy: per Pipeline key, per `environment\0wave`, the revision last delivered and
   * the clusters that delivery covered, so a late joiner is told from a member that has not applied
   * it yet. Replaced by each delivery of that wave; a Pipeline's entry goes with {@link forget}.
   * Not kept across restarts: a rollout delivered before one gives no late joiner a call.
   */
  readonly #delivered = new Map<string, Map<string, { readonly revision: string; readonly clusters: ReadonlySet<string> }>>();

  constructor(options: PromotionActorOptions) {
    this.#registry = options.registry;
    this.#clock = options.clock;
    this.#webhookTimeoutMs = options.webhookTimeoutMs;
    this.#allowPrivateWebhooks = options.allowPrivateWebhooks;
    this.#git = options.git;
    this.#patched = options.patched;
    this.#observer = options.observer;
  }

  /** Acts with the spec's strategy; never rejects: a failure is an outcome with its message. `key` is the Pipeline's memory key. */
  async carryOut(owner: OwnerRef, spec: ValidPipelineSpec, request: PromotionRequest, key: string): Promise<ActOutcome> {
    try {
      if (spec.promotion.strategy === 'git') {
        const { namespace, name } = request.pipeline;
        // A wave's lines are marked `<namespace>:<pipeline>:<environment>/<wave>`.
        const environment = request.wave === undefined ? request.to : `${request.to}/${request.wave}`;
        const imagePolicy = spec.environments.find((e) => e.name === request.to)?.imagePolicy;
        const git = await promoteThroughGit(this.#git, spec.promotion, { namespace, pipeline: name, environment, revision: request.revision, imagePolicy }, (secret) => this.#secretData(owner, secret, 'git'));
        return { ok: true, message: sanitizeForDisplay(git.message, MAX_STATUS_TEXT), git };
      }
      return { ok: true, message: sanitizeForDisplay(await this.#act(owner, spec, request, key), MAX_STATUS_TEXT) };
    } catch (err) {
      return { ok: false, message: sanitizeForDisplay(toError(err).message, MAX_STATUS_TEXT) };
    }
  }

  /**
   * Of a candidate's members, the late joiners: patch — those whose object does not hold the
   * revision at the patch path (a member carried out with the wave holds it, applied or not);
   * webhook — those the wave's delivery (in this process) did not cover. Reads caches only.
   */
  async lateJoiners(owner: OwnerRef, spec: ValidPipelineSpec, candidate: LateJoinCandidate, key: string, signal: AbortSignal): Promise<ResolvedTarget[]> {
    const promotion = spec.promotion;
    if (promotion.strategy === 'webhook') {
      const delivered = this.#delivered.get(key)?.get(`${candidate.environment}\u0000${candidate.wave ?? ''}`);
      if (delivered?.revision !== candidate.revision) return [];
      return candidate.targets.filter((t) => !delivered.clusters.has(t.clusterKey));
    }
    if (promotion.strategy !== 'patch') return [];
    const seen = await Promise.all(candidate.targets.map((t) => this.#observer.observe(t, spec, owner, signal)));
    return candidate.targets.filter((_, i) => {
      const view = seen[i];
      return view?.state === 'read' && view.object !== undefined && getAtPointer(view.object, promotion.path) !== candidate.revision;
    });
  }

  /**
   * Gives late joiners the revision their wave carried out: patch — each is patched; webhook — one
   * call per joiner, with an Idempotency-Key of its own (`uid/env/wave/rev/cluster`). Never rejects.
   */
  async carryOutJoin(owner: OwnerRef, spec: ValidPipelineSpec, request: PromotionRequest, joiners: readonly ResolvedTarget[], key: string): Promise<ActOutcome> {
    try {
      return { ok: true, message: sanitizeForDisplay(await this.#act(owner, spec, request, key, joiners), MAX_STATUS_TEXT) };
    } catch (err) {
      return { ok: false, message: sanitizeForDisplay(toError(err).message, MAX_STATUS_TEXT) };
    }
  }

  /** Drops what is remembered of a Pipeline (its key). */
  forget(key: string): void {
    this.#delivered.delete(key);
  }

  /**
   * Carries out one patch or webhook promotion; resolves with a summary for the record, rejects
   * with why it failed. `joiners`: only those (late joiners of the wave), each on its own.
   */
  async #act(owner: OwnerRef, spec: ValidPipelineSpec, request: PromotionRequest, key: string, joiners?: readonly ResolvedTarget[]): Promise<string> {
    const found = spec.environments.find((e) => e.name === request.to);
    if (found === undefined) throw new PromotionError(`environment ${request.to} is not in the spec`);
    // A wave: only its clusters; late joiners: only them.
    const env = joiners !== undefined ? { ...found, targets: joiners } : request.wave === undefined ? found : { ...found, targets: found.targets.filter((t) => found.waveOf?.get(t.clusterKey) === request.wave) };
    if (env.targets.length === 0) throw new PromotionError(`${request.wave === undefined ? `environment ${request.to}` : `wave ${request.wave} of ${request.to}`} has no clusters`);
    const promotion = spec.promotion;
    if (promotion.strategy === 'patch') {
      const patched = this.#patched.get(key) ?? new Map<string, { readonly revision: string; readonly generation: number | undefined }>();
      this.#patched.set(key, patched);
      const results = await Promise.allSettled(env.targets.map(async (t) => {
        const connection = await this.#connectionFor(t.cluster, owner);
        const onResult = (object: { readonly metadata?: { readonly generation?: number } }): void => {
          patched.set(patchedTargetKey(env.name, t), { revision: request.revision, generation: object.metadata?.generation });
        };
        return setRevision({ connection, gvk: spec.app.gvk, namespace: t.namespace, name: spec.app.name, path: promotion.path, revision: request.revision, onResult });
      }));
      const failures = results.flatMap((r, i) => (r.status === 'rejected' ? [`${env.targets[i]?.clusterKey ?? '?'} namespace ${env.targets[i]?.namespace ?? '?'}: ${toError(r.reason).message}`] : []));
      // A fleet (or wave) is carried out once enough of its clusters took it for its readiness policy.
      const fleet = found.fleet;
      const readiness = request.wave === undefined ? fleet?.readiness : fleet?.waves.find((w) => w.name === request.wave)?.readiness;
      // Late joiners are each on their own: any failure is the outcome's.
      const required = joiners !== undefined ? env.targets.length : readiness === undefined ? env.targets.length : requiredReady(readiness, env.targets.length);
      if (failures.length > 0 && env.targets.length - failures.length < required) throw new PromotionError(failures.join('; '));
      const unchanged = results.filter((r) => r.status === 'fulfilled' && r.value === 'unchanged').length;
      const missed = failures.length === 0 ? '' : `; not on ${failures.length} (enough without them for ${required} of ${env.targets.length}): ${failures.join('; ')}`;
      return `set ${promotion.path} to ${request.revision} in ${env.targets.length - unchanged - failures.length} target(s)${unchanged > 0 ? `, ${unchanged} already at it` : ''}${missed}`;
    }
    if (promotion.strategy === 'git') throw new PromotionError('the git strategy is carried out by promoteThroughGit');
    const url = await this.#webhookUrl(owner, promotion.secretName, promotion.secretKey);
    if (joiners !== undefined) return this.#deliverToJoiners(url, spec, request, joiners);
    const status = await deliverWebhook({
      url,
      body: webhookBody(spec, request, env.targets, request.retry === undefined ? {} : { retry: true }),
      // A retry is a new delivery on purpose: a receiver that deduplicates must act on it again.
      idempotencyKey: `${request.pipeline.uid}/${request.to}/${request.wave === undefined ? '' : `${request.wave}/`}${request.revision}${request.retry === undefined ? '' : `/retry-${request.retry}`}`,
      timeoutMs: this.#webhookTimeoutMs,
      clock: this.#clock,
      allowPrivateNetworks: this.#allowPrivateWebhooks,
    });
    if (found.fleet !== undefined) {
      const waves = this.#delivered.get(key) ?? new Map<string, { readonly revision: string; readonly clusters: ReadonlySet<string> }>();
      this.#delivered.set(key, waves);
      waves.set(`${request.to}\u0000${request.wave ?? ''}`, { revision: request.revision, clusters: new Set(env.targets.map((t) => t.clusterKey)) });
    }
    return `webhook answered HTTP ${status}`;
  }

  /** One webhook call per late joiner, each with its own Idempotency-Key; rejects naming those that failed. */
  async #deliverToJoiners(url: string, spec: ValidPipelineSpec, request: PromotionRequest, joiners: readonly ResolvedTarget[]): Promise<string> {
    const results = await Promise.allSettled(joiners.map((t) => deliverWebhook({
      url,
      body: webhookBody(spec, request, [t], { joined: true }),
      idempotencyKey: `${request.pipeline.uid}/${request.to}/${request.wave === undefined ? '' : `${request.wave}/`}${request.revision}/${t.clusterKey}`,
      timeoutMs: this.#webhookTimeoutMs,
      clock: this.#clock,
      allowPrivateNetworks: this.#allowPrivateWebhooks,
    })));
    const failures = results.flatMap((r, i) => (r.status === 'rejected' ? [`${joiners[i]?.clusterKey ?? '?'}: ${toError(r.reason).message}`] : []));
    if (failures.length > 0) throw new PromotionError(failures.join('; '));
    return `webhook answered for ${joiners.length} cluster(s)`;
  }

  /**
   * After a commit: asks Flux to reconcile now the environment's Kustomizations and the
   * GitRepository each reads from (`reconcile.fluxcd.io/requestedAt`), as the Pipeline's identity,
   * so the step does not wait for a Git poll. Best effort: a refusal is logged, never a failure. On
   * the management cluster without impersonation only the target's own namespace is touched. After
   * a wave's commit only the wave's clusters are asked: the commit changed no other cluster's files.
   */
  async requestFluxReconcile(owner: OwnerRef, spec: ValidPipelineSpec, environment: string, log: Logger, signal: AbortSignal, wave?: string): Promise<void> {
    if (!isKustomization(spec.app.gvk)) return;
    const env = spec.environments.find((e) => e.name === environment);
    const targets = (env?.targets ?? []).filter((t) => wave === undefined || env?.waveOf?.get(t.clusterKey) === wave);
    const at = new Date(this.#clock.now()).toISOString();
    const asked = new Set<string>();
    await Promise.all(targets.map(async (t) => {
      let connection: ClusterConnection;
      try {
        connection = await this.#connectionFor(t.cluster, owner);
      } catch (err) {
        log.debug('no connection to ask Flux to reconcile now', { cluster: t.clusterKey, error: toError(err).message });
        return;
      }
      const seen = await this.#observer.observe(t, spec, owner, signal);
      const object = seen.state === 'read' ? seen.object : undefined;
      await requestReconcile(connection, { gvk: spec.app.gvk, namespace: t.namespace, name: spec.app.name }, at, log);
      const source = object === undefined ? undefined : gitSourceOf(object);
      if (source === undefined) return;
      const namespace = source.namespace ?? t.namespace;
      if (t.cluster.kind === 'local' && owner.identity === undefined && namespace !== t.namespace) {
        log.debug('not asking a GitRepository in another namespace to reconcile (no impersonation)', { namespace });
        return;
      }
      const id = `${t.clusterKey}\u0000${namespace}\u0000${source.name}`;
      if (asked.has(id)) return;
      asked.add(id);
      await requestReconcile(connection, { gvk: source.gvk, namespace, name: source.name }, at, log);
    }));
  }

  /**
   * The provider API token of the git strategy (the git Secret's `token` or `password`, as pull
   * requests use it), read as the Pipeline's identity; undefined without a Secret or with an SSH key.
   */
  async gitApiToken(owner: OwnerRef, spec: ValidPipelineSpec): Promise<string | undefined> {
    const promotion = spec.promotion;
    if (promotion.strategy !== 'git' || promotion.secretName === undefined) return undefined;
    const credentials = gitCredentials(await this.#secretData(owner, promotion.secretName, 'git'), `${owner.namespace}/${promotion.secretName}`);
    return credentials.kind === 'basic' ? credentials.password : undefined;
  }

  /**
   * The registry's connection for the owner's writes (and Secret reads), as the owner's identity:
   * on the management cluster a Pipeline with a ServiceAccount never borrows the service's rights.
   */
  async #connectionFor(ref: ClusterRef, owner: OwnerRef): Promise<ClusterConnection> {
    return this.#registry.connectionFor(ref, owner);
  }

  /** Every key of a Secret beside the Pipeline, decoded, read as the Pipeline's identity. */
  async #secretData(owner: OwnerRef, secretName: string, what: string): Promise<Readonly<Record<string, string>>> {
    const namespace = owner.namespace;
    const local = await this.#connectionFor({ kind: 'local' }, owner);
    let secret: { readonly data?: Readonly<Record<string, string>> };
    try {
      secret = (await local.request({ method: 'GET', path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets/${encodeURIComponent(secretName)}` })) as typeof secret;
    } catch (err) {
      if (err instanceof KubeApiError) throw new PromotionError(`reading the ${what} Secret ${namespace}/${secretName}: HTTP ${err.statusCode}${err.reason === '' ? '' : ` ${err.reason}`}`, { cause: err });
      throw err;
    }
    return Object.fromEntries(Object.entries(secret.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]));
  }

  /** The webhook URL from the Secret beside the Pipeline, read as the Pipeline's identity. */
  async #webhookUrl(owner: OwnerRef, secretName: string, key: string): Promise<string> {
    const data = await this.#secretData(owner, secretName, 'webhook');
    // Own keys only: a tenant's key named `constructor` must not find Object.prototype's.
    const url = Object.hasOwn(data, key) ? data[key] : undefined;
    if (url === undefined) throw new PromotionError(`the webhook Secret ${owner.namespace}/${secretName} has no key ${JSON.stringify(key)}`);
    return url;
  }
}

/**
 * What a webhook receives for a promotion (a wave's names it; `extra` marks a retry or a late
 * joiner's call): the Pipeline, its app, from where to which environment, the revision, the attempt
 * and the clusters this call is for.
 */
function webhookBody(spec: ValidPipelineSpec, request: PromotionRequest, targets: readonly ResolvedTarget[], extra: { readonly retry?: true; readonly joined?: true }): Record<string, unknown> {
  return {
    pipeline: request.pipeline,
    appRef: { apiVersion: apiVersionOf(spec.app.gvk), kind: spec.app.gvk.kind, name: spec.app.name },
    from: request.from,
    environment: request.to,
    ...(request.wave === undefined ? {} : { wave: request.wave }),
    ...extra,
    revision: request.revision,
    attempt: request.attempt,
    targets: targets.map((t) => ({ cluster: t.clusterKey, namespace: t.namespace })),
  };
}
