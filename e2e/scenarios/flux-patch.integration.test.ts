// Scenario: the patch strategy under real Flux. The Pipeline patches each environment's child
// Kustomization (spec.postBuild.substitute.version) in place, but that child is itself applied from
// Git by the parent Kustomization `flux-system/fleet` (it carries kustomize.toolkit.fluxcd.io/name),
// so kustomize-controller puts Git's value back on its next reconcile. fleetcache must say so — a
// `Drifted` condition (reason RevertedByFlux) and a Warning Event — instead of leaving the promotion
// `Succeeded` and the Pipeline Ready and idle while the environment silently runs the old version.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { APP_NAMESPACE, PIPELINE_NAME, PIPELINE_NAMESPACE, readPipeline, type Fleet } from '../fleet.ts';
import { fluxPipelineObject, KUSTOMIZATIONS, releaseToDevInGit, VERSION_PATH } from '../flux/fleet.ts';
import type { GitServer } from '../git/server.ts';
import { eventually, type TestCluster } from '../harness/index.ts';
import { useFluxFleet } from '../flux/scenario.ts';

/** Parents and children re-apply from Git this often: the revert comes within one interval. */
const INTERVAL = '5s';

/** The Flux Pipeline, promoting by patching the child Kustomization in each target. */
function patchPipeline(url: string): object {
  const object = fluxPipelineObject(url) as { spec: Record<string, unknown> };
  return { ...object, spec: { ...object.spec, promotion: { strategy: 'patch', patch: { path: VERSION_PATH } } } };
}

async function pipelineEvents(cluster: TestCluster): Promise<{ type: string; reason: string; message: string }[]> {
  const res = await cluster.request('GET', `/api/v1/namespaces/${PIPELINE_NAMESPACE}/events?fieldSelector=involvedObject.name%3D${PIPELINE_NAME}`);
  return (res.body as { items?: { type: string; reason: string; message: string }[] }).items ?? [];
}

describe('scenario: the patch strategy under real Flux', () => {
  const scenario = useFluxFleet('flux-patch', { fleet: { kustomizationInterval: INTERVAL, pipeline: patchPipeline } });
  let fleet: Fleet;
  let server: GitServer;
  before(() => { ({ fleet, server } = scenario); });

  it('a patched value the parent Kustomization puts back is reported: Drifted/RevertedByFlux and a Warning Event', async () => {
    const child = await fleet.staging.request('GET', `${KUSTOMIZATIONS}/namespaces/${APP_NAMESPACE}/kustomizations/podinfo`);
    assert.equal((child.body as { metadata: { labels?: Record<string, string> } }).metadata.labels?.['kustomize.toolkit.fluxcd.io/name'], 'fleet', 'the patched object is managed by the parent');
    assert.equal((await readPipeline(fleet)).status?.conditions?.find((c) => c.type === 'Drifted'), undefined, 'no drift before any patch');

    await releaseToDevInGit(server, '1.1.0', INTERVAL);
    await eventually('fleetcache patched staging and recorded it Succeeded', async () => (await readPipeline(fleet)).status?.promotions?.some((r) => r.environment === 'staging' && r.revision === '1.1.0' && r.state === 'Succeeded') === true, 120_000);

    // Flux re-applies Git's 1.0.0 over the patch within an interval; fleetcache must say so.
    const drifted = await eventually('the Pipeline reports the revert', async () => {
      const condition = (await readPipeline(fleet)).status?.conditions?.find((c) => c.type === 'Drifted');
      return condition?.status === 'True' && condition;
    }, 30_000);
    assert.equal(drifted.reason, 'RevertedByFlux');
    // staging's patch, or prod's when prod was promoted from staging before Flux put staging back:
    // whichever Flux reverted first is the one the condition names at that moment.
    assert.match(drifted.message, /(staging|prod): /);
    assert.match(drifted.message, /git strategy/);
    const event = await eventually('a Warning Event Drifted', async () => (await pipelineEvents(fleet.management)).find((e) => e.reason === 'Drifted'), 30_000);
    assert.equal(event.type, 'Warning');
    assert.match(event.message, /put back by the Flux Kustomization/);

  });
});
