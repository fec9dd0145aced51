import { execFileSync } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Where the kube-apiserver and etcd binaries are. */
export interface Assets {
  readonly dir: string;
  readonly kubeApiserver: string;
  readonly etcd: string;
}

/** True when `path` exists and may be executed. */
export function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

// Beside the sources (e2e/harness → e2e/), or from the compiled copy (dist/e2e/harness → e2e/).
const buildScript = ['../build-binaries.sh', '../../../e2e/build-binaries.sh']
  .map((relative) => fileURLToPath(new URL(relative, import.meta.url)))
  .find((candidate) => executable(candidate)) ?? fileURLToPath(new URL('../build-binaries.sh', import.meta.url));

/**
 * Runs `e2e/build-binaries.sh` with `args` and returns the directory it prints (its last line of
 * stdout). stderr is inherited so that a first build shows its progress.
 */
export function buildBinaries(args: readonly string[] = []): string {
  return execFileSync(buildScript, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim().split('\n').pop() ?? '';
}
let cached: Assets | undefined;

/**
 * Finds the binaries: `KUBEBUILDER_ASSETS` (the envtest convention) when it holds both, otherwise
 * the build script, which reuses the copies cached under ~/.cache or builds them from the Go
 * modules in e2e/gomod on first use (minutes, once).
 */
export function resolveAssets(): Assets {
  if (cached !== undefined) return cached;
  const fromEnv = process.env.KUBEBUILDER_ASSETS;
  let dir: string;
  if (fromEnv !== undefined && fromEnv !== '' && executable(join(fromEnv, 'kube-apiserver')) && executable(join(fromEnv, 'etcd'))) {
    dir = fromEnv;
  } else {
    dir = buildBinaries();
  }
  const assets = { dir, kubeApiserver: join(dir, 'kube-apiserver'), etcd: join(dir, 'etcd') };
  for (const bin of [assets.kubeApiserver, assets.etcd]) {
    if (!executable(bin)) throw new Error(`harness: ${bin} is missing or not executable (set KUBEBUILDER_ASSETS or run e2e/build-binaries.sh)`);
  }
  cached = assets;
  return assets;
}
