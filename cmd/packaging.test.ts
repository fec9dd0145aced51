import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { builtinModules } from 'node:module';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadAll } from 'js-yaml';
import ts from 'typescript';
import { SimulatedCluster } from '../fixtures/index.ts';
import { usage } from './flags.ts';
import { staleManifests } from './gen-manifests.ts';
import { unsupportedNode } from './node-version.ts';
import { PIPELINE_KIND } from '../fixtures/support/index.ts';

const root = fileURLToPath(new URL('../', import.meta.url));

describe('config/', () => {
  it('holds the Pipeline CRD exactly as generated from lib/pipeline/crd.ts', async () => {
    assert.deepEqual(await staleManifests(), [], 'run node cmd/gen-manifests.ts');
  });

  it('parses as YAML, and every kustomization lists files that exist', () => {
    const dirs = ['config/crd', 'config/rbac', 'config/manager', 'config/network-policy', 'config/default', 'config/leader-election', 'config/fleet-selectors-as-service'];
    for (const dir of dirs) {
      for (const file of readdirSync(path.join(root, dir), { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.yaml'))) {
        const docs = loadAll(readFileSync(path.join(root, dir, file), 'utf8'));
        assert.ok(docs.length > 0, `${dir}/${file}`);
      }
      const kustomization = loadAll(readFileSync(path.join(root, dir, 'kustomization.yaml'), 'utf8'))[0] as { resources: string[]; patches?: { path: string }[] };
      for (const resource of [...kustomization.resources, ...(kustomization.patches ?? []).map((p) => p.path)]) assert.ok(existsSync(path.join(root, dir, resource)), `${dir}: ${resource}`);
    }
  });

  it('runs the manager non-root on a read-only root filesystem, with probes on the probe port', () => {
    const [deployment] = loadAll(readFileSync(path.join(root, 'config/manager/manager.yaml'), 'utf8')) as {
      spec: { replicas: number; template: { spec: { securityContext: { runAsNonRoot: boolean }; containers: {
        args: string[]; securityContext: { readOnlyRootFilesystem: boolean; allowPrivilegeEscalation: boolean };
        livenessProbe: { httpGet: { path: string; port: string } }; readinessProbe: { httpGet: { path: string; port: string } };
        ports: { name: string; containerPort: number }[]; resources: { requests: object };
      }[] } } };
    }[];
    const pod = deployment?.spec.template.spec;
    const container = pod?.containers[0];
    assert.ok(pod !== undefined && container !== undefined);
    assert.equal(pod.securityContext.runAsNonRoot, true);
    assert.equal(container.securityContext.readOnlyRootFilesystem, true);
    assert.equal(container.securityContext.allowPrivilegeEscalation, false);
    assert.deepEqual([container.livenessProbe.httpGet, container.readinessProbe.httpGet], [{ path: '/healthz', port: 'probes' }, { path: '/readyz', port: 'probes' }]);
    const ports = Object.fromEntries(container.ports.map((p) => [p.name, p.containerPort]));
    assert.ok(container.args.includes(`--health-probe-bind-address=:${ports.probes}`));
    assert.ok(container.args.includes(`--metrics-bind-address=:${ports.metrics}`));
    assert.ok(container.args.includes('--shard'), 'the replicas share the Pipelines');
    assert.ok(!container.args.includes('--leader-elect'), '--shard excludes --leader-elect');
    assert.equal(deployment?.spec.replicas, 3);
    // Every flag the manifest passes is one the binary accepts.
    for (const arg of container.args) assert.match(usage(), new RegExp(`  ${arg.replace(/=.*$/, '')}[ \\n]`), arg);
    assert.ok(!container.args.some((a) => a.startsWith('--metrics-secure')), 'metrics stay authenticated (the default)');
  });

  it('requests at least the memory the service holds idle (compiled, leading, watching Pipelines, none to reconcile)', async () => {
    const [deployment] = loadAll(readFileSync(path.join(root, 'config/manager/manager.yaml'), 'utf8')) as { spec: { template: { spec: { containers: { resources: { requests: { memory: string } } }[] } } } }[];
    const request = /^(\d+)Mi$/.exec(deployment?.spec.template.spec.containers[0]?.resources.requests.memory ?? '')?.[1];
    assert.ok(request !== undefined, 'memory request in Mi');
    const cluster = await SimulatedCluster.start({ name: 'idle', namespaces: ['fleetcache-system'], kinds: [
      PIPELINE_KIND,
      { group: 'coordination.k8s.io', version: 'v1', kind: 'Lease', plural: 'leases', namespaced: true },
    ] });
    const kubeconfig = path.join(scratch, 'idle-kubeconfig');
    writeFileSync(kubeconfig, cluster.kubeconfig, { mode: 0o600 });
    // With the V8 settings the deployed pod runs with (the manifest's NODE_OPTIONS).
    const nodeOptions = manifestNodeOptions();
    const child = spawn(process.execPath, [path.join(pkgDir, pkg.bin.fleetcache), `--kubeconfig=${kubeconfig}`, '--leader-elect', '--leader-election-namespace=fleetcache-system', '--metrics-bind-address=127.0.0.1:0', '--health-probe-bind-address=127.0.0.1:0'], { stdio: 'ignore', env: { ...process.env, NODE_ENV: 'production', NODE_OPTIONS: nodeOptions } });
    try {
      await cluster.waitFor((c) => c.openWatches >= 1, { timeoutMs: 60_000 });
      // Settled: a few Lease renewals (every 2 s) after the Pipeline watch opened.
      const rss = (): number => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid ?? 0}/status`, 'utf8'))?.[1]) / 1024;
      let most = 0;
      for (let i = 0; i < 5; i++) {
        await delay(1_000);
        most = Math.max(most, rss());
      }
      assert.ok(most > 50, `${most} MiB: not the service`);
      assert.ok(most <= Number(request), `idle RSS ${most.toFixed(1)} MiB is above the manifest's memory request of ${request}Mi`);
    } finally {
      child.kill('SIGKILL');
      await once(child, 'exit');
      await cluster.close();
    }
  });

  it('exposes metrics over the authenticated port, with the RBAC the metrics filter needs and a reader role', () => {
    const docs = (file: string): { kind: string; metadata: { name: string }; spec?: { ports?: { name: string; port: number; targetPort: string }[] }; rules?: { apiGroups?: string[]; resources?: string[]; nonResourceURLs?: string[]; verbs: string[] }[]; roleRef?: { name: string }; subjects?: { name: string }[] }[] =>
      loadAll(readFileSync(path.join(root, file), 'utf8')) as ReturnType<typeof docs>;
    const service = docs('config/manager/manager.yaml').find((d) => d.kind === 'Service');
    assert.deepEqual(service?.spec?.ports?.map((p) => [p.name, p.port, p.targetPort]), [['https', 8443, 'metrics']]);
    const rbac = readdirSync(path.join(root, 'config/rbac')).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml').flatMap((f) => docs(`config/rbac/${f}`));
    const role = (name: string): NonNullable<ReturnType<typeof docs>[number]['rules']> => rbac.find((d) => d.kind === 'ClusterRole' && d.metadata.name === name)?.rules ?? [];
    const auth = role('fleetcache-metrics-auth');
    assert.deepEqual(auth.map((r) => [r.apiGroups, r.resources, r.verbs]), [[['authentication.k8s.io'], ['tokenreviews'], ['create']], [['authorization.k8s.io'], ['subjectaccessreviews'], ['create']]]);
    const binding = rbac.find((d) => d.kind === 'ClusterRoleBinding' && d.roleRef?.name === 'fleetcache-metrics-auth');
    assert.deepEqual(binding?.subjects?.map((s) => s.name), ['fleetcache']);
    assert.deepEqual(role('fleetcache-metrics-reader'), [{ nonResourceURLs: ['/metrics', '/debug/caches', '/dashboard/events'], verbs: ['get'] }]);
  });
});

describe('config/ and sharding', () => {
  interface Doc { kind: string; metadata: { name: string; namespace?: string }; rules?: { apiGroups?: string[]; resources?: string[]; verbs: string[] }[]; roleRef?: { kind: string; name: string }; subjects?: { kind: string; name: string }[] }
  const docs = (file: string): Doc[] => loadAll(readFileSync(path.join(root, file), 'utf8')) as Doc[];

  it('grants the Lease verbs sharding needs in the service\'s own namespace only, to the service', () => {
    const rbac = (loadAll(readFileSync(path.join(root, 'config/rbac/kustomization.yaml'), 'utf8'))[0] as { resources: string[] }).resources.flatMap((f) => docs(`config/rbac/${f}`));
    const role = rbac.find((d) => d.metadata.name === 'fleetcache-shard' && d.kind === 'Role');
    assert.ok(role !== undefined, 'config/rbac has the Role fleetcache-shard');
    assert.equal(role.metadata.namespace, 'system', 'namespaced: config/default puts it in the service\'s namespace');
    assert.deepEqual(role.rules, [{ apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'list', 'watch', 'create', 'update', 'delete'] }]);
    const binding = rbac.find((d) => d.kind === 'RoleBinding' && d.roleRef?.name === 'fleetcache-shard');
    assert.deepEqual([binding?.roleRef?.kind, binding?.subjects?.map((s) => [s.kind, s.name])], ['Role', [['ServiceAccount', 'fleetcache']]]);
    for (const d of rbac.filter((x) => x.kind === 'ClusterRole')) {
      assert.ok(!(d.rules ?? []).some((r) => (r.resources ?? []).includes('leases')), `${d.metadata.name}: no Lease rights cluster-wide`);
    }
  });

  it('keeps a leader-election overlay: two replicas with --leader-elect, without the shard Role', () => {
    const kustomization = docs('config/leader-election/kustomization.yaml')[0] as unknown as { resources: string[]; patches: { path: string; target: { kind: string; name: string } }[] };
    assert.deepEqual(kustomization.resources, ['../default']);
    const patched = Object.fromEntries(kustomization.patches.map((p) => [`${p.target.kind}/${p.target.name}`, docs(`config/leader-election/${p.path}`)[0] as unknown as Record<string, unknown>]));
    assert.deepEqual(Object.keys(patched).sort(), ['Deployment/fleetcache', 'Role/fleetcache-shard', 'RoleBinding/fleetcache-shard']);
    assert.equal(patched['Role/fleetcache-shard']?.$patch, 'delete');
    assert.equal(patched['RoleBinding/fleetcache-shard']?.$patch, 'delete');
    const deployment = patched['Deployment/fleetcache'] as { spec: { replicas: number; template: { spec: { containers: { name: string; args: string[] }[] } } } };
    const [manager] = deployment.spec.template.spec.containers;
    const [base] = loadAll(readFileSync(path.join(root, 'config/manager/manager.yaml'), 'utf8')) as { spec: { template: { spec: { containers: { name: string; args: string[] }[] } } } }[];
    assert.equal(manager?.name, base?.spec.template.spec.containers[0]?.name, 'patches the manager container');
    assert.equal(deployment.spec.replicas, 2);
    // The args replace the base's whole: the same ones, --leader-elect for the shard flags.
    assert.deepEqual(manager?.args, ['--leader-elect', ...(base?.spec.template.spec.containers[0]?.args ?? []).filter((a) => !a.startsWith('--shard'))]);
  });
});

