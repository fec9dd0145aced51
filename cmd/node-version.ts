// Imported alone by the bin entry, before anything else loads: so this file must parse and run
// on any Node that can load an ES module, and import nothing.

/** The oldest Node.js the service runs on (`@kubernetes/client-node` 2.x needs it; package.json `engines`). */
export const minimumNode = '22.19.0';

function parts(version: string): readonly number[] {
  return version.split('.').map((p) => Number.parseInt(p, 10));
}

/**
 * Why this Node cannot run the service, in one line; undefined when it can. `version` is
 * `process.versions.node` (no leading `v`).
 */
export function unsupportedNode(version: string): string | undefined {
  const have = parts(version);
  const need = parts(minimumNode);
  for (let i = 0; i < need.length; i++) {
    const a = have[i] ?? 0;
    const b = need[i] ?? 0;
    if (Number.isNaN(a)) break;
    if (a > b) return undefined;
    if (a < b) return `fleetcache needs Node.js ${minimumNode} or newer; this is Node.js ${version}`;
  }
  return undefined;
}
