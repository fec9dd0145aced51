import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';

/**
 * Every child the harness started and has not yet seen exit. The 'exit' hook kills what is left,
 * and each child also carries a parent-death signal (setpriv --pdeathsig), so a test process that
 * is killed outright still leaves no etcd or apiserver behind.
 */
const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

const setpriv = ['/usr/bin/setpriv', '/bin/setpriv'].find((p) => existsSync(p));

/** A server process with its recent output kept for diagnosis. */
export class ManagedProcess {
  readonly name: string;
  readonly #child: ChildProcess;
  readonly #lines: string[] = [];
  readonly #maxLines: number;
  #partial = '';
  readonly exited: Promise<number | null>;
  #exitCode: number | null | undefined;

  /** `env` is added to this process's environment (e.g. KUBECONFIG for a controller). Default none. */
  constructor(name: string, command: string, args: readonly string[], maxLines = 400, env: Readonly<Record<string, string>> = {}) {
    this.name = name;
    this.#maxLines = maxLines;
    const [file, argv] = setpriv === undefined ? [command, args] : [setpriv, ['--pdeathsig', 'SIGKILL', '--', command, ...args]];
    const child = spawn(file, argv, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
    this.#child = child;
    live.add(child);
    const onData = (chunk: Buffer): void => { this.#append(chunk.toString('utf8')); };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    this.exited = new Promise((resolve) => {
      child.once('error', (err) => {
        this.#append(`spawn error: ${err.message}\n`);
        live.delete(child);
        this.#exitCode = null;
        resolve(null);
      });
      child.once('close', (code) => {
        live.delete(child);
        this.#exitCode = code;
        resolve(code);
      });
    });
  }

  get pid(): number | undefined {
    return this.#child.pid;
  }

  /** True once the process has exited (for whatever reason). */
  get hasExited(): boolean {
    return this.#exitCode !== undefined;
  }

  #append(text: string): void {
    const parts = (this.#partial + text).split('\n');
    this.#partial = parts.pop() ?? '';
    for (const line of parts) this.#lines.push(line);
    if (this.#lines.length > this.#maxLines) this.#lines.splice(0, this.#lines.length - this.#maxLines);
  }

  /** The last `count` lines the process printed. */
  tail(count = 60): string {
    const lines = this.#partial === '' ? this.#lines : [...this.#lines, this.#partial];
    return lines.slice(-count).join('\n');
  }

  /** SIGTERM, then SIGKILL if it has not exited after `graceMs`. Resolves once it has exited. */
  async stop(graceMs = 10_000): Promise<void> {
    if (this.hasExited) return;
    this.#child.kill('SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    const killed = new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        this.#child.kill('SIGKILL');
        resolve();
      }, graceMs);
    });
    await Promise.race([this.exited, killed]);
    clearTimeout(timer);
    await this.exited;
  }

  /** Resident memory in bytes, read from /proc (0 when unavailable). */
  rssBytes(): number {
    return readRss(this.#child.pid);
  }
}

function readRss(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const match = /VmRSS:\s+(\d+) kB/.exec(status);
    return match?.[1] === undefined ? 0 : Number(match[1]) * 1024;
  } catch {
    return 0;
  }
}
