import { lstat, readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { load, loadAll } from 'js-yaml';
import { GitOpsError } from './errors.ts';
import { splitComment, splitValue } from './scan.ts';

// The marker convention of weaveworks pipeline-controller (its RFC "Markers in YAML Comments for
// Application Promotion"): a YAML line whose value the promotion sets carries a line comment that
// is a JSON object with the key "$promotion" and the value "<namespace>:<pipeline>:<environment>":
//
//     version: 6.2.0 # {"$promotion": "delivery:podinfo:prod"}
//
// Editing is done on the line, not by re-serialising the document, so comments, ordering and
// formatting of everything else survive byte for byte.

/** What a revision may look like: chart versions, image tags, Git SHAs, `main@sha1:…`. */
export const REVISION_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._+:@/-]{0,254}$/;

/** The value of `$promotion` for one pipeline environment. */
export function markerFor(namespace: string, pipeline: string, environment: string): string {
  return `${namespace}:${pipeline}:${environment}`;
}

/** `<namespace>:<name>` of an ImagePolicy, both Kubernetes names (namespace a DNS label, name a DNS subdomain). */
export const IMAGE_POLICY_PATTERN = /^[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?:[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?$/;

/**
 * The ImagePolicy whose Flux setters an environment of a Pipeline owns: `<namespace>:<pipeline>-<environment>`,
 * in the Pipeline's namespace (so a tenant's markers name its own namespace); undefined when that
 * is not a valid ImagePolicy reference (then only `$promotion` markers are the environment's).
 */
export function imagePolicyFor(namespace: string, pipeline: string, environment: string): string | undefined {
  const reference = `${namespace}:${pipeline}-${environment}`;
  return IMAGE_POLICY_PATTERN.test(reference) ? reference : undefined;
}

/**
 * Bounds of the scan of a working tree. The scan is linear ({@link splitComment}): its work on a
 * file is proportional to the file's size, at most `maxFileBytes`, and on a promotion to
 * `maxScanBytes`.
 */
export interface ScanLimits {
  /** Files looked at (YAML or not) before giving up (`RepositoryTooLarge`). Default 20 000. */
  readonly maxFiles?: number;
  /** YAML files larger than this are skipped, never read. Default 1 MiB. */
  readonly maxFileBytes?: number;
  /** YAML bytes read in one promotion, all its attempts together, before giving up (`ScanLimitExceeded`). Default 32 MiB. */
  readonly maxScanBytes?: number;
}

/** Default of {@link ScanLimits.maxScanBytes}. */
export const DEFAULT_MAX_SCAN_BYTES = 32 * 1_048_576;

/** How {@link updateMarkers} runs within one promotion. */
export interface ScanContext extends ScanLimits {
  /** YAML bytes read so far by this promotion; shared by its attempts so that `maxScanBytes` bounds them all. */
  readonly budget?: { bytesRead: number };
  /** Stops the scan between files (the promotion's deadline). */
  readonly signal?: AbortSignal | undefined;
  /**
   * On a later attempt: what the marked lines of each file held when the promotion began
   * ({@link MarkerUpdate.held} of its first attempt); a line changed since by someone else is a
   * `MarkerConflict` (see {@link setMarkedValues}).
   */
  readonly began?: ReadonlyMap<string, readonly string[]> | undefined;
}


/**
 * Which marked lines belong to one environment: its `$promotion` marker, and the Flux
 * image-automation setters of the ImagePolicy it owns, if any.
 */
export interface MarkerSelector {
  /** The `$promotion` value, `<namespace>:<pipeline>:<environment>` ({@link markerFor}). */
  readonly promotion: string;
  /**
   * `<namespace>:<name>` of an ImagePolicy: lines marked `# {"$imagepolicy": "<it>"}` (the whole
   * image reference), `"<it>:tag"`, `"<it>:name"` and `"<it>:digest"` are set as Flux's
   * image-automation-controller sets them, to the revision as the image's tag (`tag@digest` for a
   * digest too). See {@link setterValue}.
   */
  readonly imagePolicy?: string | undefined;
}

/** What a marked line holds: the revision (`$promotion`), or a part of an image reference (Flux's setters). */
export type Setter = 'promotion' | 'image' | 'tag' | 'name' | 'digest';

/** Result of {@link setMarkedValues} on one text. */
export interface MarkedText {
  readonly text: string;
  /** Lines carrying this environment's marker. */
  readonly found: number;
  /** Of those, lines whose value changed. */
  readonly changed: number;
  /** The value each marked line held before the edit, in the order of the lines. */
  readonly held: readonly string[];
}

function decodeScalar(raw: string): string | undefined {
  try {
    const value: unknown = load(raw);
    return typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean' ? String(value) : undefined;
  } catch {
    return undefined;
  }
}

function encodeLike(old: string, revision: string): string {
  if (old.startsWith('"')) return JSON.stringify(revision);
  if (old.startsWith("'")) return `'${revision.replaceAll("'", "''")}'`;
  // Plain stays plain only where YAML reads it back as the same string (not 2 or 1.10 as numbers).
  let back: unknown;
  try {
    back = load(revision);
  } catch {
    back = undefined;
  }
  return back === revision ? revision : JSON.stringify(revision);
}

/** A Docker/OCI tag, and a digest (`sha256:<64 hex>` and the like), as the registries define them. */
const TAG = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;
const DIGEST = /^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[A-Fa-f0-9]{32,}$/;

/** The image name of a reference (`registry:5000/org/app:tag@sha256:…` → `registry:5000/org/app`). Linear. */
function imageName(reference: string): string {
  const at = reference.indexOf('@');
  const bare = at < 0 ? reference : reference.slice(0, at);
  const colon = bare.lastIndexOf(':');
  return colon > bare.lastIndexOf('/') ? bare.slice(0, colon) : bare;
}

/**
 * The value a line marked as `setter` gets when `revision` is promoted, given what it holds:
 * `promotion` the revision; Flux's setters read the revision as `<tag>` or `<tag>@<digest>` and
 * write, like image-automation-controller, the whole reference `<name>:<tag>[@<digest>]` (the
 * name kept from the line), the tag alone, the digest alone, and leave the name as it is (a
 * promotion moves a tag, not a repository). `where` names the line in messages.
 */
export function setterValue(setter: Setter, current: string, revision: string, where: string): string {
  if (setter === 'promotion') return revision;
  if (setter === 'name') return current;
  const at = revision.indexOf('@');
  const tag = at < 0 ? revision : revision.slice(0, at);
  const digest = at < 0 ? undefined : revision.slice(at + 1);
  if (!TAG.test(tag) || (digest !== undefined && !DIGEST.test(digest))) throw new GitOpsError('MarkerInvalid', `${where}: the revision is not an image tag (or tag@digest) for the $imagepolicy setter`);
  if (setter === 'tag') return tag;
  if (setter === 'digest') {
    if (digest === undefined) throw new GitOpsError('MarkerInvalid', `${where}: a :digest setter needs a revision that carries a digest (tag@sha256:…); a tag alone would leave the old digest pinning the old image`);
    return digest;
  }
  const name = imageName(current);
  if (name === '') throw new GitOpsError('MarkerInvalid', `${where}: the $imagepolicy line holds no image name`);
  return `${name}:${tag}${digest === undefined ? '' : `@${digest}`}`;
}

/** What the line's JSON comment marks for `selector`, if anything. */
function setterOf(parsed: unknown, selector: MarkerSelector): Setter | undefined {
  if (typeof parsed !== 'object' || parsed === null) return undefined;
  const record = parsed as Record<string, unknown>;
  if (record.$promotion === selector.promotion) return 'promotion';
  const policy = selector.imagePolicy;
  const value = record.$imagepolicy;
  if (policy === undefined || typeof value !== 'string' || !value.startsWith(policy)) return undefined;
  switch (value.slice(policy.length)) {
    case '': return 'image';
    case ':tag': return 'tag';
    case ':name': return 'name';
    case ':digest': return 'digest';
    default: return undefined;
  }
}

/**
 * Sets the value of every line of `text` marked for `marker` (a `$promotion` value, or a
 * {@link MarkerSelector} with Flux's setters too) from `revision`. Throws a {@link GitOpsError}
 * (`MarkerInvalid`) for a marked line without a single-line scalar value. `where` names the file in
 * messages.
 *
 * `began`, on a later attempt of a promotion: what each marked line held when the promotion began
 * ({@link MarkedText.held} of its first attempt). A line that since changed to something other than
 * that or the value the promotion writes was changed by someone else (a value pinned by hand):
 * it is not overwritten, the promotion fails with `MarkerConflict` naming file and line (the values
 * are not quoted). A marked line beyond those recorded is new and set.
 */
export function setMarkedValues(text: string, marker: string | MarkerSelector, revision: string, where: string, began?: readonly string[]): MarkedText {
  if (!REVISION_PATTERN.test(revision)) throw new GitOpsError('InvalidInput', 'the revision is not a plain version, tag or commit name');
  const selector: MarkerSelector = typeof marker === 'string' ? { promotion: marker } : marker;
  const image = selector.imagePolicy !== undefined;
  const words = (line: string): boolean => line.includes('$promotion') || (image && line.includes('$imagepolicy'));
  if (!words(text)) return { text, found: 0, changed: 0, held: [] };
  const lines = text.split('\n');
  let found = 0;
  let changed = 0;
  const held: string[] = [];
  for (const [i, line] of lines.entries()) {
    if (!words(line)) continue;
    const comment = splitComment(line.endsWith('\r') ? line.slice(0, -1) : line);
    if (comment === undefined) continue;
    let parsed: unknown;
    try {
      parsed = JSON.parse(comment.json);
    } catch {
      continue; // some other comment
    }
    const setter = setterOf(parsed, selector);
    if (setter === undefined) continue;
    found += 1;
    const { head, value } = splitValue(comment.before);
    const current = value === undefined || /^[|>{[&*!%@`]/.test(value) ? undefined : decodeScalar(value);
    if (value === undefined || current === undefined) {
      throw new GitOpsError('MarkerInvalid', `${where} line ${i + 1}: the marked line has no single-line scalar value to set`);
    }
    const next = setterValue(setter, current, revision, `${where} line ${i + 1}`);
    const before = began?.[held.length];
    held.push(current);
    if (current === next) continue;
    if (before !== undefined && current !== before) {
      throw new GitOpsError('MarkerConflict', `${where}:${i + 1}: the line marked for ${selector.promotion} was changed by someone else while the promotion ran (it holds neither what it held when the promotion began nor the revision); it is not overwritten`);
    }
    const cr = line.endsWith('\r') ? '\r' : '';
    lines[i] = `${head}${encodeLike(value, next)}${comment.gap}${comment.comment}${cr}`;
    changed += 1;
  }
  return { text: lines.join('\n'), found, changed, held };
}

/** Keeps a subdirectory of the repository inside it: relative, no `..`, no option-like segment. */
export function checkRepositoryPath(value: string): string {
  const trimmed = value.replace(/^\.\/+/, '').replace(/\/+$/, '');
  // eslint-disable-next-line no-control-regex
  if (value.length > 1_024 || value.startsWith('/') || /[\u0000-\u001f\\]/.test(value) || trimmed.split('/').some((s) => s === '..' || s.startsWith('-'))) {
    throw new GitOpsError('InvalidInput', 'the path must be a relative path inside the repository without ".." segments');
  }
  return trimmed === '' ? '.' : trimmed;
}

/**
 * `subdir` of the work tree `root`, every segment looked at with lstat: a symbolic link (which
 * could lead out of the clone), or anything else that is not a directory, is refused, so that
 * nothing outside the work tree is ever read or written (Flux's securejoin, Argo CD's
 * out-of-bounds symlink check).
 */
export async function resolveInside(root: string, subdir: string): Promise<string> {
  const relative = checkRepositoryPath(subdir);
  let current = root;
  for (const segment of relative === '.' ? [] : relative.split('/')) {
    if (segment === '' || segment === '.') continue;
    current = path.join(current, segment);
    const stat = await lstat(current).catch(() => undefined);
    if (stat?.isSymbolicLink() === true) throw new GitOpsError('PathRefused', `the path ${JSON.stringify(subdir)} goes through a symbolic link in the repository (${JSON.stringify(path.relative(root, current))}); links are never followed`);
    if (stat?.isDirectory() !== true) throw new GitOpsError('MarkerNotFound', `the path ${JSON.stringify(subdir)} is not a directory of the repository`);
  }
  return current;
}

/** What {@link updateMarkers} did in a working tree. */
export interface MarkerUpdate {
  /** Marked lines found (every file). */
  readonly found: number;
  /** Files rewritten, relative to the working tree. */
  readonly changedFiles: readonly string[];
  /** Per file with marked lines (relative to the working tree): what each held before the edit. */
  readonly held: ReadonlyMap<string, readonly string[]>;
}

/**
 * Walks `subdir` of the working tree `root` (symlinks and `.git` skipped, never followed), sets
 * the revision on every line marked for `marker` in `.yaml`/`.yml` files, checks each rewritten
 * file still parses as YAML, and writes it back. Throws `MarkerNotFound` when no line is marked.
 */
export async function updateMarkers(root: string, subdir: string, marker: string | MarkerSelector, revision: string, context: ScanContext = {}): Promise<MarkerUpdate> {
  const maxFiles = context.maxFiles ?? 20_000;
  const maxFileBytes = context.maxFileBytes ?? 1_048_576;
  const maxScanBytes = context.maxScanBytes ?? DEFAULT_MAX_SCAN_BYTES;
  const budget = context.budget ?? { bytesRead: 0 };
  const start = await resolveInside(root, subdir);
  let files = 0;
  let found = 0;
  const changedFiles: string[] = [];
  const held = new Map<string, readonly string[]>();
  const stack = [start];
  while (stack.length > 0) {
    const dir = stack.pop() ?? start;
    const top = await lstat(dir).catch(() => undefined);
    if (top?.isDirectory() !== true) {
      if (dir === start) throw new GitOpsError('MarkerNotFound', `the path ${JSON.stringify(subdir)} is not a directory of the repository`);
      continue;
    }
    for (const name of (await readdir(dir)).sort()) {
      if (name === '.git') continue;
      if (++files > maxFiles) throw new GitOpsError('RepositoryTooLarge', `more than ${maxFiles} files under the path (maxFiles)`);
      const full = path.join(dir, name);
      const stat = await lstat(full);
      if (stat.isDirectory()) {
        stack.push(full);
        continue;
      }
      if (!stat.isFile() || !/\.ya?ml$/i.test(name) || stat.size > maxFileBytes) continue;
      context.signal?.throwIfAborted();
      budget.bytesRead += stat.size;
      if (budget.bytesRead > maxScanBytes) throw new GitOpsError('ScanLimitExceeded', `more than ${maxScanBytes} bytes of YAML to scan in one promotion (maxScanBytes)`);
      const relative = path.relative(root, full);
      const text = await readFile(full, 'utf8');
      const result = setMarkedValues(text, marker, revision, relative, context.began?.get(relative));
      found += result.found;
      if (result.found > 0) held.set(relative, result.held);
      if (result.changed === 0) continue;
      let parsedBefore = true;
      try {
        loadAll(text);
      } catch {
        parsedBefore = false;
      }
      if (parsedBefore) {
        try {
          loadAll(result.text);
        } catch (err) {
          throw new GitOpsError('MarkerInvalid', `${relative}: setting the revision would leave invalid YAML`, { cause: err });
        }
      }
      await writeFile(full, result.text);
      changedFiles.push(relative);
    }
  }
  if (found === 0) {
    const selector = typeof marker === 'string' ? { promotion: marker, imagePolicy: undefined } : marker;
    const image = selector.imagePolicy === undefined ? '' : ` nor # {"$imagepolicy": "${selector.imagePolicy}[:tag|:name|:digest]"}`;
    throw new GitOpsError('MarkerNotFound', `no YAML line under ${JSON.stringify(subdir)} is marked # {"$promotion": "${selector.promotion}"}${image}`);
  }
  return { found, changedFiles, held };
}
