import { createServer } from 'node:net';

// One condition-polling wait for the whole project (fixtures/support), published here as part of
// `fleetcache/testing`; imported from its own file so that the package compiles no more of support.
export { eventually } from '../../fixtures/support/wait.ts';
export type { WaitOptions } from '../../fixtures/support/wait.ts';

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
