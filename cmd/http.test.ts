import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { RateLimitingWorkQueue } from '../lib/queue/index.ts';
import type { CacheInfo } from '../lib/registry/index.ts';
import { FakeClock, KubeApiError } from '../lib/util/index.ts';
import { HttpServer, metricsRoutes, probeRoutes } from './http.ts';
import { renderMetrics, WorkqueueMetrics, type ControllerStats } from './metrics.ts';

async function get(url: string, init: RequestInit = {}): Promise<{ status: number; type: string; body: string }> {
  const res = await fetch(url, init);
  return { status: res.status, type: res.headers.get('content-type') ?? '', body: await res.text() };
}

/** Sample lines (not comments) as `name{labels}` → value. */
function samples(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{.*\})?) (\S+)$/.exec(line);
    assert.ok(match?.[1] !== undefined && match[2] !== undefined, `malformed sample line: ${line}`);
    out.set(match[1], match[2] === '+Inf' ? Infinity : Number(match[2]));
  }
  return out;
}

const deployments = { group: 'apps', version: 'v1', kind: 'Deployment' };
const caches: CacheInfo[] = [
  {
    cluster: 'secret:team-a/prod', gvk: deployments, synced: true, objects: 12, owners: 2, ageMs: 61_000,
    lastError: new KubeApiError({ cluster: 'secret:team-a/prod', gvk: deployments, statusCode: 403, status: { reason: 'Forbidden', message: 'rejected Bearer abc.def' } }),
    nextGcCheckInMs: 4_000, relists: 3, watchErrors: 5,
  },
  { cluster: 'local', gvk: { group: '', version: 'v1', kind: 'Config"Map' }, synced: false, objects: 0, owners: 1, ageMs: 10, lastError: undefined, nextGcCheckInMs: undefined, relists: 0, watchErrors: 0 },
];

describe('the metrics server', () => {
  const clock = new FakeClock(1_000_000);
  const workqueue = new WorkqueueMetrics();
  const queue = new RateLimitingWorkQueue<string>({ name: 'owners', clock, metrics: workqueue });
  const stats: ControllerStats = { reconciles: 7, reconcileErrors: 2, promotions: { succeeded: 3, failed: 1 } };
  let leader = false;
  let server: HttpServer | undefined;
  after(async () => { queue.shutDown(); await server?.close(); });

  it('serves workqueue, cache, controller and leader metrics in the text format', async () => {
    server = await HttpServer.start({
      name: 'metrics',
      address: { host: '127.0.0.1', port: 0 },
      routes: metricsRoutes({ metrics: () => renderMetrics({ workqueue, caches: () => caches, controller: () => stats, leader: () => leader }), caches: () => caches }),
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

    const res = await get(`${server.url}/metrics`);
    assert.equal(res.status, 200);
    assert.equal(res.type, 'text/plain; version=0.0.4; charset=utf-8');
    const s = samples(res.body);
    assert.equal(s.get('workqueue_depth{name="owners"}'), 1, 'ns/a is back after its 5 ms backoff');
    assert.equal(s.get('workqueue_adds_total{name="owners"}'), 3);
    assert.equal(s.get('workqueue_retries_total{name="owners"}'), 1);
    assert.equal(s.get('workqueue_queue_duration_seconds_count{name="owners"}'), 2);
    assert.equal(s.get('workqueue_queue_duration_seconds_sum{name="owners"}'), 4.5, 'ns/a waited 2 s, ns/b 2.5 s');
    assert.equal(s.get('workqueue_queue_duration_seconds_bucket{name="owners",le="1"}'), 0);
    assert.equal(s.get('workqueue_queue_duration_seconds_bucket{name="owners",le="10"}'), 2);
    assert.equal(s.get('workqueue_queue_duration_seconds_bucket{name="owners",le="+Inf"}'), 2);
    assert.equal(s.get('workqueue_work_duration_seconds_count{name="owners"}'), 1);
    assert.equal(s.get('workqueue_work_duration_seconds_sum{name="owners"}'), 0.5);
    assert.equal(s.get('workqueue_unfinished_work_seconds{name="owners"}'), 3);
    assert.equal(s.get('workqueue_longest_running_processor_seconds{name="owners"}'), 3);
    assert.equal(s.get('fleetcache_caches'), 2);
    assert.equal(s.get('fleetcache_cached_objects{cluster="secret:team-a/prod",gvk="apps/v1, Kind=Deployment"}'), 12);
    assert.equal(s.get('fleetcache_relists_total{cluster="secret:team-a/prod",gvk="apps/v1, Kind=Deployment"}'), 3);
    assert.equal(s.get('fleetcache_watch_errors_total{cluster="secret:team-a/prod",gvk="apps/v1, Kind=Deployment"}'), 5);
    assert.equal(s.get('fleetcache_cache_synced{cluster="local",gvk="v1, Kind=Config\\"Map"}'), 0, 'label values are escaped');
    assert.equal(s.get('fleetcache_reconciles_total'), 7);
    assert.equal(s.get('fleetcache_reconcile_errors_total'), 2);
    assert.equal(s.get('fleetcache_promotions_total{outcome="succeeded"}'), 3);
    assert.equal(s.get('fleetcache_promotions_total{outcome="failed"}'), 1);
    assert.equal(s.get('fleetcache_leader'), 0);
    assert.ok((s.get('process_resident_memory_bytes') ?? 0) > 0);
    // Every family is declared once, before its samples.
    const types = res.body.split('\n').filter((l) => l.startsWith('# TYPE ')).map((l) => l.split(' ')[2]);
    assert.equal(new Set(types).size, types.length);
    assert.ok(second !== undefined);
    queue.done(second.item);

    leader = true;
    assert.equal(samples((await get(`${server.url}/metrics`)).body).get('fleetcache_leader'), 1);
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
