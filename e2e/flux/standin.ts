import { setTimeout as delay } from 'node:timers/promises';
import { ClusterConnection, resourcePath, type KubeObject, type ResourceInfo } from '../../lib/transport/index.ts';
import { ResourceInformer } from '../../lib/informer/index.ts';
import { KubeApiError, noopLogger, toError, type GroupVersionKind, type Logger } from '../../lib/util/index.ts';
import { kubeConfigFrom } from '../../fixtures/support/index.ts';

/** HelmRelease-like objects carry the wanted chart version here. */
const HELM_VERSION = ['spec', 'chart', 'spec', 'version'] as const;

export const HELM_RELEASE: GroupVersionKind = { group: 'helm.toolkit.fluxcd.io', version: 'v2', kind: 'HelmRelease' };
export const KUSTOMIZATION: GroupVersionKind = { group: 'kustomize.toolkit.fluxcd.io', version: 'v1', kind: 'Kustomization' };

/** What the stand-in reports as it acts, for a demo to print. */
export interface ReconciledEvent {
  readonly cluster: string;
  readonly kind: string;
  readonly namespace: string;
  readonly name: string;
  readonly revision: string;
}

/** Options of {@link FluxStandIn}. */
export interface FluxStandInOptions {
  /** Cluster name (for events and logs). */
  readonly name: string;
  /** Admin kubeconfig YAML of the cluster to act in. */
  readonly kubeconfig: string;
  /** Kinds to reconcile. Default HelmRelease and Kustomization. */
  readonly kinds?: readonly GroupVersionKind[];
  /** How long "applying" a revision takes, so a demo can be followed. Default 0. */
  readonly applyDelayMs?: number;
  /**
   * The revision a Kustomization's source offers (what kustomize-controller reads from the source's
   * `status.artifact.revision`, e.g. `main@sha1:<sha>`). Default: that field of the GitRepository,
   * OCIRepository or Bucket named by `spec.sourceRef`; `undefined` while it has no artifact.
   */
  readonly sourceRevision?: (kustomization: KubeObject) => string | undefined | Promise<string | undefined>;
  /**
   * How often a Kustomization is reconciled even when nothing changed. Default: its `spec.interval`
   * (a Go duration such as `10m` or `1m30s`), else 10 minutes. Sources are looked at for a new
   * revision every second either way (a real kustomize-controller watches them).
   */
  readonly kustomizationIntervalMs?: number;
  /** Called after an object was marked Ready at a revision. */
  readonly onReconciled?: (event: ReconciledEvent) => void;
  readonly logger?: Logger;
}

function wantedChartVersion(obj: KubeObject): string | undefined {
  let value: unknown = obj;
  for (const key of HELM_VERSION) value = (value as Record<string, unknown> | undefined)?.[key];
  return typeof value === 'string' ? value : undefined;
}

/** Flux's annotation asking for a reconcile now; its value is echoed in status.lastHandledReconcileAt. */
export const RECONCILE_REQUESTED_AT = 'reconcile.fluxcd.io/requestedAt';
const SOURCE_KINDS: Readonly<Record<string, GroupVersionKind>> = {
  GitRepository: { group: 'source.toolkit.fluxcd.io', version: 'v1', kind: 'GitRepository' },
  OCIRepository: { group: 'source.toolkit.fluxcd.io', version: 'v1', kind: 'OCIRepository' },
  Bucket: { group: 'source.toolkit.fluxcd.io', version: 'v1', kind: 'Bucket' },
};

/** How often the stand-in looks at a Kustomization's source for a new revision. */
const SOURCE_POLL_MS = 1000;

/** A Go duration (`1h2m3.5s`, `500ms`) in milliseconds; undefined when it is not one. */
export function goDurationMs(value: unknown): number | undefined {
  if (typeof value !== 'string' || !/^(\d+(\.\d+)?(h|ms|m|s))+$/.test(value)) return undefined;
  const units: Readonly<Record<string, number>> = { h: 3_600_000, m: 60_000, s: 1000, ms: 1 };
  let total = 0;
  for (const [, amount, , unit] of value.matchAll(/(\d+(\.\d+)?)(h|ms|m|s)/g)) total += Number(amount) * (units[unit ?? ''] ?? 0);
  return total;
}

