// Text from a peer (a Status message, a bad line) is bounded and escaped before it reaches an
// error, and so a status, an Event or a log line.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KubeApiError, MAX_PEER_TEXT, peerText, WatchDecodeError } from './index.ts';

const MiB = 1024 * 1024;

describe('peerText', () => {
  it('keeps short plain text as it is', () => {
    assert.equal(peerText('configmaps "x" not found'), 'configmaps "x" not found');
    assert.equal(peerText('naïve 😀 ok'), 'naïve 😀 ok');
  });

  it('escapes control, bidi, zero-width and separator characters, and lone surrogates', () => {
    assert.equal(peerText('a\nb\r\u001b[31m\u202eevil\u2066\u200b\u2028\ud800z'), 'a\\u{a}b\\u{d}\\u{1b}[31m\\u{202e}evil\\u{2066}\\u{200b}\\u{2028}\\u{d800}z');
  });

  it('bounds the result, escapes included, and says how much was dropped', () => {
    const out = peerText('x'.repeat(MiB));
    assert.equal(out, `${'x'.repeat(MAX_PEER_TEXT)}…[${MiB - MAX_PEER_TEXT} more characters]`);
    const escaped = peerText('\n'.repeat(MiB), 100);
    assert.ok(escaped.startsWith('\\u{a}'.repeat(20)) && escaped.length < 140, escaped);
    assert.equal(peerText('ab😀', 3), 'ab…[2 more characters]', 'never half a surrogate pair');
  });
});

describe('errors built from a peer', () => {
  it('a KubeApiError keeps a bounded, escaped Status', () => {
    const err = new KubeApiError({
      cluster: 'c',
      statusCode: 500,
      status: {
        kind: 'Status',
        message: `boom\u202e${'m'.repeat(MiB)}`,
        reason: `R${'r'.repeat(MiB)}`,
        details: { name: 'n'.repeat(MiB), causes: Array.from({ length: 1000 }, () => ({ message: 'c'.repeat(MiB), field: 'f\n' })) },
      },
    });
    assert.ok(err.message.length < 2 * MAX_PEER_TEXT, `message bounded (${err.message.length})`);
    assert.ok(err.message.includes('boom\\u{202e}mmm'));
    assert.ok(!err.message.includes('\u202e'));
    assert.ok((err.status?.message ?? '').length < 2 * MAX_PEER_TEXT);
    assert.ok(err.reason.length < 200);
    assert.ok((err.status?.details?.name ?? '').length < 300);
    const causes = err.status?.details?.causes ?? [];
    assert.equal(causes.length, 16);
    assert.ok(causes.every((c) => (c.message ?? '').length < 300 && c.field === 'f\\u{a}'));
  });

  it('a Status of the wrong shape keeps only what has the right types', () => {
    const err = new KubeApiError({ cluster: 'c', statusCode: 403, status: { message: 42, reason: ['x'], details: 'nope' } as never });
    assert.equal(err.reason, '');
    assert.equal(err.status?.message, undefined);
    assert.equal(err.status?.details, undefined);
    assert.match(err.message, /HTTP 403: HTTP 403/);
  });

  it('a WatchDecodeError quotes 200 escaped characters of the line', () => {
    const err = new WatchDecodeError({ cluster: 'c', line: `\u202e${'y'.repeat(MiB)}` });
    assert.ok(err.excerpt.startsWith('\\u{202e}yyy'));
    assert.ok(err.message.length < 400);
  });
});
