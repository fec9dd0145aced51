import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
// The contract is stated against the informer's default transform, so the test uses that very
// function (test-only import; library code in lib/cluster does not depend on lib/informer).
import { LAST_APPLIED_ANNOTATION, stripManagedFields } from '../informer/transform.ts';
import { parseEventDroppingManagedFields, parseListDroppingManagedFields, scanEventLazily } from './strip.ts';
import type { KubeObject, ObjectMeta } from './types.ts';
import { SeededChoices } from '../util/seeded-random.ts';

/** What the informer caches from an object: the transform's result, or the object as is if it throws. */
function ingest(obj: unknown): unknown {
  const copy = structuredClone(obj);
  try {
    return stripManagedFields(copy as KubeObject);
  } catch {
    return structuredClone(obj);
  }
}

function decodeEvent(text: string): unknown {
  return parseEventDroppingManagedFields(Buffer.from(text));
}

function objectOf(event: unknown): unknown {
  return (event as { object?: unknown }).object;
}

/** Asserts the pre-pass keeps what the transform keeps, for one line. */
function assertEquivalent(text: string, context: string): void {
  const expected = JSON.parse(text) as unknown;
  const actual = decodeEvent(text);
  assert.deepEqual(ingest(objectOf(actual)), ingest(objectOf(expected)), context);
  // Nothing but the event's object may change.
  assert.deepEqual({ ...(actual as object), object: null }, { ...(expected as object), object: null }, context);
}

const NASTY = [
  'managedFields', '"managedFields":[]', 'metadata', '"metadata":{', 'annotations', LAST_APPLIED_ANNOTATION,
  `"${LAST_APPLIED_ANNOTATION}":"x"`, '"', '\\', '\\"', '\\\\', '{', '}', '[', ']', ',', ':', ' ', '\t', '\n', '\r',
  'é', '😀', '\u2028', '\u0000', '\u001f', '\ud800', 'object', '"object":{', 'x',
];

/** Builds random JSON values and serializes them with random whitespace and key escapes. */
class Fuzzer extends SeededChoices {
  string(): string {
    let s = '';
    const parts = this.int(5);
    for (let i = 0; i < parts; i++) s += this.chance(0.6) ? this.pick(NASTY) : String.fromCharCode(32 + this.int(95));
    return s;
  }

  /**
   * A random key, never a lone backslash: V8 13.6 (Node 24) JSON.parse misreads an escaped
   * one-character key (`"\u0023"`, `"\t"`) as `\` when a sibling object of the same shape had
   * the key `\`, which would make the reference, not the pre-pass, wrong.
   */
  keyName(): string {
    const key = this.string();
    return key === '\\' ? 'backslash' : key;
  }

  value(depth: number): unknown {
    const kind = this.int(depth > 3 ? 4 : 7);
    switch (kind) {
      case 0: return this.string();
      case 1: return this.pick([0, -1, 1.5, 1e21, -2.5e-7, 123456789]);
      case 2: return this.pick([true, false]);
      case 3: return null;
      case 4: return Array.from({ length: this.int(4) }, () => this.value(depth + 1));
      default: return this.object(depth + 1);
    }
  }

