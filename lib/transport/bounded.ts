import type { Readable } from 'node:stream';
import { abortReason, nonNegativeInteger } from '../util/index.ts';

// The one reader of a body that has a byte cap: an API server's answer, a webhook receiver's, a Git
// provider's, a dashboard request's. Whoever reads a peer's body reads it here, so that the cap,
// the early refusal of a declared length and the teardown are written once.

/**
 * Sees the start of a body while it arrives (at most {@link PEEK_BYTES}), before it is whole:
 * returns true once it has what it wanted.
 */
export type Peek = (head: Buffer) => boolean;

/** How much of a body's start a {@link Peek} may see. */
export const PEEK_BYTES = 4096;

/** How {@link readBounded} reads one body. */
export interface BoundedRead {
  /** Bytes the body may have; one more and the read gives up. A non-negative integer. */
  readonly limit: number;
  /** The peer's `Content-Length`, if it sent one: above `limit`, nothing is read. */
  readonly declaredLength?: string | string[] | number | undefined;
  /** Keep the bytes (default true); false counts them and lets each chunk go (the answer is drained, never held). */
  readonly keep?: boolean | undefined;
  /** When the read fails because this signal aborted, the signal's reason is thrown instead of the stream's error. */
  readonly signal?: AbortSignal | undefined;
  readonly peek?: Peek | undefined;
}

function declared(value: BoundedRead['declaredLength']): number {
  const first = Array.isArray(value) ? value[0] : value;
  return first === undefined ? Number.NaN : Number(first);
}

/**
 * Reads `body` whole when it has at most `limit` bytes: resolves with them (an empty buffer when
 * `keep` is false), or with undefined when it is longer. The stream is destroyed as soon as the
 * limit is passed (or at once, when the declared length is above it), so at most `limit` bytes plus
 * one chunk are ever held. Rejects with the stream's error (the signal's reason when it aborted).
 */
export async function readBounded(body: Readable, read: BoundedRead): Promise<Buffer | undefined> {
  const { limit, keep = true, signal } = read;
  nonNegativeInteger('readBounded', 'limit', limit);
  if (declared(read.declaredLength) > limit) {
    body.destroy();
    return undefined;
  }
  let peek = read.peek;
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of body) {
      const buf = chunk as Buffer;
      size += buf.length;
      if (size > limit) {
        chunks.length = 0;
        body.destroy();
        return undefined;
      }
      if (!keep) continue;
      chunks.push(buf);
      if (peek !== undefined) {
        const head = chunks.length === 1 ? buf : Buffer.concat(chunks, size);
        if (peek(head.subarray(0, PEEK_BYTES)) || size >= PEEK_BYTES) peek = undefined;
      }
    }
  } catch (err) {
    if (signal?.aborted === true) throw abortReason(signal);
    throw err;
  }
  return keep ? Buffer.concat(chunks, size) : Buffer.alloc(0);
}
