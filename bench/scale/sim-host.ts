// The simulated fleet of the scale benchmark, in a process of its own so that its memory and
// sockets are not counted against fleetcache's. argv: clusters, objects per kind, and optionally
// the objects' shape (shapes.ts; default filler). Seeds every cluster with 4 kinds × objects of
// about 2 KB, then prints one JSON line of kubeconfigs on stdout and serves until stdin closes.
import { startSimulatedClusters } from '../../fixtures/index.ts';
import type { KindDefinition } from '../../fixtures/index.ts';
import { isShape, shapedObject } from './shapes.ts';

const [clusters = 100, objects = 200] = process.argv.slice(2, 4).map(Number);
const shape = process.argv[4] ?? 'filler';
if (!isShape(shape)) throw new TypeError(`sim host: unknown shape ${JSON.stringify(shape)}`);

/** The four kinds every cluster serves: two built in, two as if from CRDs (as a Flux fleet has). */
export const KINDS: readonly { readonly group: string; readonly version: string; readonly kind: string; readonly define?: KindDefinition }[] = [
  { group: '', version: 'v1', kind: 'ConfigMap' },
  { group: '', version: 'v1', kind: 'Secret' },
  { group: 'helm.toolkit.fluxcd.io', version: 'v2', kind: 'HelmRelease', define: { group: 'helm.toolkit.fluxcd.io', version: 'v2', kind: 'HelmRelease', plural: 'helmreleases', namespaced: true, status: true } },
  { group: 'kustomize.toolkit.fluxcd.io', version: 'v1', kind: 'Kustomization', define: { group: 'kustomize.toolkit.fluxcd.io', version: 'v1', kind: 'Kustomization', plural: 'kustomizations', namespaced: true, status: true } },
];

const fleet = await startSimulatedClusters(clusters, {
  namePrefix: 'scale',
  namespaces: ['apps'],
  kinds: KINDS.flatMap((k) => (k.define === undefined ? [] : [k.define])),
});
for (const [c, sim] of fleet.entries()) {
  for (const k of KINDS) {
    const apiVersion = k.group === '' ? k.version : `${k.group}/${k.version}`;
    for (let i = 0; i < objects; i++) {
      const { object, status } = shapedObject(shape, k.kind, apiVersion, c, i);
      const created = sim.store.create(object);
      // Custom kinds with a status subresource drop status on create: written after, as a controller would.
      if (status !== undefined) sim.store.updateStatus({ ...created, status });
    }
  }
}
process.stdout.write(`${JSON.stringify(fleet.map((sim) => ({ name: sim.name, kubeconfig: sim.kubeconfig })))}\n`);
process.stdin.resume();
process.stdin.on('end', () => {
  void Promise.all(fleet.map((sim) => sim.close())).then(() => { process.exit(0); });
});