  object(depth: number): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    const n = this.int(5);
    for (let i = 0; i < n; i++) {
      const key = this.chance(0.3) ? this.pick(['managedFields', 'metadata', 'annotations', 'object', LAST_APPLIED_ANNOTATION, 'items']) : this.keyName();
      out[key] = this.chance(0.2) && depth < 4 ? this.metadata(depth + 1) : this.value(depth);
    }
    return out;
  }

  /** An object shaped like metadata (sometimes not an object at all). */
  metadata(depth: number): unknown {
    if (this.chance(0.05)) return this.pick([null, 'metadata', 3, [], [{ managedFields: [] }]]);
    const members: [string, unknown][] = [
      ['name', this.string()],
      ['labels', { app: 'managedFields', [this.keyName()]: this.string() }],
    ];
    if (this.chance(0.8)) members.push(['managedFields', this.chance(0.7) ? [{ manager: this.string(), fieldsV1: this.object(depth + 1) }] : this.value(depth + 1)]);
    if (this.chance(0.8)) {
      const annotations: unknown = this.chance(0.08)
        ? this.pick([null, 'text', 7, true, ['a']])
        : { [LAST_APPLIED_ANNOTATION]: this.chance(0.8) ? JSON.stringify(this.object(depth + 1)) : this.value(depth + 1), [this.keyName()]: this.string() };
      members.push(['annotations', annotations]);
    }
    if (this.chance(0.3)) members.push([this.keyName(), this.object(depth + 1)]);
    return Object.fromEntries(this.shuffle(members));
  }

  event(): Record<string, unknown> {
    const object = Object.fromEntries(this.shuffle<[string, unknown]>([
      ['apiVersion', 'v1'],
      ['kind', this.string()],
      ['metadata', this.metadata(1)],
      ['spec', this.object(1)],
    ]));
    return Object.fromEntries(this.shuffle<[string, unknown]>([['type', this.pick(['ADDED', 'MODIFIED', 'DELETED'])], ['object', object]]));
  }

  shuffle<T>(items: T[]): T[] {
    for (let i = items.length - 1; i > 0; i--) {
      const j = this.int(i + 1);
      const a = items[i] as T;
      items[i] = items[j] as T;
      items[j] = a;
    }
    return items;
  }

  ws(): string {
    if (this.chance(0.7)) return '';
    let s = '';
    const n = 1 + this.int(3);
    for (let i = 0; i < n; i++) s += this.pick([' ', '\t', '\r', '\n']);
    return s;
  }

  /** A key as JSON text, sometimes with characters needlessly \u-escaped (same key to JSON.parse). */
  key(key: string): string {
    if (!this.chance(0.1) || key === '') return JSON.stringify(key);
    const at = this.int(key.length);
    const code = key.charCodeAt(at).toString(16).padStart(4, '0');
    return `${JSON.stringify(key.slice(0, at)).slice(0, -1)}\\u${code}${JSON.stringify(key.slice(at + 1)).slice(1)}`;
  }

  /** JSON text of `value`, with random whitespace, key escapes and earlier duplicate keys. */
  serialize(value: unknown): string {
    const w = (): string => this.ws();
    if (Array.isArray(value)) return `[${w()}${value.map((v) => `${w()}${this.serialize(v)}${w()}`).join(',')}${w()}]`;
    if (typeof value === 'object' && value !== null) {
      const members: string[] = [];
      for (const [k, v] of Object.entries(value)) {
        // JSON.parse keeps the last of duplicate keys: an earlier decoy must not matter.
        if (this.chance(0.05)) members.push(`${w()}${this.key(k)}${w()}:${w()}${this.serialize(this.value(2))}${w()}`);
        members.push(`${w()}${this.key(k)}${w()}:${w()}${this.serialize(v)}${w()}`);
      }
      return `{${members.join(',')}${members.length === 0 ? w() : ''}}`;
    }
    return JSON.stringify(value);
  }
}

/** A ConfigMap event as the API server writes it after `kubectl apply`. */
function realisticEvent(i: number): string {
  const data = { key: `value ${i}`, quote: 'say "managedFields":[] \\ é 😀' };
  return JSON.stringify({
    type: 'MODIFIED',
    object: {
      kind: 'ConfigMap',
      apiVersion: 'v1',
      metadata: {
        name: `cm-${i}`,
        namespace: 'default',
        uid: `uid-${i}`,
        resourceVersion: String(100 + i),
        labels: { app: 'web', note: '"managedFields":' },
        annotations: { [LAST_APPLIED_ANNOTATION]: `${JSON.stringify({ metadata: { name: `cm-${i}` }, data })}\n`, keep: 'me' },
        managedFields: [{ manager: 'kubectl', operation: 'Update', fieldsType: 'FieldsV1', fieldsV1: { 'f:data': { 'f:key': {} }, 'f:metadata': { 'f:annotations': { '.': {} } } } }],
      },
      data,
    },
  });
}

