// A benchmark's child processes: each variant, server or measured process runs in a fresh Node
// (with --expose-gc), so the JIT warm-up and heap of one cannot favour another.
import { spawn, type ChildProcess } from 'node:child_process';

/** `file` run as a child with --expose-gc and `args` (and `env` added); its stdout piped, stderr shared. */
export function benchChild(file: string, args: readonly string[], input: 'pipe' | 'ignore', env: Readonly<Record<string, string>> = {}): ChildProcess {
  return spawn(process.execPath, ['--expose-gc', file, ...args], { stdio: [input, 'pipe', 'inherit'], env: { ...process.env, ...env } });
}

/** The first line a child prints; rejects if it exits before printing one. */
export async function firstLine(proc: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = '';
    proc.stdout?.setEncoding('utf8');
    proc.stdout?.on('data', (chunk: string) => {
      out += chunk;
      const nl = out.indexOf('\n');
      if (nl !== -1) resolve(out.slice(0, nl));
    });
    proc.on('exit', (code) => { reject(new Error(`child exited with ${String(code)} before answering`)); });
  });
}

/** `--env=NAME=VALUE` arguments (repeatable): more environment for the measured child process. */
export function envArguments(args: readonly string[]): Record<string, string> {
  return Object.fromEntries(args.filter((a) => a.startsWith('--env=')).map((a) => {
    const [name = '', ...value] = a.slice('--env='.length).split('=');
    return [name, value.join('=')];
  }));
}