interface Condition { type: string; status: string; reason: string; message: string; lastTransitionTime: string; observedGeneration?: number }
interface KustomizationStatus {
  observedGeneration?: number;
  conditions?: Condition[];
  lastAppliedRevision?: string;
  lastAttemptedRevision?: string;
  lastHandledReconcileAt?: string;
}
interface KustomizationSpec { suspend?: unknown; sourceRef?: { kind?: unknown; name?: unknown; namespace?: unknown } }

/**
 * A small stand-in for Flux's helm-controller (not buildable here) in tests and the demo, which can
 * also play kustomize-controller where the real one is not run. It watches through fleetcache's own
 * informer and writes the status Flux would, applying nothing:
 *
 * - HelmRelease: whenever `spec.chart.spec.version` is not the version it reports, a `Ready=True`
 *   condition, `observedGeneration` equal to `metadata.generation`, and the version in
 *   `status.history[0].chartVersion`.
 * - Kustomization, as kustomize-controller v1 does (checked against it in
 *   e2e/flux/conformance.integration.test.ts): every reconcile — on a new generation, a new source
 *   revision, a `reconcile.fluxcd.io/requestedAt`, and every interval — first writes
 *   `Ready=Unknown/Progressing` (with `Reconciling=True`), then `Ready=True/ReconciliationSucceeded`
 *   with `lastAppliedRevision` = the source's revision (`main@sha1:<sha>` for Git; Flux has no
 *   `spec.revision`). With `spec.suspend: true` nothing is reconciled, yet `observedGeneration`
 *   follows `metadata.generation` while Ready stays what it was (True).
 */
export class FluxStandIn {
  readonly #options: FluxStandInOptions;
  readonly #connection: ClusterConnection;
  readonly #informers: ResourceInformer[] = [];
  readonly #pending = new Set<Promise<void>>();
  readonly #logger: Logger;
  readonly #stop = new AbortController();
  /** Kustomizations being reconciled (namespace/name), and those to reconcile again after that. */
  readonly #busy = new Set<string>();
  readonly #again = new Set<string>();
  /** When each Kustomization (uid) last finished a reconcile, for the interval. */
  readonly #lastRun = new Map<string, number>();

  constructor(options: FluxStandInOptions) {
    const interval = options.kustomizationIntervalMs;
    if (interval !== undefined && !(Number.isFinite(interval) && interval > 0)) throw new TypeError(`FluxStandIn option kustomizationIntervalMs must be a positive number of milliseconds, got ${interval}`);
    this.#options = options;
    this.#logger = options.logger ?? noopLogger;
    const kubeConfig = kubeConfigFrom(options.kubeconfig);
    this.#connection = new ClusterConnection({ name: options.name, kubeConfig });
  }

