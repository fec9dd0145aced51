import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { KubeObject } from '../transport/index.ts';
import { KubeApiError, type GroupVersionKind } from '../util/index.ts';
import { fluxSpecProblems, gitSourceOf, isCommitReference, isRevertedByFlux, isSuspended, KUSTOMIZATION_NAME_LABEL, RECONCILE_REQUESTED_AT, requestReconcile, type AnnotateConnection } from './flux.ts';
import { RecordingLogger } from '../../fixtures/support/index.ts';

const KS: GroupVersionKind = { group: 'kustomize.toolkit.fluxcd.io', version: 'v1', kind: 'Kustomization' };
const HR: GroupVersionKind = { group: 'helm.toolkit.fluxcd.io', version: 'v2', kind: 'HelmRelease' };
const SHA1 = 'a'.repeat(40);
const SHA256 = 'b'.repeat(64);

describe('Flux revisions', () => {
  it('knows a Git commit or artifact reference in every form Flux writes', () => {
    for (const r of [`main@sha1:${SHA1}`, `sha1:${SHA1}`, `refs/heads/main@sha1:${SHA1}`, `v1.2.0@sha1:${SHA1}`, `latest@sha256:${SHA256}`, `sha256:${SHA256}`, `main/${SHA1}`, `feature/x@sha1:${SHA1.toUpperCase()}`]) {
      assert.equal(isCommitReference(r), true, r);
    }
  });

  it('leaves versions alone, a bare short SHA tag included', () => {
    for (const r of ['1.2.3', 'v6.2.0', '1.0.0+build.7', 'abc1234', SHA1, 'sha1-is-not-a-digest', 'main', 'release@2024', `ghcr.io/acme/app:1.2.3@sha256:${SHA256}`]) {
      assert.equal(isCommitReference(r), false, r);
    }
  });
});

describe('Flux facts about objects', () => {
  it('sees spec.suspend: true and nothing else as suspended', () => {
    assert.equal(isSuspended({ spec: { suspend: true } }), true);
    assert.equal(isSuspended({ spec: { suspend: false } }), false);
    assert.equal(isSuspended({ spec: { suspend: 'true' } }), false);
    assert.equal(isSuspended({}), false);
  });

  it('finds the GitRepository a Kustomization reads from, its apiVersion kept when it is source.toolkit', () => {
    assert.deepEqual(gitSourceOf({ spec: { sourceRef: { kind: 'GitRepository', name: 'fleet' } } }), { gvk: { group: 'source.toolkit.fluxcd.io', version: 'v1', kind: 'GitRepository' }, namespace: undefined, name: 'fleet' });
    assert.deepEqual(gitSourceOf({ spec: { sourceRef: { kind: 'GitRepository', name: 'fleet', namespace: 'flux-system', apiVersion: 'source.toolkit.fluxcd.io/v1beta2' } } })?.gvk.version, 'v1beta2');
    assert.equal(gitSourceOf({ spec: { sourceRef: { kind: 'GitRepository', name: 'fleet', apiVersion: 'evil.example/v1' } } })?.gvk.group, 'source.toolkit.fluxcd.io', 'never another group');
    assert.equal(gitSourceOf({ spec: { sourceRef: { kind: 'OCIRepository', name: 'fleet' } } }), undefined);
    assert.equal(gitSourceOf({ spec: {} }), undefined);
  });
});

describe('specs that would loop under Flux', () => {
  it('refuses a Kustomization with the git or patch strategy and no revisionPath, saying what to set', () => {
    for (const strategy of ['git', 'patch']) {
      const problems = fluxSpecProblems({ gvk: KS, strategy, revisionPath: undefined });
      assert.equal(problems.length, 1);
      assert.match(problems[0] ?? '', /^spec\.revisionPath: .*main@sha1.*\/spec\/postBuild\/substitute\/version/);
    }
  });

  it('allows a revisionPath, the webhook strategy, and other kinds', () => {
    assert.deepEqual(fluxSpecProblems({ gvk: KS, strategy: 'git', revisionPath: '/spec/postBuild/substitute/version' }), []);
    assert.deepEqual(fluxSpecProblems({ gvk: KS, strategy: 'webhook', revisionPath: undefined }), []);
    assert.deepEqual(fluxSpecProblems({ gvk: HR, strategy: 'git', revisionPath: undefined }), []);
    assert.deepEqual(fluxSpecProblems({ gvk: { ...KS, group: 'example.com' }, strategy: 'git', revisionPath: undefined }), []);
  });
});