describe('parseEventDroppingManagedFields', () => {
  it('drops managedFields and the last-applied annotation of a typical event, and nothing else', () => {
    const text = realisticEvent(1);
    const event = decodeEvent(text) as { type: string; object: KubeObject & { metadata: ObjectMeta } };
    assert.equal(event.type, 'MODIFIED');
    assert.equal(event.object.metadata.managedFields, undefined);
    assert.deepEqual(event.object.metadata.annotations, { keep: 'me' });
    // Built without the removed parts: the transform has nothing left to delete.
    assert.deepEqual(event.object, stripManagedFields(objectOf(JSON.parse(text)) as KubeObject));
    assert.deepEqual(event.object.metadata.labels, { app: 'web', note: '"managedFields":' });
  });

  it('matches JSON.parse plus the default transform on thousands of random adversarial events', () => {
    let removedEarly = 0;
    for (let seed = 1; seed <= 3000; seed++) {
      const fuzz = new Fuzzer(seed);
      const text = fuzz.serialize(fuzz.event());
      assertEquivalent(text, `seed ${seed}: ${text}`);
      const meta: unknown = (objectOf(decodeEvent(text)) as { metadata?: unknown }).metadata;
      const original: unknown = (objectOf(JSON.parse(text)) as { metadata?: unknown }).metadata;
      if (typeof original === 'object' && original !== null && 'managedFields' in original && !('managedFields' in (meta as object))) removedEarly++;
    }
    // The property holds because the pre-pass works, not because it always gave up.
    assert.ok(removedEarly > 1000, `managedFields removed while decoding in only ${removedEarly} of 3000 events`);
  });

  it('never accepts a truncated event', () => {
    for (let seed = 1; seed <= 1000; seed++) {
      const fuzz = new Fuzzer(seed);
      const text = fuzz.serialize(fuzz.event()).trimEnd();
      const cut = text.slice(0, fuzz.int(text.length));
      assert.throws(() => decodeEvent(cut), SyntaxError, `seed ${seed}: ${cut}`);
    }
  });

  it('throws what JSON.parse throws for a malformed line', () => {
    for (const text of ['', '{', 'nope', '{"type":"ADDED","object":{"metadata":{"managedFields":[]}}', '{"object":{"metadata":{"managedFields":[],}}}']) {
      assert.throws(() => decodeEvent(text), SyntaxError, text);
    }
  });

  it('handles the edge cases by hand', () => {
    const cases = [
      // Only member, first member, last member, with whitespace everywhere.
      '{"type":"ADDED","object":{"metadata":{"managedFields":[{"a":"]}"}]}}}',
      '{ "type" : "ADDED" , "object" : { "metadata" : { "managedFields" : [ ] , "name" : "a" } } }',
      '{"type":"ADDED","object":{"metadata":{"name":"a"\r\n,\t"managedFields":{"x":[1,{"y":"\\""}]}}}}',
      // The annotation alone, first, last; an annotations object left empty.
      `{"type":"ADDED","object":{"metadata":{"annotations":{"${LAST_APPLIED_ANNOTATION}":"{\\"a\\":\\"}\\"}"}}}}`,
      `{"type":"ADDED","object":{"metadata":{"annotations":{"${LAST_APPLIED_ANNOTATION}":"v","b":"c"},"managedFields":null}}}`,
      `{"type":"ADDED","object":{"metadata":{"managedFields":1,"annotations":{"b":"c","${LAST_APPLIED_ANNOTATION}":{"not":"a string"}}}}}`,
      // Same names at other depths, in strings, in labels, in spec: all kept.
      '{"type":"ADDED","object":{"spec":{"metadata":{"managedFields":[1]}},"metadata":{"labels":{"managedFields":"x"},"managedFields":[2]}}}',
      '{"type":"ADDED","object":{"metadata":{"name":"\\"managedFields\\":[]","namespace":"\\\\"}}}',
      '{"type":"ADDED","other":{"metadata":{"managedFields":[]}},"object":{"kind":"X"}}',
      '{"object":{"metadata":{"managedFields":[]}},"type":"ADDED"}',
      // Escaped spellings are left to the transform.
      '{"type":"ADDED","object":{"metadata":{"managed\\u0046ields":[1],"annotations":{"kubectl.kubernetes.io\\/last-applied-configuration":"x"}}}}',
      // Duplicates: JSON.parse keeps the last.
      '{"type":"ADDED","object":{"metadata":{"managedFields":[1],"managedFields":[2]},"metadata":{"name":"second","managedFields":[3]}}}',
      '{"type":"ADDED","object":{"metadata":{"annotations":{"a":"1"},"managedFields":[],"annotations":"not an object"}}}',
      '{"type":"ADDED","object":{"metadata":{"annotations":"text","managedFields":[]}}}',
      '{"type":"ADDED","object":{"metadata":null}}',
      '{"type":"ADDED","object":{"metadata":{"annotations":null,"managedFields":[]}}}',
      '{"type":"ADDED","object":{"metadata":[{"managedFields":[]}]}}',
      '{"type":"ADDED","object":[]}',
      // Unicode, escapes and numbers inside what is removed.
      '{"type":"ADDED","object":{"metadata":{"managedFields":["é😀\\u00e9\\ud83d\\ude00",-1.5e+3,0,true,false,null,{}]}}}',
      // Deeper than the scan tracks: it gives up and the plain parse decides.
      `{"type":"ADDED","object":{"metadata":{"managedFields":${'['.repeat(2000)}${']'.repeat(2000)}}}}`,
    ];
    for (const text of cases) assertEquivalent(text, text);
    const only = decodeEvent(cases[0] ?? '') as { object: { metadata: object } };
    assert.deepEqual(only.object.metadata, {});
  });
});

