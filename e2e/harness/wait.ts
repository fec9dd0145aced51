import { createServer } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';

/**
 * Polls `check` every 50 ms until it returns something other than `false` or `undefined`, and
 * resolves with that; fails with `timed out … waiting until <what>` after `timeoutMs`.
 */
export async function eventually<T>(what: string, check: () => T | false | undefined | Promise<T | false | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const result = await check();
    if (result !== false && result !== undefined) return result;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000} s waiting until ${what}`);
    await delay(50);
  }
}

/** A TCP port on 127.0.0.1 that was free a moment ago (bind to it soon). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => { resolve(port); });
    });
  });
}
