import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FluxStandIn, goDurationMs } from './standin.ts';

describe('goDurationMs (a Kustomization spec.interval)', () => {
  it('reads Go durations', () => {
    assert.equal(goDurationMs('10m'), 600_000);
    assert.equal(goDurationMs('1m30s'), 90_000);
    assert.equal(goDurationMs('1h0m0.5s'), 3_600_500);
    assert.equal(goDurationMs('250ms'), 250);
  });

  it('is undefined for anything else', () => {
    for (const value of [undefined, 10, '', '10', '5d', 'm', '1m 30s']) assert.equal(goDurationMs(value), undefined, String(value));
  });
});

describe('FluxStandIn options', () => {
  it('rejects a kustomizationIntervalMs that is not a positive number', () => {
    for (const value of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
      assert.throws(() => new FluxStandIn({ name: 'c', kubeconfig: '', kustomizationIntervalMs: value }), (err: unknown) => err instanceof TypeError && err.message.includes('kustomizationIntervalMs'), String(value));
    }
  });
});
