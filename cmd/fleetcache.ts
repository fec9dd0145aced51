#!/usr/bin/env node
// The fleetcache service's entry point (package.json bin). On a Node too old for the service, its
// dependencies would die while loading with an obscure error (undici's, on Node 20): check first,
// importing nothing else, then load the service.
import { unsupportedNode } from './node-version.ts';

const problem = unsupportedNode(process.versions.node);
if (problem !== undefined) {
  process.stderr.write(`${problem}\n`);
  process.exit(1);
}
await import('./run.ts');
