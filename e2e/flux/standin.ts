import { KubeConfig } from '@kubernetes/client-node';
import { ClusterConnection, resourcePath, type KubeObject, type ResourceInfo } from '../../lib/transport/index.ts';
import { ResourceInformer } from '../../lib/informer/index.ts';
import { KubeApiError, noopLogger, toError, type GroupVersionKind, type Logger } from '../../lib/util/index.ts';

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
  /** Called after an object was marked Ready at a revision. */
  readonly onReconciled?: (event: ReconciledEvent) => void;
  readonly logger?: Logger;
}

function wantedRevision(obj: KubeObject, gvk: GroupVersionKind): string | undefined {
  if (gvk.kind === 'HelmRelease') {
    let value: unknown = obj;
    for (const key of HELM_VERSION) value = (value as Record<string, unknown> | undefined)?.[key];
    return typeof value === 'string' ? value : undefined;
  }
  const spec = obj.spec as { revision?: unknown } | undefined;
  return typeof spec?.revision === 'string' ? spec.revision : undefined;
}

/**
 * A small stand-in for Flux in tests and the demo: whenever a HelmRelease (or Kustomization) asks
 * for a revision it does not report yet, it "applies" it and writes the status Flux would — a
 * `Ready=True` condition, `observedGeneration` equal to `metadata.generation`, and the revision in
 * `status.history[0].chartVersion` (HelmRelease) or `status.lastAppliedRevision` (Kustomization).
 * It watches through fleetcache's own informer.
 */
export class FluxStandIn {
  readonly #options: FluxStandInOptions;
  readonly #connection: ClusterConnection;
  readonly #informers: ResourceInformer[] = [];
  readonly #pending = new Set<Promise<void>>();
  readonly #logger: Logger;
  readonly #stop = new AbortController();

  constructor(options: FluxStandInOptions) {
    this.#options = options;
    this.#logger = options.logger ?? noopLogger;
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromString(options.kubeconfig);
    this.#connection = new ClusterConnection({ name: options.name, kubeConfig });
  }

  /** Starts watching; resolves once every kind's cache is synced. */
  async start(): Promise<void> {
    for (const gvk of this.#options.kinds ?? [HELM_RELEASE, KUSTOMIZATION]) {
      const info = await this.#connection.resolve(gvk);
      const informer = new ResourceInformer({ client: this.#connection.resourceClient(info) });
      const consider = (obj: KubeObject): void => { this.#track(this.#reconcile(info, obj)); };
      informer.addHandler({ add: consider, update: (_old, obj) => { consider(obj); } });
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

  async #reconcile(info: ResourceInfo, obj: KubeObject): Promise<void> {
    const gvk = info.gvk;
    const revision = wantedRevision(obj, gvk);
    const meta = obj.metadata;
    if (revision === undefined || meta?.name === undefined) return;
    const status = (obj.status ?? {}) as { observedGeneration?: number; history?: { chartVersion?: string }[]; lastAppliedRevision?: string };
    const current = gvk.kind === 'HelmRelease' ? status.history?.[0]?.chartVersion : status.lastAppliedRevision;
    if (current === revision && status.observedGeneration === meta.generation) return;
    if ((this.#options.applyDelayMs ?? 0) > 0) await new Promise((resolve) => setTimeout(resolve, this.#options.applyDelayMs));
    if (this.#stop.signal.aborted) return;

    const now = new Date().toISOString();
    const nextStatus = {
      ...status,
      observedGeneration: meta.generation,
      conditions: [{ type: 'Ready', status: 'True', reason: 'ReconciliationSucceeded', message: `Applied revision ${revision}`, lastTransitionTime: now, observedGeneration: meta.generation }],
      ...(gvk.kind === 'HelmRelease'
        ? { history: [{ chartVersion: revision, status: 'deployed' }, ...(status.history ?? []).filter((h) => h.chartVersion !== revision)].slice(0, 5) }
        : { lastAppliedRevision: revision }),
    };
    const path = `${resourcePath(info, { namespace: meta.namespace, name: meta.name })}/status`;
    try {
      await this.#connection.request({
        method: 'PATCH',
        path,
        contentType: 'application/merge-patch+json',
        body: { metadata: { resourceVersion: meta.resourceVersion }, status: nextStatus },
        gvk,
        signal: this.#stop.signal,
      });
    } catch (err) {
      // A newer version of the object is on its way to the informer: it will be considered then.
      if (err instanceof KubeApiError && err.statusCode === 409) return;
      throw err;
    }
    this.#options.onReconciled?.({ cluster: this.#options.name, kind: gvk.kind, namespace: meta.namespace ?? '', name: meta.name, revision });
  }
}
