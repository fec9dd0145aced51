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
}


/** Result of {@link setMarkedValues} on one text. */
export interface MarkedText {
  readonly text: string;
  /** Lines carrying this environment's marker. */
  readonly found: number;
  /** Of those, lines whose value changed. */
  readonly changed: number;
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
  if (old.startsWith("'")) return `'${revision}'`;
  // Plain stays plain only where YAML reads it back as the same string (not 2 or 1.10 as numbers).
  let back: unknown;
  try {
    back = load(revision);
  } catch {
    back = undefined;
  }
  return back === revision ? revision : JSON.stringify(revision);
}

/**
 * Sets `revision` as the value of every line of `text` marked with `marker`. Throws a
 * {@link GitOpsError} (`MarkerInvalid`) for a marked line without a single-line scalar value.
 * `where` names the file in messages.
 */
export function setMarkedValues(text: string, marker: string, revision: string, where: string): MarkedText {
  if (!REVISION_PATTERN.test(revision)) throw new GitOpsError('InvalidInput', 'the revision is not a plain version, tag or commit name');
  if (!text.includes('$promotion')) return { text, found: 0, changed: 0 };
  const lines = text.split('\n');
  let found = 0;
  let changed = 0;
  for (const [i, line] of lines.entries()) {
    if (!line.includes('$promotion')) continue;
    const comment = splitComment(line.endsWith('\r') ? line.slice(0, -1) : line);
    if (comment === undefined) continue;
    let parsed: unknown;
    try {
      parsed = JSON.parse(comment.json);
    } catch {
      continue; // some other comment
    }
    if (typeof parsed !== 'object' || parsed === null || (parsed as Record<string, unknown>).$promotion !== marker) continue;
    found += 1;
    const { head, value } = splitValue(comment.before);
    if (value === undefined || /^[|>{[&*!%@`]/.test(value) || decodeScalar(value) === undefined) {
      throw new GitOpsError('MarkerInvalid', `${where} line ${i + 1}: the marked line has no single-line scalar value to set`);
    }
    if (decodeScalar(value) === revision) continue;
    const cr = line.endsWith('\r') ? '\r' : '';
    lines[i] = `${head}${encodeLike(value, revision)}${comment.gap}${comment.comment}${cr}`;
    changed += 1;
  }
  return { text: lines.join('\n'), found, changed };
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
}

/**
 * Walks `subdir` of the working tree `root` (symlinks and `.git` skipped, never followed), sets
 * the revision on every line marked for `marker` in `.yaml`/`.yml` files, checks each rewritten
 * file still parses as YAML, and writes it back. Throws `MarkerNotFound` when no line is marked.
 */
export async function updateMarkers(root: string, subdir: string, marker: string, revision: string, context: ScanContext = {}): Promise<MarkerUpdate> {
  const maxFiles = context.maxFiles ?? 20_000;
  const maxFileBytes = context.maxFileBytes ?? 1_048_576;
  const maxScanBytes = context.maxScanBytes ?? DEFAULT_MAX_SCAN_BYTES;
  const budget = context.budget ?? { bytesRead: 0 };
  const start = await resolveInside(root, subdir);
  let files = 0;
  let found = 0;
  const changedFiles: string[] = [];
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
      const result = setMarkedValues(text, marker, revision, relative);
      found += result.found;
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
  if (found === 0) throw new GitOpsError('MarkerNotFound', `no YAML line under ${JSON.stringify(subdir)} is marked # {"$promotion": "${marker}"}`);
  return { found, changedFiles };
}
