/**
 * A small LZ77 codec (LZ4's sequence layout) for the cold objects of a compressed cache: ASCII text
 * in, a Latin-1 string out (one byte per character in V8's heap), matched against a dictionary of
 * the cache's own objects.
 *
 * Why not zlib: every `deflateRawSync`/`inflateRawSync` call creates a native zlib context (and a
 * copy of the dictionary) that lives until the next garbage collection; a process packing hundreds
 * of thousands of objects left ≈ 1.2 KB of glibc heap per call resident for good (measured: 96,000
 * calls, heap +11 MB, RSS +120 MB), more than packing saved. This codec allocates nothing per call
 * but the strings it returns: its working arrays are made once and reused (the codec is synchronous
 * and never re-entered). Without entropy coding it keeps a little more than deflate would (literals
 * cost a byte each), which the dictionary more than makes up for on objects of one kind.
 *
 * Format, a sequence of: a token byte (literal count in the high nibble, match length − 4 in the
 * low; 15 means more follows as bytes of 255 and a last byte below 255), the literals, then, but
 * for the last sequence, the match: its distance back as two bytes (1–65,535, little-endian; the
 * dictionary comes before the text) and the rest of its length as said. Decoding checks every
 * count and distance against the bounds it was given, so a corrupted input is an error, never a
 * read or write out of bounds.
 */

/** Shortest match worth a sequence. */
const MIN_MATCH = 4;
/** The last bytes are always literals: a match never reads past the end while probing four bytes. */
const LAST_LITERALS = 5;
const MAX_DISTANCE = 65_535;
const HASH_BITS = 14;
/** Largest dictionary: a match reaches back at most {@link MAX_DISTANCE} from anywhere in the text. */
export const MAX_DICTIONARY = 16 * 1024;

/** Thrown when packed bytes do not decode: they were not made by {@link lzPack} with this dictionary. */
export class LzCorruptError extends Error {
  override readonly name = 'LzCorruptError';
}

// Working arrays, made once: the codec is synchronous and never re-entered.
/** Dictionary then text, as bytes: what matches are found in. */
let window = new Uint8Array(64 * 1024);
/** Where each 4-byte hash was last seen in the dictionary in `window` (built once per dictionary). */
const dictionaryTable = new Int32Array(1 << HASH_BITS);
/** Where each hash was last seen in the text being packed, valid when `textStamp` says this call. */
const textTable = new Int32Array(1 << HASH_BITS);
const textStamp = new Int32Array(1 << HASH_BITS);
let stamp = 0;
/** The dictionary `window` and `dictionaryTable` hold now. */
let loaded: Uint8Array | undefined;
/** Output of either direction, as a Buffer for its Latin-1 decoder. */
let out = Buffer.allocUnsafeSlow(64 * 1024);

function hash(b: Uint8Array, i: number): number {
  const v = (b[i] ?? 0) | ((b[i + 1] ?? 0) << 8) | ((b[i + 2] ?? 0) << 16) | ((b[i + 3] ?? 0) << 24);
  return Math.imul(v, 0x9e3779b1) >>> (32 - HASH_BITS);
}

/** `window` at least `size` bytes, keeping the loaded dictionary. */
function windowOf(size: number): Uint8Array {
  if (window.length < size) {
    const bigger = new Uint8Array(Math.max(size, window.length * 2));
    bigger.set(window.subarray(0, loaded?.length ?? 0));
    window = bigger;
  }
  return window;
}

/** `out` at least `size` bytes. */
function outOf(size: number): Buffer {
  if (out.length < size) out = Buffer.allocUnsafeSlow(Math.max(size, out.length * 2));
  return out;
}

function load(dictionary: Uint8Array): void {
  if (loaded === dictionary) return;
  const w = windowOf(dictionary.length);
  w.set(dictionary);
  dictionaryTable.fill(-1);
  for (let i = 0; i + MIN_MATCH <= dictionary.length; i++) dictionaryTable[hash(w, i)] = i;
  loaded = dictionary;
}

/** Writes a length's continuation bytes at `o`; returns the index after them. */
function writeLength(o: Buffer, at: number, rest: number): number {
  let r = rest;
  while (r >= 255) {
    o[at++] = 255;
    r -= 255;
  }
  o[at++] = r;
  return at;
}

/** Length of the common run of `w` at `a` and `b` (a < b), up to `end` for `b`. */
function common(w: Uint8Array, a: number, b: number, end: number): number {
  let n = 0;
  while (b + n < end && w[a + n] === w[b + n]) n++;
  return n;
}

/**
 * `text` packed against `dictionary` (at most {@link MAX_DICTIONARY} bytes) as a Latin-1 string;
 * undefined when `text` is not ASCII (its characters would not be its bytes) or packs to more
 * than `limit` bytes.
 */
