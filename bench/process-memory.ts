// What the memory benchmarks read of their own process beyond process.memoryUsage(), and the two
// ways they make it hand memory back (issue 27): V8's memory-reducing GC and glibc's malloc_trim.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';

/** Resident bytes of glibc's main-arena brk heap (`[heap]` in /proc/self/smaps); 0 off Linux. */
export function brkHeapBytes(): number {
  try {
    const smaps = readFileSync('/proc/self/smaps', 'utf8');
    const at = smaps.indexOf('[heap]');
    const rss = at < 0 ? null : /^Rss:\s+(\d+) kB/m.exec(smaps.slice(at));
    return rss === null ? 0 : Number(rss[1]) * 1024;
  } catch {
    return 0; // not Linux
  }
}

/** Three full collections 50 ms apart (needs --expose-gc): what a measurement waits for first. */
export async function fullGcs(): Promise<void> {
  for (let i = 0; i < 3; i++) {
    (globalThis as { gc?: () => void }).gc?.();
    await delay(50);
  }
}

/**
 * V8's memory-reducing collection (what its memory reducer runs on a quiet process): it also hands
 * back the 256 KiB pages V8 keeps pooled, resident but outside `heapTotal`. Needs --expose-gc.
 */
export function memoryReducingGc(): void {
  (globalThis as { gc?: (options: object) => void }).gc?.({ type: 'major', execution: 'sync', flavor: 'last-resort' });
}

/** glibc's malloc_trim(0) in this process, called through gdb (needs gdb and ptrace; throws otherwise). */
export function mallocTrim(): void {
  execFileSync('gdb', ['-p', String(process.pid), '-batch', '-ex', 'call (int)malloc_trim(0)'], { stdio: 'ignore', timeout: 60_000 });
}
