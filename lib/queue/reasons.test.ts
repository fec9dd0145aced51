// The reason label of a failed reconcile: a fixed word per kind of failure, `panic` for a bug.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FleetcacheError, KubeApiError, TransportError } from '../util/index.ts';
import { RECONCILE_ERROR_REASONS, reconcileErrorReason } from './reasons.ts';
import { RateLimitingWorkQueue } from './rate-limiting.ts';
import { runWorkers, type ReconcileObservation } from './workers.ts';

const gvk = { group: '', version: 'v1', kind: 'ConfigMap' };
const api = (statusCode: number): KubeApiError => new KubeApiError({ cluster: 'local', gvk, statusCode });

describe('reconcileErrorReason', () => {
  it('names API refusals by status, transport and library errors by type, bugs as panic, and the rest other', () => {
    let bug: unknown;
    try {
      const parsed = JSON.parse('null') as { readonly x: unknown };
      bug = parsed.x; // TypeError: the bug under test
    } catch (err) {
      bug = err;
    }
    const cases: [unknown, string][] = [
      [api(409), 'conflict'], [new FleetcacheError('ERR_STATUS_CONFLICT', 'kept conflicting'), 'conflict'],
      [api(404), 'not_found'], [api(403), 'forbidden'], [api(401), 'forbidden'], [api(422), 'invalid'], [api(400), 'invalid'],
      [api(429), 'throttled'], [api(503), 'server_error'], [api(418), 'api_error'],
      [new TransportError({ cluster: 'local' }, 'ECONNREFUSED'), 'transport'],
      [new FleetcacheError('ERR_CLOSED', 'closed'), 'fleetcache'],
      [new DOMException('late', 'TimeoutError'), 'timeout'],
      [bug, 'panic'], [new ReferenceError('x is not defined'), 'panic'], [new RangeError('too deep'), 'panic'], ['a string', 'panic'], [undefined, 'panic'],
      [new TypeError('fetch failed', { cause: new Error('ECONNRESET') }), 'other'],
      [new Error('no'), 'other'],
    ];
    for (const [thrown, reason] of cases) assert.equal(reconcileErrorReason(thrown), reason, String(thrown));
    for (const [, reason] of cases) assert.ok(RECONCILE_ERROR_REASONS.includes(reconcileErrorReason(reason === 'panic' ? 'x' : new Error(reason))), 'every reason is listed');
  });

  it('reaches onReconcile from runWorkers: a thrown bug is a panic, a malformed result invalid_result', async () => {
    const queue = new RateLimitingWorkQueue<string>({ name: 'reasons' });
    const controller = new AbortController();
    const seen: ReconcileObservation[] = [];
    const run = runWorkers(queue, {
      signal: controller.signal, name: 'c', maxRetries: 0,
      onReconcile: (o) => { seen.push(o); if (seen.length === 3) controller.abort(); },
      handler: (item) => {
        if (item === 'bug') return Promise.reject(new TypeError('Cannot read properties of undefined'));
        if (item === 'malformed') return Promise.resolve({ requeueAfterMs: -1 });
        return Promise.reject(api(409));
      },
    });
    for (const item of ['bug', 'malformed', 'conflict']) queue.add(item);
    await run;
    queue.shutDown();
    assert.deepEqual(seen.map((o) => [o.result, o.reason]), [['error', 'panic'], ['error', 'invalid_result'], ['error', 'conflict']]);
  });
});
