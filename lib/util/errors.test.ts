import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FleetcacheError, KubeApiError, KubeconfigRefusedError, UnknownKindError, WatchDecodeError, toError } from './errors.ts';
import { formatGvk, gvkOf } from './gvk.ts';

const deployments = { group: 'apps', version: 'v1', kind: 'Deployment' };

describe('errors', () => {
  it('KubeApiError carries cluster, GVK, status and reason, and says them in its message', () => {
    const err = new KubeApiError({
      cluster: 'prod', gvk: deployments, statusCode: 403,
      status: { kind: 'Status', status: 'Failure', reason: 'Forbidden', code: 403, message: 'deployments.apps is forbidden' },
      request: { method: 'GET', path: '/apis/apps/v1/deployments' },
    });
    assert.ok(err instanceof FleetcacheError);
    assert.equal(err.code, 'ERR_KUBE_API');
    assert.equal(err.name, 'KubeApiError');
    assert.equal(err.statusCode, 403);
    assert.equal(err.reason, 'Forbidden');
    assert.equal(err.isGone, false);
    assert.match(err.message, /cluster prod, apps\/v1, Kind=Deployment: HTTP 403 Forbidden: deployments.apps is forbidden \(GET \/apis\/apps\/v1\/deployments\)/);
  });

  it('KubeApiError recognises 410 and the Expired reason as Gone, and reads Retry-After from the Status', () => {
    assert.equal(new KubeApiError({ cluster: 'c', statusCode: 410 }).isGone, true);
    assert.equal(new KubeApiError({ cluster: 'c', statusCode: 500, status: { reason: 'Expired' } }).isGone, true);
    assert.equal(new KubeApiError({ cluster: 'c', statusCode: 429, status: { details: { retryAfterSeconds: 3 } } }).retryAfterSeconds, 3);
    assert.equal(new KubeApiError({ cluster: 'c', statusCode: 429, retryAfterSeconds: 5, status: { details: { retryAfterSeconds: 3 } } }).retryAfterSeconds, 5);
  });

  it('each failure has its own stable code', () => {
    assert.equal(new UnknownKindError({ cluster: 'c', gvk: deployments, statusCode: 404 }).code, 'ERR_UNKNOWN_KIND');
    const decode = new WatchDecodeError({ cluster: 'c', line: 'x'.repeat(500) });
    assert.equal(decode.code, 'ERR_WATCH_DECODE');
    assert.equal(decode.excerpt.length, 201, 'the excerpt is bounded');
    const refused = new KubeconfigRefusedError({ cluster: 'c', rule: 'exec', subject: 'user "ci" exec command', hint: 'set allowExec to permit it' });
    assert.equal(refused.code, 'ERR_KUBECONFIG_REFUSED');
    assert.match(refused.message, /refused user "ci" exec command: rule "exec"; set allowExec/);
  });

  it('toError never yields a non-Error', () => {
    const original = new Error('x');
    assert.equal(toError(original), original);
    assert.equal(toError('boom').message, 'boom');
    assert.match(toError(undefined).message, /undefined/);
  });
});

describe('gvk', () => {
  it('splits apiVersion and formats like client-go', () => {
    assert.deepEqual(gvkOf('v1', 'ConfigMap'), { group: '', version: 'v1', kind: 'ConfigMap' });
    assert.deepEqual(gvkOf('apps/v1', 'Deployment'), deployments);
    assert.equal(formatGvk(deployments), 'apps/v1, Kind=Deployment');
    assert.equal(formatGvk(gvkOf('v1', 'Secret')), 'v1, Kind=Secret');
  });

  it('rejects malformed apiVersions', () => {
    for (const bad of ['', '/v1', 'apps/', 'a/b/c']) assert.throws(() => gvkOf(bad, 'X'), TypeError, bad);
    assert.throws(() => gvkOf('v1', ''), TypeError);
  });
});
