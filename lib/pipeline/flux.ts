import { resourcePath, type ClusterConnection, type KubeObject } from '../transport/index.ts';
import { KubeApiError, toError, type GroupVersionKind, type Logger } from '../util/index.ts';
import { getAtPointer } from './json-pointer.ts';

// What the promotion service must know about Flux's controllers (kustomize-controller,
// source-controller) to promote through them without looping or lying: revision formats,
// suspension, the reconcile request annotation, and the label on what a Kustomization applies.

/** The API group of Flux Kustomizations. */
export const KUSTOMIZE_GROUP = 'kustomize.toolkit.fluxcd.io';
/** The API group of Flux sources (GitRepository, OCIRepository, Bucket, ...). */
export const SOURCE_GROUP = 'source.toolkit.fluxcd.io';
/** Set on every object a Kustomization applies: its owner Kustomization's name. */
export const KUSTOMIZATION_NAME_LABEL = 'kustomize.toolkit.fluxcd.io/name';
/** Changing this annotation makes a Flux controller reconcile the object now (what `flux reconcile` sets). */
export const RECONCILE_REQUESTED_AT = 'reconcile.fluxcd.io/requestedAt';

/**
 * Flux's artifact revisions (RFC-0005): `[<ref>@]<algorithm>:<hex digest>` — `main@sha1:<40 hex>`,
 * `sha1:<hex>`, `v1.2.0@sha1:...`, `latest@sha256:<64 hex>`, `sha256:<hex>` — and the older
 * `<branch>/<40 hex>`. Not matched: a bare hex string (image tags are often short commit SHAs),
 * and an image reference pinned by digest (`ghcr.io/acme/app:1.2.3@sha256:…`: a Git ref or tag
 * has no `:` before the `@`).
 */
const ARTIFACT_REVISION = /^(?:[^@\s:]+@)?(?:sha1|sha256|sha384|sha512|blake3):[0-9a-fA-F]{7,}$/;
const LEGACY_GIT_REVISION = /^[^@\s]+\/[0-9a-fA-F]{40}$/;

/**
 * True when `revision` is a Git commit or artifact reference. Such a value names what a source
 * fetched, not a version of the application: it is the same for every environment on a branch and
 * changes with every commit (fleetcache's own included), so writing it into a manifest loops.
 */
export function isCommitReference(revision: string): boolean {
  return ARTIFACT_REVISION.test(revision) || LEGACY_GIT_REVISION.test(revision);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** `spec.suspend: true` (Flux's Kustomization and HelmRelease, and any kind that copies it). */
export function isSuspended(obj: KubeObject): boolean {
  const spec = (obj as { readonly spec?: unknown }).spec;
  return isRecord(spec) && spec.suspend === true;
}

/** A Flux Kustomization's kind. */
export function isKustomization(gvk: GroupVersionKind): boolean {
  return gvk.group === KUSTOMIZE_GROUP && gvk.kind === 'Kustomization';
}

/**
 * Problems of a spec that would loop under Flux, by field path: a Kustomization's default revision
 * (`status.lastAppliedRevision`) is the Git commit, so with the git or patch strategy it would be
 * written into the next environment's manifest, and every such commit changes it again.
 */
export function fluxSpecProblems(spec: { readonly gvk: GroupVersionKind; readonly strategy: string; readonly revisionPath: string | undefined }): string[] {
  if (!isKustomization(spec.gvk) || spec.revisionPath !== undefined || (spec.strategy !== 'git' && spec.strategy !== 'patch')) return [];
  return [
    `spec.revisionPath: required for a Flux Kustomization with the ${spec.strategy} strategy: its default revision, status.lastAppliedRevision, is the Git commit ` +
      '(main@sha1:…), the same in every environment and changed by every commit, fleetcache\'s own included; point revisionPath at the value the promotion sets, ' +
      'e.g. /spec/postBuild/substitute/version',
  ];
}

/** The subset of a cluster connection {@link requestReconcile} uses. */
export type AnnotateConnection = Pick<ClusterConnection, 'name' | 'resolve' | 'request'>;

/** The GitRepository a Kustomization reads from, when `spec.sourceRef` names one. */
export function gitSourceOf(kustomization: KubeObject): { readonly gvk: GroupVersionKind; readonly namespace: string | undefined; readonly name: string } | undefined {
  const spec = (kustomization as { readonly spec?: unknown }).spec;
  const ref = isRecord(spec) ? spec.sourceRef : undefined;
  if (!isRecord(ref) || ref.kind !== 'GitRepository' || typeof ref.name !== 'string' || ref.name === '') return undefined;
  const apiVersion = typeof ref.apiVersion === 'string' && ref.apiVersion.startsWith(`${SOURCE_GROUP}/`) ? ref.apiVersion : `${SOURCE_GROUP}/v1`;
  return {
    gvk: { group: SOURCE_GROUP, version: apiVersion.slice(SOURCE_GROUP.length + 1), kind: 'GitRepository' },
    namespace: typeof ref.namespace === 'string' && ref.namespace !== '' ? ref.namespace : undefined,
    name: ref.name,
  };
}

/**
 * Asks a Flux controller to reconcile one object now: a merge patch of
 * `metadata.annotations[reconcile.fluxcd.io/requestedAt]`. Best effort by design: forbidden (the
 * identity may not patch it) is logged at debug, anything else at warn; never thrown, so a
 * promotion never fails for it.
 *
 * @returns true when the annotation was set.
 */
export async function requestReconcile(
  connection: AnnotateConnection,
  object: { readonly gvk: GroupVersionKind; readonly namespace: string; readonly name: string },
  requestedAt: string,
  log: Logger,
): Promise<boolean> {
  const where = { cluster: connection.name, kind: object.gvk.kind, namespace: object.namespace, name: object.name };
  try {
    const info = await connection.resolve(object.gvk);
    await connection.request({
      method: 'PATCH',
      path: resourcePath(info, { namespace: object.namespace, name: object.name }),
      gvk: object.gvk,
      body: { metadata: { annotations: { [RECONCILE_REQUESTED_AT]: requestedAt } } },
      contentType: 'application/merge-patch+json',
    });
    log.debug('asked Flux to reconcile now', where);
    return true;
  } catch (err) {
    if (err instanceof KubeApiError && err.statusCode === 403) log.debug('may not ask Flux to reconcile now (forbidden); it will on its interval', where);
    else log.warn('could not ask Flux to reconcile now; it will on its interval', { ...where, error: toError(err).message });
    return false;
  }
}

/**
 * True when a patched object has been put back by the Flux Kustomization that manages it: it
 * carries {@link KUSTOMIZATION_NAME_LABEL}, its value at `path` is no longer `revision`, and its
 * generation is past the one the patch left (`patchedGeneration`; unknown after a restart, when
 * the cache is newer than the patch anyway) — so a cache that has not yet seen the patch is not
 * mistaken for a revert.
 */
export function isRevertedByFlux(obj: KubeObject, path: string, revision: string, patchedGeneration: number | undefined): boolean {
  const labels = obj.metadata?.labels;
  if (!isRecord(labels) || typeof labels[KUSTOMIZATION_NAME_LABEL] !== 'string') return false;
  const value = getAtPointer(obj, path);
  if (value === revision || (typeof value === 'number' && String(value) === revision)) return false;
  const generation = obj.metadata?.generation;
  return patchedGeneration === undefined || (typeof generation === 'number' && generation > patchedGeneration);
}
