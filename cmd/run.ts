// The service's process, once fleetcache.ts has checked the Node version: signals in, exit status out.
import { main } from './main.ts';

const stop = new AbortController();
let signals = 0;
for (const name of ['SIGTERM', 'SIGINT'] as const) {
  process.on(name, () => {
    signals += 1;
    // A second signal means "now": skip the graceful shutdown.
    if (signals > 1) process.exit(1);
    stop.abort(new Error(`received ${name}`));
  });
}

const status = await main({ argv: process.argv.slice(2), env: process.env, stdout: process.stdout, stderr: process.stderr, signal: stop.signal });
process.exit(status);