  /** Starts watching; resolves once every kind's cache is synced. */
  async start(): Promise<void> {
    for (const gvk of this.#options.kinds ?? [HELM_RELEASE, KUSTOMIZATION]) {
      const info = await this.#connection.resolve(gvk);
      const kustomization = gvk.kind === KUSTOMIZATION.kind;
      const informer = new ResourceInformer({
        client: this.#connection.resourceClient(info),
        ...(kustomization ? { resyncIntervalMs: SOURCE_POLL_MS } : {}),
      });
      const consider = (obj: KubeObject): void => {
        this.#track(kustomization ? this.#considerKustomization(info, informer, obj) : this.#reconcileRelease(info, obj));
      };
      informer.addHandler({ add: consider, update: (_old, obj) => { consider(obj); }, ...(kustomization ? { resync: consider } : {}) });
      informer.start(this.#stop.signal);
      this.#informers.push(informer);
    }
    await Promise.all(this.#informers.map((i) => i.waitForSync(this.#stop.signal)));
  }

  async stop(): Promise<void> {
    this.#stop.abort();
    await Promise.all(this.#informers.map((i) => i.stop()));
    await Promise.allSettled([...this.#pending]);
    await this.#connection.close();
  }

  #track(work: Promise<void>): void {
    this.#pending.add(work);
    void work.catch((err: unknown) => {
      if (!this.#stop.signal.aborted) this.#logger.warn('flux stand-in: reconcile failed', { error: toError(err).message });
    }).finally(() => { this.#pending.delete(work); });
  }

  #intervalMs(obj: KubeObject): number {
    return this.#options.kustomizationIntervalMs ?? goDurationMs((obj.spec as { interval?: unknown } | undefined)?.interval) ?? 600_000;
  }

  async #patchStatus(info: ResourceInfo, obj: KubeObject, status: object): Promise<KubeObject | undefined> {
    const meta = obj.metadata ?? {};
    const path = `${resourcePath(info, { namespace: meta.namespace, name: meta.name ?? '' })}/status`;
    try {
      return await this.#connection.request({
        method: 'PATCH',
        path,
        contentType: 'application/merge-patch+json',
        body: { metadata: { resourceVersion: meta.resourceVersion }, status },
        gvk: info.gvk,
        signal: this.#stop.signal,
      }) as KubeObject;
    } catch (err) {
      // A newer version of the object is on its way to the informer: it will be considered then.
      if (err instanceof KubeApiError && (err.statusCode === 409 || err.statusCode === 404)) return undefined;
      throw err;
    }
  }

  async #reconcileRelease(info: ResourceInfo, obj: KubeObject): Promise<void> {
    const gvk = info.gvk;
    const revision = wantedChartVersion(obj);
    const meta = obj.metadata;
    if (revision === undefined || meta?.name === undefined) return;
    const status = (obj.status ?? {}) as { observedGeneration?: number; history?: { chartVersion?: string }[] };
    if (status.history?.[0]?.chartVersion === revision && status.observedGeneration === meta.generation) return;
    if ((this.#options.applyDelayMs ?? 0) > 0) await new Promise((resolve) => setTimeout(resolve, this.#options.applyDelayMs));
    if (this.#stop.signal.aborted) return;

    const now = new Date().toISOString();
    const patched = await this.#patchStatus(info, obj, {
      ...status,
      observedGeneration: meta.generation,
      conditions: [{ type: 'Ready', status: 'True', reason: 'ReconciliationSucceeded', message: `Applied revision ${revision}`, lastTransitionTime: now, observedGeneration: meta.generation }],
      history: [{ chartVersion: revision, status: 'deployed' }, ...(status.history ?? []).filter((h) => h.chartVersion !== revision)].slice(0, 5),
    });
    if (patched !== undefined) this.#options.onReconciled?.({ cluster: this.#options.name, kind: gvk.kind, namespace: meta.namespace ?? '', name: meta.name, revision });
  }

  /** One reconcile of a Kustomization at a time; an event meanwhile runs it once more after. */
  async #considerKustomization(info: ResourceInfo, informer: ResourceInformer, obj: KubeObject): Promise<void> {
    const key = `${obj.metadata?.namespace ?? ''}/${obj.metadata?.name ?? ''}`;
    if (this.#busy.has(key)) {
      this.#again.add(key);
      return;
    }
    this.#busy.add(key);
    try {
      let current: KubeObject | undefined = obj;
      while (current !== undefined && !this.#stop.signal.aborted) {
        this.#again.delete(key);
        await this.#reconcileKustomization(info, current);
        current = this.#again.has(key) ? informer.store.get(key) : undefined;
      }
    } finally {
      this.#busy.delete(key);
      this.#again.delete(key);
    }
  }

  async #sourceRevision(obj: KubeObject): Promise<string | undefined> {
    if (this.#options.sourceRevision !== undefined) return this.#options.sourceRevision(obj);
    const ref = (obj.spec as KustomizationSpec | undefined)?.sourceRef;
    const gvk = typeof ref?.kind === 'string' ? SOURCE_KINDS[ref.kind] : undefined;
    if (gvk === undefined || typeof ref?.name !== 'string') return undefined;
    const namespace = typeof ref.namespace === 'string' ? ref.namespace : obj.metadata?.namespace;
    try {
      const info = await this.#connection.resolve(gvk, this.#stop.signal);
      const source = await this.#connection.request({ method: 'GET', path: resourcePath(info, { namespace, name: ref.name }), gvk, signal: this.#stop.signal }) as KubeObject;
      const revision = (source.status as { artifact?: { revision?: unknown } } | undefined)?.artifact?.revision;
      return typeof revision === 'string' ? revision : undefined;
    } catch (err) {
      if (err instanceof KubeApiError && err.statusCode === 404) return undefined;
      throw err;
    }
  }

  async #reconcileKustomization(info: ResourceInfo, obj: KubeObject): Promise<void> {
    const meta = obj.metadata;
    if (meta?.name === undefined || meta.uid === undefined || meta.deletionTimestamp !== undefined) return;
    const status = (obj.status ?? {}) as KustomizationStatus;
    const spec = (obj.spec ?? {}) as KustomizationSpec;
    const requestedAt = meta.annotations?.[RECONCILE_REQUESTED_AT];
    const handled = requestedAt === undefined ? {} : { lastHandledReconcileAt: requestedAt };
    const ready = status.conditions?.find((c) => c.type === 'Ready');

    if (spec.suspend === true) {
      // kustomize-controller returns before the apply, and its deferred status patch still moves
      // observedGeneration when Ready is True: a suspended object looks reconciled.
      const observed = ready?.status === 'True' ? { observedGeneration: meta.generation } : {};
      if ((ready?.status !== 'True' || status.observedGeneration === meta.generation) && status.lastHandledReconcileAt === requestedAt) return;
      await this.#patchStatus(info, obj, { ...status, ...observed, ...handled });
      return;
    }

    const revision = await this.#sourceRevision(obj);
    if (this.#stop.signal.aborted) return;
    const now = (): string => new Date().toISOString();
    if (revision === undefined) {
      if (ready?.reason === 'ArtifactFailed') return;
      await this.#patchStatus(info, obj, {
        ...status,
        ...handled,
        conditions: [{ type: 'Ready', status: 'False', reason: 'ArtifactFailed', message: 'Source artifact not found', lastTransitionTime: now() }],
      });
      return;
    }
    const due = status.observedGeneration !== meta.generation
      || status.lastAppliedRevision !== revision
      || status.lastHandledReconcileAt !== requestedAt
      || ready?.status !== 'True'
      || Date.now() - (this.#lastRun.get(meta.uid) ?? 0) >= this.#intervalMs(obj);
    if (!due) return;

    // Every reconcile starts so, the periodic no-op one included.
    const progressing = await this.#patchStatus(info, obj, {
      ...status,
      conditions: [
        { type: 'Ready', status: 'Unknown', reason: 'Progressing', message: 'Reconciliation in progress', lastTransitionTime: now(), observedGeneration: meta.generation },
        { type: 'Reconciling', status: 'True', reason: 'Progressing', message: `Fetching manifests for revision ${revision}`, lastTransitionTime: now(), observedGeneration: meta.generation },
      ],
    });
    if (progressing === undefined) return;
    const stopped = await delay(Math.max(this.#options.applyDelayMs ?? 0, 1), false, { signal: this.#stop.signal }).catch(() => true);
    if (stopped) return;
    // A merge patch replaces the conditions list whole: Reconciling goes, as finalizeStatus drops it.
    const applied = await this.#patchStatus(info, progressing, {
      ...status,
      ...handled,
      observedGeneration: meta.generation,
      lastAppliedRevision: revision,
      lastAttemptedRevision: revision,
      conditions: [{ type: 'Ready', status: 'True', reason: 'ReconciliationSucceeded', message: `Applied revision: ${revision}`, lastTransitionTime: now(), observedGeneration: meta.generation }],
    });
    if (applied === undefined) return;
    this.#lastRun.set(meta.uid, Date.now());
    this.#options.onReconciled?.({ cluster: this.#options.name, kind: KUSTOMIZATION.kind, namespace: meta.namespace ?? '', name: meta.name, revision });
  }
}
