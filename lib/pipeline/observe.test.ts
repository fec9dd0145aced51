import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { KubeObject } from '../transport/index.ts';
import { TransportError } from '../util/index.ts';
import { environmentStatusOf, isObjectReady, readinessOf, isRevision, MAX_REVISION_LENGTH, NOT_A_REVISION, objectRevision, readRevision, targetStatusOf } from './observe.ts';
import type { TargetStatus } from './types.ts';
import type { ResolvedTarget } from './validate.ts';

function helmRelease(options: { generation?: number; observed?: number; ready?: string; history?: readonly string[]; version?: string }): KubeObject {
  return {
    metadata: { name: 'podinfo', namespace: 'apps', generation: options.generation ?? 2 },
    spec: { chart: { spec: { version: options.version ?? '1.0.0' } } },
    status: {
      observedGeneration: options.observed ?? options.generation ?? 2,
      conditions: [{ type: 'Reconciling', status: 'False' }, { type: 'Ready', status: options.ready ?? 'True' }],
      history: (options.history ?? ['1.0.0']).map((chartVersion) => ({ chartVersion })),
    },
  };
}

const target: ResolvedTarget = { cluster: { kind: 'local' }, clusterKey: 'local', namespace: 'apps' };

describe('target readiness and revision', () => {
  it('is ready only with Ready=True at the current generation', () => {
    assert.equal(isObjectReady(helmRelease({})), true);
    assert.equal(isObjectReady(helmRelease({ ready: 'False' })), false);
    assert.equal(isObjectReady(helmRelease({ ready: 'Unknown' })), false);
    assert.equal(isObjectReady(helmRelease({ generation: 3, observed: 2 })), false, 'Ready about an older spec is not ready');
    assert.equal(isObjectReady({ metadata: { generation: 1 } }), false, 'no status');
    assert.equal(isObjectReady({ metadata: { generation: 1 }, status: { observedGeneration: 1, conditions: 'Ready' } }), false, 'malformed conditions');
  });

  it('reads lastAppliedRevision, else the newest history entry, else the named path', () => {
    assert.equal(objectRevision({ status: { lastAppliedRevision: 'main@sha1:abc' } }, undefined), 'main@sha1:abc');
    assert.equal(objectRevision(helmRelease({ history: ['1.2.0', '1.1.0'] }), undefined), '1.2.0', 'Flux keeps history newest first');
    assert.equal(objectRevision({ status: { lastAppliedRevision: '', history: [{ chartVersion: '2.0.0' }] } }, undefined), '2.0.0');
    assert.equal(objectRevision(helmRelease({ version: '9.9.9' }), '/spec/chart/spec/version'), '9.9.9');
    assert.equal(objectRevision({ status: { build: 42 } }, '/status/build'), '42');
    assert.equal(objectRevision({ status: { history: [] } }, undefined), undefined);
    assert.equal(objectRevision({ status: { lastAppliedRevision: 'x' } }, '/status/other'), undefined, 'a named path replaces the defaults');
    // The path is optional: without one, the kind's own field (what README's examples call).
    assert.equal(objectRevision({ status: { lastAppliedRevision: 'main@sha1:abc' } }), 'main@sha1:abc');
    assert.equal(objectRevision(helmRelease({ history: ['1.2.0'] })), '1.2.0');
  });

  it('turns each observation into a target status', () => {
    assert.deepEqual(targetStatusOf(target, { state: 'loading' }, undefined), { cluster: 'local', namespace: 'apps', ready: false });
    const error = new TransportError({ cluster: 'secret:team-a/prod' }, 'connect ECONNREFUSED 127.0.0.1:1');
    assert.deepEqual(targetStatusOf(target, { state: 'unreadable', error }, undefined), { cluster: 'local', namespace: 'apps', readable: false, ready: false, error: error.message });
    assert.deepEqual(targetStatusOf(target, { state: 'read', object: undefined }, undefined), { cluster: 'local', namespace: 'apps', readable: true, exists: false, ready: false });
    assert.deepEqual(targetStatusOf(target, { state: 'read', object: helmRelease({ history: ['1.3.0'] }) }, undefined), { cluster: 'local', namespace: 'apps', readable: true, exists: true, ready: true, revision: '1.3.0' });
  });
});

