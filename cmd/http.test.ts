import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { RateLimitingWorkQueue } from '../lib/queue/index.ts';
import type { CacheInfo } from '../lib/registry/index.ts';
import { FakeClock, KubeApiError } from '../lib/util/index.ts';
import { HttpServer, ManagerMetrics, metricsRoute, probeRoutes } from '../lib/manager/index.ts';
import { cachesRoute } from './http.ts';
import { parseExposition, type Exposition } from './exposition.test-util.ts';
import { registerServiceMetrics, type ControllerStats } from './metrics.ts';

async function get(url: string, init: RequestInit = {}): Promise<{ status: number; type: string; body: string }> {
  const res = await fetch(url, init);
  return { status: res.status, type: res.headers.get('content-type') ?? '', body: await res.text() };
}

const deployments = { group: 'apps', version: 'v1', kind: 'Deployment' };
const caches: CacheInfo[] = [
  {
    cluster: 'secret:team-a/prod', gvk: deployments, synced: true, objects: 12, owners: 2, ageMs: 61_000,
    lastError: new KubeApiError({ cluster: 'secret:team-a/prod', gvk: deployments, statusCode: 403, status: { reason: 'Forbidden', message: 'rejected Bearer abc.def' } }),
    nextGcCheckInMs: 4_000, relists: 3, watchErrors: 5, retainedBytes: 24_576, compressed: 9,
  },
  { cluster: 'local', gvk: { group: '', version: 'v1', kind: 'Config"Map' }, synced: false, objects: 0, owners: 1, ageMs: 10, lastError: undefined, nextGcCheckInMs: undefined, relists: 0, watchErrors: 0 },
];

