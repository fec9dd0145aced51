// LIST pages for lazy objects (issue 27): each item's stripped text and metadata from one scan, the
// text parsing to what the parsing pre-pass gives; anything the scan cannot vouch for is parsed.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseListLazily } from './list-scan.ts';
import { parseListDroppingManagedFields } from './strip.ts';
import type { KubeList, KubeObject } from './types.ts';

const LAST = 'kubectl.kubernetes.io/last-applied-configuration';

function item(name: string, extra: Record<string, unknown> = {}): object {
  return {
    metadata: {
      name, namespace: 'ns', uid: `uid-${name}`, resourceVersion: '5', labels: { app: 'web' },
      annotations: { [LAST]: '{"a":"b"}', keep: 'me' },
      managedFields: [{ manager: 'kubectl', fieldsV1: { 'f:data': {} } }],
    },
    data: { k: `v ${name} ✓` },
    ...extra,
  };
}

function body(items: readonly unknown[]): Buffer {
  return Buffer.from(JSON.stringify({ kind: 'ConfigMapList', apiVersion: 'v1', metadata: { resourceVersion: '9', continue: 'tok' }, items }));
}

describe('parseListLazily', () => {
  it('gives every item as stripped text plus its metadata; the text parses to the pre-pass item', () => {
    const buf = body([item('a'), item('é-ü'), item('c', { spec: { deep: [[{ x: '}]' }]] } })]);
    const page = parseListLazily(buf) as KubeList;
    const parsed = parseListDroppingManagedFields(buf) as KubeList;
    assert.deepEqual(page.metadata, { resourceVersion: '9', continue: 'tok' });
    assert.equal(page.kind, 'ConfigMapList');
    assert.equal(page.items.length, 3);
    for (let k = 0; k < 3; k++) {
      const text = page.texts?.[k];
      assert.ok(text !== undefined, `item ${String(k)} as text`);
      const whole = JSON.parse(text.text) as KubeObject;
      assert.deepEqual(whole, parsed.items[k]);
      assert.equal(whole.metadata?.managedFields, undefined);
      assert.deepEqual(whole.metadata?.annotations, { keep: 'me' });
      assert.deepEqual(JSON.parse(text.text.slice(text.metadataStart, text.metadataEnd)), whole.metadata);
      assert.deepEqual(page.items[k], { metadata: whole.metadata }, 'the item itself is its metadata only');
    }
  });

  it('parses an item the scan cannot vouch for (annotations not an object, no metadata) as the pre-pass does', () => {
    const odd = { metadata: { name: 'odd', annotations: 'text' }, data: {} };
    const bare = { data: { only: 'data' } };
    const buf = body([item('a'), odd, bare]);
    const page = parseListLazily(buf) as KubeList;
    assert.ok(page.texts?.[0] !== undefined);
    assert.equal(page.texts[1], undefined);
    assert.equal(page.texts[2], undefined);
    assert.deepEqual(page.items[1], odd);
    assert.deepEqual(page.items[2], bare);
  });

  it('an empty page, and a body it is unsure of (a second items, whitespace), are parsed like JSON.parse', () => {
    assert.deepEqual(parseListLazily(Buffer.from('{"metadata":{"resourceVersion":"1"},"items":[]}')), { metadata: { resourceVersion: '1' }, items: [], texts: [] });
    const twice = Buffer.from('{"metadata":{},"items":[{"metadata":{"name":"x"}}],"items":[]}');
    assert.deepEqual(parseListLazily(twice), { metadata: {}, items: [] });
    const spaced = Buffer.from(' {\n "metadata" : { "resourceVersion" : "3" } ,\n "items" : [ {"metadata":{"name":"s","uid":"u"},"n":1} ] , "x": 12.5e3 }\n');
    const page = parseListLazily(spaced) as KubeList;
    assert.deepEqual(page.items, [{ metadata: { name: 's', uid: 'u' } }]);
    assert.deepEqual(JSON.parse(page.texts?.[0]?.text ?? ''), { metadata: { name: 's', uid: 'u' }, n: 1 });
    assert.equal((page as unknown as { x: number }).x, 12500);
  });

  it('a malformed body throws the parser\'s SyntaxError; a bad item body is left to the text\'s parse', () => {
    assert.throws(() => parseListLazily(Buffer.from('{"metadata":{},"items":[{"metadata":{"name":"x"}}]')), SyntaxError);
    assert.throws(() => parseListLazily(Buffer.from('{"metadata":{,"items":[]}')), SyntaxError);
    const page = parseListLazily(Buffer.from('{"metadata":{},"items":[{"metadata":{"name":"x","uid":"u"},"data":{"k":tru}}]}')) as KubeList;
    assert.deepEqual(page.items, [{ metadata: { name: 'x', uid: 'u' } }]);
    assert.throws(() => JSON.parse(page.texts?.[0]?.text ?? ''), SyntaxError);
  });
});