describe('readiness under Flux', () => {
  /** A Kustomization as kustomize-controller leaves it. */
  function kustomization(options: { suspend?: boolean; ready?: string; reason?: string; generation?: number; observed?: number } = {}): KubeObject {
    return {
      metadata: { name: 'podinfo', namespace: 'apps', generation: options.generation ?? 3 },
      spec: { suspend: options.suspend ?? false, postBuild: { substitute: { version: '1.1.0' } } },
      status: {
        observedGeneration: options.observed ?? options.generation ?? 3,
        lastAppliedRevision: `main@sha1:${'a'.repeat(40)}`,
        conditions: [{ type: 'Ready', status: options.ready ?? 'True', reason: options.reason ?? 'ReconciliationSucceeded' }],
      },
    };
  }

  it('a suspended target is not ready, though Flux keeps Ready=True and observedGeneration current', () => {
    const suspended = kustomization({ suspend: true });
    assert.deepEqual(readinessOf(suspended), { ready: false, reason: 'Suspended' });
    assert.equal(isObjectReady(suspended), false);
    const status = targetStatusOf(target, { state: 'read', object: suspended }, '/spec/postBuild/substitute/version');
    assert.deepEqual(status, { cluster: 'local', namespace: 'apps', readable: true, exists: true, ready: false, reason: 'Suspended', revision: '1.1.0' });
    const env = environmentStatusOf('staging', [status]);
    assert.equal(env.ready, false);
    assert.equal(env.reason, 'Suspended', 'the environment says why');
  });

  it('names why else a target is not ready, in a fixed vocabulary', () => {
    assert.deepEqual(readinessOf(kustomization()), { ready: true });
    assert.deepEqual(readinessOf(kustomization({ ready: 'Unknown', reason: 'Progressing' })), { ready: false, reason: 'Progressing' });
    assert.deepEqual(readinessOf(kustomization({ ready: 'Unknown', reason: 'Something' })), { ready: false, reason: 'NotReady' });
    assert.deepEqual(readinessOf(kustomization({ ready: 'False', reason: 'BuildFailed' })), { ready: false, reason: 'NotReady' });
    assert.deepEqual(readinessOf(kustomization({ generation: 4, observed: 3 })), { ready: false, reason: 'NotObserved' });
    assert.deepEqual(readinessOf(kustomization({ generation: 4, observed: 3, ready: 'Unknown', reason: 'Progressing' })), { ready: false, reason: 'NotObserved' }, 'a new spec being applied is not the no-op reconcile');
  });
});

