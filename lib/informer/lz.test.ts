// The compressed cache's codec: what it packs unpacks to exactly the text, whatever the text and
// the dictionary; what it was not given is an error, never a read or write out of bounds.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { LzCorruptError, lzPack, lzUnpack, MAX_DICTIONARY } from './lz.ts';

const ascii = (bytes: Buffer): string => [...bytes].map((b) => String.fromCharCode(b & 0x7f)).join('');

describe('lz codec', () => {
  it('round-trips texts of every shape: empty, short, runs, long, repetitive, random, past 64 KiB, with and without a dictionary', () => {
    const dictionary = new TextEncoder().encode('{"metadata":{"name":"web","namespace":"apps","labels":{"app":"web"}},"spec":{"replicas":3}}'.repeat(40));
    const texts = [
      '', 'a', 'abcd', 'abcde', 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', 'x'.repeat(100_000),
      '{"metadata":{"name":"web-7","namespace":"apps","labels":{"app":"web-7"}},"spec":{"replicas":2}}',
      ascii(randomBytes(5_000)), ascii(randomBytes(300)).repeat(300), `${ascii(randomBytes(70_000))}${ascii(randomBytes(40))}`.repeat(2),
    ];
    for (const dict of [dictionary, new Uint8Array(0), dictionary.subarray(0, 7)]) {
      for (const text of texts) {
        const packed = lzPack(text, dict, Number.MAX_SAFE_INTEGER);
        assert.ok(packed !== undefined, `packed ${String(text.length)}`);
        assert.equal(lzUnpack(packed, dict, text.length), text, `text of ${String(text.length)} with a dictionary of ${String(dict.length)}`);
      }
    }
    // Matches against the dictionary: a text like its objects keeps little.
    const like = '{"metadata":{"name":"web-7","namespace":"apps","labels":{"app":"web-7"}},"spec":{"replicas":2}}';
    assert.ok((lzPack(like, dictionary, 1e9) ?? '').length < like.length / 3);
  });

  it('refuses text it cannot hold as bytes, and text that packs past the limit', () => {
    assert.equal(lzPack('caf\u00e9 au lait', new Uint8Array(0), 1e9), undefined, 'not ASCII');
    assert.equal(lzPack('snow \u2603', new Uint8Array(0), 1e9), undefined);
    const random = ascii(randomBytes(2_000));
    assert.equal(lzPack(random, new Uint8Array(0), 1_000), undefined, 'does not fit the limit');
    assert.throws(() => lzPack('x', new Uint8Array(MAX_DICTIONARY + 1), 1e9), RangeError);
  });

  it('a corrupted, truncated or misattributed input is an LzCorruptError, never a wrong text of the right size', () => {
    const dictionary = new TextEncoder().encode('abcdefghijklmnopqrstuvwxyz0123456789'.repeat(20));
    const text = `${'abcdefghijklmnopqrstuvwxyz'.repeat(5)}-unique-tail-${'0123456789'.repeat(3)}`;
    const packed = lzPack(text, dictionary, 1e9) ?? '';
    assert.throws(() => lzUnpack(packed.slice(0, -3), dictionary, text.length), LzCorruptError);
    assert.throws(() => lzUnpack(packed, dictionary, text.length + 1), LzCorruptError);
    assert.throws(() => lzUnpack(packed, dictionary, text.length - 1), LzCorruptError);
    assert.throws(() => lzUnpack(packed, new Uint8Array(0), text.length), LzCorruptError, 'a distance into a dictionary it does not have');
    assert.throws(() => lzUnpack('', dictionary, 0), LzCorruptError);
    // Any byte changed: an error or, when the change is in a literal, a different text; never a throw of another kind.
    for (let k = 0; k < packed.length; k++) {
      for (const b of [0, 15, 0xf0, 0xff]) {
        const bad = packed.slice(0, k) + String.fromCharCode(b) + packed.slice(k + 1);
        try {
          lzUnpack(bad, dictionary, text.length);
        } catch (err) {
          assert.ok(err instanceof LzCorruptError, String(err));
        }
      }
    }
  });
});