describe('config/network-policy', () => {
  it('lets only namespaces labelled metrics=enabled reach the metrics port of the manager\'s pods, and ships in config/default', () => {
    interface Policy { kind: string; spec: { podSelector: { matchLabels: Record<string, string> }; policyTypes: string[]; ingress: { from: { namespaceSelector?: { matchLabels: Record<string, string> } }[]; ports: { port: string | number; protocol: string }[] }[] } }
    const [policy] = loadAll(readFileSync(path.join(root, 'config/network-policy/allow-metrics-traffic.yaml'), 'utf8')) as Policy[];
    const [deployment] = loadAll(readFileSync(path.join(root, 'config/manager/manager.yaml'), 'utf8')) as { spec: { template: { metadata: { labels: Record<string, string> }; spec: { containers: { ports: { name: string; containerPort: number }[] }[] } } } }[];
    assert.equal(policy?.kind, 'NetworkPolicy');
    const labels = deployment?.spec.template.metadata.labels ?? {};
    assert.ok(Object.entries(policy.spec.podSelector.matchLabels).every(([k, v]) => labels[k] === v), 'the policy selects the manager\'s pods');
    assert.deepEqual(policy.spec.policyTypes, ['Ingress']);
    assert.deepEqual(policy.spec.ingress, [{ from: [{ namespaceSelector: { matchLabels: { metrics: 'enabled' } } }], ports: [{ port: 'metrics', protocol: 'TCP' }] }]);
    assert.equal(deployment?.spec.template.spec.containers[0]?.ports.find((p) => p.name === 'metrics')?.containerPort, 8443);
    const kustomization = loadAll(readFileSync(path.join(root, 'config/default/kustomization.yaml'), 'utf8'))[0] as { resources: string[] };
    assert.ok(kustomization.resources.includes('../network-policy'));
  });
});

