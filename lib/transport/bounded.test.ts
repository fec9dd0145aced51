import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { describe, it } from 'node:test';
import { PEEK_BYTES, readBounded } from './bounded.ts';

/** A stream of `count` chunks of `size` bytes each, counting how many were pulled. */
function chunks(count: number, size: number): { readonly stream: Readable; readonly pulled: () => number } {
  let pulled = 0;
  const stream = new Readable({
    read() {
      if (pulled === count) {
        this.push(null);
        return;
      }
      pulled += 1;
      this.push(Buffer.alloc(size, 0x61));
    },
  });
  return { stream, pulled: () => pulled };
}

describe('readBounded', () => {
  it('reads a body of exactly the limit whole, and gives up one byte beyond', async () => {
    const whole = await readBounded(chunks(64, 1).stream, { limit: 64 });
    assert.equal(whole?.length, 64);
    const over = chunks(65, 1);
    assert.equal(await readBounded(over.stream, { limit: 64 }), undefined);
    assert.equal(over.stream.destroyed, true, 'the stream is let go once the limit is passed');
  });

  it('stops pulling at the limit: a huge body is read only to its cap', async () => {
    const huge = chunks(1_000_000, 1024);
    assert.equal(await readBounded(huge.stream, { limit: 10 * 1024 }), undefined);
    // The stream may have buffered ahead up to its high-water mark, no further.
    assert.ok(huge.pulled() < 64, `pulled ${huge.pulled()} chunks`);
  });

  it('refuses a declared length above the limit before reading anything', async () => {
    const declared = chunks(1, 8);
    assert.equal(await readBounded(declared.stream, { limit: 64, declaredLength: '65' }), undefined);
    assert.equal(declared.pulled(), 0);
    assert.equal(declared.stream.destroyed, true);
    assert.equal((await readBounded(chunks(1, 8).stream, { limit: 64, declaredLength: ['8'] }))?.length, 8);
  });

  it('with keep false counts the bytes against the limit but holds none', async () => {
    const drained = await readBounded(chunks(4, 16).stream, { limit: 64, keep: false });
    assert.equal(drained?.length, 0);
    assert.equal(await readBounded(chunks(5, 16).stream, { limit: 64, keep: false }), undefined);
  });

  it('shows the start of the body to peek until it is satisfied or has seen PEEK_BYTES', async () => {
    const seen: number[] = [];
    await readBounded(chunks(8, PEEK_BYTES / 2).stream, { limit: 8 * PEEK_BYTES, peek: (head) => { seen.push(head.length); return false; } });
    assert.deepEqual(seen, [PEEK_BYTES / 2, PEEK_BYTES]);
    let calls = 0;
    await readBounded(chunks(4, 8).stream, { limit: 64, peek: () => { calls += 1; return true; } });
    assert.equal(calls, 1);
  });

  it('rejects with the stream\'s error, or with the signal\'s reason when the signal aborted', async () => {
    const broken = (): Readable => new Readable({ read() { this.destroy(Object.assign(new Error('reset'), { code: 'ECONNRESET' })); } });
    await assert.rejects(readBounded(broken(), { limit: 64 }), /reset/);
    const controller = new AbortController();
    controller.abort(new Error('stopping'));
    await assert.rejects(readBounded(broken(), { limit: 64, signal: controller.signal }), /stopping/);
  });

  it('throws a TypeError naming the option for a limit that is not a non-negative integer', async () => {
    for (const limit of [-1, 1.5, Number.NaN]) await assert.rejects(readBounded(chunks(1, 1).stream, { limit }), (err: unknown) => err instanceof TypeError && err.message.includes('limit'));
  });
});
