import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { KubeObject } from '../transport/index.ts';
import { TransportError } from '../util/index.ts';
import { environmentStatusOf, isObjectReady, objectRevision, targetStatusOf } from './observe.ts';
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
  });

  it('turns each observation into a target status', () => {
    assert.deepEqual(targetStatusOf(target, { state: 'loading' }, undefined), { cluster: 'local', namespace: 'apps', ready: false });
    const error = new TransportError({ cluster: 'secret:team-a/prod' }, 'connect ECONNREFUSED 127.0.0.1:1');
    assert.deepEqual(targetStatusOf(target, { state: 'unreadable', error }, undefined), { cluster: 'local', namespace: 'apps', readable: false, ready: false, error: error.message });
    assert.deepEqual(targetStatusOf(target, { state: 'read', object: undefined }, undefined), { cluster: 'local', namespace: 'apps', readable: true, exists: false, ready: false });
    assert.deepEqual(targetStatusOf(target, { state: 'read', object: helmRelease({ history: ['1.3.0'] }) }, undefined), { cluster: 'local', namespace: 'apps', readable: true, exists: true, ready: true, revision: '1.3.0' });
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
