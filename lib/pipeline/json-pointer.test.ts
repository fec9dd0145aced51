import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { getAtPointer, isJsonPointer, parsePointer, setAtPointerOp } from './json-pointer.ts';

describe('JSON pointers', () => {
  it('recognises RFC 6901 pointers and refuses the root and bad escapes', () => {
    for (const ok of ['/a', '/a/b', '/a~1b', '/a~0b', '/0', '/a/', '//']) assert.ok(isJsonPointer(ok), ok);
    for (const bad of ['', 'a', 'a/b', '/a~', '/a~2', 7, undefined]) assert.ok(!isJsonPointer(bad), String(bad));
  });

  it('unescapes ~1 before ~0', () => {
    assert.deepEqual(parsePointer('/a~1b/c~0d/~01'), ['a/b', 'c~d', '~1']);
  });

  it('reads through objects and arrays, and misses cleanly', () => {
    const doc = { spec: { chart: { spec: { version: '1.2.0' } } }, status: { history: [{ chartVersion: '1.1.0' }] }, 'a/b': 1 };
    assert.equal(getAtPointer(doc, '/spec/chart/spec/version'), '1.2.0');
    assert.equal(getAtPointer(doc, '/status/history/0/chartVersion'), '1.1.0');
    assert.equal(getAtPointer(doc, '/a~1b'), 1);
    assert.equal(getAtPointer(doc, '/status/history/01/chartVersion'), undefined, 'leading zeros are not indexes');
    assert.equal(getAtPointer(doc, '/spec/missing/x'), undefined);
    assert.equal(getAtPointer(doc, '/spec/chart/spec/version/x'), undefined);
    assert.equal(getAtPointer(doc, '/constructor'), undefined, 'inherited members are not members');
  });

  it('sets with replace when the member exists, and add with the missing parents otherwise', () => {
    const doc = { spec: { chart: { spec: { version: '1.0.0' } }, values: {} } };
    assert.deepEqual(setAtPointerOp(doc, '/spec/chart/spec/version', '2.0.0'), { op: 'replace', path: '/spec/chart/spec/version', value: '2.0.0' });
    assert.deepEqual(setAtPointerOp(doc, '/spec/values/tag', 'v2'), { op: 'add', path: '/spec/values/tag', value: 'v2' });
    assert.deepEqual(setAtPointerOp(doc, '/spec/source/ref/tag', 'v2'), { op: 'add', path: '/spec/source', value: { ref: { tag: 'v2' } } });
    assert.deepEqual(setAtPointerOp({ spec: {} }, '/spec/a~1b/c', 'x'), { op: 'add', path: '/spec/a~1b', value: { c: 'x' } });
  });

  it('refuses to set through something that is not an object', () => {
    assert.throws(() => setAtPointerOp({ spec: { chart: 'podinfo' } }, '/spec/chart/version', '1'), /cannot set \/spec\/chart\/version: \/spec\/chart is not an object/);
    assert.throws(() => setAtPointerOp({ spec: { list: [] } }, '/spec/list/0', '1'), /\/spec\/list is not an object/);
  });
});
