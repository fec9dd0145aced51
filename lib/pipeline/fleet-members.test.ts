import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { serviceAccountIdentity } from '../cluster/index.ts';
import type { OwnerRef, Registry } from '../registry/index.ts';
import { FleetMembers } from './fleet-members.ts';
import { validatePipelineSpec, type ValidPipelineSpec } from './validate.ts';

// Who may list the Secrets a fleet's selector picks from: a Pipeline acting as a ServiceAccount
// (its Role decides), or the service itself only when the operator opted in; clusters listed by
// name are read by name (get) under either identity.

function fleetSpec(fleet: Record<string, unknown>): ValidPipelineSpec {
  const result = validatePipelineSpec({
    appRef: { apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease', name: 'podinfo' },
    environments: [{ name: 'dev', targets: [{ namespace: 'team-a' }] }, { name: 'prod', fleet: { namespace: 'apps', ...fleet } }],
    promotion: { strategy: 'patch', patch: { path: '/spec/chart/spec/version' } },
  }, 'team-a');
  assert.ok(result.valid, JSON.stringify(result));
  return result.spec;
}

const secret = (name: string, labels: Record<string, string>): object => ({ metadata: { name, namespace: 'team-a', labels } });

/** A registry whose every reader is synced and lists `objects`; records each target asked for. */
function fakeRegistry(objects: readonly object[]): { readonly registry: Pick<Registry, 'watchTargetAndGetReader'>; readonly asked: { namespace: string | undefined; kind: string; identity: string }[] } {
  const asked: { namespace: string | undefined; kind: string; identity: string }[] = [];
  const registry = {
    watchTargetAndGetReader: (_cluster: unknown, target: { gvk: { kind: string }; namespace?: string }, owner: OwnerRef) => {
      asked.push({ namespace: target.namespace, kind: target.gvk.kind, identity: owner.identity?.kind ?? 'own' });
      return Promise.resolve({ synced: true, lastError: undefined, list: () => objects, get: () => undefined });
    },
  } as unknown as Pick<Registry, 'watchTargetAndGetReader'>;
  return { registry, asked };
}

const owner: OwnerRef = { namespace: 'team-a', name: 'podinfo' };
const asAccount: OwnerRef = { ...owner, identity: serviceAccountIdentity('team-a', 'fleet-deployer') };
const secrets = [secret('c1', { fleet: 'prod' }), secret('c2', { fleet: 'prod' }), secret('other', { fleet: 'dev' })];

describe('FleetMembers: who lists a selector\'s Secrets', () => {
  it('lists them as the Pipeline\'s ServiceAccount, in the Pipeline\'s namespace only', async () => {
    const { registry, asked } = fakeRegistry(secrets);
    const members = new FleetMembers(registry);
    const spec = fleetSpec({ clusterSelector: { matchLabels: { fleet: 'prod' } } });
    assert.deepEqual(members.declared('team-a/podinfo', spec, asAccount).map((d) => d.target.namespace), ['team-a']);
    const resolved = await members.resolve('team-a/podinfo', spec, asAccount, AbortSignal.timeout(5_000));
    assert.deepEqual(resolved.membership.get('prod'), { state: 'known' });
    assert.deepEqual(resolved.spec.environments[1]?.targets.map((t) => t.cluster), [{ kind: 'secret', name: 'c1', namespace: 'team-a' }, { kind: 'secret', name: 'c2', namespace: 'team-a' }]);
    assert.deepEqual(asked, [{ namespace: 'team-a', kind: 'Secret', identity: 'impersonate' }]);
  });

  it('refuses a selector under the service\'s own identity without listing anything, saying what to grant', async () => {
    const { registry, asked } = fakeRegistry(secrets);
    const members = new FleetMembers(registry);
    const spec = fleetSpec({ clusterSelector: { matchLabels: { fleet: 'prod' } }, clusters: [{ kind: 'Secret', name: 'edge' }] });
    assert.deepEqual(members.declared('team-a/podinfo', spec, owner), [], 'no list/watch declared for the service');
    const resolved = await members.resolve('team-a/podinfo', spec, owner, AbortSignal.timeout(5_000));
    const state = resolved.membership.get('prod');
    assert.ok(state?.state === 'unreadable', JSON.stringify(state));
    const message = state.error;
    for (const needed of ['spec.serviceAccountName', '--default-service-account', 'get, list and watch on "secrets"', 'namespace team-a', 'config/samples/fleet-tenant-role.yaml', 'fleet.clusters']) {
      assert.ok(message.includes(needed), `"${needed}" in: ${message}`);
    }
    assert.deepEqual(asked, [], 'nothing listed as the service');
    // The cluster listed by name is still a member (read by name, get).
    assert.deepEqual(resolved.spec.environments[1]?.targets.map((t) => t.cluster), [{ kind: 'secret', name: 'edge' }]);
  });

  it('names Cluster API Clusters for a Cluster selector', async () => {
    const { registry } = fakeRegistry([]);
    const resolved = await new FleetMembers(registry).resolve('team-a/podinfo', fleetSpec({ clusterSelector: { kind: 'Cluster', matchLabels: { fleet: 'prod' } } }), owner, AbortSignal.timeout(5_000));
    const state = resolved.membership.get('prod');
    assert.match(state?.state === 'unreadable' ? state.error : '', /lists and watches Cluster API Clusters .* "clusters" in group cluster\.x-k8s\.io/);
  });

  it('lists them as the service when the operator opted in (allowFleetSelectorsAsService)', async () => {
    const { registry, asked } = fakeRegistry(secrets);
    const members = new FleetMembers(registry, { selectorsAsService: true });
    const spec = fleetSpec({ clusterSelector: { matchLabels: { fleet: 'prod' } } });
    const resolved = await members.resolve('team-a/podinfo', spec, owner, AbortSignal.timeout(5_000));
    assert.deepEqual(resolved.membership.get('prod'), { state: 'known' });
    assert.equal(resolved.spec.environments[1]?.targets.length, 2);
    assert.deepEqual(asked, [{ namespace: 'team-a', kind: 'Secret', identity: 'own' }]);
  });
});