/** Records requests; answers PATCH with `answer`. */
class FakeConnection implements AnnotateConnection {
  readonly name = 'fake';
  readonly requests: { method: string; path: string; body: unknown; contentType: string | undefined }[] = [];
  readonly answer: () => Promise<unknown>;
  constructor(answer: () => Promise<unknown> = () => Promise.resolve({})) {
    this.answer = answer;
  }
  resolve(gvk: GroupVersionKind): ReturnType<AnnotateConnection['resolve']> {
    return Promise.resolve({ gvk, resource: `${gvk.kind.toLowerCase()}s`, namespaced: true, verbs: ['get', 'patch'] });
  }
  request(options: Parameters<AnnotateConnection['request']>[0]): ReturnType<AnnotateConnection['request']> {
    this.requests.push({ method: options.method, path: options.path, body: options.body, contentType: options.contentType });
    return this.answer();
  }
}

describe('requestReconcile', () => {
  it('sets reconcile.fluxcd.io/requestedAt with a merge patch', async () => {
    const conn = new FakeConnection();
    assert.equal(await requestReconcile(conn, { gvk: KS, namespace: 'apps', name: 'podinfo' }, '2026-01-01T00:00:00.123Z', new RecordingLogger()), true);
    assert.equal(conn.requests.length, 1);
    const [req] = conn.requests;
    assert.equal(req?.method, 'PATCH');
    assert.equal(req.contentType, 'application/merge-patch+json');
    assert.match(req.path, /\/namespaces\/apps\/kustomizations\/podinfo$/);
    assert.deepEqual(req.body, { metadata: { annotations: { [RECONCILE_REQUESTED_AT]: '2026-01-01T00:00:00.123Z' } } });
  });

  it('carries on quietly from a 403 (debug), and from other failures with a warning: never throws', async () => {
    const forbidden = new FakeConnection(() => Promise.reject(new KubeApiError({ cluster: 'fake', gvk: KS, statusCode: 403, status: { reason: 'Forbidden', message: 'no' } })));
    const log = new RecordingLogger();
    assert.equal(await requestReconcile(forbidden, { gvk: KS, namespace: 'apps', name: 'podinfo' }, 'now', log), false);
    assert.deepEqual(log.lines.map((l) => l.level), ['debug']);
    const broken = new FakeConnection(() => Promise.reject(new Error('connection reset')));
    const log2 = new RecordingLogger();
    assert.equal(await requestReconcile(broken, { gvk: KS, namespace: 'apps', name: 'podinfo' }, 'now', log2), false);
    assert.deepEqual(log2.lines.map((l) => l.level), ['warn']);
  });
});

describe('isRevertedByFlux', () => {
  const managed = (version: string, generation: number, labels: Record<string, string> = { [KUSTOMIZATION_NAME_LABEL]: 'apps' }): KubeObject => ({ metadata: { name: 'podinfo', generation, labels }, spec: { postBuild: { substitute: { version } } } });
  const path = '/spec/postBuild/substitute/version';

  it('is a value put back, on an object a Kustomization manages, after the patch', () => {
    assert.equal(isRevertedByFlux(managed('1.0.0', 4), path, '1.1.0', 3), true);
    assert.equal(isRevertedByFlux(managed('1.0.0', 4), path, '1.1.0', undefined), true, 'after a restart the cache is newer than the patch');
  });

  it('is not a cache that has not seen the patch yet, a value that holds, or an object no Kustomization manages', () => {
    assert.equal(isRevertedByFlux(managed('1.0.0', 2), path, '1.1.0', 3), false, 'older than the patch');
    assert.equal(isRevertedByFlux(managed('1.0.0', 3), path, '1.1.0', 3), false, 'the patch\'s own generation');
    assert.equal(isRevertedByFlux(managed('1.1.0', 5), path, '1.1.0', 3), false);
    assert.equal(isRevertedByFlux(managed('1.0.0', 5, {}), path, '1.1.0', 3), false);
  });
});