/** The image's NODE_OPTIONS (its `ENV NODE_OPTIONS=` line). */
function imageNodeOptions(): string {
  return /^ENV NODE_OPTIONS=(\S+)$/m.exec(readFileSync(path.join(root, 'Dockerfile'), 'utf8'))?.[1] ?? '';
}

/** NODE_OPTIONS as the deployed container has it: the manifest's when it sets one (it replaces the image's), else the image's. */
function manifestNodeOptions(): string {
  const [deployment] = loadAll(readFileSync(path.join(root, 'config/manager/manager.yaml'), 'utf8')) as { spec: { template: { spec: { containers: { env?: { name: string; value?: string }[] }[] } } } }[];
  return deployment?.spec.template.spec.containers[0]?.env?.find((e) => e.name === 'NODE_OPTIONS')?.value ?? imageNodeOptions();
}

/** What a compiled file refers to: relative modules (static and dynamic imports, re-exports), packages, and files read beside it. */
function references(source: string): { readonly modules: readonly string[]; readonly packages: readonly string[]; readonly urls: readonly string[] } {
  const specifiers = [...source.matchAll(/(?:^|[;\s])(?:import|export)\s[^;'"]*?from\s*['"]([^'"]+)['"]|(?:^|[;\s])import\s*['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]\s*\)/gm)]
    .map((m) => m[1] ?? m[2] ?? m[3] ?? '');
  return {
    modules: specifiers.filter((s) => s.startsWith('.')),
    packages: specifiers.filter((s) => !s.startsWith('.')),
    // Relative paths to non-module files, whether written in `new URL(…)` or listed for it.
    urls: source.includes('import.meta.url') ? [...source.matchAll(/['"](\.\.?\/[^'"\s]+\.(?:sh|json|wasm|ya?ml|mod|sum))['"]/g)].map((m) => m[1] ?? '') : [],
  };
}

/** `@scope/name/sub` → `@scope/name`; `name/sub` → `name`; undefined for Node's own modules. */
function packageName(specifier: string): string | undefined {
  if (specifier.startsWith('node:') || builtinModules.includes(specifier)) return undefined;
  return specifier.split('/').slice(0, specifier.startsWith('@') ? 2 : 1).join('/');
}

/**
 * The files reachable from `entries` (paths relative to the package root) through relative
 * imports, with the packages they import. A module that is not in `files` fails, naming who imports
 * it; of several `new URL` candidates in one file (sources or dist/ layout), one must be there.
 */
