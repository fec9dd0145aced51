// Fidelity of the Flux stand-in (standin.ts) to Flux's own kustomize-controller, in what fleetcache
// reads: every case runs, unchanged, against a cluster running the real source-controller and
// kustomize-controller and against one running the real source-controller and the stand-in. A
// failure on the stand-in's side is a bug in the stand-in.
import assert from 'node:assert/strict';
import { after, afterEach, before, describe, it } from 'node:test';
import { RawClient } from '../../fixtures/sim/raw-client.ts';
import { git, GitServer } from '../git/server.ts';
import { eventually, useClusters, type TestCluster } from '../harness/index.ts';
import { startFluxControllers, type FluxControllers } from './controllers.ts';
import { FluxStandIn, KUSTOMIZATION, RECONCILE_REQUESTED_AT } from './standin.ts';
import { kubeConfigFrom } from '../../fixtures/support/index.ts';

const NS = 'conformance';
const KS = `/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/${NS}/kustomizations`;
const GIT = `/apis/source.toolkit.fluxcd.io/v1/namespaces/${NS}/gitrepositories`;
const CONFIGMAP = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  version: "${version}"\n';

interface Condition { readonly type: string; readonly status: string; readonly reason: string }
interface Kustomization {
  readonly metadata: { readonly name: string; readonly generation: number; readonly resourceVersion: string; readonly annotations?: Record<string, string> };
  readonly spec: Record<string, unknown>;
  readonly status?: { readonly observedGeneration?: number; readonly conditions?: readonly Condition[]; readonly lastAppliedRevision?: string; readonly lastHandledReconcileAt?: string };
}

function ready(k: Kustomization): Condition | undefined {
  return k.status?.conditions?.find((c) => c.type === 'Ready');
}

function clientFor(cluster: TestCluster): RawClient {
  const kc = kubeConfigFrom(cluster.adminKubeconfig);
  return new RawClient({ server: cluster.server, caPem: cluster.caData, token: kc.getCurrentUser()?.token });
}

const fixture = useClusters(2, { namePrefix: 'flux-conformance' });