describe('what counts as a revision', () => {
  const accepted = ['1.2.3', 'v1.2.3-rc.1+build.5', `main@sha1:${'a'.repeat(40)}`, `sha256:${'0'.repeat(64)}`, '42', 'r'.repeat(MAX_REVISION_LENGTH), 'version-é'];
  for (const value of accepted) {
    it(`accepts ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`, () => {
      assert.equal(isRevision(value), true);
      assert.deepEqual(readRevision({ status: { lastAppliedRevision: value } }, undefined), { kind: 'revision', revision: value });
    });
  }

  const refused: readonly [string, unknown][] = [
    ['one character too long', 'r'.repeat(MAX_REVISION_LENGTH + 1)],
    ['a PEM key', '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n'],
    ['a space', '1.2.3 extra'],
    ['a tab', '1.2.3\t'],
    ['a newline (a forged log line)', '1.2.3\n{"level":"info"}'],
    ['a NUL', '1.2.3\u0000'],
    ['an escape sequence', '\u001b[31m1.2.3'],
    ['a right-to-left override', '1.2.3\u202e'],
    ['a bidi isolate', '\u20661.2.3'],
    ['a zero-width space', '1.2\u200b.3'],
    ['a no-break space', '1.2\u00a0.3'],
    ['a line separator', '1.2\u2028.3'],
    ['a lone surrogate', '1.2.3\ud800'],
    ['a private-use character', '1.2.3\ue000'],
    ['an object', { token: 'x' }],
    ['a list', ['1.2.3']],
    ['a boolean', true],
    ['an infinite number', Number.POSITIVE_INFINITY],
  ];
  for (const [what, value] of refused) {
    it(`refuses ${what} as "not a revision", without echoing it`, () => {
      if (typeof value === 'string') assert.equal(isRevision(value), false);
      const obj: KubeObject = { metadata: { name: 'podinfo', namespace: 'apps', generation: 1 }, status: { observedGeneration: 1, conditions: [{ type: 'Ready', status: 'True' }], lastAppliedRevision: value } };
      assert.deepEqual(readRevision(obj, undefined), { kind: 'invalid' });
      assert.equal(objectRevision(obj, undefined), undefined);
      const status = targetStatusOf(target, { state: 'read', object: obj }, undefined);
      assert.deepEqual(status, { cluster: 'local', namespace: 'apps', readable: true, exists: true, ready: false, error: NOT_A_REVISION });
      const env = environmentStatusOf('dev', [status]);
      assert.equal(env.ready, false);
      assert.equal(env.revision, undefined);
      if (typeof value === 'string') assert.ok(!JSON.stringify(env).includes(JSON.stringify(value).slice(1, -1)), 'the value is not echoed');
    });
  }

  it('treats unset and empty as absent, not as "not a revision"', () => {
    assert.deepEqual(readRevision({ status: {} }, undefined), { kind: 'absent' });
    assert.deepEqual(readRevision({ status: { lastAppliedRevision: '' } }, undefined), { kind: 'absent' });
    assert.deepEqual(readRevision({ data: {} }, '/data/identity'), { kind: 'absent' });
    assert.deepEqual(readRevision({ data: { identity: null } }, '/data/identity'), { kind: 'absent' });
  });

  it('checks a value at a named revision path the same way', () => {
    assert.deepEqual(readRevision({ data: { identity: 'LS0tLS1CRUdJTiBPUEVOU1NIIFBSSVZBVEUgS0VZLS0tLS0K'.repeat(4) } }, '/data/identity'), { kind: 'invalid' });
    assert.deepEqual(readRevision({ data: { revision: 'abc123' } }, '/data/revision'), { kind: 'revision', revision: 'abc123' });
  });
});

function t(revision: string | undefined, ready: boolean, readable = true): TargetStatus {
  return { cluster: 'local', namespace: 'n', ready, readable, ...(revision === undefined ? {} : { revision }) };
}

describe('environment status', () => {
  it('is ready when every target is ready at one revision', () => {
    assert.deepEqual(environmentStatusOf('dev', [t('1', true), t('1', true)]), { name: 'dev', ready: true, revision: '1', targets: [t('1', true), t('1', true)] });
  });

  it('reports the shared revision even when not every target is ready', () => {
    const env = environmentStatusOf('dev', [t('1', true), t('1', false)]);
    assert.equal(env.ready, false);
    assert.equal(env.revision, '1');
  });

  it('has no revision and is not ready when targets disagree or lack one', () => {
    for (const targets of [[t('1', true), t('2', true)], [t(undefined, true)], []]) {
      const env = environmentStatusOf('dev', targets);
      assert.equal(env.ready, false);
      assert.equal(env.revision, undefined);
    }
  });

  it('is not ready while a target cannot be read', () => {
    assert.equal(environmentStatusOf('dev', [t('1', true), t('1', true, false)]).ready, false);
  });
});