function closure(entries: readonly string[], files: ReadonlySet<string>, read: (file: string) => string): { readonly files: ReadonlySet<string>; readonly packages: ReadonlySet<string> } {
  const seen = new Set<string>();
  const packages = new Set<string>();
  const queue = [...entries];
  for (let file = queue.pop(); file !== undefined; file = queue.pop()) {
    if (seen.has(file)) continue;
    assert.ok(files.has(file), `${file} is not in the package`);
    seen.add(file);
    const refs = references(read(file));
    for (const specifier of refs.modules) {
      const joined = path.posix.normalize(path.posix.join(path.posix.dirname(file), specifier));
      // TypeScript resolves `./x.ts` and `./x.js` in a declaration file to `./x.d.ts`.
      const target = [joined, ...(file.endsWith('.d.ts') ? [joined.replace(/\.[jt]s$/, '.d.ts')] : [])].find((t) => files.has(t));
      assert.ok(target !== undefined, `${file} imports ${specifier}, which is not in the package`);
      queue.push(target);
    }
    for (const specifier of refs.packages) {
      const name = packageName(specifier);
      if (name !== undefined) packages.add(name);
    }
    if (refs.urls.length > 0) {
      const found = refs.urls.map((u) => path.posix.normalize(path.posix.join(path.posix.dirname(file), u))).filter((t) => files.has(t));
      assert.ok(found.length > 0, `${file} refers to ${refs.urls.join(' or ')}, none of them in the package`);
      for (const target of found) seen.add(target);
    }
  }
  return { files: seen, packages };
}

/** A private key with its body (the log redaction pattern in cmd/logging.ts has only the header). */
const keyMaterial = /-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----\s*[A-Za-z0-9+/=]{16}/;

interface PackageJson {
  readonly exports: Record<string, { readonly types: string; readonly default: string } | string>;
  readonly bin: { readonly fleetcache: string };
  readonly dependencies: Record<string, string>;
  readonly peerDependencies: Record<string, string>;
}

/**
 * The root entry's public names: what `fleetcache` exports at run time, and the types it exports
 * besides. A change here is a change of the public API: docs/library.md's "Entry points" states the count,
 * and the test below holds the two to each other. Util internals (`raceAbort`, `sleep`, `toError`,
 * `FakeClock`…) and the service's controller and Git machinery (`fleetcache/pipeline`) never
 * belong here.
 */
const ROOT_VALUES = [
  'CacheGoneError', 'ClosedError', 'ClusterChangedError', 'ClusterSet', 'clusterKey', 'clusterRefOf', 'CompositeProvider', 'CoreV1SecretReader',
  'FleetAccumulator', 'FleetcacheError', 'InvalidClusterRefError', 'InvalidPathSegmentError', 'InvalidSelectorError', 'KubeApiError',
  'KubeconfigInvalidError', 'KubeconfigRefusedError', 'KubeconfigSecretNotFoundError', 'LimitExceededError', 'LocalProvider',
  'MemoryBudgetExceededError', 'OWN_IDENTITY', 'ObjectSkippedError', 'RateLimitingWorkQueue', 'Registry', 'SecretProvider', 'SocketBudget',
  'SocketReclaimedError', 'StaticProvider', 'StatusConflictError', 'TransportError', 'UnknownKindError', 'WatchDecodeError', 'createListLimiter',
  'defaultControllerRateLimiter', 'defaultSocketBudget', 'fieldMatcher', 'fromPino', 'fromWinston', 'identityTransform',
  'labelMatcher', 'loadKubeconfig', 'localKubeConfig', 'noopLogger', 'ownerKey', 'parseOwnerKey', 'registrySource', 'runWorkers',
  'serviceAccountIdentity', 'snapshotQuery', 'stripManagedFields', 'watchOwners', 'writeStatus',
];
const ROOT_TYPES = [
  'AccumulatorOptions', 'AccumulatorStatus', 'AcquireOptions', 'BackoffOptions', 'CacheInfo', 'CacheInformerOptions',
  'CacheReader', 'CacheScope', 'Clock', 'ClusterAccess', 'ClusterChange', 'ClusterConnection', 'ClusterLease', 'ClusterProvider',
  'ClusterRef', 'ClusterSetOptions', 'Clusters', 'CompositeProviderOptions', 'ConcurrencyLimiter', 'ConnectionKey',
  'ConnectionOptions', 'CoreV1SecretReaderOptions', 'DefaultControllerRateLimiterOptions', 'DeltaOf', 'FleetSnapshot', 'Freshness',
  'GroupVersionKind', 'HeldReader', 'Identity', 'InformerHandler', 'KubeList', 'KubeObject', 'KubeStatus', 'KubeconfigRule',
  'ListOptions', 'ListReason', 'LoadKubeconfigOptions', 'LocalKubeConfigOptions', 'LocalProviderOptions', 'LogFields', 'Logger',
  'MemoryBudgetOptions', 'MemoryBudgetStatus', 'NamespacedName', 'ObjectHead', 'ObjectMatcher', 'ObjectMeta', 'ObjectOf', 'ObjectTargetRef', 'OwnerKey', 'OwnerRef', 'PatchOptions', 'PathSegmentField',
  'PinoLike', 'QuerySet', 'QueryStatus', 'QueueMetricsProvider', 'QueueStats', 'RateLimiter', 'RateLimitingQueue',
  'RateLimitingQueueOptions', 'ReadLimit', 'ReadLimits', 'ReaderOptions', 'ReconcileErrorReason', 'ReconcileObservation', 'ReconcileResult',
  'RegistryOptions', 'RelistSummary', 'RequestObservation', 'RequestOptions', 'RequeueAfter', 'ResolveContext', 'ResourceClient',
  'ResourceInfo', 'RunWorkersOptions', 'SecretData', 'SecretProviderOptions', 'SecretReader', 'SelectorOptions', 'SetTargetRef',
  'SnapshotClient', 'SnapshotDelta', 'SnapshotQuery', 'SnapshotSource', 'SnapshotsOptions', 'SocketBudgetOptions', 'SourceQuery', 'SourceReader',
  'StaticProviderOptions', 'StatusConnection', 'TargetRef', 'Timer', 'Transform', 'WatchEvent', 'WatchOptions', 'WatchOwnersOptions', 'WinstonLike',
  'Wire', 'WorkContext', 'WorkHandler', 'WriteConnection', 'WriteOptions', 'WriteStatusOptions', 'WriteStatusResult',
];

