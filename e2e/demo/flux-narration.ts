/**
 * What real Flux does in one cluster of `make demo DEMO_FLAGS=--git`, told from the child
 * Kustomization `apps/podinfo` as the apiserver shows it: the parent Kustomization applied a new
 * version from Git (spec changed), fleetcache asked Flux to reconcile now (the
 * `reconcile.fluxcd.io/requestedAt` annotation), kustomize-controller applied a commit — which
 * changes what runs there, or not (every commit to the branch is applied in every environment).
 * Pure: the demo polls, this says what changed between two views.
 */

/** The parts of a Kustomization the narration reads. */
export interface KustomizationView {
  /** spec.postBuild.substitute.version: what Git asks this environment to run. */
  readonly version?: string | undefined;
  /** metadata.annotations[reconcile.fluxcd.io/requestedAt]. */
  readonly requestedAt?: string | undefined;
  /** status.lastAppliedRevision: the commit applied, `main@sha1:<sha>`. */
  readonly appliedRevision?: string | undefined;
  /** What runs: the applied ConfigMap `apps/podinfo`'s data.version. */
  readonly runs?: string | undefined;
}

const REQUESTED_AT = 'reconcile.fluxcd.io/requestedAt';

function text(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

function record(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null ? value as Record<string, unknown> : {};
}

/**
 * The view of a Kustomization object as the apiserver returns it (any shape: fields absent are
 * undefined), with the version that runs (read after it, so at least as new as its status).
 */
export function kustomizationView(object: unknown, runs: string | undefined): KustomizationView {
  const obj = record(object);
  const metadata = record(obj.metadata);
  const spec = record(obj.spec);
  const status = record(obj.status);
  return {
    version: text(record(record(spec.postBuild).substitute).version),
    requestedAt: text(record(metadata.annotations)[REQUESTED_AT]),
    appliedRevision: text(status.lastAppliedRevision),
    runs,
  };
}

/** `main@sha1:0123456789abcdef…` → `main@sha1:0123456`: short, as git log prints it. */
export function shortRevision(revision: string): string {
  const at = /^(.*@sha1:)([0-9a-f]{7})[0-9a-f]*$/.exec(revision);
  return at === null ? revision : `${at[1] ?? ''}${at[2] ?? ''}`;
}

/**
 * What happened between `before` (undefined: not seen yet) and `after`, as lines of narration. The
 * Ready=Unknown that starts every reconcile, even a no-op one, says nothing: only an apply is told
 * (a new status.lastAppliedRevision, which moves only when an apply succeeded, or a new version run).
 */
export function fluxChanges(before: KustomizationView | undefined, after: KustomizationView): string[] {
  const lines: string[] = [];
  if (before !== undefined && after.version !== undefined && after.version !== before.version) {
    lines.push(`flux: the parent Kustomization applied the new commit's folder: Kustomization apps/podinfo now asks for ${after.version}`);
  }
  if (after.requestedAt !== undefined && after.requestedAt !== before?.requestedAt && before !== undefined) {
    lines.push('fleetcache asked Flux to reconcile Kustomization apps/podinfo now (reconcile.fluxcd.io/requestedAt)');
  }
  // A new commit is applied first with the child's old spec (the GitRepository moved, the parent has
  // not applied the new folder yet), then again at the same commit once the parent has: told as what
  // runs changing, whichever commit it came with.
  if (after.appliedRevision === undefined) return lines;
  const applied = `flux: kustomize-controller applied ${shortRevision(after.appliedRevision)}`;
  if (after.runs !== undefined && after.runs !== before?.runs) {
    lines.push(`${applied}: ConfigMap apps/podinfo ${before?.runs === undefined ? 'at' : 'now at'} ${after.runs}`);
  } else if (after.appliedRevision !== before?.appliedRevision) {
    lines.push(`${applied}: nothing changes here, ConfigMap apps/podinfo still at ${after.runs ?? '?'}`);
  }
  return lines;
}
