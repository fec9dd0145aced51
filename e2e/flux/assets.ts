import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { loadAll } from 'js-yaml';
import { buildBinaries, executable } from '../harness/assets.ts';

/** Where Flux's source-controller and kustomize-controller binaries and their CRDs are. */
export interface FluxAssets {
  readonly dir: string;
  readonly sourceController: string;
  readonly kustomizeController: string;
  /** The CRDs of both controllers (GitRepository, Kustomization, …), from the same release. */
  readonly crds: readonly object[];
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

function complete(dir: string): boolean {
  return executable(join(dir, 'source-controller')) && executable(join(dir, 'kustomize-controller')) && isDirectory(join(dir, 'crds'));
}

let cached: FluxAssets | undefined;

/**
 * Finds the Flux binaries: `FLUX_ASSETS` when it holds both and a `crds/` folder, otherwise
 * `e2e/build-binaries.sh flux`, which reuses the copies cached under ~/.cache or builds them from
 * the Go modules in e2e/gomod on first use (minutes, once, with progress on stderr).
 */
export function resolveFluxAssets(): FluxAssets {
  if (cached !== undefined) return cached;
  const fromEnv = process.env.FLUX_ASSETS;
  const dir = fromEnv !== undefined && fromEnv !== '' && complete(fromEnv)
    ? fromEnv
    : buildBinaries(['flux']);
  if (!complete(dir)) throw new Error(`flux: ${dir} lacks source-controller, kustomize-controller or crds/ (set FLUX_ASSETS or run e2e/build-binaries.sh flux)`);
  const crds: object[] = [];
  for (const file of readdirSync(join(dir, 'crds')).filter((f) => f.endsWith('.yaml')).sort()) {
    for (const doc of loadAll(readFileSync(join(dir, 'crds', file), 'utf8'))) {
      if (typeof doc === 'object' && doc !== null && (doc as { kind?: unknown }).kind === 'CustomResourceDefinition') crds.push(doc);
    }
  }
  if (crds.length === 0) throw new Error(`flux: no CustomResourceDefinition in ${join(dir, 'crds')}`);
  cached = { dir, sourceController: join(dir, 'source-controller'), kustomizeController: join(dir, 'kustomize-controller'), crds };
  return cached;
}