for (const kind of ['real', 'stand-in'] as const) {
  describe(`Kustomization status: ${kind} kustomize-controller`, () => {
    let cluster: TestCluster;
    let client: RawClient;
    let server: GitServer;
    let flux: FluxControllers | undefined;
    let standIn: FluxStandIn | undefined;
    const repo = `conformance-${kind}`;

    async function get(name: string): Promise<Kustomization> {
      const res = await cluster.request('GET', `${KS}/${name}`);
      assert.equal(res.statusCode, 200, JSON.stringify(res.body));
      return res.body as Kustomization;
    }

    async function update(name: string, edit: (k: Kustomization) => Kustomization): Promise<void> {
      await eventually(`${name} is updated`, async () => (await cluster.request('PUT', `${KS}/${name}`, edit(await get(name)))).statusCode === 200);
    }

    /** The Ready conditions a watch sees from `resourceVersion` on, until `until` holds. */
    async function readyStates(name: string, resourceVersion: string, until: (k: Kustomization) => boolean): Promise<string[]> {
      const watch = await client.watch(`${KS}?fieldSelector=metadata.name%3D${name}&resourceVersion=${resourceVersion}`);
      try {
        const seen: string[] = [];
        for (;;) {
          const event = await watch.nextEvent(60_000);
          const k = event.object as unknown as Kustomization;
          const r = ready(k);
          const state = `${r?.status ?? 'none'}/${r?.reason ?? 'none'}`;
          if (seen.at(-1) !== state) seen.push(state);
          if (until(k)) return seen;
        }
      } finally {
        watch.close();
      }
    }

    async function create(name: string, extra: Record<string, unknown> = {}): Promise<Kustomization> {
      const res = await cluster.request('POST', KS, {
        apiVersion: 'kustomize.toolkit.fluxcd.io/v1',
        kind: 'Kustomization',
        metadata: { name, namespace: NS },
        spec: { interval: '10m', prune: true, path: './app', targetNamespace: NS, sourceRef: { kind: 'GitRepository', name: 'repo' }, postBuild: { substitute: { version: '1.0.0' } }, ...extra },
      });
      assert.equal(res.statusCode, 201, JSON.stringify(res.body));
      return eventually(`${name} is Ready`, async () => {
        const k = await get(name);
        return ready(k)?.status === 'True' && k.status?.observedGeneration === k.metadata.generation && k;
      }, 60_000);
    }

    async function artifactRevision(): Promise<string | undefined> {
      return ((await cluster.request('GET', `${GIT}/repo`)).body as { status?: { artifact?: { revision?: string } } }).status?.artifact?.revision;
    }

    before(async () => {
      const clusters = fixture.clusters as [TestCluster, TestCluster];
      cluster = kind === 'real' ? clusters[0] : clusters[1];
      client = clientFor(cluster);
      server = await GitServer.start();
      await server.seed(repo, { 'app/configmap.yaml': CONFIGMAP });
      flux = await startFluxControllers(cluster, { kustomizeController: kind === 'real' });
      if (kind === 'stand-in') {
        standIn = new FluxStandIn({ name: cluster.name, kubeconfig: cluster.adminKubeconfig, kinds: [KUSTOMIZATION] });
        await standIn.start();
      }
      assert.equal((await cluster.request('POST', '/api/v1/namespaces', { metadata: { name: NS } })).statusCode, 201);
      const res = await cluster.request('POST', GIT, {
        apiVersion: 'source.toolkit.fluxcd.io/v1',
        kind: 'GitRepository',
        metadata: { name: 'repo', namespace: NS },
        spec: { url: server.url(repo), ref: { branch: 'main' }, interval: '2s' },
      });
      assert.equal(res.statusCode, 201, JSON.stringify(res.body));
    }, { timeout: 600_000 });

    afterEach((t) => {
      if ('passed' in t && !t.passed && flux !== undefined) process.stderr.write(`\n=== Flux (${kind}) after "${t.name}" ===\n${flux.logs(40)}\n`);
    });

    after(async () => {
      client.close();
      await standIn?.stop();
      await flux?.stop();
      await server.close();
    });

    it('reports the source commit as lastAppliedRevision main@sha1:<sha>; spec.revision does not exist', async () => {
      const sha = (await git(server.bare(repo), 'rev-parse', 'main')).trim();
      const k = await create('revision', { revision: '9.9.9' });
      assert.equal(k.spec.revision, undefined, 'the CRD prunes spec.revision: Flux has no such field');
      assert.equal(k.status?.lastAppliedRevision, `main@sha1:${sha}`);
      assert.equal(k.status.lastAppliedRevision, await artifactRevision());
      assert.equal(ready(k)?.reason, 'ReconciliationSucceeded');
    });

    it('starts every reconcile, one nothing changed for included, with Ready=Unknown/Progressing', async () => {
      const k = await create('requested');
      const at = new Date().toISOString();
      const seen = readyStates('requested', k.metadata.resourceVersion, (o) => o.status?.lastHandledReconcileAt === at && ready(o)?.status === 'True');
      await update('requested', (o) => ({ ...o, metadata: { ...o.metadata, annotations: { ...o.metadata.annotations, [RECONCILE_REQUESTED_AT]: at } } }));
      assert.deepEqual((await seen).filter((s) => s !== 'True/ReconciliationSucceeded').slice(0, 1), ['Unknown/Progressing']);
      const after = await get('requested');
      assert.equal(after.status?.observedGeneration, after.metadata.generation);
      assert.equal(after.status.lastAppliedRevision, k.status?.lastAppliedRevision, 'the same commit, applied again');
    });

    it('with spec.suspend: true keeps Ready=True and moves observedGeneration, while a new commit is not applied', async () => {
      const k = await create('suspended');
      const applied = k.status?.lastAppliedRevision;
      const seen = readyStates('suspended', k.metadata.resourceVersion, (o) => o.status?.observedGeneration === o.metadata.generation && o.metadata.generation > k.metadata.generation);
      await update('suspended', (o) => ({ ...o, spec: { ...o.spec, suspend: true, postBuild: { substitute: { version: '2.0.0' } } } }));
      assert.deepEqual([...new Set(await seen)], ['True/ReconciliationSucceeded'], 'Ready stays True through the suspended update');
      const sha = await server.commit(repo, { 'app/extra.yaml': CONFIGMAP.replace('name: app', 'name: extra') }, 'a commit Flux must not apply');
      await eventually('the source has the new commit', async () => await artifactRevision() === `main@sha1:${sha}`, 60_000);
      // A requested reconcile is handled (status says so) yet applies nothing while suspended.
      const at = new Date().toISOString();
      await update('suspended', (o) => ({ ...o, metadata: { ...o.metadata, annotations: { ...o.metadata.annotations, [RECONCILE_REQUESTED_AT]: at } } }));
      const handled = await eventually('the request is handled', async () => { const o = await get('suspended'); return o.status?.lastHandledReconcileAt === at && o; }, 60_000);
      assert.equal(handled.status?.lastAppliedRevision, applied, 'the new commit is not applied');
      assert.equal(ready(handled)?.status, 'True');
      assert.equal(handled.status?.observedGeneration, handled.metadata.generation);
    });
  });
}
