import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { redactUrl, redactUrlsInText, sanitizeForDisplay } from './sanitize.ts';

describe('sanitizeForDisplay', () => {
  it('escapes C0/C1 controls, bidi overrides and isolates, separators and lone surrogates', () => {
    assert.equal(sanitizeForDisplay('a\nb\r\tc\x1b[31md\x00\x7f\x85'), 'a\\nb\\r\\tc\\x1b[31md\\x00\\x7f\\x85');
    // Trojan Source: an override that makes "admin" read backwards, an isolate, implicit marks.
    assert.equal(sanitizeForDisplay('x\u202enimda\u202c\u2066y\u2069\u200e\u200f\u061c'), 'x\\u202enimda\\u202c\\u2066y\\u2069\\u200e\\u200f\\u061c');
    assert.equal(sanitizeForDisplay('p\u2028q\u2029\ufeff'), 'p\\u2028q\\u2029\\ufeff');
    assert.equal(sanitizeForDisplay('lone \ud800 and \udc00'), 'lone \\ud800 and \\udc00');
  });

  it('leaves ordinary text, accents and emoji alone', () => {
    const text = 'déployé 1.2.3 ✓ 🚀 名前';
    assert.equal(sanitizeForDisplay(text), text);
  });

  it('caps the length with a marker counting what was dropped, never splitting a pair or an escape', () => {
    const long = 'x'.repeat(5_000);
    const out = sanitizeForDisplay(long, 100);
    assert.ok(out.length <= 100, String(out.length));
    const kept = /^(x+)…\[\+(\d+) chars\]$/.exec(out);
    assert.ok(kept !== null, out);
    assert.equal((kept[1] ?? '').length + Number(kept[2]), 5_000);
    for (let n = 40; n < 60; n++) {
      const emoji = sanitizeForDisplay('🚀'.repeat(100), n);
      assert.ok(emoji.length <= n);
      assert.doesNotMatch(emoji, /[\ud800-\udbff](?![\udc00-\udfff])/, 'a surrogate pair was split');
      const escapes = sanitizeForDisplay('\x1b'.repeat(100), n);
      assert.match(escapes, /^(?:\\x1b)*…\[\+\d+ chars\]$/, 'an escape was split');
      const dropped = Number(/\+(\d+) chars/.exec(escapes)?.[1]);
      assert.equal(escapes.indexOf('…') / 4 + dropped, 100, 'kept escapes and dropped characters add up');
    }
  });

  it('costs no more for a huge string than for a short one (bounded work)', () => {
    const huge = 'a\n'.repeat(32 * 1024 * 1024); // 64 Mi code units
    const out = sanitizeForDisplay(huge, 64);
    assert.ok(out.length <= 64);
    assert.match(out, /^(?:a\\n)+a?…\[\+\d+ chars\]$/);
  });

  it('refuses a cap too small for the marker', () => {
    assert.throws(() => sanitizeForDisplay('x', 8), TypeError);
  });
});

describe('redactUrl', () => {
  it('replaces user information, query and fragment, keeping scheme, host, port and path', () => {
    assert.equal(redactUrl('http://user:pass@hooks.example.com:8443/deploy/web?token=s3cr3t&x=1#frag'), 'http://REDACTED@hooks.example.com:8443/deploy/web?REDACTED#REDACTED');
    assert.equal(redactUrl('https://token@h/p'), 'https://REDACTED@h/p');
    assert.equal(redactUrl('https://:pw@h/p?'), 'https://REDACTED@h/p?REDACTED');
    assert.equal(redactUrl(new URL('https://h.example/a/b')), 'https://h.example/a/b');
  });

  it('prints nothing of text that is not a URL, nor of URLs without a host', () => {
    assert.equal(redactUrl('s3cr3t-token not a url'), '<invalid URL>');
    assert.equal(redactUrl('data:text/plain,s3cr3t'), 'data:<redacted>');
  });

  it('redacts every URL inside free text', () => {
    const text = 'Request cannot be constructed from a URL that includes credentials: http://u:p4ss@h/x?token=t0k; retry https://h2/y?sig=abc.';
    const out = redactUrlsInText(text);
    assert.doesNotMatch(out, /p4ss|t0k|sig=abc/);
    assert.match(out, /http:\/\/REDACTED@h\/x\?REDACTED/);
    assert.match(out, /https:\/\/h2\/y\?REDACTED/);
    assert.equal(redactUrlsInText('listening on http://127.0.0.1:8080 and https://[::1]:8443'), 'listening on http://127.0.0.1:8080 and https://[::1]:8443', 'nothing to redact: left as written');
  });
});
