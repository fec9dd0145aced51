// Proofs for the reflector's promises around deletes, 410 Gone, backoff jitter and LIST
// continuation, on a fake clock and FakeResourceClient: each test goes red when its behaviour breaks.
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { FakeResourceClient } from '../transport/testing.ts';
import type { KubeObject, ListOptions } from '../transport/index.ts';
import { FakeClock, KubeApiError } from '../util/index.ts';
import { seededRandom } from '../util/seeded-random.ts';
import { ResourceInformer, type InformerHandler, type InformerOptions } from './index.ts';
import { settle } from '../../fixtures/support/index.ts';

function cm(name: string, data: Record<string, string> = {}): KubeObject {
  return { metadata: { namespace: 'ns', name }, data };
}

function gone(): KubeApiError {
  return new KubeApiError({ cluster: 'fake', gvk: { group: '', version: 'v1', kind: 'ConfigMap' }, statusCode: 410, status: { kind: 'Status', reason: 'Expired', code: 410 } });
}

function unavailable(): KubeApiError {
  return new KubeApiError({ cluster: 'fake', gvk: { group: '', version: 'v1', kind: 'ConfigMap' }, statusCode: 503, status: { kind: 'Status', reason: 'ServiceUnavailable', code: 503 } });
}

type Seen = readonly [string, string, unknown];

function recorder(): { readonly seen: Seen[]; readonly handler: InformerHandler } {
  const seen: Seen[] = [];
  const name = (o: KubeObject): string => o.metadata?.name ?? '';
  return {
    seen,
    handler: {
      add: (o) => { seen.push(['add', name(o), o.metadata?.resourceVersion]); },
      update: (_a, b) => { seen.push(['update', name(b), b.metadata?.resourceVersion]); },
      delete: (o, unknown) => { seen.push(['delete', name(o), unknown]); },
    },
  };
}

const running: ResourceInformer[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((i) => i.stop()));
});

function setup(options: Partial<InformerOptions> = {}, client = new FakeResourceClient()): { client: FakeResourceClient; clock: FakeClock; informer: ResourceInformer } {
  const clock = new FakeClock(1_000_000);
  const informer = new ResourceInformer({ client, clock, ...options });
  running.push(informer);
  return { client, clock, informer };
}

/** Starts the informer with a recording handler and returns what it records after the initial sync. */
async function recordingAfterSync(informer: ResourceInformer): Promise<Seen[]> {
  const { seen, handler } = recorder();
  informer.addHandler(handler);
  informer.start();
  await informer.waitForSync();
  await settle();
  seen.length = 0;
  return seen;
}

describe('informer: a delete for an object already gone delivers nothing', () => {
  it('a repeated DELETED on the watch is delivered once', async () => {
    const { client, informer } = setup({ random: () => 0 });
    const last = client.upsert(cm('a'), { quiet: true });
    const seen = await recordingAfterSync(informer);
    client.remove('ns/a');
    // The same deletion again, as a replayed event, and once more with a later resourceVersion.
    client.send({ type: 'DELETED', object: last });
    client.send({ type: 'DELETED', object: { ...last, metadata: { ...last.metadata, resourceVersion: '999' } } });
    // And a deletion of an object this informer never held.
    client.send({ type: 'DELETED', object: { ...cm('never'), metadata: { namespace: 'ns', name: 'never', uid: 'u-never', resourceVersion: '998' } } });
    await settle();
    assert.deepEqual(seen, [['delete', 'a', false]]);
    assert.equal(informer.store.size, 0);
  });

  it('a DELETED on the watch for an object a relist already deleted delivers nothing more', async () => {
    const { client, informer } = setup({ random: () => 0 });
    const final = client.upsert(cm('a'), { quiet: true });
    client.upsert(cm('b'), { quiet: true });
    const seen = await recordingAfterSync(informer);
    // Deleted while the watch was broken: the relist after the 410 synthesizes the delete...
    client.remove('ns/a', { quiet: true });
    client.stream?.fail(gone());
    await settle();
    assert.deepEqual(seen, [['delete', 'a', true]]);
    assert.equal(client.listCalls.length, 2);
    // ...and the real deletion, arriving late on the new watch, is a duplicate.
    client.send({ type: 'DELETED', object: final });
    await settle();
    assert.deepEqual(seen, [['delete', 'a', true]]);
    assert.deepEqual(informer.store.keys(), ['ns/b']);
  });
});

describe('informer: 410 Gone in a row backs off', () => {
  it('relists at once after the first 410, then waits the backoff (800, 1600, 3200 ms) for each further 410 in a row', async () => {
    const { client, clock, informer } = setup({ random: () => 0 });
    for (let i = 0; i < 4; i++) client.failNext('watch', gone());
    informer.start();
    await informer.waitForSync();
    await settle();
    assert.equal(client.listCalls.length, 2, 'the first 410 relists at once');
    for (const wait of [800, 1600, 3200]) {
      const lists: number = client.listCalls.length;
      clock.advance(wait - 1);
      await settle();
      assert.equal(client.listCalls.length, lists, `no relist before ${wait} ms`);
      clock.advance(1);
      await settle();
      assert.equal(client.listCalls.length, lists + 1, `a relist after ${wait} ms`);
    }
    assert.equal(client.watchCalls.length, 5);
    assert.equal(informer.stats().gones, 4);
    assert.equal(client.stream?.closed, false, 'watching again once the 410s stop');
  });

  it('a 410 after the watch delivered events is not "in a row": it relists at once', async () => {
    const { client, informer } = setup({ random: () => 0 });
    client.failNext('watch', gone());
    informer.start();
    await informer.waitForSync();
    await settle();
    assert.equal(client.listCalls.length, 2, 'the first 410 relists at once');
    // The new watch works for a while, then falls behind compaction (an ERROR 410 mid-stream).
    client.upsert(cm('a'));
    await settle();
    assert.equal(informer.store.size, 1);
    client.stream?.fail(gone());
    await settle();
    assert.equal(client.listCalls.length, 3, 'events arrived between the two 410s: relisted without a backoff');
    // And a watch that ends cleanly after events resets the streak too.
    client.upsert(cm('b'));
    await settle();
    client.stream?.end();
    await settle();
    client.stream?.fail(gone());
    await settle();
    assert.equal(client.listCalls.length, 4);
  });
});