describe('the metrics server', () => {
  const clock = new FakeClock(1_000_000);
  const metrics = new ManagerMetrics();
  metrics.addController('pipeline', { workers: 4, queue: 'owners' });
  const queue = new RateLimitingWorkQueue<string>({ name: 'owners', clock, metrics: metrics.queueMetrics('pipeline') });
  const stats: ControllerStats = { reconciles: 7, reconcileErrors: 2, promotions: { succeeded: 3, failed: 1 } };
  let leader = false;
  metrics.bind({ caches: () => caches, memoryBudget: () => ({ maxRssBytes: 768 * 2 ** 20, refusals: 3 }), leader: () => leader, leaseName: 'fleetcache-leader' });
  registerServiceMetrics(metrics.registry, () => stats);
  let server: HttpServer | undefined;
  after(async () => { queue.shutDown(); await server?.close(); });

  async function scrape(): Promise<Exposition> {
    assert.ok(server !== undefined);
    const res = await get(`${server.url}/metrics`);
    assert.equal(res.status, 200);
    assert.equal(res.type, 'text/plain; version=0.0.4; charset=utf-8');
    return parseExposition(res.body);
  }

  it('serves workqueue, controller, client, cache and leader metrics with controller-runtime\'s names, types and labels', async () => {
    server = await HttpServer.start({
      name: 'metrics',
      address: { host: '127.0.0.1', port: 0 },
      routes: { '/metrics': metricsRoute(() => metrics.metrics()), '/debug/caches': cachesRoute(() => caches) },
    });
    queue.add('ns/a');
    queue.add('ns/b');
    queue.add('ns/a'); // a duplicate of an item already waiting is not an add
    clock.advance(2_000);
    const first = await queue.get();
    assert.equal(first?.item, 'ns/a');
    clock.advance(500);
    queue.done('ns/a');
    queue.addRateLimited('ns/a');
    const second = await queue.get(); // ns/b, in progress while we scrape
    clock.advance(3_000);
    metrics.observeReconcile({ controller: 'pipeline', result: 'success', durationMs: 120 });
    metrics.observeReconcile({ controller: 'pipeline', result: 'error', durationMs: 30, reason: 'conflict' });
    metrics.observeReconcile({ controller: 'pipeline', result: 'requeue_after', durationMs: 7_000 });
    metrics.observeRequest({ cluster: 'secret:team-a/prod', method: 'GET', code: '200', durationMs: 40 });
    metrics.observeRequest({ cluster: 'secret:team-a/prod', method: 'GET', code: '200', durationMs: 60 });
    metrics.observeRequest({ cluster: 'local', method: 'PUT', code: '409', durationMs: 5 });

    const m = await scrape();
    const q = { controller: 'pipeline', name: 'owners' };
    assert.equal(m.type('workqueue_depth'), 'gauge');
    assert.equal(m.value('workqueue_depth', q), 1, 'ns/a is back after its 5 ms backoff');
    assert.equal(m.type('workqueue_adds_total'), 'counter');
    assert.equal(m.value('workqueue_adds_total', q), 3);
    assert.equal(m.type('workqueue_retries_total'), 'counter');
    assert.equal(m.value('workqueue_retries_total', q), 1);
    assert.equal(m.type('workqueue_queue_duration_seconds'), 'histogram');
    assert.equal(m.value('workqueue_queue_duration_seconds_count', q), 2);
    assert.equal(m.value('workqueue_queue_duration_seconds_sum', q), 4.5, 'ns/a waited 2 s, ns/b 2.5 s');
    assert.equal(m.value('workqueue_queue_duration_seconds_bucket', { ...q, le: '1' }), 0);
    assert.equal(m.value('workqueue_queue_duration_seconds_bucket', { ...q, le: '10' }), 2);
    assert.equal(m.value('workqueue_queue_duration_seconds_bucket', { ...q, le: '+Inf' }), 2);
    assert.deepEqual(m.buckets('workqueue_queue_duration_seconds', q), ['1e-8', '1e-7', '0.000001', '0.00001', '0.0001', '0.001', '0.01', '0.1', '1', '10', '100', '1000', '+Inf']);
    assert.equal(m.type('workqueue_work_duration_seconds'), 'histogram');
    assert.equal(m.value('workqueue_work_duration_seconds_count', q), 1);
    assert.equal(m.value('workqueue_work_duration_seconds_sum', q), 0.5);
    assert.equal(m.type('workqueue_unfinished_work_seconds'), 'gauge');
    assert.equal(m.value('workqueue_unfinished_work_seconds', q), 3);
    assert.equal(m.type('workqueue_longest_running_processor_seconds'), 'gauge');
    assert.equal(m.value('workqueue_longest_running_processor_seconds', q), 3);

    const c = { controller: 'pipeline' };
    assert.equal(m.type('controller_runtime_reconcile_total'), 'counter');
    assert.equal(m.value('controller_runtime_reconcile_total', { ...c, result: 'success' }), 1);
    assert.equal(m.value('controller_runtime_reconcile_total', { ...c, result: 'error' }), 1);
    assert.equal(m.value('controller_runtime_reconcile_total', { ...c, result: 'requeue_after' }), 1);
    assert.equal(m.value('controller_runtime_reconcile_total', { ...c, result: 'requeue' }), 0, 'every result starts at 0');
    assert.equal(m.type('controller_runtime_reconcile_errors_total'), 'counter');
    assert.equal(m.value('controller_runtime_reconcile_errors_total', c), 1);
    assert.equal(m.type('fleetcache_reconcile_errors_total'), 'counter');
    assert.equal(m.value('fleetcache_reconcile_errors_total', { ...c, reason: 'conflict' }), 1, 'the error by its reason');
    assert.equal(m.type('controller_runtime_reconcile_panics_total'), 'counter');
    assert.equal(m.value('controller_runtime_reconcile_panics_total', c), 0, 'starts at 0: a conflict is no panic');
    assert.equal(m.type('controller_runtime_reconcile_time_seconds'), 'histogram');
    assert.equal(m.value('controller_runtime_reconcile_time_seconds_count', c), 3);
    assert.equal(m.value('controller_runtime_reconcile_time_seconds_sum', c), 7.15);
    assert.equal(m.value('controller_runtime_reconcile_time_seconds_bucket', { ...c, le: '0.05' }), 1);
    assert.equal(m.buckets('controller_runtime_reconcile_time_seconds', c).length, 41, '40 bounds from 5 ms to 60 s, and +Inf');
    assert.equal(m.type('controller_runtime_max_concurrent_reconciles'), 'gauge');
    assert.equal(m.value('controller_runtime_max_concurrent_reconciles', c), 4);
    assert.equal(m.type('controller_runtime_active_workers'), 'gauge');
    assert.equal(m.value('controller_runtime_active_workers', c), 1, 'ns/b is being processed');

    assert.equal(m.type('rest_client_requests_total'), 'counter');
    assert.equal(m.value('rest_client_requests_total', { cluster: 'secret:team-a/prod', code: '200', method: 'GET' }), 2);
    assert.equal(m.value('rest_client_requests_total', { cluster: 'local', code: '409', method: 'PUT' }), 1);
    assert.equal(m.type('rest_client_request_duration_seconds'), 'histogram');
    assert.equal(m.value('rest_client_request_duration_seconds_count', { cluster: 'secret:team-a/prod', verb: 'GET' }), 2);
    assert.equal(m.value('rest_client_request_duration_seconds_sum', { cluster: 'secret:team-a/prod', verb: 'GET' }), 0.1);

    const prod = { cluster: 'secret:team-a/prod', group: 'apps', version: 'v1', kind: 'Deployment' };
    assert.equal(m.type('fleetcache_caches'), 'gauge');
    assert.equal(m.value('fleetcache_caches', {}), 2);
    assert.equal(m.type('fleetcache_cached_objects'), 'gauge');
    assert.equal(m.value('fleetcache_cached_objects', prod), 12);
    assert.equal(m.type('fleetcache_cache_retained_bytes'), 'gauge');
    assert.equal(m.value('fleetcache_cache_retained_bytes', prod), 24_576);
    assert.equal(m.type('fleetcache_cache_compressed_objects'), 'gauge');
    assert.equal(m.value('fleetcache_cache_compressed_objects', prod), 9);
    assert.equal(m.value('fleetcache_cache_compressed_objects', { cluster: 'local', group: '', version: 'v1', kind: 'Config"Map' }), 0, 'unset: none');
    assert.equal(m.type('fleetcache_relists_total'), 'counter');
    assert.equal(m.value('fleetcache_relists_total', prod), 3);
    assert.equal(m.type('fleetcache_watch_errors_total'), 'counter');
    assert.equal(m.value('fleetcache_watch_errors_total', prod), 5);
    assert.equal(m.value('fleetcache_cache_owners', prod), 2);
    assert.equal(m.value('fleetcache_cache_synced', { cluster: 'local', group: '', version: 'v1', kind: 'Config"Map' }), 0, 'label values are escaped and read back');
    assert.equal(m.type('fleetcache_memory_budget_refusals_total'), 'counter');
    assert.equal(m.value('fleetcache_memory_budget_refusals_total', {}), 3);
    assert.equal(m.value('fleetcache_memory_budget_bytes', {}), 768 * 2 ** 20);
    assert.equal(m.value('fleetcache_promotions_total', { outcome: 'succeeded' }), 3);
    assert.equal(m.value('fleetcache_promotions_total', { outcome: 'failed' }), 1);
    assert.equal(m.type('leader_election_master_status'), 'gauge');
    assert.equal(m.value('leader_election_master_status', { name: 'fleetcache-leader' }), 0);
    assert.equal(m.value('fleetcache_leader', {}), 0);

    // Node runtime metrics, from prom-client's default collectors.
    assert.ok((m.value('process_resident_memory_bytes', {}) ?? 0) > 0);
    assert.equal(m.type('nodejs_eventloop_lag_seconds'), 'gauge');
    assert.equal(m.type('nodejs_heap_size_used_bytes'), 'gauge');
    assert.equal(m.type('nodejs_gc_duration_seconds'), 'histogram');

    assert.ok(second !== undefined);
    queue.done(second.item);
    leader = true;
    assert.equal((await scrape()).value('leader_election_master_status', { name: 'fleetcache-leader' }), 1);
  });

  it('registers into an embedder\'s own prom-client registry, beside its metrics', async () => {
    const { Counter, Registry } = await import('prom-client');
    const own = new Registry();
    const mine = new Counter({ name: 'my_operator_things_total', help: 'things', registers: [own] });
    mine.inc(2);
    const merged = new ManagerMetrics({ registry: own, defaultMetrics: false });
    merged.addController('pipeline', { workers: 2, queue: 'owners' });
    const m = parseExposition(await own.metrics());
    assert.equal(m.value('my_operator_things_total', {}), 2);
    assert.equal(m.value('controller_runtime_max_concurrent_reconciles', { controller: 'pipeline' }), 2);
    assert.equal(m.type('nodejs_heap_size_used_bytes'), undefined, 'defaultMetrics: false');
  });

  it('serves /debug/caches as JSON with errors as scrubbed messages', async () => {
    assert.ok(server !== undefined);
    const res = await get(`${server.url}/debug/caches`);
    assert.equal(res.status, 200);
    assert.equal(res.type, 'application/json');
    const body = JSON.parse(res.body) as { caches: Record<string, unknown>[] };
    assert.deepEqual(body.caches.map((c) => c.cluster), ['local', 'secret:team-a/prod']);
    const prod = body.caches[1];
    assert.equal(prod?.gvk, 'apps/v1, Kind=Deployment');
    assert.equal(prod.objects, 12);
    assert.equal(prod.synced, true);
    assert.equal(prod.nextGcCheckInSeconds, 4);
    assert.match(String(prod.lastError), /HTTP 403 Forbidden: rejected Bearer \[REDACTED\]/);
    assert.equal(body.caches[0]?.lastError, null);
  });

  it('answers 404 to unknown paths and 405 to writes', async () => {
    assert.ok(server !== undefined);
    assert.equal((await get(`${server.url}/nope`)).status, 404);
    const post = await get(`${server.url}/metrics`, { method: 'POST', body: 'x' });
    assert.equal(post.status, 405);
  });
});

