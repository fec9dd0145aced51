import { GitOpsError } from './errors.ts';

// What a branch holds, learnt before anything is checked out: `git ls-tree -r -l -z --full-tree`
// lists every file with the size from its object's header (nothing is inflated), so a repository
// whose few compressed bytes stand for hundreds of MiB is refused while it is still those bytes.

/** Bounds of a branch's tree. */
export interface TreeLimits {
  /** Sum of the sizes of the tree's files. */
  readonly maxBytes: number;
  /** Files (any kind: regular, link, submodule) in the tree. */
  readonly maxFiles: number;
  /** YAML files under the path larger than this are left out of the checkout (the scan skips them). */
  readonly maxFileBytes: number;
}

/** What the tree holds, as far as the promotion cares. */
export interface TreeSummary {
  readonly bytes: number;
  readonly files: number;
  /** YAML files under the path larger than `maxFileBytes`, as paths from the repository's root. */
  readonly oversized: readonly string[];
}

const YAML = /\.ya?ml$/i;

/**
 * Reads the NUL-separated output of `git ls-tree -r -l -z --full-tree` as it arrives, adding up
 * sizes and counting files; {@link push} returns the error to stop git with as soon as a limit is
 * passed, or when an ancestor of the path is a symbolic link (or a file). Memory: one record at a
 * time plus the oversized files' paths (at most `maxBytes / maxFileBytes` of them).
 */
export class TreeListing {
  readonly #limits: TreeLimits;
  readonly #subdir: string;
  /** `subdir` and each of its ancestors, from the root ("a", "a/b", …); empty for the whole repository. */
  readonly #ancestors: ReadonlySet<string>;
  readonly #oversized: string[] = [];
  #pending: Buffer[] = [];
  #bytes = 0;
  #files = 0;
  #failed: GitOpsError | undefined;

  constructor(subdir: string, limits: TreeLimits) {
    this.#limits = limits;
    this.#subdir = subdir === '.' ? '' : subdir;
    const segments = this.#subdir === '' ? [] : this.#subdir.split('/');
    this.#ancestors = new Set(segments.map((_, i) => segments.slice(0, i + 1).join('/')));
  }

  /** Takes the next chunk of output; returns the error to stop with, if any. */
  push(chunk: Buffer): GitOpsError | undefined {
    let start = 0;
    for (let nul = chunk.indexOf(0); nul >= 0 && this.#failed === undefined; nul = chunk.indexOf(0, start)) {
      this.#pending.push(chunk.subarray(start, nul));
      this.#record(Buffer.concat(this.#pending));
      this.#pending = [];
      start = nul + 1;
    }
    if (start < chunk.length) this.#pending.push(chunk.subarray(start));
    // One record is bounded by git's path length; a record without end is not git's output.
    if (this.#pending.reduce((n, b) => n + b.length, 0) > 65_536) this.#failed ??= new GitOpsError('RepositoryTooLarge', 'a path in the tree is longer than 65536 bytes');
    return this.#failed;
  }

  /** The totals, once git has exited 0. */
  summary(): TreeSummary {
    if (this.#failed !== undefined) throw this.#failed;
    if (this.#pending.length > 0) throw new GitOpsError('CloneFailed', 'the tree listing ended in the middle of a record');
    return { bytes: this.#bytes, files: this.#files, oversized: [...this.#oversized] };
  }

  /** `<mode> <type> <object> <size>\t<path>`, size right-aligned or `-`. */
  #record(record: Buffer): void {
    const tab = record.indexOf(9);
    if (tab < 0) {
      this.#failed = new GitOpsError('CloneFailed', 'the tree listing has a record without a path');
      return;
    }
    const fields = record.subarray(0, tab).toString('latin1').split(' ').filter((f) => f !== '');
    const file = record.subarray(tab + 1).toString('utf8');
    const [mode, , , sizeField] = fields;
    const size = sizeField === undefined || sizeField === '-' ? 0 : Number(sizeField);
    if (!Number.isSafeInteger(size) || size < 0) {
      this.#failed = new GitOpsError('CloneFailed', 'the tree listing has a record without a size');
      return;
    }
    this.#files += 1;
    this.#bytes += size;
    if (this.#files > this.#limits.maxFiles) {
      this.#failed = new GitOpsError('RepositoryTooLarge', `the branch has more than ${this.#limits.maxFiles} files (maxRepositoryFiles)`);
      return;
    }
    if (this.#bytes > this.#limits.maxBytes) {
      this.#failed = new GitOpsError('RepositoryTooLarge', `the branch's files add up to more than ${this.#limits.maxBytes} bytes (maxRepositoryBytes)`);
      return;
    }
    if (this.#ancestors.has(file)) {
      // Listed with -r, so not a directory: a link could lead out of the clone.
      if (mode === '120000') this.#failed = new GitOpsError('PathRefused', `the path ${JSON.stringify(this.#subdir)} goes through a symbolic link in the repository (${JSON.stringify(file)}); links are never followed`);
      return;
    }
    if (size > this.#limits.maxFileBytes && YAML.test(file) && (this.#subdir === '' || file.startsWith(`${this.#subdir}/`))) this.#oversized.push(file);
  }
}

/** Escapes a path for a gitignore-style pattern: every character with a meaning gets a backslash. */
function literal(pathname: string): string {
  return pathname.replace(/[\\*?[\]!# ]/g, '\\$&');
}

/**
 * The sparse-checkout patterns (non-cone) that check out only what the scan reads: the YAML files
 * under `subdir`, less the oversized ones (whose paths have no line break: others cannot be
 * written as a pattern and stay, bounded by `maxBytes` like everything checked out).
 */
export function sparsePatterns(subdir: string, oversized: readonly string[]): string {
  const base = subdir === '.' ? '' : `/${literal(subdir)}`;
  const lines = [`${base}/**/*.[yY][aA][mM][lL]`, `${base}/**/*.[yY][mM][lL]`];
  for (const file of oversized) if (!/[\r\n]/.test(file)) lines.push(`!/${literal(file)}`);
  return `${lines.join('\n')}\n`;
}
