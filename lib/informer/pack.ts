/**
 * Cold objects of a lazy cache, kept deflated (issue 27, `objects: 'compressed'`). Objects of one
 * cache are one kind and share most of their text (keys, label names, images, chart names), so
 * each cache deflates against a dictionary of its own first objects: real objects shrink to
 * 8–16 % of their text (Deployments, ClusterRoles, APIServices of a real API server), where
 * deflate alone gives 45–60 %. A dictionary never crosses caches: a cache is one cluster, one
 * kind, one identity's view, so compressing one object against another reveals nothing across
 * them.
 *
 * Small window and memory level: a call's cost is mostly zlib's state set-up, which these keep
 * to about 25 µs to deflate and 5–6 µs to inflate a 1.3 KB object (an 8 KiB window, the
 * dictionary's size).
 */
import { deflateRawSync, inflateRawSync } from 'node:zlib';

const WINDOW_BITS = 13;
const MEM_LEVEL = 5;
/** A dictionary holds at most the window: zlib uses only its last window of bytes. */
export const DICTIONARY_BYTES = 1 << WINDOW_BITS;
/** Deflated text is kept only when at most this share of the text: saving less than a third is not worth an inflate per read (base64 of random bytes, what Secrets and certificates hold, deflates to about 0.75). */
const WORTH = 2 / 3;

/**
 * One object's text, deflated: its bytes as a Latin-1 string (one byte per character in V8's
 * heap, no Buffer wrapper or native allocation per object). Immutable.
 */
export class Packed {
  readonly #bytes: string;
  readonly #dictionary: Buffer;
  /** UTF-8 bytes of the text: bounds the inflate. */
  readonly #size: number;

  constructor(bytes: string, dictionary: Buffer, size: number) {
    this.#bytes = bytes;
    this.#dictionary = dictionary;
    this.#size = size;
  }

  /** Bytes held (characters of the Latin-1 string). */
  get length(): number {
    return this.#bytes.length;
  }

  /** The text back (an inflate per call: callers cache what they decode). */
  text(): string {
    return inflateRawSync(Buffer.from(this.#bytes, 'latin1'), {
      windowBits: WINDOW_BITS,
      dictionary: this.#dictionary,
      maxOutputLength: Math.max(1, this.#size),
    }).toString('utf8');
  }
}

/** `text` deflated against `dictionary`; undefined when that saves too little to be worth it. */
export function pack(text: string, dictionary: Buffer): Packed | undefined {
  const raw = Buffer.from(text, 'utf8');
  const bytes = deflateRawSync(raw, { windowBits: WINDOW_BITS, memLevel: MEM_LEVEL, dictionary });
  if (bytes.length > raw.length * WORTH) return undefined;
  return new Packed(bytes.toString('latin1'), dictionary, raw.length);
}

/**
 * A dictionary from sample texts of one cache: up to {@link DICTIONARY_BYTES} of them, whole
 * texts only (deflate finds the longest matches against the dictionary's end, so the last
 * sample weighs most; any order serves).
 */
export function dictionaryFrom(texts: Iterable<string>): Buffer {
  const parts: Buffer[] = [];
  let size = 0;
  for (const text of texts) {
    const bytes = Buffer.from(text, 'utf8');
    if (size + bytes.length > DICTIONARY_BYTES) {
      if (size === 0) parts.push(bytes.subarray(bytes.length - DICTIONARY_BYTES));
      break;
    }
    parts.push(bytes);
    size += bytes.length;
  }
  // A copy of its own: the dictionary outlives the samples and is shared by every packed object.
  return Buffer.from(Buffer.concat(parts));
}
