import { clusterKey, type ClusterRef } from '../cluster/index.ts';
import { labelMatcher, type OwnerRef, type Registry, type TargetRef } from '../registry/index.ts';
import { KubeApiError, toError, type GroupVersionKind } from '../util/index.ts';
import type { ResolvedEnvironment, ResolvedTarget, ResolvedWave, ValidPipelineSpec } from './validate.ts';

// Who is in a fleet environment now: the kubeconfig Secrets (or Cluster API Clusters) in the
// Pipeline's namespace its selector matches, read through the registry's cache as the Pipeline's
// identity (so a label change wakes the Pipeline, nothing is polled), plus those it lists; and
// which wave each member is in.

const SECRET_GVK: GroupVersionKind = Object.freeze({ group: '', version: 'v1', kind: 'Secret' });
const CAPI_CLUSTER_GVK: GroupVersionKind = Object.freeze({ group: 'cluster.x-k8s.io', version: 'v1beta1', kind: 'Cluster' });

/** One member of a fleet: its target and the labels of the object that made it one (none when listed by name). */
export interface FleetMember {
  readonly target: ResolvedTarget;
  readonly labels: Readonly<Record<string, string>>;
}

/**
 * Each member's wave, by cluster key. Members are taken in cluster-key order; each wave takes, of
 * the members no earlier wave took, those its selector matches, or the next `count`, or the next
 * `percent` of the whole fleet (rounded up); the last wave also takes every member left.
 */
export function assignWaves(members: readonly FleetMember[], waves: readonly ResolvedWave[]): Map<string, string> {
  const waveOf = new Map<string, string>();
  let left = [...members].sort((a, b) => (a.target.clusterKey < b.target.clusterKey ? -1 : a.target.clusterKey > b.target.clusterKey ? 1 : 0));
  for (const [i, wave] of waves.entries()) {
    let taken: FleetMember[];
    if (i === waves.length - 1) taken = left;
    else if (wave.by.kind === 'selector') {
      const matches = labelMatcher(wave.by.labelSelector, `wave ${wave.name} selector`);
      taken = left.filter((m) => matches({ metadata: { labels: { ...m.labels } } }));
    } else {
      const n = wave.by.kind === 'count' ? wave.by.count : Math.ceil((wave.by.percent * members.length) / 100);
      taken = left.slice(0, n);
    }
    for (const m of taken) waveOf.set(m.target.clusterKey, wave.name);
    const took = new Set(taken);
    left = left.filter((m) => !took.has(m));
  }
  return waveOf;
}

/** What is known of a fleet environment's membership. */
export type Membership =
  | { readonly state: 'known' }
  /** The selector's cache has not completed its first LIST. */
  | { readonly state: 'loading' }
  /** The Secret (or Cluster) list cannot be read: the cluster's error. */
  | { readonly state: 'unreadable'; readonly error: string };

/** A spec with its fleet environments' members filled in, and what is known of each membership. */
export interface ResolvedMembers {
  readonly spec: ValidPipelineSpec;
  /** Per fleet environment name. */
  readonly membership: ReadonlyMap<string, Membership>;
}

/**
 * The selector's set target on the management cluster: what the owner watches for membership.
 * None under the service's own identity ({@link selectorRefusal}).
 */
function selectorTarget(env: ResolvedEnvironment, owner: OwnerRef, asService: boolean): { readonly cluster: ClusterRef; readonly target: TargetRef } | undefined {
  const selector = env.fleet?.selector;
  if (selector === undefined || selectorRefusal(env, owner, asService) !== undefined) return undefined;
  const gvk = selector.kind === 'Secret' ? SECRET_GVK : CAPI_CLUSTER_GVK;
  // Namespace scope: a tenant's identity may list Secrets in its own namespace only.
  return { cluster: { kind: 'local' }, target: { gvk, namespace: owner.namespace, labelSelector: selector.labelSelector, scope: 'namespace' } };
}

/**
 * Why a fleet's selector is not read, or undefined when it is. A selector lists and watches
 * Secrets (or Clusters) in the Pipeline's namespace; the service's own ClusterRole reads Secrets
 * by name only (`get`), because list/watch on Secrets in every namespace of a shared management
 * cluster would let the service (and every Pipeline acting as it) read every tenant's
 * credentials. So a selector needs the Pipeline to act as a ServiceAccount, whose Role in its own
 * namespace grants the listing; the message says what to grant. Clusters listed by name need
 * `get` only and work under either identity. `asService`: the operator granted the service the
 * listing (`allowFleetSelectorsAsService`, config/fleet-selectors-as-service) and accepts the risk.
 */
export function selectorRefusal(env: ResolvedEnvironment, owner: OwnerRef, asService: boolean): string | undefined {
  const selector = env.fleet?.selector;
  if (selector === undefined || asService || (owner.identity !== undefined && owner.identity.kind !== 'own')) return undefined;
  return `a clusterSelector lists and watches ${selector.kind === 'Secret' ? 'Secrets' : 'Cluster API Clusters'} in namespace ${owner.namespace}, which the service's own identity may not (it reads Secrets by name only): `
    + `set spec.serviceAccountName (or the service's --default-service-account) to a ServiceAccount whose Role in ${owner.namespace} grants ${grantText(selector.kind, owner.namespace)}, or list the clusters by name in fleet.clusters`;
}

