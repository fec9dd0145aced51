import { spawn } from 'node:child_process';
import { lstat, readdir } from 'node:fs/promises';
import path from 'node:path';
import { abortReason, type Clock } from '../util/index.ts';
import { GitOpsError, type GitOpsReason } from './errors.ts';

/** One git command. */
export interface GitCommand {
  /** Absolute path of the git binary. */
  readonly gitPath: string;
  readonly args: readonly string[];
  readonly cwd: string;
  /** The whole environment of the child: nothing is inherited from this process. */
  readonly env: Readonly<Record<string, string>>;
  /** What the command does, for messages ("clone", "push"). */
  readonly step: string;
  /** The reason a non-zero exit reports, unless the caller inspects the exit itself. */
  readonly failure: GitOpsReason;
  readonly timeoutMs: number;
  /** Bound on stdout and on stderr, each. */
  readonly maxOutputBytes: number;
  /** Kill the command when the files under `dir` grow past `maxBytes` (checked every 200 ms). */
  readonly sizeLimit?: { readonly dir: string; readonly maxBytes: number } | undefined;
  readonly clock: Clock;
  readonly signal?: AbortSignal | undefined;
  /**
   * Hard limits of the kernel on git and every process it starts, set by running it through
   * util-linux's `prlimit`: address space (a blob git would inflate in memory fails its
   * allocation instead of growing the pod) and the size of any one file it writes.
   */
  readonly hardLimits?: { readonly prlimitPath: string; readonly maxMemoryBytes: number; readonly maxFileBytes: number } | undefined;
  /**
   * Takes stdout as it comes instead of collecting it (then `maxOutputBytes` bounds stderr only):
   * returns an error to stop git with, or undefined.
   */
  readonly onStdout?: ((chunk: Buffer) => Error | undefined) | undefined;
}

export interface GitOutput {
  readonly exitCode: number;
  readonly stdout: string;
  /** Kept for the caller's decisions (push rejections); never put in status, Events or logs. */
  readonly stderr: string;
}

const SIZE_POLL_MS = 200;
const MAX_WALK_ENTRIES = 200_000;

/** Bytes of the regular files under `dir`, symlinks not followed; stops counting past `limit`. */
export async function treeSize(dir: string, limit = Infinity): Promise<number> {
  let total = 0;
  let entries = 0;
  const stack = [dir];
  while (stack.length > 0 && total <= limit) {
    const current = stack.pop() ?? dir;
    let names: string[];
    try {
      names = await readdir(current);
    } catch {
      continue; // vanished while git works (tmp_pack files are renamed)
    }
    for (const name of names) {
      if (++entries > MAX_WALK_ENTRIES) return Infinity;
      const full = path.join(current, name);
      try {
        const stat = await lstat(full);
        if (stat.isDirectory()) stack.push(full);
        else if (stat.isFile()) total += stat.size;
      } catch {
        // vanished meanwhile
      }
    }
  }
  return total;
}

/**
 * Runs git without a shell (under `prlimit` when `hardLimits` is set), in its own process group so that a timeout, an abort or an output
 * over the bound kills git and its helpers (git-remote-https, ssh) together. Resolves with the
 * exit code and the (bounded) output; rejects with a {@link GitOpsError} for a timeout, an
 * oversized output or repository, a git that cannot be started, or an abort (its reason).
 */
export function runGit(command: GitCommand): Promise<GitOutput> {
  return new Promise<GitOutput>((resolve, reject) => {
    if (command.signal?.aborted === true) {
      reject(abortReason(command.signal));
      return;
    }
    const hard = command.hardLimits;
    const [file, args] = hard === undefined
      ? [command.gitPath, command.args]
      : [hard.prlimitPath, [`--as=${hard.maxMemoryBytes}`, `--fsize=${hard.maxFileBytes}`, '--', command.gitPath, ...command.args]];
    const child = spawn(file, args, { cwd: command.cwd, env: command.env, detached: true, stdio: ['ignore', 'pipe', 'pipe'], windowsHide: true });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let outBytes = 0;
    let errBytes = 0;
    let failed: Error | undefined;
    let sizeTimer: { cancel(): void } | undefined;
    const kill = (reason: Error): void => {
      failed ??= reason;
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      } catch {
        child.kill('SIGKILL'); // the group is gone already
      }
    };
    const timer = command.clock.setTimer(command.timeoutMs, () => {
      kill(new GitOpsError('Timeout', `git ${command.step} did not finish within ${command.timeoutMs} ms (timeoutMs)`));
    });
    const onAbort = (): void => { if (command.signal !== undefined) kill(abortReason(command.signal)); };
    command.signal?.addEventListener('abort', onAbort, { once: true });
    const collect = (chunks: Buffer[], which: 'out' | 'err') => (chunk: Buffer): void => {
      const total = which === 'out' ? (outBytes += chunk.length) : (errBytes += chunk.length);
      if (total > command.maxOutputBytes) {
        kill(new GitOpsError('OutputTooLarge', `git ${command.step} wrote more than ${command.maxOutputBytes} bytes`));
        return;
      }
      chunks.push(chunk);
    };
    const consume = command.onStdout;
    if (consume === undefined) child.stdout.on('data', collect(out, 'out'));
    else {
      child.stdout.on('data', (chunk: Buffer) => {
        if (failed !== undefined) return;
        const error = consume(chunk);
        if (error !== undefined) kill(error);
      });
    }
    child.stderr.on('data', collect(err, 'err'));
    const limit = command.sizeLimit;
    if (limit !== undefined) {
      const poll = (): void => {
        sizeTimer = command.clock.setTimer(SIZE_POLL_MS, () => {
          void treeSize(limit.dir, limit.maxBytes).then((size) => {
            if (size > limit.maxBytes) kill(new GitOpsError('RepositoryTooLarge', `the repository grew past ${limit.maxBytes} bytes during git ${command.step} (maxRepositoryBytes)`));
            else if (failed === undefined && child.exitCode === null) poll();
          });
        });
      };
      poll();
    }
    const finish = (): void => {
      timer.cancel();
      sizeTimer?.cancel();
      command.signal?.removeEventListener('abort', onAbort);
    };
    child.on('error', (error) => {
      finish();
      reject(failed ?? new GitOpsError(command.failure, `git could not be started for ${command.step}`, { cause: error }));
    });
    child.on('close', (code, signal) => {
      finish();
      if (failed !== undefined) {
        reject(failed);
        return;
      }
      const stderr = Buffer.concat(err).toString('utf8');
      if (hard !== undefined && signal === 'SIGXFSZ') {
        reject(new GitOpsError('RepositoryTooLarge', `git ${command.step} wrote a file larger than ${hard.maxFileBytes} bytes (maxRepositoryBytes)`));
        return;
      }
      // Read for the decision only, never quoted: git's own words when an allocation failed.
      if (hard !== undefined && code !== 0 && /out of memory|malloc failed|mmap failed|cannot allocate memory/i.test(stderr)) {
        reject(new GitOpsError('RepositoryTooLarge', `git ${command.step} needed more memory than its limit of ${hard.maxMemoryBytes} bytes (maxGitMemoryBytes)`));
        return;
      }
      resolve({ exitCode: code ?? -1, stdout: Buffer.concat(out).toString('utf8'), stderr });
    });
  });
}
