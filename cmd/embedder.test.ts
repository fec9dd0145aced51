// The embedder's view: every ```ts block of README and docs/ compiled as a TypeScript operator author compiles
// their own project against the package as `npm pack` makes it — strict, exactOptionalPropertyTypes,
// noUncheckedIndexedAccess, NodeNext, verbatimModuleSyntax, and skipLibCheck off, so the package's
// declarations are checked too. Its own scratch directory under the OS temp dir: nothing shared
// with other checkouts (cmd/packaging.test.ts builds inside node_modules/.cache).
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../', import.meta.url));
const tsc = path.join(root, 'node_modules/typescript/bin/tsc');
const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { readonly dependencies: Record<string, string>; readonly peerDependencies: Record<string, string> };

/** The embedder's compiler options: the strictest a consumer is likely to use. */
const EMBEDDER_TSCONFIG = {
  compilerOptions: {
    target: 'es2023',
    lib: ['es2024'],
    module: 'nodenext',
    moduleResolution: 'nodenext',
    types: ['node'],
    strict: true,
    exactOptionalPropertyTypes: true,
    noUncheckedIndexedAccess: true,
    noImplicitOverride: true,
    noImplicitReturns: true,
    verbatimModuleSyntax: true,
    skipLibCheck: false,
    noEmit: true,
  },
  include: ['*.ts', 'types/*.ts'],
};

/**
 * What README's fragments use without declaring it (a snippet continues the one before it): given
 * here with the types the surrounding text gives them. A name a fragment uses that is missing here
 * fails the compile, so a new fragment says what it needs.
 */
const CONTEXT = `// Names README's fragments take from the text around them.
declare const registry: import('fleetcache').Registry;
declare const owner: import('fleetcache').OwnerRef;
declare const cluster: import('fleetcache').ClusterRef;
declare const deployments: import('fleetcache').GroupVersionKind;
declare const labelMatcher: typeof import('fleetcache').labelMatcher;
declare const kubeConfig: import('@kubernetes/client-node').KubeConfig;
declare const logger: import('fleetcache').Logger;
declare function runController(kubeConfig: import('@kubernetes/client-node').KubeConfig, logger: import('fleetcache').Logger, signal: AbortSignal): Promise<void>;
declare function syncSettings(from: import('@kubernetes/client-node').CoreV1Api, to: import('@kubernetes/client-node').CoreV1Api): Promise<void>;
`;

/** The part of @types/ws that client-node's declarations name (see below). */
const WS_TYPES = `declare module 'ws' {
  const WebSocketAlias: typeof WebSocket;
  interface WebSocketAlias extends WebSocket {}
  class WebSocket { constructor(address: string, options?: WebSocket.ClientOptions); close(): void; }
  namespace WebSocket {
    interface ClientOptions { readonly [option: string]: unknown }
    type Data = string | Buffer | ArrayBuffer | Buffer[];
    const WebSocket: typeof WebSocketAlias;
    interface WebSocket extends WebSocketAlias {}
  }
  export = WebSocket;
}
`;

let scratch = '';
let consumer = '';

