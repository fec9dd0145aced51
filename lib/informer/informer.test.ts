import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { FakeResourceClient } from '../transport/testing.ts';
import type { KubeObject, ResourceClient, ResourceInfo, ResourceResolver } from '../transport/index.ts';
import {
  ClosedError,
  FakeClock,
  KubeApiError,
  TransportError,
  UnknownKindError,
  WatchDecodeError,
  type GroupVersionKind,
} from '../util/index.ts';
import { labelIndex, LAST_APPLIED_ANNOTATION, ResourceInformer, type InformerHandler, type InformerOptions } from './index.ts';
import { RecordingLogger, settle } from '../../fixtures/support/index.ts';

type Seen = readonly [string, ...unknown[]];

/** A handler that records every call as a compact tuple. */
function recorder(): { readonly seen: Seen[]; readonly handler: InformerHandler } {
  const seen: Seen[] = [];
  const name = (o: KubeObject): string => `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;
  return {
    seen,
    handler: {
      add: (o, initial) => { seen.push(['add', name(o), o.metadata?.resourceVersion, initial]); },
      update: (a, b) => { seen.push(['update', name(a), a.metadata?.resourceVersion, b.metadata?.resourceVersion]); },
      delete: (o, unknown) => { seen.push(['delete', name(o), unknown]); },
    },
  };
}

function cm(ns: string, name: string, data: Record<string, string> = {}, labels: Record<string, string> = {}): KubeObject {
  return { metadata: { namespace: ns, name, labels }, data };
}

function apiError(statusCode: number, reason = '', retryAfterSeconds?: number): KubeApiError {
  return new KubeApiError({ cluster: 'fake', gvk: { group: '', version: 'v1', kind: 'ConfigMap' }, statusCode, status: { kind: 'Status', reason, code: statusCode }, retryAfterSeconds });
}

const running: ResourceInformer[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((i) => i.stop()));
});

function setup(options: Partial<InformerOptions> = {}, client = new FakeResourceClient()): { client: FakeResourceClient; clock: FakeClock; informer: ResourceInformer } {
  const clock = new FakeClock(1_000_000);
  const informer = new ResourceInformer({ client, clock, random: () => 0, ...options });
  running.push(informer);
  return { client, clock, informer };
}

/** A default informer with a recording handler, started, synced, and its initial events delivered. */
async function synced(): Promise<{ client: FakeResourceClient; informer: ResourceInformer; seen: Seen[] }> {
  const { client, informer } = setup();
  const { seen, handler } = recorder();
  informer.addHandler(handler);
  informer.start();
  await informer.waitForSync();
  await settle();
  return { client, informer, seen };
}

describe('ResourceInformer: listing and syncing', () => {
  it('lists page by page and is synced only after the last page is applied', async () => {
    const client = new FakeResourceClient();
    for (let i = 0; i < 1200; i++) client.upsert(cm('ns', `cm-${String(i).padStart(4, '0')}`), { quiet: true });
    const { informer } = setup({ pageSize: 500 }, client);
    const { seen, handler } = recorder();
    informer.addHandler(handler);
    let syncedAt = -1;
    informer.on('synced', () => { syncedAt = seen.length; });
    assert.equal(client.listCalls.length, 0, 'no I/O before start()');
    informer.start();
    await informer.waitForSync(AbortSignal.timeout(5000));

    assert.deepEqual(client.listCalls.map((c) => [c.limit, c.continue]), [[500, undefined], [500, '1300:500'], [500, '1300:1000']]);
    assert.equal(informer.store.size, 1200);
    assert.equal(syncedAt, 1200, 'synced after every initial add was delivered');
    assert.ok(seen.every((s) => s[0] === 'add' && s[3] === true), 'initial adds are flagged isInInitialList');
    const listed = informer.store.get('ns/cm-0007');
    assert.equal(listed?.kind, 'ConfigMap', 'list items get their kind');
    assert.equal(listed.apiVersion, 'v1');
    assert.equal(informer.stats().synced, true);
    assert.equal(informer.stats().resourceVersion, '1300');
  });

  it('applies namespace and selectors to LIST and WATCH alike, and watches from the list version with bookmarks', async () => {
    const { client, informer } = setup({ namespace: 'team-a', labelSelector: 'app=web', fieldSelector: 'metadata.name!=x' });
    informer.start();
    await informer.waitForSync();
    await settle();
    const list = client.listCalls[0];
    const watch = client.watchCalls[0];
    assert.ok(list !== undefined && watch !== undefined);
    for (const call of [list, watch]) {
      assert.equal(call.namespace, 'team-a');
      assert.equal(call.labelSelector, 'app=web');
      assert.equal(call.fieldSelector, 'metadata.name!=x');
    }
    assert.equal(watch.resourceVersion, client.resourceVersion);
    assert.equal(watch.allowWatchBookmarks, true);
    assert.ok(watch.timeoutSeconds >= 300 && watch.timeoutSeconds < 600, `timeoutSeconds ${watch.timeoutSeconds}`);
  });

  it('waitForSync rejects with the signal reason on abort and with ClosedError on stop', async () => {
    const { client, informer } = setup();
    client.failNext('list', apiError(500));
    informer.start();
    const controller = new AbortController();
    const aborted = informer.waitForSync(controller.signal);
    controller.abort(new Error('gave up'));
    await assert.rejects(aborted, /gave up/);
    const pending = informer.waitForSync();
    await informer.stop();
    await assert.rejects(pending, ClosedError);
    await assert.rejects(informer.waitForSync(), ClosedError);
  });
});

describe('ResourceInformer: watch events', () => {
  it('reports add, update with old and new objects, and delete with the final state', async () => {
    const { client, informer, seen } = await synced();
    const created = client.upsert(cm('ns', 'a', { v: '1' }));
    client.upsert(cm('ns', 'a', { v: '2' }));
    const old = created.metadata?.resourceVersion;
    client.remove('ns/a');
    await settle();
    assert.deepEqual(seen, [
      ['add', 'ns/a', old, false],
      ['update', 'ns/a', old, String(Number(old) + 1)],
      ['delete', 'ns/a', false],
    ]);
    assert.equal(informer.store.size, 0);
    assert.equal(informer.stats().events, 3);
  });

  it('does not report an update whose resourceVersion did not change', async () => {
    const { client, seen } = await synced();
    const obj = client.upsert(cm('ns', 'a'));
    client.send({ type: 'MODIFIED', object: obj });
    await settle();
    assert.deepEqual(seen.map((s) => s[0]), ['add']);
  });

  it('shows a delete and recreate (new UID) as a delete then an add', async () => {
    const { client, informer, seen } = await synced();
    client.upsert(cm('ns', 'a'));
    client.remove('ns/a');
    client.upsert(cm('ns', 'a'));
    await settle();
    assert.deepEqual(seen.map((s) => s.slice(0, 2)), [['add', 'ns/a'], ['delete', 'ns/a'], ['add', 'ns/a']]);
    assert.notEqual(informer.store.get('ns/a')?.metadata?.uid, undefined);
  });

  it('advances the resourceVersion on bookmarks and resumes from it when the stream ends', async () => {
    const { client, informer } = setup();
    informer.start();
    await informer.waitForSync();
    await settle();
    client.upsert(cm('ns', 'elsewhere'), { quiet: true });
    client.bookmark();
    await settle();
    client.stream?.end();
    await settle();
    assert.equal(client.watchCalls.length, 2);
    assert.equal(client.watchCalls[1]?.resourceVersion, client.resourceVersion);
    assert.equal(client.listCalls.length, 1, 'a clean end re-watches without relisting');
    assert.equal(informer.stats().reconnects, 1);
  });
});

describe('ResourceInformer: relist after 410 Gone', () => {
  it('replaces: updates changed objects, skips unchanged ones, deletes vanished ones as finalStateUnknown', async () => {
    const { client, informer } = setup();
    client.upsert(cm('ns', 'same'), { quiet: true });
    client.upsert(cm('ns', 'changed', { v: '1' }), { quiet: true });
    client.upsert(cm('ns', 'vanished'), { quiet: true });
    client.upsert(cm('ns', 'recreated'), { quiet: true });
    const { seen, handler } = recorder();
    informer.addHandler(handler);
    const relisted: unknown[] = [];
    informer.on('relisted', (summary) => { relisted.push(summary); });
    informer.start();
    await informer.waitForSync();
    await settle();
    seen.length = 0;

    // While the watch is broken: changes nobody sees on a stream.
    client.upsert(cm('ns', 'changed', { v: '2' }), { quiet: true });
    client.remove('ns/vanished', { quiet: true });
    client.remove('ns/recreated', { quiet: true });
    client.upsert(cm('ns', 'recreated'), { quiet: true });
    client.upsert(cm('ns', 'new'), { quiet: true });
    client.stream?.fail(apiError(410, 'Expired'));
    await settle();

    assert.deepEqual(seen.map((s) => s.slice(0, 2).concat(s[0] === 'add' || s[0] === 'delete' ? [s.at(-1)] : [])), [
      ['update', 'ns/changed'],
      ['add', 'ns/new', false],
      ['delete', 'ns/recreated', true],
      ['add', 'ns/recreated', false],
      ['delete', 'ns/vanished', true],
    ]);
    const stats = informer.stats();
    assert.equal(stats.gones, 1);
    assert.equal(stats.relists, 1);
    assert.equal(stats.lastError, undefined, 'a 410 is routine, not an error');
    assert.deepEqual(relisted.at(-1), { reason: 'gone', added: 2, updated: 1, deleted: 2 });
    assert.equal(client.listCalls.length, 2, 'relisted at once, without waiting for a backoff');
  });

  it('restarts a LIST whose continue token expired', async () => {
    const client = new FakeResourceClient();
    for (let i = 0; i < 5; i++) client.upsert(cm('ns', `cm-${i}`), { quiet: true });
    const { informer } = setup({ pageSize: 2 }, client);
    const calls = client.listCalls;
    const realList = client.list.bind(client);
    let failed = false;
    client.list = async (options) => {
      if (options.continue !== undefined && !failed) {
        failed = true;
        calls.push(options);
        throw apiError(410, 'Expired');
      }
      return realList(options);
    };
    informer.start();
    await informer.waitForSync();
    assert.deepEqual(calls.map((c) => c.continue === undefined ? 'first' : 'next'), ['first', 'next', 'first', 'next', 'next']);
    assert.equal(informer.store.size, 5);
    assert.equal(informer.stats().gones, 1);
  });
});

describe('ResourceInformer: retries', () => {
  it('backs off on 5xx, honours Retry-After on 429, and never gives up', async () => {
    const { client, clock, informer } = setup();
    client.failNext('list', apiError(503));
    client.failNext('list', apiError(429, 'TooManyRequests', 7));
    informer.start();
    await settle();
    assert.equal(client.listCalls.length, 1);
    assert.ok(informer.stats().lastError instanceof KubeApiError);
    // [advance the clock by, LISTs made by then, why]
    const steps: readonly (readonly [number, number, string?])[] = [
      [799, 1, 'the first retry waits 800 ms'],
      [1, 2],
      [6_999, 2, 'Retry-After: 7 is honoured over the 1.6 s backoff'],
      [1, 3],
    ];
    for (const [ms, lists, why] of steps) {
      clock.advance(ms);
      await settle();
      assert.equal(client.listCalls.length, lists, why);
    }
    assert.equal(informer.synced, true);
    assert.equal(informer.stats().lastError, undefined, 'cleared by a successful LIST');
  });

  it('records 403 as a typed error with cluster, GVK and status, retries slowly, and recovers', async () => {
    const { client, clock, informer } = setup();
    const errors: Error[] = [];
    let recoveries = 0;
    informer.on('error', (e) => { errors.push(e); });
    informer.on('recovered', () => { recoveries++; });
    client.failNext('list', apiError(403, 'Forbidden'));
    informer.start();
    await settle();
    const err = informer.stats().lastError;
    assert.ok(err instanceof KubeApiError);
    assert.equal(err.statusCode, 403);
    assert.equal(err.cluster, 'fake');
    assert.deepEqual(err.gvk, { group: '', version: 'v1', kind: 'ConfigMap' });
    assert.equal(errors[0], err);
    clock.advance(4_999);
    await settle();
    assert.equal(client.listCalls.length, 1, 'a 403 is retried slowly (5 s)');
    clock.advance(1);
    await informer.waitForSync();
    assert.equal(informer.stats().lastError, undefined);
    assert.equal(recoveries, 1);
  });

  it('resumes from the last good event after a malformed line or a cut stream, and says when it recovered', async () => {
    const { client, clock, informer } = setup();
    const { seen, handler } = recorder();
    let recoveries = 0;
    informer.on('recovered', () => { recoveries++; });
    informer.addHandler(handler);
    informer.start();
    await informer.waitForSync();
    await settle();
    assert.equal(recoveries, 0, 'nothing to recover from');
    client.upsert(cm('ns', 'a'));
    await settle();
    const goodRv = client.resourceVersion;
    client.stream?.fail(new WatchDecodeError({ cluster: 'fake', line: '{"type":"ADDED","obj' }));
    await settle();
    assert.ok(informer.stats().lastError instanceof WatchDecodeError);
    clock.advance(800);
    await settle();
    assert.equal(client.watchCalls.at(-1)?.resourceVersion, goodRv);
    client.stream?.fail(new TransportError({ cluster: 'fake' }, 'socket hang up'));
    await settle();
    clock.advance(10_000);
    await settle();
    assert.equal(client.watchCalls.length, 3);
    assert.equal(client.watchCalls.at(-1)?.resourceVersion, goodRv);
    assert.equal(client.listCalls.length, 1, 'no relist needed: the resourceVersion is still valid');
    assert.equal(seen.length, 1);
    assert.equal(informer.stats().lastError, undefined);
    assert.equal(recoveries, 2, 'once after each failure, when the next watch was accepted');
  });

  it('treats a watch that closes at once without events as a failure, not a hot loop', async () => {
    const { client, clock, informer } = setup();
    informer.start();
    await informer.waitForSync();
    await settle();
    client.stream?.end();
    await settle();
    assert.equal(client.watchCalls.length, 1);
    clock.advance(800);
    await settle();
    assert.equal(client.watchCalls.length, 2);
  });

  it('reconnects a watch that went silent past the inactivity deadline, and not one kept alive by bookmarks', async () => {
    const { client, clock, informer } = setup({ watchInactivityTimeoutMs: 180_000 });
    informer.start();
    await informer.waitForSync();
    await settle();
    for (let i = 0; i < 5; i++) {
      clock.advance(60_000);
      client.bookmark();
      await settle();
    }
    assert.equal(client.watchCalls.length, 1, 'bookmarks every minute keep the stream');
    clock.advance(180_000);
    await settle();
    assert.ok(informer.stats().lastError instanceof TransportError);
    clock.advance(1_600);
    await settle();
    assert.equal(client.watchCalls.length, 2);
    assert.equal(client.streams.length, 1, 'the silent stream was released');
    assert.equal(informer.stats().reconnects, 1);
  });

  it('finds a kind whose CRD appears after the informer asked for it', async () => {
    const gvk: GroupVersionKind = { group: 'example.com', version: 'v1', kind: 'Widget' };
    const info: ResourceInfo = { gvk, resource: 'widgets', namespaced: true, verbs: ['list', 'watch'] };
    const client = new FakeResourceClient({ cluster: 'late', info });
    client.upsert({ metadata: { namespace: 'ns', name: 'w' } }, { quiet: true });
    let installed = false;
    const resolver: ResourceResolver = {
      name: 'late',
      resolve: (g) => (installed ? Promise.resolve(info) : Promise.reject(new UnknownKindError({ cluster: 'late', gvk: g, statusCode: 404 }))),
      resourceClient: (): ResourceClient => client,
    };
    const clock = new FakeClock();
    const informer = new ResourceInformer({ connection: resolver, gvk, clock, random: () => 0 });
    running.push(informer);
    informer.start();
    await settle();
    assert.ok(informer.stats().lastError instanceof UnknownKindError);
    installed = true;
    clock.advance(5_000);
    await informer.waitForSync();
    assert.equal(informer.store.get('ns/w')?.kind, 'Widget');
  });
});

describe('ResourceInformer: lifecycle', () => {
  it('start is idempotent, stop releases the stream and every timer, and a stopped informer stays stopped', async () => {
    const { client, clock, informer } = setup({ resyncIntervalMs: 60_000 });
    informer.start();
    informer.start();
    await informer.waitForSync();
    await settle();
    assert.equal(client.streams.length, 1, 'one watch, however often start() is called');
    const first = informer.stop();
    const second = informer.stop();
    assert.equal(first, second);
    await first;
    assert.equal(client.streams.length, 0);
    assert.equal(clock.pendingTimers, 0, 'no timer left behind');
    assert.throws(() => { informer.start(); }, ClosedError);
    client.upsert(cm('ns', 'after-stop'));
    await settle();
    assert.equal(informer.store.get('ns/after-stop'), undefined);
  });

  it('stops when the start signal aborts, even in the middle of a backoff', async () => {
    const { client, clock, informer } = setup();
    client.failNext('list', apiError(500));
    const controller = new AbortController();
    informer.start(controller.signal);
    await settle();
    controller.abort();
    await informer.stop();
    assert.equal(clock.pendingTimers, 0);
    clock.advance(60_000);
    await settle();
    assert.equal(client.listCalls.length, 1);
  });

  it('a start signal that aborts stops the informer by itself: waiters rejected, timers released, stopped for good', { timeout: 10_000 }, async () => {
    const { client, clock, informer } = setup();
    client.failNext('list', apiError(500));
    const controller = new AbortController();
    informer.start(controller.signal);
    const waiting = informer.waitForSync();
    await settle();
    controller.abort(new Error('the cluster went away'));
    await assert.rejects(waiting, ClosedError);
    await settle();
    assert.equal(clock.pendingTimers, 0);
    assert.throws(() => { informer.start(); }, ClosedError);
    clock.advance(60_000);
    await settle();
    assert.equal(client.listCalls.length, 1);
  });

  it('started with an aborted signal, lists nothing', async () => {
    const { client, informer } = setup();
    informer.start(AbortSignal.abort());
    await settle();
    assert.equal(client.listCalls.length, 0);
    assert.equal(informer.synced, false);
    await informer.stop();
  });

  it('stop during the first LIST leaves no watch behind', async () => {
    const { client, informer } = setup();
    let release: (() => void) | undefined;
    const realList = client.list.bind(client);
    client.list = async (options) => {
      await new Promise<void>((resolve) => { release = resolve; });
      return realList(options);
    };
    informer.start();
    await settle();
    const stopped = informer.stop();
    release?.();
    await stopped;
    await settle();
    assert.equal(client.watchCalls.length, 0);
    assert.equal(informer.synced, false);
  });
});

describe('ResourceInformer: handlers', () => {
  it('isolates a handler that throws or rejects from the informer and from other handlers', async () => {
    const logger = new RecordingLogger();
    const { client, informer } = setup({ logger });
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown): void => { unhandled.push(reason); };
    process.on('unhandledRejection', onUnhandled);
    try {
      informer.addHandler({ add: () => { throw new Error('boom'); } });
      informer.addHandler({ add: async () => { await Promise.resolve(); throw new Error('async boom'); } });
      const { seen, handler } = recorder();
      informer.addHandler(handler);
      informer.start();
      await informer.waitForSync();
      await settle();
      client.upsert(cm('ns', 'a'));
      client.upsert(cm('ns', 'b'));
      await settle();
      assert.deepEqual(seen.map((s) => s[1]), ['ns/a', 'ns/b']);
      assert.equal(logger.lines.filter((l) => l.message === 'informer handler failed').length, 4);
      assert.deepEqual(unhandled, []);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('gives a late handler the cached objects first, then live events, never twice', async () => {
    const { client, informer } = setup();
    client.upsert(cm('ns', 'a'), { quiet: true });
    client.upsert(cm('ns', 'b'), { quiet: true });
    informer.start();
    await informer.waitForSync();
    await settle();
    const { seen, handler } = recorder();
    informer.addHandler(handler);
    // An event that the loop may apply before the registration's microtask runs.
    client.upsert(cm('ns', 'a', { v: '2' }));
    await settle();
    assert.deepEqual(seen.map((s) => [s[0], s[1], s.at(-1)]), [
      ['add', 'ns/a', true],
      ['add', 'ns/b', true],
      ['update', 'ns/a', client.resourceVersion],
    ]);
  });

  it('gives a handler registered from inside a delivery each object exactly once', async () => {
    const { client, informer } = setup();
    for (const name of ['a', 'b', 'c']) client.upsert(cm('ns', name), { quiet: true });
    const late = recorder();
    let registered = false;
    informer.addHandler({
      add: () => {
        if (registered) return;
        registered = true;
        informer.addHandler(late.handler);
      },
    });
    informer.start();
    await informer.waitForSync();
    await settle();
    client.upsert(cm('ns', 'd'));
    await settle();
    assert.deepEqual(late.seen.map((s) => [s[1], s[3]]), [['ns/a', true], ['ns/b', true], ['ns/c', true], ['ns/d', false]]);
  });

  it('stops delivering to an unsubscribed handler', async () => {
    const { client, informer } = setup();
    const { seen, handler } = recorder();
    const off = informer.addHandler(handler);
    informer.start();
    await informer.waitForSync();
    await settle();
    client.upsert(cm('ns', 'a'));
    await settle();
    off();
    off();
    client.upsert(cm('ns', 'b'));
    await settle();
    assert.deepEqual(seen.map((s) => s[1]), ['ns/a']);
  });

  it('delivers resync only to resync callbacks, jittered within [0.9, 1.1) of the interval', async () => {
    const { client, clock, informer } = setup({ resyncIntervalMs: 100_000, random: () => 0.5 });
    client.upsert(cm('ns', 'a'), { quiet: true });
    const resynced: string[] = [];
    const { seen, handler } = recorder();
    informer.addHandler({ ...handler, resync: (o) => { resynced.push(o.metadata?.name ?? ''); } });
    informer.start();
    await informer.waitForSync();
    seen.length = 0;
    clock.advance(99_999);
    assert.deepEqual(resynced, []);
    clock.advance(1);
    assert.deepEqual(resynced, ['a']);
    assert.deepEqual(seen, [], 'resync is never an update');
  });
});

describe('ResourceInformer: store', () => {
  it('hands out deeply frozen objects, stripped of managedFields and last-applied by default', async () => {
    const { client, informer } = setup();
    client.upsert({
      metadata: {
        namespace: 'ns', name: 'a',
        managedFields: [{ manager: 'kubectl' }],
        annotations: { [LAST_APPLIED_ANNOTATION]: '{"big":true}', keep: 'me' },
      },
      data: { nested: 'x' },
    }, { quiet: true });
    informer.start();
    await informer.waitForSync();
    const obj = informer.store.getByName('ns', 'a');
    assert.ok(obj !== undefined);
    assert.equal(obj.metadata?.managedFields, undefined);
    assert.deepEqual(obj.metadata?.annotations, { keep: 'me' });
    assert.ok(Object.isFrozen(obj) && Object.isFrozen(obj.metadata) && Object.isFrozen(obj.data));
    assert.throws(() => { (obj.data as Record<string, string>).nested = 'changed'; }, TypeError);
  });

  it('applies a custom transform at ingest', async () => {
    const { client, informer } = setup({ transform: (o) => ({ metadata: o.metadata ?? {}, slim: true }) });
    client.upsert(cm('ns', 'a', { big: 'x'.repeat(1000) }), { quiet: true });
    informer.start();
    await informer.waitForSync();
    assert.deepEqual(Object.keys(informer.store.get('ns/a') ?? {}), ['metadata', 'slim']);
  });

  it('indexes by namespace and by custom indexers, and keeps indexes in step with changes', async () => {
    const { client, informer } = setup({ indexers: { app: labelIndex('app'), dataKeys: (o) => Object.keys((o as { data?: object }).data ?? {}) } });
    client.upsert(cm('a', 'x', { k1: '' }, { app: 'web' }), { quiet: true });
    client.upsert(cm('b', 'y', { k1: '', k2: '' }, { app: 'web' }), { quiet: true });
    client.upsert(cm('b', 'z', {}, { app: 'db' }), { quiet: true });
    informer.start();
    await informer.waitForSync();
    await settle();
    const names = (objs: readonly KubeObject[]): string[] => objs.map((o) => o.metadata?.name ?? '').sort();
    assert.deepEqual(names(informer.store.byIndex('namespace', 'b')), ['y', 'z']);
    assert.deepEqual(names(informer.store.byIndex('app', 'web')), ['x', 'y']);
    assert.deepEqual(names(informer.store.byIndex('dataKeys', 'k1')), ['x', 'y']);
    client.upsert(cm('b', 'y', {}, { app: 'db' }));
    client.remove('a/x');
    await settle();
    assert.deepEqual(names(informer.store.byIndex('app', 'web')), []);
    assert.deepEqual(names(informer.store.byIndex('app', 'db')), ['y', 'z']);
    assert.deepEqual(names(informer.store.byIndex('dataKeys', 'k1')), []);
    assert.deepEqual(names(informer.store.byIndex('namespace', 'a')), []);
    assert.throws(() => informer.store.byIndex('nope', 'x'), TypeError);
  });

  it('rejects invalid options with a TypeError naming the option', () => {
    const client = new FakeResourceClient();
    assert.throws(() => new ResourceInformer({ client, pageSize: 0 }), /pageSize/);
    assert.throws(() => new ResourceInformer({ client, resyncIntervalMs: -1 }), /resyncIntervalMs/);
    assert.throws(() => new ResourceInformer({ client, indexers: { namespace: () => [] } }), /namespace/);
    assert.throws(() => new ResourceInformer({}), /client/);
  });
});
