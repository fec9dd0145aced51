// The service's process, once fleetcache.ts has checked the Node version: signals in, exit status out.
import { signalHandler } from '../lib/manager/index.ts';
import { main } from './main.ts';

// The first SIGTERM/SIGINT stops gracefully; a second means "now" (exit 1, skipping the shutdown).
// The exit is the program's to make, here at its entry point: the kit never calls process.exit.
const signal = signalHandler({ exit: (code) => process.exit(code) });
const status = await main({ argv: process.argv.slice(2), env: process.env, stdout: process.stdout, stderr: process.stderr, signal });
process.exit(status);
