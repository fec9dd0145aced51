/**
 * Cold objects of a lazy cache, kept packed (issue 27, `objects: 'compressed'`). Objects of one
 * cache are one kind and share most of their text (keys, label names, images, chart names), so
 * each cache packs against a dictionary of its own first objects (lz.ts): real objects keep
 * 13–23 % of their text (Deployments, Services, ConfigMaps, ClusterRoles of a real API server;
 * `bench/compress.bench.ts`), where the same codec without a dictionary keeps three quarters. A
 * dictionary never crosses caches: a cache is one cluster, one kind, one identity's view, so
 * packing one object against another reveals nothing across them.
 */
import { isAscii, lzPack, lzUnpack, MAX_DICTIONARY } from './lz.ts';

/** Packed text is kept only when at most this share of the text: saving less than a third is not worth an unpack per read. */
const WORTH = 2 / 3;
/** A dictionary is at most this share of the text of the cache it is sampled from. */
const DICTIONARY_SHARE = 1 / 8;
/** Smallest dictionary worth sampling: a cache with less text than 8 of these is not packed. */
export const MIN_DICTIONARY = 2 * 1024;

/**
 * One object's text, packed: its bytes as a Latin-1 string (one byte per character in V8's heap,
 * no Buffer or native allocation per object). Immutable.
 */
export class Packed {
  readonly #bytes: string;
  readonly #dictionary: Uint8Array;
  /** Characters of the text. */
  readonly #size: number;

  constructor(bytes: string, dictionary: Uint8Array, size: number) {
    this.#bytes = bytes;
    this.#dictionary = dictionary;
    this.#size = size;
  }

  /** Bytes held (characters of the Latin-1 string). */
  get length(): number {
    return this.#bytes.length;
  }

  /** The text back (an unpack per call, ≈ 4 µs for 2 KB: callers cache what they decode). */
  text(): string {
    return lzUnpack(this.#bytes, this.#dictionary, this.#size);
  }
}

/** `text` packed against `dictionary`; undefined when it is not ASCII or that saves less than a third. */
export function pack(text: string, dictionary: Uint8Array): Packed | undefined {
  const bytes = lzPack(text, dictionary, Math.floor(text.length * WORTH));
  return bytes === undefined ? undefined : new Packed(bytes, dictionary, text.length);
}

/**
 * A dictionary sampled from the texts of one cache holding `textBytes` of them: whole ASCII texts
 * (the first ones given) up to an eighth of that, at most 16 KiB; undefined when that would be
 * under {@link MIN_DICTIONARY}, or when the texts given after the samples (up to three) mostly do
 * not pack against it: a cache of random-looking objects (keys, tokens) holds no dictionary and
 * packs nothing. Matches are looked up by where a run was last seen, so later samples weigh most.
 */
export function dictionaryFrom(texts: readonly string[], textBytes: number): Uint8Array | undefined {
  const max = Math.min(MAX_DICTIONARY, Math.floor(textBytes * DICTIONARY_SHARE));
  if (max < MIN_DICTIONARY) return undefined;
  const buffer = new Uint8Array(max);
  let size = 0;
  let used = 0;
  for (; used < texts.length && size < max; used++) {
    const text = texts[used] ?? '';
    if (!isAscii(text)) continue;
    size += Buffer.from(buffer.buffer, buffer.byteOffset + size, max - size).write(text, 0, 'latin1');
  }
  if (size < MIN_DICTIONARY) return undefined;
  // A dictionary of its own size: it is kept as long as any object packed against it.
  const dictionary = buffer.slice(0, size);
  const probes = texts.slice(used, used + 3);
  const packing = probes.filter((text) => pack(text, dictionary) !== undefined).length;
  return packing * 2 < probes.length ? undefined : dictionary;
}

/** Texts a dictionary is sampled and probed from: enough for the largest dictionary and its probes. */
export const SAMPLE_BYTES = 2 * MAX_DICTIONARY;
