// Which kinds a Pipeline may name as its app (the object watched, and patched, in every target).
// A tenant who may create Pipelines otherwise points the service at any kind its credentials
// reach (a ClusterRoleBinding, a ValidatingWebhookConfiguration), held back only by least
// privilege; the platform team states instead which kinds promotion is for.
import { DNS_SUBDOMAIN_SOURCE, type GroupVersionKind } from '../util/index.ts';

/**
 * The kinds allowed when the platform team says nothing (`--app-kinds`): the objects whose spec
 * carries the revision a GitOps promotion moves, and nothing that grants rights or configures
 * something else.
 *
 * - Flux: `HelmRelease` (chart version), `Kustomization` (source revision, path), and the sources
 *   promoted by moving their ref: `GitRepository` and `OCIRepository` (tag, semver, digest).
 * - Argo CD: `Application` (`spec.source.targetRevision`).
 * - apps/v1 `Deployment`, `StatefulSet`, `DaemonSet` (an image tag in the pod template).
 *
 * Left out on purpose: ConfigMaps (their data configures other software, and a revision path into
 * one copies that data into status), Flux's `HelmChart` and `Bucket` (generated or rarely
 * promoted), RBAC, admission, CRDs and every other cluster-scoped kind. Add them by flag.
 */
export const DEFAULT_APP_KINDS: readonly string[] = [
  'HelmRelease.helm.toolkit.fluxcd.io',
  'Kustomization.kustomize.toolkit.fluxcd.io',
  'GitRepository.source.toolkit.fluxcd.io',
  'OCIRepository.source.toolkit.fluxcd.io',
  'Application.argoproj.io',
  'Deployment.apps',
  'StatefulSet.apps',
  'DaemonSet.apps',
];

/** A kind as written in an allow-list: `Kind.group`, `Kind` for the core group. */
export function kindName(gvk: Pick<GroupVersionKind, 'group' | 'kind'>): string {
  return gvk.group === '' ? gvk.kind : `${gvk.kind}.${gvk.group}`;
}

const KIND = '[A-Za-z][A-Za-z0-9]*';
const patternRe = new RegExp(`^(\\*|(${KIND}|\\*)(\\.${DNS_SUBDOMAIN_SOURCE})?)$`);

interface Pattern {
  /** undefined: any kind. */
  readonly kind: string | undefined;
  /** undefined: any group (only with `*` alone). '' is the core group. */
  readonly group: string | undefined;
}

/**
 * An allow-list of app kinds, from patterns: `Kind.group` (exact, the kind case-sensitive as the
 * API serves it), `*.group` (every kind of a group), `Kind` (a core kind such as `ConfigMap`), or
 * `*` (every kind). Core `Secret`s stay refused whatever the list says (validation refuses them
 * first).
 */
export class AppKinds {
  readonly #patterns: readonly Pattern[];
  /** The patterns as given, for messages and logs. */
  readonly patterns: readonly string[];

  private constructor(patterns: readonly string[]) {
    this.patterns = patterns;
    this.#patterns = patterns.map((p) => {
      if (p === '*') return { kind: undefined, group: undefined };
      const dot = p.indexOf('.');
      const kind = dot < 0 ? p : p.slice(0, dot);
      return { kind: kind === '*' ? undefined : kind, group: dot < 0 ? '' : p.slice(dot + 1) };
    });
  }

  /**
   * The allow-list of `patterns`. Throws a TypeError naming `option` and the first pattern that is
   * malformed; an empty list is refused too (it would refuse every Pipeline: say so with a kind).
   */
  static parse(patterns: readonly string[], option = 'appKinds'): AppKinds {
    if (!Array.isArray(patterns) || patterns.length === 0) throw new TypeError(`${option} must list at least one kind pattern`);
    for (const p of patterns) {
      if (typeof p !== 'string' || p.length > 317 || !patternRe.test(p)) {
        throw new TypeError(`${option}: ${JSON.stringify(p)} is not a kind pattern (Kind.group, *.group, Kind for the core group, or *)`);
      }
    }
    return new AppKinds([...new Set(patterns)]);
  }

  /** {@link DEFAULT_APP_KINDS}. */
  static readonly defaults: AppKinds = AppKinds.parse(DEFAULT_APP_KINDS);

  /** Whether `gvk`'s group and kind match one pattern (the version is not considered). */
  allows(gvk: Pick<GroupVersionKind, 'group' | 'kind'>): boolean {
    return this.#patterns.some((p) => (p.group === undefined || p.group === gvk.group) && (p.kind === undefined || p.kind === gvk.kind));
  }
}
