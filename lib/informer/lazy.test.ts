// Lazy objects (issue 27): the cache keeps each object's stripped JSON text and parses it when a
// reader or a whole-object handler asks; head handlers see metadata only and never cause a parse.
// Parses are counted by `stats().decodes`.
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { FakeResourceClient } from '../transport/testing.ts';
import type { KubeObject } from '../transport/index.ts';
import { KubeApiError, ObjectSkippedError } from '../util/index.ts';
import { LAST_APPLIED_ANNOTATION, ResourceInformer, type InformerOptions, type ObjectHead } from './index.ts';
import { settle } from '../../fixtures/support/index.ts';
import { eventually } from '../../e2e/harness/index.ts';

const running: ResourceInformer[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((i) => i.stop()));
});

function cm(name: string, data: Record<string, string> = { k: 'v' }, labels: Record<string, string> = { app: 'web' }): KubeObject {
  return {
    metadata: {
      namespace: 'ns',
      name,
      labels,
      annotations: { [LAST_APPLIED_ANNOTATION]: '{"big":"copy"}', keep: 'me' },
      managedFields: [{ manager: 'kubectl', fieldsV1: { 'f:data': {} } }],
    },
    data,
  };
}

function started(options: Partial<InformerOptions> = {}, objects = ['a', 'b']): { client: FakeResourceClient; informer: ResourceInformer } {
  const client = new FakeResourceClient();
  for (const name of objects) client.upsert(cm(name));
  const informer = new ResourceInformer({ client, objects: 'lazy', ...options });
  running.push(informer);
  return { client, informer };
}

async function sync(informer: ResourceInformer): Promise<void> {
  informer.start();
  await informer.waitForSync(AbortSignal.timeout(10_000));
  await settle();
}

