import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { PassThrough } from 'node:stream';
import { describe, it } from 'node:test';
import { KubeApiError, TransportError, WatchDecodeError } from '../util/index.ts';
import type { WatchEvent } from './types.ts';
import { decodeWatchStream, type DecodeOptions } from './watch-decoder.ts';

const scope = { cluster: 'test', gvk: { group: '', version: 'v1', kind: 'ConfigMap' } };

/** A response body fed chunk by chunk (a PassThrough has every stream method the decoder uses). */
function body(): PassThrough & IncomingMessage {
  return new PassThrough() as PassThrough & IncomingMessage;
}

async function collect(chunks: readonly Buffer[], options: DecodeOptions = {}): Promise<WatchEvent[]> {
  const res = body();
  const events: WatchEvent[] = [];
  const done = (async () => {
    for await (const batch of decodeWatchStream(res, scope, new AbortController().signal, options)) {
      assert.ok(batch.length > 0, 'never an empty batch');
      events.push(...batch);
    }
  })();
  for (const chunk of chunks) res.write(chunk);
  res.end();
  await done;
  return events;
}

const lines = [
  { type: 'ADDED', object: { metadata: { name: 'é😀', managedFields: [{ manager: 'x' }] }, data: { k: 'ü\u2028' } } },
  { type: 'MODIFIED', object: { metadata: { name: 'b', annotations: { 'kubectl.kubernetes.io/last-applied-configuration': '{"a":"😀"}', keep: '1' } } } },
  { type: 'BOOKMARK', object: { metadata: { resourceVersion: '7' } } },
  { type: 'DELETED', object: { metadata: { name: 'c' } } },
];