describe('parseListDroppingManagedFields', () => {
  it('drops managedFields and the last-applied annotation of every item and nothing else', () => {
    for (let seed = 1; seed <= 1000; seed++) {
      const fuzz = new Fuzzer(seed);
      const items = Array.from({ length: fuzz.int(5) }, () => objectOf(fuzz.event()));
      if (fuzz.chance(0.2)) items.push(fuzz.value(1));
      const text = fuzz.serialize({ kind: 'List', metadata: { resourceVersion: '5', managedFields: [] }, items });
      const expected = JSON.parse(text) as { items: unknown[] };
      const actual = parseListDroppingManagedFields(Buffer.from(text)) as { items: unknown[] };
      assert.deepEqual(actual.items.map(ingest), expected.items.map(ingest), `seed ${seed}: ${text}`);
      assert.deepEqual({ ...actual, items: null }, { ...expected, items: null }, `seed ${seed}: ${text}`);
    }
  });

  it('builds no managedFields for a typical list', () => {
    const text = `{"kind":"ConfigMapList","metadata":{"resourceVersion":"9"},"items":[${[1, 2, 3].map((i) => JSON.stringify(objectOf(JSON.parse(realisticEvent(i))))).join(',')}]}`;
    const list = parseListDroppingManagedFields(Buffer.from(text)) as { items: KubeObject[] };
    assert.equal(list.items.length, 3);
    for (const item of list.items) {
      assert.equal(item.metadata?.managedFields, undefined);
      assert.deepEqual(item.metadata?.annotations, { keep: 'me' });
    }
  });
});

