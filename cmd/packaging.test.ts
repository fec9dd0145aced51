import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadAll } from 'js-yaml';
import { usage } from './flags.ts';
import { staleManifests } from './gen-manifests.ts';
import { unsupportedNode } from './node-version.ts';

const root = fileURLToPath(new URL('../', import.meta.url));

describe('config/', () => {
  it('holds the Pipeline CRD exactly as generated from fixtures/crds/pipeline.ts', async () => {
    assert.deepEqual(await staleManifests(), [], 'run node cmd/gen-manifests.ts');
  });

  it('parses as YAML, and every kustomization lists files that exist', () => {
    const dirs = ['config/crd', 'config/rbac', 'config/manager', 'config/default'];
    for (const dir of dirs) {
      for (const file of readdirSync(path.join(root, dir), { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.yaml'))) {
        const docs = loadAll(readFileSync(path.join(root, dir, file), 'utf8'));
        assert.ok(docs.length > 0, `${dir}/${file}`);
      }
      const kustomization = loadAll(readFileSync(path.join(root, dir, 'kustomization.yaml'), 'utf8'))[0] as { resources: string[] };
      for (const resource of kustomization.resources) assert.ok(existsSync(path.join(root, dir, resource)), `${dir}: ${resource}`);
    }
  });

  it('runs the manager non-root on a read-only root filesystem, with probes on the probe port', () => {
    const [deployment] = loadAll(readFileSync(path.join(root, 'config/manager/manager.yaml'), 'utf8')) as {
      spec: { template: { spec: { securityContext: { runAsNonRoot: boolean }; containers: {
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
    assert.ok(container.args.includes('--leader-elect'));
    // Every flag the manifest passes is one the binary accepts.
    for (const arg of container.args) assert.match(usage(), new RegExp(`  ${arg.replace(/=.*$/, '')}[ \\n]`), arg);
    assert.ok(!container.args.some((a) => a.startsWith('--metrics-secure')), 'metrics stay authenticated (the default)');
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
    assert.deepEqual(role('fleetcache-metrics-reader'), [{ nonResourceURLs: ['/metrics', '/debug/caches'], verbs: ['get'] }]);
  });
});

describe('Dockerfile', () => {
  // Compiled as `npm run build` does, to a scratch directory inside node_modules (so that the
  // compiled files still resolve the installed packages).
  const scratch = path.join(root, 'node_modules/.cache/fleetcache-packaging-test');
  before(() => {
    rmSync(scratch, { recursive: true, force: true });
    execFileSync(process.execPath, [path.join(root, 'node_modules/typescript/bin/tsc'), '-p', path.join(root, 'tsconfig.build.json'), '--outDir', path.join(scratch, 'dist')], { stdio: 'inherit' });
  });
  after(() => { rmSync(scratch, { recursive: true, force: true }); });

  const dockerfile = readFileSync(path.join(root, 'Dockerfile'), 'utf8');
  const ignored = readFileSync(path.join(root, '.dockerignore'), 'utf8').split('\n').filter((l) => l !== '' && !l.startsWith('#'));

  it('copies from the build context only files that exist and are not ignored', () => {
    const copies = [...dockerfile.matchAll(/^COPY (?!--from)(.+) (\S+)$/gm)].flatMap((m) => (m[1] ?? '').split(' '));
    assert.ok(copies.length >= 5);
    for (const source of copies) {
      assert.ok(existsSync(path.join(root, source)), source);
      assert.ok(!ignored.includes(source), `${source} is in .dockerignore`);
    }
  });

  it('copies from the build stage exactly what the build produces, and starts the bin entry', () => {
    const built = [...dockerfile.matchAll(/^COPY --from=build \/src\/(\S+) \S+$/gm)].map((m) => m[1] ?? '');
    assert.deepEqual(built, ['dist/lib', 'dist/cmd', 'dist/fixtures']);
    for (const dir of built) assert.ok(existsSync(path.join(scratch, dir)), dir);
    const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { bin: { fleetcache: string } };
    const entry = /^ENTRYPOINT \["node", "([^"]+)"\]$/m.exec(dockerfile)?.[1];
    assert.equal(`./${entry ?? ''}`, pkg.bin.fleetcache);
    // The compiled entry runs: --help from dist/ prints the same text as from the sources.
    const help = execFileSync(process.execPath, [path.join(scratch, entry ?? ''), '--help'], { encoding: 'utf8' });
    assert.equal(help, usage());
    assert.match(readFileSync(path.join(scratch, entry ?? ''), 'utf8'), /^#!\/usr\/bin\/env node\n/);
  });

  it('on a Node older than 22.19 the bin says so in one line and exits 1, before loading anything else (the machine\'s /usr/bin/node when older, else this Node made to report 22.18.0)', () => {
    const entry = path.join(scratch, 'dist/cmd/fleetcache.js');
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

  it('runs as a non-root user', () => {
    assert.match(dockerfile, /^USER [1-9]\d*:[1-9]\d*$/m);
  });
});