describe('decodeWatchStream', () => {
  it('decodes every line whatever the chunk boundaries, multi-byte characters and CRLF included', async () => {
    const text = Buffer.from(`${lines.map((l) => JSON.stringify(l)).join('\r\n')}\n\n  \n`);
    for (let at = 0; at <= text.length; at++) {
      const events = await collect([text.subarray(0, at), text.subarray(at)]);
      assert.deepEqual(events, lines, `split at ${at}`);
    }
    const bytes = Array.from({ length: text.length }, (_, i) => text.subarray(i, i + 1));
    assert.deepEqual(await collect(bytes), lines);
  });

  it('with dropManagedFields, leaves managedFields and the last-applied annotation out and keeps the rest', async () => {
    const text = Buffer.from(`${lines.map((l) => JSON.stringify(l)).join('\n')}\n`);
    const events = await collect([text.subarray(0, 100), text.subarray(100)], { dropManagedFields: true });
    assert.deepEqual(events, [
      { type: 'ADDED', object: { metadata: { name: 'é😀' }, data: { k: 'ü\u2028' } } },
      { type: 'MODIFIED', object: { metadata: { name: 'b', annotations: { keep: '1' } } } },
      lines[2],
      lines[3],
    ]);
  });

  it('yields the events before a malformed line, then throws a WatchDecodeError', async () => {
    const res = body();
    res.end(`${JSON.stringify(lines[0])}\n{"type":"ADDED","object":{\n${JSON.stringify(lines[3])}\n`);
    const seen: WatchEvent[] = [];
    await assert.rejects(async () => {
      for await (const batch of decodeWatchStream(res, scope, new AbortController().signal, { dropManagedFields: true })) seen.push(...batch);
    }, WatchDecodeError);
    assert.equal(seen.length, 1);
    assert.ok(res.destroyed);
  });

  it('throws an ERROR event as a KubeApiError', async () => {
    const res = body();
    res.end(`${JSON.stringify({ type: 'ERROR', object: { kind: 'Status', code: 410, reason: 'Expired' } })}\n`);
    await assert.rejects(async () => {
      for await (const _ of decodeWatchStream(res, scope, new AbortController().signal)) assert.fail('no event expected');
    }, (err: unknown) => err instanceof KubeApiError && err.isGone);
  });

  it('throws a TransportError for a stream that ends in the middle of an event or breaks', async () => {
    await assert.rejects(collect([Buffer.from(`${JSON.stringify(lines[0])}\n{"type":"ADD`)]), TransportError);
    const res = body();
    const run = (async () => {
      for await (const _ of decodeWatchStream(res, scope, new AbortController().signal)) res.destroy(new Error('connection reset'));
    })();
    res.write(`${JSON.stringify(lines[0])}\n`);
    await assert.rejects(run, (err: unknown) => err instanceof TransportError && err.message.includes('connection reset'));
  });

  it('pauses the socket while the consumer lags, and resumes when it catches up', async () => {
    const res = body();
    const iterator = decodeWatchStream(res, scope, new AbortController().signal)[Symbol.asyncIterator]();
    const first = iterator.next();
    res.write(`${JSON.stringify(lines[3])}\n`.repeat(1000));
    const head = await first;
    if (head.done === true) assert.fail('the stream ended early');
    assert.ok(res.isPaused(), 'a backlog of decoded events pauses the response');
    let count = head.value.length;
    while (count < 1000) {
      const next = await iterator.next();
      if (next.done === true) assert.fail('the stream ended early');
      count += next.value.length;
    }
    assert.equal(count, 1000);
    res.end();
    assert.equal((await iterator.next()).done, true);
    assert.ok(res.destroyed);
  });

  it('fails at once for a response the connection dropped before the consumer started', async () => {
    // What a reset between the response headers and the first next() leaves: no event will follow.
    // (An IncomingMessage destroyed while nobody listens for 'error' records no error: the second
    // case; with a listener, it keeps the reset's error: the first.)
    const res = body();
    res.on('error', () => undefined);
    res.write(`${JSON.stringify(lines[3])}\n`);
    res.destroy(new Error('read ECONNRESET'));
    await new Promise((resolve) => setImmediate(resolve));
    const failure = await (async () => {
      for await (const _ of decodeWatchStream(res, scope, new AbortController().signal)) assert.fail('no event expected');
    })().then(() => undefined, (e: unknown) => e);
    assert.ok(failure instanceof TransportError && failure.message.includes('ECONNRESET'), String(failure));
    const closed = body();
    closed.destroy();
    await new Promise((resolve) => setImmediate(resolve));
    await assert.rejects(async () => {
      for await (const _ of decodeWatchStream(closed, scope, new AbortController().signal)) assert.fail('no event expected');
    }, (err: unknown) => err instanceof TransportError && err.message.includes('closed before the stream ended'));
  });

  it('releases the socket when the consumer leaves early', async () => {
    const res = body();
    res.write(`${JSON.stringify(lines[3])}\n`.repeat(3));
    for await (const _ of decodeWatchStream(res, scope, new AbortController().signal)) break;
    assert.ok(res.destroyed);
  });

  it('behaves as a generator: nothing before the first next(), calls in flight queued, return() after them', async () => {
    const res = body();
    const events = decodeWatchStream(res, scope, new AbortController().signal)[Symbol.asyncIterator]();
    assert.equal(res.listenerCount('data'), 0, 'nothing is read before the first next()');
    const first = events.next();
    const second = events.next();
    const left = events.return?.();
    res.write(`${JSON.stringify(lines[3])}\n`);
    assert.deepEqual(await first, { done: false, value: [lines[3]] });
    res.write(`${JSON.stringify(lines[3])}\n${JSON.stringify(lines[2])}\n`);
    assert.deepEqual(await second, { done: false, value: [lines[3], lines[2]] }, 'the second call waited for the first and took what came next');
    assert.deepEqual(await left, { done: true, value: undefined });
    assert.ok(res.destroyed, 'return() released the socket once the calls before it settled');
    assert.equal((await events.next()).done, true);

    const unread = body();
    assert.deepEqual(await decodeWatchStream(unread, scope, new AbortController().signal).return?.(), { done: true, value: undefined });
    assert.equal(unread.destroyed, false, 'a stream never read is left alone, as by a generator never started');
  });
});