/** `actual` is `expected` (both sorted), or the assertion names what was added and what removed. */
function assertSameNames(actual: readonly string[], expected: readonly string[], what: string): void {
  const added = actual.filter((n) => !expected.includes(n));
  const removed = expected.filter((n) => !actual.includes(n));
  assert.deepEqual({ added, removed }, { added: [], removed: [] }, `${what} changed: update the list in cmd/packaging.test.ts and docs/library.md's count, or undo the change`);
  assert.deepEqual(actual, [...expected].sort(), `${what}: keep the list sorted`);
}

/** The names each declaration file exports, types included, as a TypeScript consumer of the package sees them. */
function declaredExports(files: readonly string[]): Map<string, string[]> {
  const program = ts.createProgram(files, { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, target: ts.ScriptTarget.ES2023, types: ['node'], skipLibCheck: true, noEmit: true });
  const checker = program.getTypeChecker();
  return new Map(files.map((file) => {
    const source = program.getSourceFile(file);
    const module = source === undefined ? undefined : checker.getSymbolAtLocation(source);
    assert.ok(module !== undefined, `${file} is not a module`);
    return [file, checker.getExportsOfModule(module).map((symbol) => symbol.getName()).sort()];
  }));
}

// The package as `npm pack` makes it: a copy of the working tree (what git tracks or would track),
// compiled as `npm run build` does, in a scratch directory of its own under the OS temp dir (never
// inside node_modules, which checkouts may share); its node_modules links to the installed packages
// so that the compiled files resolve them.
const scratch = mkdtempSync(path.join(tmpdir(), 'fleetcache-packaging-'));
const pkgDir = path.join(scratch, 'pkg');
const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as PackageJson;
let packed = new Set<string>();
const readPacked = (file: string): string => readFileSync(path.join(pkgDir, file), 'utf8');
/** README and every document of docs/ as the package carries them, one after another. */
const packedDocs = (): string => [...packed].filter((f) => f === 'README.md' || /^docs\/[^/]+\.md$/.test(f)).sort().map(readPacked).join('\n');

before(() => {
  const tracked = execFileSync('git', ['ls-files', '-co', '--exclude-standard', '-z'], { cwd: root, encoding: 'utf8' }).split('\0').filter((f) => f !== '' && existsSync(path.join(root, f)));
  for (const file of tracked) cpSync(path.join(root, file), path.join(pkgDir, file));
  symlinkSync(path.join(root, 'node_modules'), path.join(pkgDir, 'node_modules'), 'dir');
  // Compiled from the working tree: tsc emits nothing for sources under node_modules.
  execFileSync(process.execPath, [path.join(root, 'node_modules/typescript/bin/tsc'), '-p', path.join(root, 'tsconfig.build.json'), '--outDir', path.join(pkgDir, 'dist')], { stdio: 'inherit' });
  const [report] = JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: pkgDir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })) as { files: { path: string }[] }[];
  packed = new Set(report?.files.map((f) => f.path));
});
after(() => { rmSync(scratch, { recursive: true, force: true }); });