export function lzPack(text: string, dictionary: Uint8Array, limit: number): string | undefined {
  if (dictionary.length > MAX_DICTIONARY) throw new RangeError(`a dictionary holds at most ${MAX_DICTIONARY} bytes`);
  if (!isAscii(text)) return undefined;
  load(dictionary);
  const d = dictionary.length;
  const n = text.length;
  const w = windowOf(d + n);
  // ASCII: one byte per character.
  Buffer.from(w.buffer, w.byteOffset, w.length).write(text, d, n, 'latin1');
  const end = d + n;
  const o = outOf(n + Math.ceil(n / 255) + 16);
  stamp = stamp === 0x7fffffff ? 1 : stamp + 1;
  if (stamp === 1) textStamp.fill(0);
  let op = 0;
  let anchor = d;
  let i = d;
  const matchLimit = end - LAST_LITERALS;
  while (i < matchLimit) {
    const h = hash(w, i);
    let best = 0;
    let from = 0;
    if (textStamp[h] === stamp && i - (textTable[h] ?? 0) <= MAX_DISTANCE) {
      const c = textTable[h] ?? 0;
      const len = common(w, c, i, end);
      if (len >= MIN_MATCH) {
        best = len;
        from = c;
      }
    }
    const c = dictionaryTable[h] ?? -1;
    if (c >= 0 && i - c <= MAX_DISTANCE) {
      const len = common(w, c, i, end);
      if (len > best) {
        best = len;
        from = c;
      }
    }
    textTable[h] = i;
    textStamp[h] = stamp;
    if (best < MIN_MATCH) {
      i++;
      continue;
    }
    // A sequence: the literals since the anchor, then the match.
    const literals = i - anchor;
    const extra = best - MIN_MATCH;
    if (op + literals + 16 + Math.ceil((literals + extra) / 255) > limit) return undefined;
    o[op++] = (Math.min(literals, 15) << 4) | Math.min(extra, 15);
    if (literals >= 15) op = writeLength(o, op, literals - 15);
    o.set(w.subarray(anchor, i), op);
    op += literals;
    const distance = i - from;
    o[op++] = distance & 0xff;
    o[op++] = distance >>> 8;
    if (extra >= 15) op = writeLength(o, op, extra - 15);
    // The match's last positions are remembered too: the next object's text will repeat them.
    for (let k = i + best - 2; k < i + best && k < matchLimit; k++) {
      const hk = hash(w, k);
      textTable[hk] = k;
      textStamp[hk] = stamp;
    }
    i += best;
    anchor = i;
  }
  const literals = end - anchor;
  if (op + literals + 2 + Math.ceil(literals / 255) > limit) return undefined;
  o[op++] = Math.min(literals, 15) << 4;
  if (literals >= 15) op = writeLength(o, op, literals - 15);
  o.set(w.subarray(anchor, end), op);
  op += literals;
  return o.toString('latin1', 0, op);
}

/** ASCII only: every character below 128 (its characters are its bytes). */
export function isAscii(text: string): boolean {
  return Buffer.byteLength(text, 'utf8') === text.length;
}

/**
 * The text {@link lzPack} packed into `packed` against `dictionary`, `size` characters long.
 * Throws {@link LzCorruptError} when `packed` does not decode to exactly that.
 */
export function lzUnpack(packed: string, dictionary: Uint8Array, size: number): string {
  const n = packed.length;
  const o = outOf(size + n);
  // The packed string's bytes go after the room for the text: read from there while writing before it.
  const input = o.subarray(size, size + n);
  input.write(packed, 0, n, 'latin1');
  const d = dictionary.length;
  let ip = 0;
  let op = 0;
  const length = (first: number): number => {
    let total = first;
    if (first === 15) {
      for (;;) {
        if (ip >= n) throw new LzCorruptError('packed text ends inside a length');
        const b = input[ip++] ?? 0;
        total += b;
        if (b !== 255) break;
      }
    }
    return total;
  };
  for (;;) {
    if (ip >= n) throw new LzCorruptError('packed text ends before its last sequence');
    const token = input[ip++] ?? 0;
    const literals = length(token >>> 4);
    if (ip + literals > n || op + literals > size) throw new LzCorruptError('literals out of bounds');
    o.set(input.subarray(ip, ip + literals), op);
    ip += literals;
    op += literals;
    if (ip === n) break;
    if (ip + 2 > n) throw new LzCorruptError('packed text ends inside a distance');
    const distance = (input[ip] ?? 0) | ((input[ip + 1] ?? 0) << 8);
    ip += 2;
    const match = length(token & 0x0f) + MIN_MATCH;
    if (distance === 0 || distance > op + d || op + match > size) throw new LzCorruptError('match out of bounds');
    // Copied a byte at a time: a match may overlap what it writes (a run).
    let from = op - distance;
    for (let k = 0; k < match; k++, from++) o[op++] = from < 0 ? (dictionary[d + from] ?? 0) : (o[from] ?? 0);
  }
  if (op !== size) throw new LzCorruptError(`packed text decodes to ${op} characters, not ${size}`);
  return o.toString('latin1', 0, size);
}