/** The verbs a selector's account needs, and where the sample Role is. */
function grantText(kind: 'Secret' | 'Cluster', namespace: string): string {
  const what = kind === 'Secret' ? '"secrets"' : '"clusters" in group cluster.x-k8s.io (and get on "secrets")';
  return `get, list and watch on ${what} in namespace ${namespace} (example: config/samples/fleet-tenant-role.yaml)`;
}

/** A selector read's error; a 403 also says what the account lacks. */
function selectorError(err: Error, kind: 'Secret' | 'Cluster', namespace: string): string {
  return err instanceof KubeApiError && err.statusCode === 403 ? `${err.message}: the Pipeline's account needs ${grantText(kind, namespace)}` : err.message;
}

/**
 * Resolves fleet environments' members each reconcile and remembers the last members per Pipeline
 * key, so that the owner's declared targets ({@link declared}) include them before they are read
 * again (no release and re-add of every member's cache at each reconcile).
 *
 * Invariant: `#last` holds an entry for a Pipeline key only between a {@link resolve} and its
 * {@link forget}; touched only by that Pipeline's reconcile (the queue never runs two at once).
 */
export class FleetMembers {
  readonly #registry: Pick<Registry, 'watchTargetAndGetReader'>;
  /** Selectors are read with the service's own identity too (see {@link selectorRefusal}). */
  readonly #selectorsAsService: boolean;
  /** Pipeline key → the member targets last resolved, as the registry declares them. */
  readonly #last = new Map<string, readonly { readonly cluster: ClusterRef; readonly target: TargetRef }[]>();

  constructor(registry: Pick<Registry, 'watchTargetAndGetReader'>, options: { readonly selectorsAsService?: boolean } = {}) {
    this.#registry = registry;
    this.#selectorsAsService = options.selectorsAsService === true;
  }

  /**
   * What the owner watches for its fleets: each selector's set of Secrets (or Clusters), and the
   * member targets last resolved (`target` builds a target's ref).
   */
  declared(key: string, spec: ValidPipelineSpec, owner: OwnerRef): { readonly cluster: ClusterRef; readonly target: TargetRef }[] {
    const sets = spec.environments.flatMap((env) => selectorTarget(env, owner, this.#selectorsAsService) ?? []);
    return [...sets, ...(this.#last.get(key) ?? [])];
  }

  /** The spec with each fleet environment's members and waves filled in. Cluster failures are memberships, never errors. */
  async resolve(key: string, spec: ValidPipelineSpec, owner: OwnerRef, signal: AbortSignal): Promise<ResolvedMembers> {
    const membership = new Map<string, Membership>();
    const environments = await Promise.all(spec.environments.map(async (env): Promise<ResolvedEnvironment> => {
      const fleet = env.fleet;
      if (fleet === undefined) return env;
      const members = new Map<string, FleetMember>();
      const add = (cluster: ClusterRef, labels: Readonly<Record<string, string>>): void => {
        const target = { cluster, clusterKey: clusterKey(cluster, owner.namespace), namespace: fleet.namespace };
        if (!members.has(target.clusterKey)) members.set(target.clusterKey, { target, labels });
      };
      const refused = selectorRefusal(env, owner, this.#selectorsAsService);
      let state: Membership = refused === undefined ? { state: 'known' } : { state: 'unreadable', error: refused };
      const set = selectorTarget(env, owner, this.#selectorsAsService);
      if (set !== undefined && fleet.selector !== undefined) {
        try {
          const reader = await this.#registry.watchTargetAndGetReader(set.cluster, set.target, owner, signal);
          const error = reader.lastError;
          if (error !== undefined) state = { state: 'unreadable', error: selectorError(error, fleet.selector.kind, owner.namespace) };
          else if (!reader.synced) state = { state: 'loading' };
          else {
            const matches = labelMatcher(fleet.selector.labelSelector, 'fleet clusterSelector');
            for (const obj of reader.list({ namespace: owner.namespace })) {
              const name = obj.metadata?.name;
              if (name === undefined || !matches(obj)) continue;
              add(fleet.selector.kind === 'Secret' ? { kind: 'secret', name, namespace: owner.namespace } : { kind: 'cluster-api', name, namespace: owner.namespace }, obj.metadata?.labels ?? {});
            }
          }
        } catch (err) {
          if (signal.aborted) throw err;
          state = { state: 'unreadable', error: selectorError(toError(err), fleet.selector.kind, owner.namespace) };
        }
      }
      for (const cluster of fleet.clusters) add(cluster, {});
      membership.set(env.name, state);
      const list = [...members.values()].sort((a, b) => (a.target.clusterKey < b.target.clusterKey ? -1 : 1));
      return { ...env, targets: list.map((m) => m.target), ...(fleet.waves.length === 0 ? {} : { waveOf: assignWaves(list, fleet.waves) }) };
    }));
    return { spec: { ...spec, environments }, membership };
  }

  /** Remembers the member targets just declared to the registry (`targets` from the resolved spec). */
  remember(key: string, targets: readonly { readonly cluster: ClusterRef; readonly target: TargetRef }[]): void {
    if (targets.length === 0) this.#last.delete(key);
    else this.#last.set(key, targets);
  }

  /** Drops what is remembered of a Pipeline. */
  forget(key: string): void {
    this.#last.delete(key);
  }
}