describe('the probe server', () => {
  let synced = false;
  let server: HttpServer | undefined;
  after(async () => { await server?.close(); });

  it('/healthz passes while the process runs; /readyz only once every check passes', async () => {
    server = await HttpServer.start({
      name: 'probes',
      address: { host: '127.0.0.1', port: 0 },
      routes: probeRoutes([{ name: 'pipelines', check: () => (synced ? undefined : 'the Pipeline cache has not synced') }]),
    });
    assert.deepEqual(await get(`${server.url}/healthz`), { status: 200, type: 'text/plain; charset=utf-8', body: 'ok' });
    const notReady = await get(`${server.url}/readyz`);
    assert.equal(notReady.status, 500);
    assert.match(notReady.body, /\[-\]pipelines failed: the Pipeline cache has not synced/);
    synced = true;
    assert.equal((await get(`${server.url}/readyz`)).body, 'ok');
    assert.match((await get(`${server.url}/readyz?verbose`)).body, /\[\+\]pipelines ok/);
    const head = await fetch(`${server.url}/readyz`, { method: 'HEAD' });
    assert.equal(head.status, 200);
  });

  it('refuses an address in use, and close() is idempotent', async () => {
    assert.ok(server !== undefined);
    await assert.rejects(HttpServer.start({ name: 'x', address: { host: '127.0.0.1', port: server.port }, routes: {} }), /EADDRINUSE/);
    await server.close();
    await server.close();
    await assert.rejects(fetch(`${server.url}/healthz`));
  });
});