describe('the npm package', () => {
  const entryFiles = (): string[] => [
    ...Object.values(pkg.exports).flatMap((e) => (typeof e === 'string' ? [e] : [e.default, e.types])),
    pkg.bin.fleetcache,
  ].map((f) => path.posix.normalize(f));

  it('holds the LICENSE, and every export and bin target', () => {
    assert.ok(packed.size > 0);
    for (const file of ['LICENSE', 'package.json', 'README.md', 'docs/library.md', ...entryFiles()]) assert.ok(packed.has(file), file);
    assert.match(readPacked('LICENSE'), /^ {33}Apache License\n {27}Version 2\.0, January 2004\n/);
  });

  it('ships no source map whose sources it does not ship', () => {
    for (const map of [...packed].filter((f) => f.endsWith('.map'))) {
      const { sources } = JSON.parse(readPacked(map)) as { sources: string[] };
      for (const source of sources) assert.ok(packed.has(path.posix.normalize(path.posix.join(path.posix.dirname(map), source))), `${map} points at ${source}, which is not shipped`);
    }
  });

  it('holds no private key material', () => {
    for (const file of packed) {
      assert.doesNotMatch(file, /\.(key|pem|p12|pfx)$/, file);
      assert.doesNotMatch(readPacked(file), keyMaterial, file);
    }
  });

  it('holds no demo, scenario, conformance, service-running or manifest-generating code, and no tests', () => {
    for (const file of packed) {
      assert.doesNotMatch(file, /(^|\/)(demo|scenarios|conformance|flux|kind|bench|config|testdata)\//, file);
      assert.doesNotMatch(file, /^dist\/e2e\/(service|fleet)\.|gen-manifests|\.test\.|(?<!\.d)\.ts$/, file);
    }
  });

  it('holds every file its entry points import, every package they import is a dependency, and nothing else compiled', () => {
    const reached = closure(entryFiles(), packed, readPacked);
    const allowed = new Set([...Object.keys(pkg.dependencies), ...Object.keys(pkg.peerDependencies)]);
    for (const name of reached.packages) assert.ok(allowed.has(name), `${name} is imported by the package but is not a dependency or peer dependency`);
    // A module counts as reached by its JavaScript or its declarations (tsc emits both for each;
    // type-only modules have JavaScript nothing imports, internal ones declarations nothing names).
    const module = (file: string): string => file.replace(/(\.d\.ts|\.js)$/, '');
    const reachedModules = new Set([...reached.files].map(module));
    const unreached = [...packed].filter((f) => f.startsWith('dist/') && !reachedModules.has(module(f)));
    assert.deepEqual(unreached, [], 'compiled modules no entry point imports');
    // The build script the harness runs needs the pinned Go modules beside it.
    assert.ok(reached.files.has('e2e/build-binaries.sh'));
    for (const binary of ['etcd', 'kube-apiserver']) for (const file of ['go.mod', 'go.sum']) assert.ok(packed.has(`e2e/gomod/${binary}/${file}`), `${binary}/${file}`);
  });

  /** Runs `script` as an ES module beside the package, importing it by name as an embedder does; its stdout as JSON. */
  const consumer = (script: string): unknown => {
    const link = path.join(scratch, 'node_modules/fleetcache');
    if (!existsSync(link)) {
      mkdirSync(path.dirname(link), { recursive: true });
      symlinkSync(pkgDir, link, 'dir');
    }
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], { cwd: scratch, encoding: 'utf8' });
    assert.equal(run.status, 0, run.stderr);
    return JSON.parse(run.stdout);
  };
  /** The packed file of an export (`.`, `./manager`…): its declarations or its JavaScript. */
  const exportFile = (entry: string, kind: 'types' | 'default'): string => {
    const target = pkg.exports[entry];
    assert.ok(target !== undefined && typeof target !== 'string', entry);
    return path.posix.normalize(target[kind]);
  };

  it('resolves the manager kit and the pipeline controller by name: `fleetcache/manager` and `fleetcache/pipeline` load from the compiled package, beside `fleetcache`', () => {
    assert.ok(packed.has('dist/lib/manager/index.js') && packed.has('dist/lib/manager/index.d.ts'));
    const seen = consumer([
      "const kit = await import('fleetcache/manager');",
      "const lib = await import('fleetcache');",
      "const pipeline = await import('fleetcache/pipeline');",
      "console.log(JSON.stringify({ kit: Object.keys(kit).sort(), manager: typeof kit.Manager, registry: typeof lib.Registry, watchOwners: typeof lib.watchOwners, pipeline: Object.keys(pipeline).sort() }));",
    ].join('\n')) as { kit: string[]; manager: string; registry: string; watchOwners: string; pipeline: string[] };
    assert.deepEqual([seen.manager, seen.registry, seen.watchOwners], ['function', 'function', 'function']);
    for (const name of ['Manager', 'signalHandler', 'syncedCheck', 'LeaderElector', 'KubeAuthFilter', 'ManagerMetrics', 'HttpServer']) assert.ok(seen.kit.includes(name), `fleetcache/manager exports ${name}`);
    for (const name of ['PipelineController', 'PIPELINE_GVK', 'validatePipelineSpec', 'recordApproval', 'PromotionError']) assert.ok(seen.pipeline.includes(name), `fleetcache/pipeline exports ${name}`);
  });

  it('exports from `fleetcache` exactly its listed names, values and types, and loads none of the service\'s controller, Git or manager code', () => {
    const values = consumer("const lib = await import('fleetcache'); console.log(JSON.stringify(Object.keys(lib).sort()));") as string[];
    const declarations = path.join(pkgDir, exportFile('.', 'types'));
    const declared = declaredExports([declarations]).get(declarations) ?? [];
    assertSameNames(values, ROOT_VALUES, 'the values `fleetcache` exports');
    assertSameNames(declared.filter((name) => !values.includes(name)), ROOT_TYPES, 'the types `fleetcache` exports');
    const loaded = closure([exportFile('.', 'default')], packed, readPacked).files;
    assert.deepEqual([...loaded].filter((file) => /^dist\/lib\/(pipeline|gitops|manager)\//.test(file)), [], 'modules `import \'fleetcache\'` loads');
    const stated = /^The root entry exports (\d+) names\b/m.exec(readPacked('docs/library.md'))?.[1];
    assert.equal(Number(stated), ROOT_VALUES.length + ROOT_TYPES.length, 'docs/library.md\'s count of the root entry\'s names ("The root entry exports N names")');
  });

  it('documents every entry point in docs/library.md\'s table, and every name README and docs/ import from one is exported by it', () => {
    const library = readPacked('docs/library.md');
    const section = library.indexOf('\n## Entry points\n');
    assert.ok(section >= 0, 'docs/library.md has an "Entry points" section');
    const table = library.slice(section, library.indexOf('\n\n', library.indexOf('\n| ', section)));
    const documented = [...table.matchAll(/^\| `(fleetcache(?:\/[a-z]+)?)` \|/gm)].map((m) => m[1] ?? '');
    const entries = Object.keys(pkg.exports).filter((e) => e !== './package.json');
    assert.deepEqual(documented.sort(), entries.map((e) => (e === '.' ? 'fleetcache' : `fleetcache/${e.slice(2)}`)).sort());
    const declarations = new Map(entries.map((e) => [e === '.' ? 'fleetcache' : `fleetcache/${e.slice(2)}`, path.join(pkgDir, exportFile(e, 'types'))]));
    const exported = declaredExports([...declarations.values()]);
    const imports = [...packedDocs().matchAll(/^```ts\n([\s\S]*?)^```$/gm)]
      .flatMap((block) => [...(block[1] ?? '').matchAll(/^import\s+(?:type\s+)?\{([^}]*)\}\s+from\s+'([^']+)';$/gm)])
      .filter((m) => declarations.has(m[2] ?? ''))
      .flatMap((m) => (m[1] ?? '').split(',').map((name) => ({ entry: m[2] ?? '', name: name.trim().replace(/^type\s+/, '') })).filter((i) => i.name !== ''));
    assert.ok(imports.length >= 20, `${imports.length} names imported from the package in README's and docs/' examples`);
    for (const { entry, name } of imports) assert.ok(exported.get(declarations.get(entry) ?? '')?.includes(name), `README or docs/ import ${name} from '${entry}', which does not export it`);
  });
});

/** Whether .dockerignore's rules (last match wins, `!` re-includes) leave `file` in the build context. */
function inContext(file: string, rules: readonly string[]): boolean {
  let included = true;
  for (const rule of rules) {
    const negated = rule.startsWith('!');
    const pattern = negated ? rule.slice(1) : rule;
    const glob = new RegExp(`^${pattern.split('**/').map((part) => part.split('*').map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('[^/]*')).join('(?:.*/)?')}(?:/.*)?$`);
    if (glob.test(file)) included = negated;
  }
  return included;
}

/** The packages `npm ci --omit=dev` installs from the lockfile: every entry not marked dev. */
interface LockedPackage {
  readonly dev?: boolean;
  readonly dependencies?: Record<string, string>;
  readonly optionalDependencies?: Record<string, string>;
  readonly peerDependencies?: Record<string, string>;
  readonly peerDependenciesMeta?: Record<string, { readonly optional?: boolean }>;
}

function lockedRuntimePackages(): Map<string, LockedPackage> {
  const lock = JSON.parse(readFileSync(path.join(root, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockedPackage> };
  return new Map(Object.entries(lock.packages).filter(([key, entry]) => key !== '' && entry.dev !== true));
}

/** Node's lookup of `name` from the lockfile entry `from` ('' for the root): nearest node_modules up. */
function resolveLocked(installed: ReadonlyMap<string, unknown>, from: string, name: string): string | undefined {
  let dir = from;
  for (;;) {
    const candidate = `${dir === '' ? '' : `${dir}/`}node_modules/${name}`;
    if (installed.has(candidate)) return candidate;
    if (dir === '') return undefined;
    const cut = dir.lastIndexOf('node_modules/');
    dir = cut <= 0 ? '' : dir.slice(0, cut - 1);
  }
}

describe('Dockerfile', () => {
  const dockerfile = readFileSync(path.join(root, 'Dockerfile'), 'utf8');
  const stages = dockerfile.split(/^FROM /m).slice(1);
  const stage = (name: string): string => stages.find((s) => s.split('\n')[0]?.endsWith(` AS ${name}`)) ?? '';
  const rules = readFileSync(path.join(root, '.dockerignore'), 'utf8').split('\n').filter((l) => l !== '' && !l.startsWith('#'));

  it('copies into the build stage every source tsconfig.build.json compiles, none of them ignored', () => {
    const copies = [...stage('build').matchAll(/^COPY (?!--from)(.+) (\S+)$/gm)].flatMap((m) => (m[1] ?? '').split(' '));
    for (const source of copies) assert.ok(existsSync(path.join(root, source)), source);
    const compiled = execFileSync(process.execPath, [path.join(root, 'node_modules/typescript/bin/tsc'), '-p', path.join(root, 'tsconfig.build.json'), '--listFilesOnly'], { encoding: 'utf8' })
      .split('\n').filter((f) => f.startsWith(root) && !f.includes('/node_modules/')).map((f) => path.relative(root, f));
    assert.ok(compiled.length > 50);
    for (const file of [...compiled, 'tsconfig.json', 'tsconfig.build.json', 'package.json', 'package-lock.json']) {
      assert.ok(copies.some((c) => file === c || file.startsWith(`${c}/`)), `${file} is compiled but not copied into the build stage`);
      assert.ok(inContext(file, rules), `${file} is compiled but .dockerignore leaves it out`);
    }
    for (const file of ['e2e/demo/demo.ts', 'e2e/harness/cluster.integration.test.ts', 'e2e/harness/testdata/start-and-hang.ts', 'bench/README.md']) assert.ok(!inContext(file, rules), `${file} is sent to the Docker build`);
  });

  it('installs the runtime dependencies from the lockfile alone, @kubernetes/client-node included', () => {
    const runs = [...stage('deps').matchAll(/^RUN (.+)$/gm)].map((m) => m[1] ?? '').join('\n');
    assert.match(runs, /\bnpm ci --omit=dev\b/);
    assert.doesNotMatch(dockerfile, /\bnpm (install|i|add)\b|\byarn\b|\bpnpm\b/, 'a dependency installed outside the lockfile');
    const installed = lockedRuntimePackages();
    // What the image's code imports is installed, and so is everything those packages need.
    const image = closure([pkg.bin.fleetcache.replace(/^\.\//, '')], packed, readPacked);
    assert.ok(image.packages.has('@kubernetes/client-node'));
    const queue = [...image.packages].map((name) => ({ from: '', name }));
    const checked = new Set<string>();
    for (let next = queue.pop(); next !== undefined; next = queue.pop()) {
      const key = resolveLocked(installed, next.from, next.name);
      assert.ok(key !== undefined, `${next.name} (needed by ${next.from === '' ? 'the service' : next.from}) is not installed by npm ci --omit=dev`);
      if (checked.has(key)) continue;
      checked.add(key);
      const entry = installed.get(key) ?? {};
      const optional = new Set([...Object.keys(entry.optionalDependencies ?? {}), ...Object.entries(entry.peerDependenciesMeta ?? {}).filter(([, m]) => m.optional === true).map(([n]) => n)]);
      for (const name of [...Object.keys(entry.dependencies ?? {}), ...Object.keys(entry.peerDependencies ?? {})]) if (!optional.has(name)) queue.push({ from: key, name });
    }
  });

  it('copies from the build stage what the bin imports and nothing else, no key among it, and starts the bin entry', () => {
    const built = [...dockerfile.matchAll(/^COPY --from=build \/src\/(\S+) \S+$/gm)].map((m) => m[1] ?? '');
    assert.deepEqual(built, ['dist/lib', 'dist/cmd']);
    const fromContext = [...(stages.at(-1) ?? '').matchAll(/^COPY (?!--from)(.+) \.\/$/gm)].flatMap((m) => (m[1] ?? '').split(' '));
    assert.deepEqual(fromContext, ['package.json', 'LICENSE']);
    const inImage = new Set([...fromContext, ...[...packed].filter((f) => built.some((dir) => f.startsWith(`${dir}/`)))]);
    const entry = /^ENTRYPOINT \["node", "([^"]+)"\]$/m.exec(dockerfile)?.[1] ?? '';
    assert.equal(`./${entry}`, pkg.bin.fleetcache);
    closure([entry], inImage, readPacked);
    for (const file of inImage) assert.doesNotMatch(readPacked(file), keyMaterial, file);
    // The compiled entry runs: --help from dist/ prints the same text as from the sources.
    const help = execFileSync(process.execPath, [path.join(pkgDir, entry), '--help'], { encoding: 'utf8' });
    assert.equal(help, usage());
    assert.match(readPacked(entry), /^#!\/usr\/bin\/env node\n/);
  });

  it('on a Node older than 22.19 the bin says so in one line and exits 1, before loading anything else (the machine\'s /usr/bin/node when older, else this Node made to report 22.18.0)', () => {
    const entry = path.join(pkgDir, pkg.bin.fleetcache);
    const system = '/usr/bin/node';
    const systemVersion = existsSync(system) ? execFileSync(system, ['-p', 'process.versions.node'], { encoding: 'utf8' }).trim() : undefined;
    // On a real old Node, loading the service (undici, client-node) would fail with another error:
    // the one line proves the check ran first. The fake only proves the check is wired.
    const [node, args, version] = systemVersion !== undefined && unsupportedNode(systemVersion) !== undefined
      ? [system, [entry, '--help'], systemVersion]
      : [process.execPath, ['--import', `data:text/javascript,Object.defineProperty(process,'versions',{value:{...process.versions,node:'22.18.0'}})`, entry, '--help'], '22.18.0'];
    const result = spawnSync(node, args, { encoding: 'utf8' });
    assert.deepEqual({ status: result.status, stdout: result.stdout, stderr: result.stderr }, { status: 1, stdout: '', stderr: `fleetcache needs Node.js 22.19.0 or newer; this is Node.js ${version}\n` });
  });

  it('caps V8\'s young generation, so a fleet syncing at once does not commit memory no object stays in, and the manifest keeps the cap', () => {
    const image = imageNodeOptions();
    assert.match(image, /^--max-semi-space-size=\d+$/);
    // A container's NODE_OPTIONS replaces the image's: the manifest must repeat every image flag.
    const deployed = manifestNodeOptions().split(/\s+/);
    for (const flag of image.split(/\s+/)) assert.ok(deployed.includes(flag), `config/manager/manager.yaml's NODE_OPTIONS drops the image's ${flag}`);
  });

  it('runs as a non-root user', () => {
    assert.match(dockerfile, /^USER [1-9]\d*:[1-9]\d*$/m);
  });
});