describe('scanEventLazily (objects kept as text)', () => {
  const object = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: 'ünï', namespace: 'ns', uid: 'u-1', resourceVersion: '7', labels: { app: 'wéb' },
      annotations: { [LAST_APPLIED_ANNOTATION]: '{"x":1}', keep: 'me' },
      managedFields: [{ manager: 'kubectl', fieldsV1: { 'f:data': { 'f:k': {} } } }],
    },
    data: { k: 'vä', nested: '{"metadata":{}}' },
  };
  const scan = (line: string): ReturnType<typeof scanEventLazily> => {
    const buf = Buffer.from(`  ${line} \r`);
    return scanEventLazily(buf, 2, buf.length - 2);
  };

  it('gives the type, the object without what the transform drops, and where its metadata is (non-ASCII before it too)', () => {
    for (const event of [{ type: 'MODIFIED', object }, { type: 'DELETED', object }, { type: 'ADDED', object: { ...object, metadata: { ...object.metadata, managedFields: undefined } } }]) {
      const scanned = scan(JSON.stringify(event));
      assert.ok(scanned !== undefined);
      assert.equal(scanned.type, event.type);
      assert.deepEqual(JSON.parse(scanned.text), ingest(JSON.parse(JSON.stringify(object))));
      assert.deepEqual(JSON.parse(scanned.text.slice(scanned.metadataStart, scanned.metadataEnd)), (ingest(JSON.parse(JSON.stringify(object))) as KubeObject).metadata);
    }
    const kindFirst = scan(JSON.stringify({ type: 'ADDED', object: { note: 'Ünicode', ...object } }));
    assert.ok(kindFirst !== undefined);
    assert.equal((JSON.parse(kindFirst.text.slice(kindFirst.metadataStart, kindFirst.metadataEnd)) as ObjectMeta).name, 'ünï');
  });

  it('declines what it cannot vouch for: bookmarks, errors, no metadata, the type after the object, trailing bytes', () => {
    assert.equal(scan('{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}}'), undefined);
    assert.equal(scan('{"type":"ERROR","object":{"kind":"Status","metadata":{}}}'), undefined);
    assert.equal(scan('{"type":"ADDED","object":{"data":{}}}'), undefined);
    assert.equal(scan('{"type":"ADDED","object":{"metadata":null}}'), undefined);
    assert.equal(scan('{"object":{"metadata":{"name":"a"}},"type":"ADDED"}'), undefined);
    assert.equal(scan('{"type":"ADDED","type":"DELETED","object":{"metadata":{"name":"a"}}}'), undefined);
    assert.equal(scan('{"type":"ADDED","object":{"metadata":{"name":"a"}}} x'), undefined);
    assert.equal(scan('{"type":"ADDED","object":{"metadata":{"name":"a"'), undefined);
    assert.equal(scan('{"type":"ADDED","object":{"metadata":{"name":"a"}'), undefined);
  });

  it('does not read the object past its metadata: what is wrong there shows when the text is parsed', () => {
    for (const line of [
      '{"type":"ADDED","object":{"metadata":{"name":"a"},"data":{"k":tru}}}',
      '{"type":"ADDED","object":{"metadata":{"name":"a"},"data":{"k":[1}}}',
      '{"type":"ADDED","object":{"metadata":{"name":"a"}},"object":{"metadata":{"name":"b"}}}',
      '{"type":"ADDED","object":{"metadata":{"name":"a"}},"extra":{}}',
    ]) {
      const lax = scan(line);
      assert.ok(lax !== undefined, line);
      assert.throws(() => JSON.parse(lax.text), SyntaxError, line);
    }
    // A duplicate metadata parses (JSON.parse keeps the last): the informer checks the parsed
    // object's uid and resourceVersion against the captured ones (lazy.test.ts).
    const duplicate = scan('{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"1"},"metadata":{"name":"a","resourceVersion":"2"}}}');
    assert.ok(duplicate !== undefined);
    assert.equal((JSON.parse(duplicate.text.slice(duplicate.metadataStart, duplicate.metadataEnd)) as ObjectMeta).resourceVersion, '1');
  });
});
