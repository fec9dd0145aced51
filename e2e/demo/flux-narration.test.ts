import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fluxChanges, kustomizationView, shortRevision } from './flux-narration.ts';

const sha = '0123456789abcdef0123456789abcdef01234567';
const other = 'fedcba9876543210fedcba9876543210fedcba98';

function kustomization(version: string, revision: string | undefined, ready: string, requestedAt?: string): unknown {
  // Ready is there to show that the narration does not depend on it (it flickers on every reconcile).
  return {
    metadata: { name: 'podinfo', namespace: 'apps', ...(requestedAt === undefined ? {} : { annotations: { 'reconcile.fluxcd.io/requestedAt': requestedAt } }) },
    spec: { postBuild: { substitute: { version } } },
    status: { ...(revision === undefined ? {} : { lastAppliedRevision: revision }), conditions: [{ type: 'Reconciling', status: 'True' }, { type: 'Ready', status: ready }] },
  };
}

describe('kustomizationView', () => {
  it('reads the version, the reconcile request and the applied commit, beside what runs', () => {
    assert.deepEqual(kustomizationView(kustomization('1.1.0', `main@sha1:${sha}`, 'True', '2026-11-27T12:00:00Z'), '1.0.0'), {
      version: '1.1.0', requestedAt: '2026-11-27T12:00:00Z', appliedRevision: `main@sha1:${sha}`, runs: '1.0.0',
    });
  });
  it('leaves out what is absent or of another type', () => {
    assert.deepEqual(kustomizationView({ spec: { postBuild: { substitute: { version: 3 } } }, status: { lastAppliedRevision: 1 } }, undefined), {
      version: undefined, requestedAt: undefined, appliedRevision: undefined, runs: undefined,
    });
    assert.deepEqual(kustomizationView(null, undefined), { version: undefined, requestedAt: undefined, appliedRevision: undefined, runs: undefined });
  });
});

describe('shortRevision', () => {
  it('shortens a commit reference to seven hex digits and leaves anything else as is', () => {
    assert.equal(shortRevision(`main@sha1:${sha}`), 'main@sha1:0123456');
    assert.equal(shortRevision('1.1.0'), '1.1.0');
  });
});

describe('fluxChanges', () => {
  const v = (object: unknown, runs = '1.0.0') => kustomizationView(object, runs);
  it('tells the first applied commit when the Kustomization is first seen', () => {
    assert.deepEqual(fluxChanges(undefined, v(kustomization('1.0.0', `main@sha1:${sha}`, 'True'))), ['flux: kustomize-controller applied main@sha1:0123456: ConfigMap apps/podinfo at 1.0.0']);
    assert.deepEqual(fluxChanges(undefined, v(kustomization('1.0.0', undefined, 'Unknown'), undefined)), []);
  });
  it('tells a promotion as real Flux carries it out: new spec from Git, reconcile asked, commit applied', () => {
    const start = v(kustomization('1.0.0', `main@sha1:${sha}`, 'True'));
    const asked = v(kustomization('1.0.0', `main@sha1:${sha}`, 'True', 't1'));
    const fetched = v(kustomization('1.1.0', `main@sha1:${sha}`, 'Unknown', 't1'));
    const applied = v(kustomization('1.1.0', `main@sha1:${other}`, 'Unknown', 't1'), '1.1.0');
    assert.deepEqual(fluxChanges(start, asked), ['fleetcache asked Flux to reconcile Kustomization apps/podinfo now (reconcile.fluxcd.io/requestedAt)']);
    assert.deepEqual(fluxChanges(asked, fetched), ['flux: the parent Kustomization applied the new commit\'s folder: Kustomization apps/podinfo now asks for 1.1.0']);
    assert.deepEqual(fluxChanges(fetched, applied), ['flux: kustomize-controller applied main@sha1:fedcba9: ConfigMap apps/podinfo now at 1.1.0']);
  });
  it('tells the new version run when Flux applies the new spec at the commit it had already applied', () => {
    const stale = v(kustomization('1.0.0', `main@sha1:${other}`, 'True', 't1')); // the commit, with the old spec
    const fetched = v(kustomization('1.1.0', `main@sha1:${other}`, 'Unknown', 't1'));
    const applied = v(kustomization('1.1.0', `main@sha1:${other}`, 'True', 't1'), '1.1.0');
    assert.deepEqual(fluxChanges(stale, fetched), ['flux: the parent Kustomization applied the new commit\'s folder: Kustomization apps/podinfo now asks for 1.1.0']);
    assert.deepEqual(fluxChanges(fetched, applied), ['flux: kustomize-controller applied main@sha1:fedcba9: ConfigMap apps/podinfo now at 1.1.0']);
  });
  it('says when a commit for another environment is applied here and changes nothing', () => {
    const before = v(kustomization('1.0.0', `main@sha1:${sha}`, 'True'));
    const after = v(kustomization('1.0.0', `main@sha1:${other}`, 'True'));
    assert.deepEqual(fluxChanges(before, after), ['flux: kustomize-controller applied main@sha1:fedcba9: nothing changes here, ConfigMap apps/podinfo still at 1.0.0']);
  });
  it('says nothing for a no-op reconcile (Ready=Unknown, then True at the same commit)', () => {
    const ready = v(kustomization('1.0.0', `main@sha1:${sha}`, 'True'));
    const reconciling = v(kustomization('1.0.0', `main@sha1:${sha}`, 'Unknown'));
    assert.deepEqual(fluxChanges(ready, reconciling), []);
    assert.deepEqual(fluxChanges(reconciling, ready), []);
  });
});