describe('informer: jitter in the default backoff and in the watch timeout', () => {
  it('the default backoff multiplies each delay by [1, 2) with the injected randomness', async () => {
    const seed = 15;
    const { client, clock, informer } = setup({ random: seededRandom(seed) });
    const expected = seededRandom(seed);
    for (let i = 0; i < 6; i++) client.failNext('list', unavailable());
    informer.start();
    await settle();
    const ratios: number[] = [];
    let base = 800;
    for (let i = 0; i < 6; i++) {
      const wait = clock.nextTimerIn;
      assert.ok(wait !== undefined, `a retry is scheduled after failure ${i + 1}`);
      const cap = Math.min(base, 30_000);
      assert.ok(wait >= cap && wait < 2 * cap, `retry ${i + 1} in ${wait} ms, outside [${cap}, ${2 * cap})`);
      assert.equal(wait, cap * (1 + expected()), 'the delay is the base times 1 + random()');
      ratios.push(wait / cap);
      base *= 2;
      const lists = client.listCalls.length;
      clock.advance(wait);
      await settle();
      assert.equal(client.listCalls.length, lists + 1);
    }
    assert.equal(new Set(ratios).size, ratios.length, `jittered, not fixed: ratios ${ratios.join(', ')}`);
    await informer.waitForSync();
  });

  it('asks each watch for a timeoutSeconds in [300, 600), from the injected randomness', async () => {
    for (const [random, expected] of [[0, 300], [0.5, 450], [0.999_999, 599]] as const) {
      const { client, informer } = setup({ random: () => random });
      informer.start();
      await informer.waitForSync();
      await settle();
      assert.equal(client.watchCalls[0]?.timeoutSeconds, expected, `random() = ${random}`);
      await informer.stop();
    }
  });

  it('with the default randomness, timeoutSeconds differs between watches and stays in [300, 600)', async () => {
    const { client, informer } = setup();
    informer.start();
    await informer.waitForSync();
    await settle();
    // Each watch ends after a bookmark (progress, so the next one opens at once).
    for (let i = 0; i < 40; i++) {
      client.bookmark();
      client.stream?.end();
      await settle(5);
    }
    const timeouts = client.watchCalls.map((w) => w.timeoutSeconds);
    assert.equal(timeouts.length, 41);
    for (const t of timeouts) assert.ok(Number.isInteger(t) && t >= 300 && t < 600, `timeoutSeconds ${t}`);
    assert.ok(new Set(timeouts).size > 1, `randomized: got ${timeouts.join(', ')}`);
  });
});

describe('informer: an expired continue token', () => {
  /** Answers the next `count` continuation LISTs with 410, after running `meanwhile`. */
  function expireContinuations(client: FakeResourceClient, count: number, meanwhile: () => void = () => undefined): void {
    const list = client.list.bind(client);
    let left = count;
    client.list = (options: ListOptions) => {
      if (options.continue !== undefined && left > 0) {
        left--;
        meanwhile();
        client.listCalls.push(options);
        return Promise.reject(gone());
      }
      return list(options);
    };
  }

  function fill(client: FakeResourceClient, n: number): void {
    for (let i = 0; i < n; i++) client.upsert(cm(`cm-${i}`), { quiet: true });
  }

  it('restarts the LIST from the beginning, dropping what the expired pages held', async () => {
    const client = new FakeResourceClient();
    fill(client, 5);
    // Between the first page and the expiry, cm-0 (on the first page) is deleted and cm-9 created.
    expireContinuations(client, 1, () => {
      client.remove('ns/cm-0', { quiet: true });
      client.upsert(cm('cm-9'), { quiet: true });
    });
    const { informer } = setup({ pageSize: 2, random: () => 0 }, client);
    const { seen, handler } = recorder();
    informer.addHandler(handler);
    informer.start();
    await informer.waitForSync();
    assert.deepEqual(client.listCalls.map((c) => [c.limit, c.continue === undefined ? 'start' : 'continue']), [
      [2, 'start'], [2, 'continue'],
      [2, 'start'], [2, 'continue'], [2, 'continue'],
    ]);
    assert.deepEqual(informer.store.keys().sort(), ['ns/cm-1', 'ns/cm-2', 'ns/cm-3', 'ns/cm-4', 'ns/cm-9']);
    assert.ok(!seen.some((s) => s[1] === 'cm-0'), 'nothing of the expired attempt is delivered');
    assert.equal(informer.stats().resourceVersion, client.resourceVersion, 'watching from the restarted LIST');
    assert.equal(informer.stats().gones, 1);
  });

  it('falls back to one unpaginated LIST after a second expiry', async () => {
    const client = new FakeResourceClient();
    fill(client, 5);
    expireContinuations(client, 2);
    const { informer } = setup({ pageSize: 2, random: () => 0 }, client);
    informer.start();
    await informer.waitForSync();
    assert.deepEqual(client.listCalls.map((c) => [c.limit, c.continue === undefined ? 'start' : 'continue']), [
      [2, 'start'], [2, 'continue'],
      [2, 'start'], [2, 'continue'],
      [undefined, 'start'],
    ]);
    assert.equal(informer.store.size, 5);
    assert.equal(informer.stats().gones, 2);
  });
});