describe('lazy objects', () => {
  it('a head handler that never reads causes no parse, through LIST, watch updates, deletes and resync-free churn', async () => {
    const { client, informer } = started();
    const seen: string[] = [];
    const heads: ObjectHead[] = [];
    informer.addHeadHandler({
      add: (h) => { heads.push(h); seen.push(`add ${h.metadata.name ?? ''} ${h.metadata.labels?.app ?? ''}`); },
      update: (old, h) => { heads.push(h); seen.push(`update ${old.metadata.resourceVersion ?? ''}→${h.metadata.resourceVersion ?? ''} ${h.metadata.labels?.app ?? ''}`); },
      delete: (h, unknown) => { seen.push(`delete ${h.metadata.name ?? ''} ${String(unknown)}`); },
    });
    await sync(informer);
    for (let i = 0; i < 20; i++) client.upsert(cm('a', { k: `v${i}` }, { app: i % 2 === 0 ? 'web' : 'api' }));
    client.upsert(cm('c'));
    client.remove('ns/b');
    await settle();
    assert.equal(seen.length, 2 + 20 + 1 + 1);
    assert.equal(seen.at(-3), 'update 121→122 api');
    assert.equal(seen.at(-1), 'delete b false');
    assert.equal(informer.stats().decodes, 0, 'nothing was parsed');
    const head = heads.at(-1);
    assert.ok(head !== undefined && Object.isFrozen(head) && Object.isFrozen(head.metadata) && Object.isFrozen(head.metadata.labels));
    assert.equal(head.kind, 'ConfigMap');
    assert.equal(head.apiVersion, 'v1');
    assert.equal(head.metadata.managedFields, undefined, 'the default transform applies to heads');
    assert.deepEqual(head.metadata.annotations, { keep: 'me' });
    assert.equal((head as { data?: unknown }).data, undefined, 'a head carries metadata only');
    // The namespace and label indexes come from metadata: no parse either.
    assert.deepEqual(informer.store.keys().sort(), ['ns/a', 'ns/c']);
    assert.equal(informer.stats().decodes, 0);
  });

  it('an update\'s old head is parsed only when its handler reads it, and then reads as a plain frozen head of the old object', async () => {
    const { client, informer } = started({}, ['a']);
    const olds: ObjectHead[] = [];
    const news: ObjectHead[] = [];
    informer.addHeadHandler({ update: (old, current) => { olds.push(old); news.push(current); } });
    await sync(informer);
    // Every JSON.parse of metadata text (an object's head) is counted.
    const realParse = JSON.parse;
    let metadataParses = 0;
    JSON.parse = function parse(text: string, reviver?: (this: unknown, key: string, value: unknown) => unknown): unknown {
      if (typeof text === 'string' && text.startsWith('{"namespace"')) metadataParses++;
      return realParse(text, reviver);
    } as typeof JSON.parse;
    try {
      for (let i = 0; i < 10; i++) client.upsert(cm('a', { k: `v${i}` }, { app: `v${i}` }));
      await settle();
      assert.equal(olds.length, 10);
      assert.equal(metadataParses, 10, 'one parse per update: its new head; the old heads were not read');
      const read = olds[5];
      assert.ok(read !== undefined);
      assert.equal(read.metadata.labels?.app, 'v4', 'the old head is the object before the update');
      assert.equal(metadataParses, 11, 'reading an old head parses it, once');
      const again = read.metadata;
      assert.equal(again, read.metadata, 'the same metadata on every read');
      assert.equal(metadataParses, 11);
    } finally {
      JSON.parse = realParse;
    }
    const old = olds[5];
    assert.ok(old !== undefined);
    assert.ok(Object.isFrozen(old) && Object.isFrozen(old.metadata) && Object.isFrozen(old.metadata.labels));
    assert.deepEqual(Object.keys(old), ['apiVersion', 'kind', 'metadata']);
    // A plain head to spreading, JSON, structuredClone and deep equality: what the new head of the update before was.
    assert.deepEqual(old, news[4]);
    assert.deepEqual({ ...old }, news[4]);
    assert.deepEqual(structuredClone(old), news[4]);
    assert.deepEqual(JSON.parse(JSON.stringify(old)), JSON.parse(JSON.stringify(news[4])));
    assert.equal(old.metadata.managedFields, undefined);
    assert.deepEqual(old.metadata.annotations, { keep: 'me' });
    assert.throws(() => { (old as { kind: string }).kind = 'Other'; }, TypeError);
  });

  it('a LIST is taken as text: no whole object is parsed until read, and what is read equals the parsed mode\'s', async () => {
    const names = Array.from({ length: 50 }, (_, i) => `item-${String(i).padStart(2, '0')}`);
    const { client, informer } = started({ pageSize: 20 }, names);
    const parsedInformer = new ResourceInformer({ client, objects: 'parsed' });
    running.push(parsedInformer);
    // Every JSON.parse of text holding an object's body (its `data`) is a whole-object parse.
    const realParse = JSON.parse;
    let wholeParses = 0;
    JSON.parse = function parse(text: string, reviver?: (this: unknown, key: string, value: unknown) => unknown): unknown {
      if (typeof text === 'string' && text.includes('"data"')) wholeParses++;
      return realParse(text, reviver);
    } as typeof JSON.parse;
    try {
      informer.addHeadHandler({ add: () => undefined });
      await sync(informer);
      assert.equal(informer.store.size, 50);
      assert.equal(wholeParses, 0, 'three LIST pages, no object body parsed');
      assert.equal(informer.stats().decodes, 0);
      const one = informer.store.get('ns/item-07');
      assert.equal(wholeParses, 1, 'a read parses its object, once');
      assert.equal(one?.kind, 'ConfigMap', 'apiVersion and kind, absent from a typed list\'s items, are added on read');
      assert.equal(informer.store.byIndex('namespace', 'ns').length, 50, 'the namespace index was filled from metadata');
    } finally {
      JSON.parse = realParse;
    }
    await sync(parsedInformer);
    const byName = (list: readonly KubeObject[]): KubeObject[] => [...list].sort((x, y) => (x.metadata?.name ?? '').localeCompare(y.metadata?.name ?? ''));
    assert.deepEqual(byName(informer.store.list()), byName(parsedInformer.store.list()));
    assert.deepEqual(client.listCalls.map((c) => c.objectText), [true, true, true, false]);
  });

  it('a relist of texts adds, updates and deletes as the watch would; unchanged objects are not reported', async () => {
    const { client, informer } = started({}, ['a', 'b', 'c']);
    const seen: string[] = [];
    informer.addHeadHandler({
      add: (h, initial) => { if (!initial) seen.push(`add ${h.metadata.name ?? ''}`); },
      update: (_o, h) => { seen.push(`update ${h.metadata.name ?? ''}`); },
      delete: (h, unknown) => { seen.push(`delete ${h.metadata.name ?? ''} ${String(unknown)}`); },
    });
    await sync(informer);
    client.upsert(cm('a', { k: 'changed' }), { quiet: true });
    client.upsert(cm('d'), { quiet: true });
    client.remove('ns/b', { quiet: true });
    client.stream?.fail(new KubeApiError({ cluster: 'fake', gvk: { group: '', version: 'v1', kind: 'ConfigMap' }, statusCode: 410, status: { kind: 'Status', reason: 'Expired', code: 410 } }));
    await eventually('relisted', () => informer.stats().relists === 1);
    await settle();
    assert.deepEqual(seen.sort(), ['add d', 'delete b true', 'update a']);
    assert.deepEqual(informer.store.get('ns/a')?.data, { k: 'changed' });
    assert.equal(informer.stats().decodes, 1, 'only the read parsed');
  });

  it('a uid written with an escape, and a cluster-scoped name with a slash, keep their bookkeeping exact', async () => {
    const { client, informer } = started();
    const errors: Error[] = [];
    informer.on('error', (e) => errors.push(e));
    await sync(informer);
    // The slot keeps where the uid is in the text; an escaped one is not there verbatim.
    client.stream?.pushLine('{"type":"ADDED","object":{"metadata":{"namespace":"ns","name":"esc","uid":"u\\u002d1","resourceVersion":"900"},"data":{"k":"v"}}}');
    client.stream?.pushLine('{"type":"ADDED","object":{"metadata":{"name":"odd/name","uid":"u-2","resourceVersion":"901"}}}');
    await settle();
    assert.equal(informer.store.get('ns/esc')?.metadata?.uid, 'u-1');
    client.stream?.pushLine('{"type":"MODIFIED","object":{"metadata":{"namespace":"ns","name":"esc","uid":"u\\u002d1","resourceVersion":"902"},"data":{"k":"w"}}}');
    await settle();
    assert.deepEqual(informer.store.get('ns/esc')?.data, { k: 'w' }, 'same uid: an update, not a recreation');
    assert.deepEqual(informer.store.byIndex('namespace', '').map((o) => o.metadata?.name), ['odd/name']);
    assert.equal(informer.store.byIndex('namespace', 'odd').length, 0);
    client.stream?.pushLine('{"type":"DELETED","object":{"metadata":{"name":"odd/name","uid":"u-2","resourceVersion":"903"}}}');
    await settle();
    assert.deepEqual(informer.store.byIndex('namespace', ''), []);
    assert.deepEqual(errors, []);
  });

  it('uid and resourceVersion are compared exactly where the text holds them: a re-sent version is no event, a longer uid or version is a change', async () => {
    const { client, informer } = started({}, []);
    const seen: string[] = [];
    informer.addHeadHandler({
      add: (h) => { seen.push(`add ${h.metadata.uid ?? ''} ${h.metadata.resourceVersion ?? ''}`); },
      update: (old, h) => { seen.push(`update ${old.metadata.resourceVersion ?? ''}→${h.metadata.resourceVersion ?? ''}`); },
      delete: (h, unknown) => { seen.push(`delete ${h.metadata.uid ?? ''} ${String(unknown)}`); },
    });
    await sync(informer);
    const line = (uid: string, rv: string, k: string): string => `{"type":"MODIFIED","object":{"metadata":{"namespace":"ns","name":"x","uid":"${uid}","resourceVersion":"${rv}"},"data":{"k":"${k}"}}}`;
    client.stream?.pushLine(line('u-1', '90', 'a'));
    client.stream?.pushLine(line('u-1', '90', 'a'));
    client.stream?.pushLine(line('u-1', '901', 'b'));
    client.stream?.pushLine(line('u-1', '90', 'c'));
    client.stream?.pushLine(line('u-10', '902', 'd'));
    client.stream?.pushLine(line('u-1', '903', 'e'));
    await settle();
    assert.deepEqual(seen, [
      'add u-1 90',
      'update 90→901',
      'update 901→90',
      'delete u-1 true',
      'add u-10 902',
      'delete u-10 true',
      'add u-1 903',
    ]);
    assert.deepEqual(informer.store.get('ns/x')?.data, { k: 'e' });
    assert.deepEqual(informer.store.byIndex('namespace', 'ns').map((o) => o.metadata?.resourceVersion), ['903'], 'the namespace index follows replacements');
    client.stream?.pushLine('{"type":"DELETED","object":{"metadata":{"namespace":"ns","name":"x","uid":"u-1","resourceVersion":"904"}}}');
    await settle();
    assert.deepEqual(informer.store.byIndex('namespace', 'ns'), []);
  });

  it('a whole-object handler gets parsed, frozen, transformed objects; a read right after is served by the decoded cache', async () => {
    const { client, informer } = started();
    const got: KubeObject[] = [];
    informer.addHandler({ update: (_old, obj) => { got.push(obj); } });
    await sync(informer);
    client.upsert(cm('a', { k: 'new' }));
    await settle();
    const obj = got[0];
    assert.ok(obj !== undefined && Object.isFrozen(obj) && Object.isFrozen(obj.data));
    assert.deepEqual(obj.data, { k: 'new' });
    assert.equal(obj.metadata?.managedFields, undefined);
    assert.deepEqual(obj.metadata?.annotations, { keep: 'me' });
    const decodes = informer.stats().decodes;
    assert.equal(informer.store.get('ns/a'), obj, 'the reader gets the object the handler got, without another parse');
    assert.equal(informer.stats().decodes, decodes);
  });

  it('a read after an update returns the new object', async () => {
    const { client, informer } = started();
    await sync(informer);
    assert.deepEqual(informer.store.get('ns/a')?.data, { k: 'v' });
    client.upsert(cm('a', { k: 'second' }, { app: 'api' }));
    await settle();
    const after = informer.store.get('ns/a');
    assert.deepEqual(after?.data, { k: 'second' });
    assert.equal(after.metadata?.labels?.app, 'api');
    assert.ok(Object.isFrozen(after) && Object.isFrozen(after.metadata));
    assert.throws(() => { (after as { data: unknown }).data = {}; }, TypeError);
    assert.deepEqual(informer.store.byIndex('namespace', 'ns').map((o) => o.metadata?.name).sort(), ['a', 'b']);
    client.remove('ns/a');
    await settle();
    assert.equal(informer.store.get('ns/a'), undefined, 'a read after a delete finds nothing');
  });

  it('a custom transform still applies, to LIST items and watch events (the informer keeps them parsed)', async () => {
    const transform = (obj: KubeObject): KubeObject => ({ ...obj, metadata: { ...obj.metadata, labels: { ...obj.metadata?.labels, seen: 'yes' } } });
    const { client, informer } = started({ transform });
    await sync(informer);
    assert.equal(informer.store.get('ns/a')?.metadata?.labels?.seen, 'yes');
    client.upsert(cm('a', { k: 'w' }));
    await settle();
    const obj = informer.store.get('ns/a');
    assert.deepEqual(obj?.data, { k: 'w' });
    assert.equal(obj.metadata?.labels?.seen, 'yes');
    assert.ok(obj.metadata.managedFields !== undefined, 'a custom transform sees whole objects');
    assert.equal(informer.stats().decodes, 0, 'kept parsed: nothing to parse on read');
  });

  it('a corrupted line whose metadata the pre-pass vouched for is an ObjectSkippedError when first read; the rest carries on', async () => {
    const { client, informer } = started();
    const errors: Error[] = [];
    informer.on('error', (e) => errors.push(e));
    const deletes: string[] = [];
    informer.addHeadHandler({ delete: (h, unknown) => { deletes.push(`${h.metadata.name ?? ''} ${String(unknown)}`); } });
    await sync(informer);
    client.stream?.pushLine('{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"ns","name":"bad","uid":"u-bad","resourceVersion":"900"},"data":{"k":tru}}}');
    client.upsert(cm('after'));
    await settle();
    assert.deepEqual(informer.store.keys().sort(), ['ns/a', 'ns/after', 'ns/b', 'ns/bad'], 'taken without a parse');
    assert.equal(informer.store.get('ns/bad'), undefined);
    assert.equal(errors.length, 1);
    const err = errors[0];
    assert.ok(err instanceof ObjectSkippedError);
    assert.deepEqual(err.object, { namespace: 'ns', name: 'bad' });
    assert.ok(err.cause instanceof SyntaxError);
    assert.equal(informer.stats().skipped, 1);
    assert.deepEqual(informer.store.keys().sort(), ['ns/a', 'ns/after', 'ns/b'], 'left out of the cache');
    await settle();
    assert.deepEqual(deletes, ['bad true'], 'handlers hear it went, its final state unknown');
    assert.deepEqual(informer.store.list().map((o) => o.metadata?.name).sort(), ['a', 'after', 'b']);
    assert.equal(informer.stats().lastError, undefined, 'the cache itself is healthy');
  });

  it('with a whole-object handler, a corrupted line is skipped at ingest (never added), as before lazy objects', async () => {
    const { client, informer } = started();
    const errors: Error[] = [];
    informer.on('error', (e) => errors.push(e));
    const adds: string[] = [];
    informer.addHandler({ add: (o) => { adds.push(o.metadata?.name ?? ''); } });
    await sync(informer);
    client.stream?.pushLine('{"type":"ADDED","object":{"metadata":{"namespace":"ns","name":"bad","uid":"u","resourceVersion":"900"},"data":{"k":nul}}}');
    client.upsert(cm('after'));
    await settle();
    assert.deepEqual(adds.sort(), ['a', 'after', 'b']);
    assert.equal(errors.length, 1);
    assert.ok(errors[0] instanceof ObjectSkippedError);
    assert.deepEqual(informer.store.keys().sort(), ['ns/a', 'ns/after', 'ns/b']);
  });

  it('an object whose text disagrees with the metadata read at ingest (a duplicate metadata) is skipped when read', async () => {
    const { client, informer } = started();
    const errors: Error[] = [];
    informer.on('error', (e) => errors.push(e));
    await sync(informer);
    client.stream?.pushLine('{"type":"ADDED","object":{"metadata":{"namespace":"ns","name":"dup","uid":"u","resourceVersion":"900"},"metadata":{"namespace":"ns","name":"dup","uid":"u","resourceVersion":"1"}}}');
    await settle();
    assert.ok(informer.store.keys().includes('ns/dup'));
    assert.equal(informer.store.get('ns/dup'), undefined);
    assert.ok(errors[0] instanceof ObjectSkippedError);
    assert.match((errors[0].cause as Error).message, /disagrees with the metadata/);
    assert.equal(informer.store.keys().includes('ns/dup'), false);
  });

  it('the decoded-object cache is bounded by decodedCacheSize, least recently used out first', async () => {
    const { informer } = started({ decodedCacheSize: 2 }, ['a', 'b', 'c', 'd']);
    await sync(informer);
    const decodes = (): number => informer.stats().decodes;
    const a = informer.store.get('ns/a');
    assert.equal(decodes(), 1);
    assert.equal(informer.store.get('ns/a'), a, 'a cache hit hands out the same frozen object');
    assert.equal(decodes(), 1);
    informer.store.get('ns/b');
    informer.store.get('ns/a');
    informer.store.get('ns/c');
    assert.equal(decodes(), 3, 'b and c parsed once each; a was still cached');
    assert.equal(informer.store.get('ns/a'), a, 'a, recently used, stayed');
    informer.store.get('ns/b');
    assert.equal(decodes(), 4, 'b was the least recently used one: dropped, parsed again');
    informer.store.list();
    assert.equal(decodes(), 4 + 2, 'listing 4 objects with 2 cached (a, b) parses the other two');
    const list = informer.store.list();
    assert.equal(list.length, 4);
    assert.ok(decodes() <= 6 + 4, 'never more than one parse per object per read');
  });

  it('decodedCacheSize 0 keeps nothing decoded; objects: parsed never parses on read; bad values are TypeErrors', async () => {
    const { informer } = started({ decodedCacheSize: 0 });
    await sync(informer);
    informer.store.get('ns/a');
    informer.store.get('ns/a');
    assert.equal(informer.stats().decodes, 2);
    const parsed = (started({ objects: 'parsed' })).informer;
    assert.equal(new ResourceInformer({ client: new FakeResourceClient() }).stats().decodes, 0);
    await sync(parsed);
    assert.equal(parsed.store.get('ns/a'), parsed.store.get('ns/a'));
    assert.equal(parsed.stats().decodes, 0);
    const client = new FakeResourceClient();
    assert.throws(() => new ResourceInformer({ client, decodedCacheSize: -1 }), TypeError);
    assert.throws(() => new ResourceInformer({ client, objects: 'eager' as 'lazy' }), /objects must be 'lazy', 'parsed' or 'compressed'/);
  });

  it('retainedBytes follows what the cache holds: about the text of each object, less after a delete', async () => {
    const { client, informer } = started({}, ['a', 'b', 'c']);
    await sync(informer);
    const text = JSON.stringify(informer.store.get('ns/a')).length;
    const three = informer.stats().retainedBytes;
    assert.ok(three >= 3 * text && three < 3 * (text + 600), `${String(three)} for 3 objects of ${String(text)} B`);
    client.remove('ns/c');
    await settle();
    const two = informer.stats().retainedBytes;
    assert.ok(two < three && Math.abs(three - two - three / 3) < 64, `${String(two)} after a delete`);
    const parsed = (started({ objects: 'parsed' }, ['a'])).informer;
    await sync(parsed);
    assert.ok(parsed.stats().retainedBytes > 0);
  });
});