before(() => {
  scratch = mkdtempSync(path.join(tmpdir(), 'fleetcache-embedder-'));
  const pkgDir = path.join(scratch, 'pkg');
  // The package as npm packs it: package.json's "files" from this checkout, dist compiled as `npm run build` does.
  for (const file of ['package.json', 'README.md', 'docs', 'LICENSE', 'e2e/build-binaries.sh', 'e2e/gomod']) cpSync(path.join(root, file), path.join(pkgDir, file), { recursive: true });
  execFileSync(process.execPath, [tsc, '-p', path.join(root, 'tsconfig.build.json'), '--outDir', path.join(pkgDir, 'dist')], { stdio: 'inherit' });
  const [packed] = JSON.parse(execFileSync('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', scratch], { cwd: pkgDir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })) as { filename: string }[];
  assert.ok(packed !== undefined);
  // A consumer project with the tarball installed, and the package's dependencies (and @types/node) beside it.
  consumer = path.join(scratch, 'consumer');
  const modules = path.join(consumer, 'node_modules');
  mkdirSync(modules, { recursive: true });
  execFileSync('tar', ['-xzf', path.join(scratch, packed.filename), '-C', modules]);
  renameSync(path.join(modules, 'package'), path.join(modules, 'fleetcache'));
  const names = [...Object.keys(pkg.dependencies), ...Object.keys(pkg.peerDependencies), '@types/node', 'undici-types'];
  for (const name of names) {
    mkdirSync(path.dirname(path.join(modules, name)), { recursive: true });
    symlinkSync(path.join(root, 'node_modules', name), path.join(modules, name), 'dir');
  }
  writeFileSync(path.join(consumer, 'package.json'), JSON.stringify({ name: 'embedder', private: true, type: 'module' }));
  writeFileSync(path.join(consumer, 'tsconfig.json'), JSON.stringify(EMBEDDER_TSCONFIG, null, 2));
  writeFileSync(path.join(consumer, 'context.d.ts'), CONTEXT);
  // client-node's own dependency isomorphic-ws declares its types through 'ws', whose types are
  // @types/ws: with skipLibCheck off an embedder installs it (README says so). This repository does
  // not depend on it, so the shorthand declaration TypeScript suggests stands in for it here.
  // In a folder of its own without "type": "module": the declarations are CommonJS, as @types/ws's.
  mkdirSync(path.join(consumer, 'types'));
  writeFileSync(path.join(consumer, 'types/package.json'), '{}');
  writeFileSync(path.join(consumer, 'types/ws.d.ts'), WS_TYPES);
});
after(() => { if (scratch !== '') rmSync(scratch, { recursive: true, force: true }); });

describe('README and docs/ for an embedder', () => {
  it('compiles every ```ts block against the packed package under the strictest flags, skipLibCheck off', () => {
    // README and every document of docs/, as the package carries them.
    const installed = path.join(consumer, 'node_modules/fleetcache');
    const documents = ['README.md', ...readdirSync(path.join(installed, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
    assert.ok(documents.length >= 5, documents.join(' '));
    let count = 0;
    for (const document of documents) {
      const blocks = [...readFileSync(path.join(installed, document), 'utf8').matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1] ?? '');
      // Each block its own module (a fragment's top-level await included), named by its document and place.
      for (const [i, block] of blocks.entries()) writeFileSync(path.join(consumer, `${path.basename(document, '.md')}-${String(i + 1).padStart(2, '0')}.ts`), `${block}export {};\n`);
      count += blocks.length;
    }
    assert.ok(count >= 6, `${String(count)} blocks`);
    const run = spawnSync(process.execPath, [tsc, '-p', consumer, '--pretty', 'false'], { cwd: consumer, encoding: 'utf8' });
    assert.equal(run.status, 0, `The snippets of README and docs/ do not compile as an embedder's project:\n${run.stdout}${run.stderr}`);
  });

  it('takes client-node\'s models through Wire<T>, refuses them bare (their Date is a string at run time), and has one KubeObject in every entry', () => {
    writeFileSync(path.join(consumer, 'models.ts'), `
import type { V1ConfigMap, V1Deployment } from '@kubernetes/client-node';
import type { CacheReader, KubeObject, Registry, Wire } from 'fleetcache';
import type { KubeObject as TestingKubeObject } from 'fleetcache/testing';

declare const registry: Registry;
const target = { gvk: { group: '', version: 'v1', kind: 'ConfigMap' }, namespace: 'apps', name: 'settings' };
export async function read(): Promise<string | undefined> {
  const reader: CacheReader<Wire<V1ConfigMap>> = await registry.watchTargetAndGetReader<Wire<V1ConfigMap>>({ kind: 'local' }, target, { namespace: 'a', name: 'b' });
  const cm = reader.get({ namespace: 'apps', name: 'settings' });
  const created: string | undefined = cm?.metadata?.creationTimestamp;
  return created ?? cm?.data?.['mode'];
}
export const replicas = (d: Wire<V1Deployment>): number => d.spec?.replicas ?? 1;
// @ts-expect-error V1ConfigMap promises a Date where a string arrives
export const bare = (): Promise<unknown> => registry.watchTargetAndGetReader<V1ConfigMap>({ kind: 'local' }, target, { namespace: 'a', name: 'b' });
export const same = (a: KubeObject, b: TestingKubeObject): [TestingKubeObject, KubeObject] => [a, b];
`);
    const run = spawnSync(process.execPath, [tsc, '-p', consumer, '--pretty', 'false'], { cwd: consumer, encoding: 'utf8' });
    assert.equal(run.status, 0, `${run.stdout}${run.stderr}`);
  });
});
