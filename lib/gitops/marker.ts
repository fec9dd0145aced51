import { lstat, readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { load, loadAll } from 'js-yaml';
import { GitOpsError } from './errors.ts';

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

/** Bounds of the scan of a working tree. */
export interface ScanLimits {
  /** Files looked at (YAML or not) before giving up. Default 20 000. */
  readonly maxFiles?: number;
  /** YAML files larger than this are skipped. Default 1 MiB. */
  readonly maxFileBytes?: number;
}

const COMMENT = /^(?<before>.*?)(?<gap>\s+)(?<comment>#\s*(?<json>\{.*\}))\s*$/;
const BEFORE = /^(?<head>\s*(?:-\s+)?(?:(?:"(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^\s"'#{}[\],][^#]*?)\s*:\s+)?)(?<value>\S.*?)?\s*$/;

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
    const comment = COMMENT.exec(line.endsWith('\r') ? line.slice(0, -1) : line);
    if (comment?.groups === undefined) continue;
    let parsed: unknown;
    try {
      parsed = JSON.parse(comment.groups.json ?? '');
    } catch {
      continue; // some other comment
    }
    if (typeof parsed !== 'object' || parsed === null || (parsed as Record<string, unknown>).$promotion !== marker) continue;
    found += 1;
    const before = BEFORE.exec(comment.groups.before ?? '');
    const value = before?.groups?.value;
    if (before?.groups === undefined || value === undefined || /^[|>{[&*!%@`]/.test(value) || decodeScalar(value) === undefined) {
      throw new GitOpsError('MarkerInvalid', `${where} line ${i + 1}: the marked line has no single-line scalar value to set`);
    }
    if (decodeScalar(value) === revision) continue;
    const cr = line.endsWith('\r') ? '\r' : '';
    lines[i] = `${before.groups.head ?? ''}${encodeLike(value, revision)}${comment.groups.gap ?? ' '}${comment.groups.comment ?? ''}${cr}`;
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
export async function updateMarkers(root: string, subdir: string, marker: string, revision: string, limits: ScanLimits = {}): Promise<MarkerUpdate> {
  const maxFiles = limits.maxFiles ?? 20_000;
  const maxFileBytes = limits.maxFileBytes ?? 1_048_576;
  const start = path.join(root, checkRepositoryPath(subdir));
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
      if (++files > maxFiles) throw new GitOpsError('RepositoryTooLarge', `more than ${maxFiles} files under the path`);
      const full = path.join(dir, name);
      const stat = await lstat(full);
      if (stat.isDirectory()) {
        stack.push(full);
        continue;
      }
      if (!stat.isFile() || !/\.ya?ml$/i.test(name) || stat.size > maxFileBytes) continue;
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
