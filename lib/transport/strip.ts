/**
 * A pre-pass for the informer's default transform: it removes `metadata.managedFields` and the
 * `kubectl.kubernetes.io/last-applied-configuration` annotation of a watch event's object (or of
 * every item of a LIST page) from the UTF-8 bytes before they are decoded and parsed, so neither
 * the decoder nor the parser ever builds what the transform would throw away, and the transform
 * no longer deletes properties (which leaves V8 objects in slower, larger dictionary mode).
 *
 * Soundness: the scan follows the JSON grammar from the first byte, through the event, its object
 * and the object's metadata, so a removal happens only at the real key of the real object, never
 * inside a string, at another depth, or in a nested object of the same name. Only raw (unescaped)
 * key spellings are recognised; anything else is left to the transform, which still runs after.
 * Keys are matched on their first occurrence: JSON.parse keeps the last of duplicate keys, and the
 * transform removes that one. When the scan is unsure (malformed structure, nesting deeper than it
 * tracks) or the shortened text does not parse, the original text is parsed instead, so a valid
 * line always decodes, after the transform, to exactly what `JSON.parse` plus the transform give.
 * What is kept is checked by JSON.parse; a removed value is followed by its strings and brackets
 * only (exact on valid JSON): a syntax error inside a removed value (a bad number or escape) goes
 * unnoticed, with the same result as if that value had been valid.
 */

import { isAscii } from 'node:buffer';
import { MAX_DEPTH, placeInModule, PLACED_AT, skipContainerOrString } from './skip.ts';
import type { ObjectMeta } from './types.ts';

const TAB = 0x09;
const LF = 0x0a;
const CR = 0x0d;
const SPACE = 0x20;
const QUOTE = 0x22;
const PLUS = 0x2b;
const COMMA = 0x2c;
const MINUS = 0x2d;
const DOT = 0x2e;
const SLASH = 0x2f;
const ZERO = 0x30;
const ONE = 0x31;
const NINE = 0x39;
const COLON = 0x3a;
const UPPER_E = 0x45;
const LBRACKET = 0x5b;
const BACKSLASH = 0x5c;
const RBRACKET = 0x5d;
const LOWER_B = 0x62;
const LOWER_E = 0x65;
const LOWER_F = 0x66;
const LOWER_N = 0x6e;
const LOWER_R = 0x72;
const LOWER_T = 0x74;
const LOWER_U = 0x75;
const LBRACE = 0x7b;
const RBRACE = 0x7d;

/** Returned by a scan step for text it cannot vouch for: the caller parses the original. */
const FAIL = -1;
/** Returned by a walk once everything to remove has been found: the rest is left to JSON.parse. */
const STOP = -2;

/** What a level of the walk is looking at. */
const EVENT = 0;
const LIST = 1;
const OBJECT = 2;
const METADATA = 3;
const ANNOTATIONS = 4;
/** The rest of an object whose part of interest is done: nothing in it is removed. */
const SKIP = 5;
type Level = typeof EVENT | typeof LIST | typeof OBJECT | typeof METADATA | typeof ANNOTATIONS | typeof SKIP;

const OBJECT_KEY = bytes('"object"');
const TYPE_KEY = bytes('"type"');
const ITEMS_KEY = bytes('"items"');
const METADATA_KEY = bytes('"metadata"');
const ANNOTATIONS_KEY = bytes('"annotations"');
const MANAGED_FIELDS_KEY = bytes('"managedFields"');
const LAST_APPLIED_KEY = bytes('"kubectl.kubernetes.io/last-applied-configuration"');
const TRUE = bytes('true');
const FALSE = bytes('false');
const NULL = bytes('null');

function bytes(text: string): Uint8Array {
  return new TextEncoder().encode(text);
}

// Scratch state of the scan in progress. The scan is synchronous and never re-entered, so one
// module-wide copy serves every stream without allocating per line.
/** Open containers of `skipValue` (the opening character code), `depth` of them in use. */
const containers = new Uint8Array(MAX_DEPTH);
/** Ranges to remove, flattened as [start, end, start, end, ...] in increasing order. */
const cuts: number[] = [];
/** True for a LIST page: every item is walked to its end; false for an event: stop early. */
let scanToEnd = false;
/** Per object being walked: its managedFields was cut / its annotations were walked. */
let managedFieldsCut = false;
let annotationsDone = false;
/**
 * Set by {@link scanEventLazily}: the walk goes to the event's end and records where the event's
 * type, its object and the object's metadata are (first occurrences; a duplicate fails the scan,
 * as JSON.parse would keep the last one).
 */
let lazy = false;
let typeAt = -1;
let typeEnd = -1;
let objectAt = -1;
let objectEnd = -1;
let metadataAt = -1;
let metadataEnd = -1;

// Every scan function reads `b` only below `n` (the end of the text): a typed-array read past the
// end would return undefined and send V8 to a generic, several times slower path.

/** Index of the first non-whitespace byte at or after `i` (JSON whitespace only). */
export function ws(b: Uint8Array, i: number, n: number): number {
  while (i < n) {
    const c = b[i];
    if (c !== SPACE && c !== LF && c !== CR && c !== TAB) return i;
    i++;
  }
  return i;
}

/** The byte at `i`, or -1 at the end. */
function at(b: Uint8Array, i: number, n: number): number {
  return i < n ? (b[i] ?? -1) : -1;
}

/** True when `b` holds exactly `word` at `i` (below `n`). */
function matches(b: Uint8Array, i: number, n: number, word: Uint8Array): boolean {
  const len = word.length;
  if (i + len > n) return false;
  for (let k = 0; k < len; k++) if (b[i + k] !== word[k]) return false;
  return true;
}

function isHex(c: number | undefined): boolean {
  return c !== undefined && ((c >= ZERO && c <= NINE) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66));
}

function isDigit(c: number): boolean {
  return c >= ZERO && c <= NINE;
}

/** `i` is at an opening quote: the index after the closing quote, or FAIL. */
function skipString(b: Uint8Array, i: number, n: number): number {
  for (let j = i + 1; j < n; j++) {
    const c = b[j] ?? 0;
    if (c === QUOTE) return j + 1;
    if (c === BACKSLASH) {
      const e = at(b, ++j, n);
      if (e === LOWER_U) {
        if (j + 4 >= n || !isHex(b[j + 1]) || !isHex(b[j + 2]) || !isHex(b[j + 3]) || !isHex(b[j + 4])) return FAIL;
        j += 4;
      } else if (e !== QUOTE && e !== BACKSLASH && e !== SLASH && e !== LOWER_B && e !== LOWER_F && e !== LOWER_N && e !== LOWER_R && e !== LOWER_T) {
        return FAIL;
      }
    } else if (c < SPACE) {
      return FAIL;
    }
  }
  return FAIL;
}

/** `i` is at the start of a number: the index after it, or FAIL. */
function skipNumber(b: Uint8Array, i: number, n: number): number {
  let j = i;
  if (at(b, j, n) === MINUS) j++;
  let c = at(b, j, n);
  if (c === ZERO) {
    j++;
  } else if (c >= ONE && c <= NINE) {
    do j++; while (isDigit(at(b, j, n)));
  } else {
    return FAIL;
  }
  if (at(b, j, n) === DOT) {
    if (!isDigit(at(b, ++j, n))) return FAIL;
    do j++; while (isDigit(at(b, j, n)));
  }
  c = at(b, j, n);
  if (c === LOWER_E || c === UPPER_E) {
    c = at(b, ++j, n);
    if (c === PLUS || c === MINUS) j++;
    if (!isDigit(at(b, j, n))) return FAIL;
    do j++; while (isDigit(at(b, j, n)));
  }
  return j;
}

/** `i` is at a member's key: skips `"key" :` and whitespace, returning where the value starts. */
function memberValue(b: Uint8Array, i: number, n: number): number {
  if (at(b, i, n) !== QUOTE) return FAIL;
  i = skipString(b, i, n);
  if (i < 0) return FAIL;
  i = ws(b, i, n);
  if (at(b, i, n) !== COLON) return FAIL;
  return ws(b, i + 1, n);
}

/** `start` is at a value: checks it against the JSON grammar and returns the index after it, or FAIL. */
function skipValue(b: Uint8Array, start: number, n: number): number {
  let i = start;
  let depth = 0;
  for (;;) {
    let c = at(b, i, n);
    if (c === LBRACE || c === LBRACKET) {
      i = ws(b, i + 1, n);
      if (at(b, i, n) === (c === LBRACE ? RBRACE : RBRACKET)) {
        i++;
      } else {
        if (depth === MAX_DEPTH) return FAIL;
        containers[depth++] = c;
        if (c === LBRACE) {
          i = memberValue(b, i, n);
          if (i < 0) return FAIL;
        }
        continue;
      }
    } else if (c === QUOTE) {
      i = skipString(b, i, n);
      if (i < 0) return FAIL;
    } else if (c === LOWER_T) {
      if (!matches(b, i, n, TRUE)) return FAIL;
      i += 4;
    } else if (c === LOWER_F) {
      if (!matches(b, i, n, FALSE)) return FAIL;
      i += 5;
    } else if (c === LOWER_N) {
      if (!matches(b, i, n, NULL)) return FAIL;
      i += 4;
    } else {
      i = skipNumber(b, i, n);
      if (i < 0) return FAIL;
    }
    // After a value: close finished containers, or move on to the next element.
    for (;;) {
      if (depth === 0) return i;
      i = ws(b, i, n);
      c = at(b, i, n);
      const open = containers[depth - 1];
      if (c === COMMA) {
        i = ws(b, i + 1, n);
        if (open === LBRACE) {
          i = memberValue(b, i, n);
          if (i < 0) return FAIL;
        }
        break;
      }
      if (c !== (open === LBRACE ? RBRACE : RBRACKET)) return FAIL;
      depth--;
      i++;
    }
  }
}

/**
 * `start` is at a value: returns the index after it, or FAIL. Strings, objects and arrays are
 * followed through their escapes and brackets only (skip.ts), which is exact on valid JSON and
 * several times cheaper than `skipValue`: used for the values removed or skipped, whose grammar
 * inside is not checked (what is kept is checked by JSON.parse). Big removed values are long
 * strings and deep `fieldsV1` trees.
 */
function skipValueFast(b: Uint8Array, start: number, n: number): number {
  const first = b[start];
  if (first === QUOTE || first === LBRACE || first === LBRACKET) return skipContainerOrString(b, start, n);
  return skipValue(b, start, n);
}

/**
 * Records the removal of the member from `key` to `end` (its value's end). A member after the
 * first goes with the comma before it; the first goes with the comma after it, which must be
 * followed by another member.
 */
function cut(b: Uint8Array, n: number, comma: number, key: number, end: number): boolean {
  if (comma >= 0) {
    cuts.push(comma, end);
    return true;
  }
  const j = ws(b, end, n);
  const c = at(b, j, n);
  if (c === RBRACE) {
    cuts.push(key, end);
    return true;
  }
  if (c !== COMMA) return false;
  const next = ws(b, j + 1, n);
  if (at(b, next, n) !== QUOTE) return false;
  cuts.push(key, next);
  return true;
}

/** `open` is at a `[` of LIST items: walks each object item, skips anything else. */
function walkItems(b: Uint8Array, open: number, n: number): number {
  let i = ws(b, open + 1, n);
  if (at(b, i, n) === RBRACKET) return i + 1;
  for (;;) {
    const end = at(b, i, n) === LBRACE ? walkObject(b, i, n, OBJECT) : skipValue(b, i, n);
    if (end < 0) return end;
    i = ws(b, end, n);
    const c = at(b, i, n);
    if (c === RBRACKET) return i + 1;
    if (c !== COMMA) return FAIL;
    i = ws(b, i + 1, n);
  }
}

/**
 * `open` is at the `{` of an object at `level`: walks its members, descending into the one that
 * leads to what is removed and skipping the others. Returns the index after the closing `}`,
 * FAIL, or STOP when the scan may end here.
 */
function walkObject(b: Uint8Array, open: number, n: number, level: Level): number {
  if (level === OBJECT) {
    managedFieldsCut = false;
    annotationsDone = false;
  }
  let i = ws(b, open + 1, n);
  if (at(b, i, n) === RBRACE) return i + 1;
  // The comma before the current member; -1 for the first member.
  let comma = -1;
  for (;;) {
    const key = i;
    const value = memberValue(b, key, n);
    if (value < 0) return FAIL;
    const c = at(b, value, n);
    let end: number;
    if (level === METADATA && !managedFieldsCut && matches(b, key, n, MANAGED_FIELDS_KEY)) {
      end = skipValueFast(b, value, n);
      if (end < 0 || !cut(b, n, comma, key, end)) return FAIL;
      managedFieldsCut = true;
      if (!scanToEnd && annotationsDone) return STOP;
    } else if (level === ANNOTATIONS && matches(b, key, n, LAST_APPLIED_KEY)) {
      end = skipValueFast(b, value, n);
      if (end < 0 || !cut(b, n, comma, key, end)) return FAIL;
      annotationsDone = true;
      if (!scanToEnd && managedFieldsCut) return STOP;
      level = SKIP;
    } else if (c === LBRACE && level === METADATA && !annotationsDone && matches(b, key, n, ANNOTATIONS_KEY)) {
      end = walkObject(b, value, n, ANNOTATIONS);
      if (end < 0) return end;
      annotationsDone = true;
      if (!scanToEnd && managedFieldsCut) return STOP;
    } else if (c === LBRACE && level === OBJECT && matches(b, key, n, METADATA_KEY)) {
      end = walkObject(b, value, n, METADATA);
      if (end < 0) return end;
      if (lazy) {
        metadataAt = value;
        metadataEnd = end;
        return STOP;
      }
      if (!scanToEnd) return STOP;
      // A duplicate metadata later in this item is left to the transform.
      level = SKIP;
    } else if (lazy && level === OBJECT && matches(b, key, n, METADATA_KEY)) {
      // Lazy: a metadata that is not an object cannot be captured.
      return FAIL;
    } else if (lazy && level === EVENT && matches(b, key, n, OBJECT_KEY)) {
      // The type must come first (the API server writes it so): the walk ends in the object.
      if (c !== LBRACE || typeAt < 0) return FAIL;
      objectAt = value;
      end = walkObject(b, value, n, OBJECT);
      return end === FAIL ? FAIL : STOP;
    } else if (lazy && level === EVENT && matches(b, key, n, TYPE_KEY)) {
      if (c !== QUOTE || typeAt >= 0) return FAIL;
      end = skipString(b, value, n);
      if (end < 0) return FAIL;
      typeAt = value;
      typeEnd = end;
    } else if (c === LBRACE && level === EVENT && matches(b, key, n, OBJECT_KEY)) {
      end = walkObject(b, value, n, OBJECT);
      return end === FAIL ? FAIL : STOP;
    } else if (c === LBRACKET && level === LIST && matches(b, key, n, ITEMS_KEY)) {
      end = walkItems(b, value, n);
      return end === FAIL ? FAIL : STOP;
    } else {
      end = skipValueFast(b, value, n);
      if (end < 0) return FAIL;
    }
    i = ws(b, end, n);
    const next = at(b, i, n);
    if (next === RBRACE) return i + 1;
    if (next !== COMMA) return FAIL;
    comma = i;
    i = ws(b, i + 1, n);
  }
}

/** Kept text up to this size is assembled in one reused buffer; a bigger one gets its own. */
const SCRATCH_MAX = 1 << 20;
let scratch = Buffer.allocUnsafe(64 * 1024);

/**
 * Decodes bytes [start, end) of `buf` as UTF-8 without the ranges the walk finds; undefined when
 * there is nothing to remove or the scan is unsure. Cuts fall on ASCII bytes, never inside a
 * multi-byte character. The kept bytes are copied together and decoded once: JSON.parse gets one
 * flat string rather than a concatenation it would first have to copy again.
 */
function stripped(buf: Buffer, start: number, end: number, level: typeof EVENT | typeof LIST): string | undefined {
  // The walk runs over a copy in the WebAssembly module's memory when it fits: its long values are
  // then skipped where they lie instead of each being copied there.
  const placed = placeInModule(buf, start, end);
  if (placed !== undefined) {
    end = PLACED_AT + end - start;
    start = PLACED_AT;
    buf = placed;
  }
  cuts.length = 0;
  scanToEnd = level === LIST;
  const open = ws(buf, start, end);
  const result = at(buf, open, end) === LBRACE ? walkObject(buf, open, end, level) : FAIL;
  if (result === FAIL || cuts.length === 0) return undefined;
  const length = end - start - cutBytes();
  return withoutCuts(buf, start, end, length).toString('utf8', 0, length);
}

/** How many bytes the spans in `cuts` hold. */
function cutBytes(): number {
  let removed = 0;
  for (let k = 0; k < cuts.length; k += 2) removed += (cuts[k + 1] ?? 0) - (cuts[k] ?? 0);
  return removed;
}

/**
 * `buf[start, end)` without the spans in `cuts` (ascending, inside it), `length` bytes at the start
 * of the returned buffer: the reused scratch buffer when it fits (valid until the next scan).
 */
function withoutCuts(buf: Buffer, start: number, end: number, length: number): Buffer {
  let out = scratch;
  if (length > out.length) {
    out = Buffer.allocUnsafe(length);
    if (length <= SCRATCH_MAX) scratch = out;
  }
  let from = start;
  let size = 0;
  for (let k = 0; k < cuts.length; k += 2) {
    size += buf.copy(out, size, from, cuts[k]);
    from = cuts[k + 1] ?? end;
  }
  buf.copy(out, size, from, end);
  return out;
}

/**
 * True when the default transform would throw on this (parsed) object: its metadata has an
 * annotations member that is not an object. The informer then keeps the object as parsed, so the
 * pre-pass must not have removed anything from it either.
 */
function transformWouldThrow(obj: unknown): boolean {
  if (typeof obj !== 'object' || obj === null) return false;
  const meta = (obj as { metadata?: unknown }).metadata;
  if (typeof meta !== 'object' || meta === null) return false;
  const annotations = (meta as { annotations?: unknown }).annotations;
  return annotations !== undefined && (typeof annotations !== 'object' || annotations === null);
}

/**
 * Parses bytes [start, end) of `buf` (one watch event, UTF-8) as `JSON.parse` would, except that
 * the event's `object` may lack `metadata.managedFields` and the last-applied-configuration
 * annotation. Throws when `JSON.parse` throws, with its error. After `stripManagedFields`, the
 * object is the same as `stripManagedFields(JSON.parse(text).object)`.
 */
export function parseEventDroppingManagedFields(buf: Buffer, start = 0, end = buf.length): unknown {
  const text = stripped(buf, start, end, EVENT);
  if (text !== undefined) {
    try {
      const parsed: unknown = JSON.parse(text);
      if (!transformWouldThrow((parsed as { object?: unknown } | null)?.object)) return parsed;
    } catch {
      // The original text decides: it throws the parser's own error (or parses, if the scan erred).
    }
  }
  return JSON.parse(buf.toString('utf8', start, end));
}

/**
 * Parses a LIST response body (UTF-8) as `JSON.parse` would, except that each object of `items`
 * may lack `metadata.managedFields` and the last-applied-configuration annotation (same contract
 * as {@link parseEventDroppingManagedFields}, item by item).
 */
export function parseListDroppingManagedFields(buf: Buffer): unknown {
  const text = stripped(buf, 0, buf.length, LIST);
  if (text !== undefined) {
    try {
      const parsed: unknown = JSON.parse(text);
      const items = (parsed as { items?: unknown } | null)?.items;
      if (!Array.isArray(items) || !items.some(transformWouldThrow)) return parsed;
    } catch {
      // As for events.
    }
  }
  return JSON.parse(buf.toString('utf8'));
}

/** The index after the `}` that ends bytes [from, end) but for whitespace, or FAIL. */
function lastBrace(b: Uint8Array, from: number, end: number): number {
  let i = end - 1;
  while (i >= from) {
    const c = b[i];
    if (c === RBRACE) return i + 1;
    if (c !== SPACE && c !== LF && c !== CR && c !== TAB) return FAIL;
    i--;
  }
  return FAIL;
}

/** A watch event's type and object as {@link scanEventLazily} finds them, not parsed. */
export interface LazyEvent {
  readonly type: 'ADDED' | 'MODIFIED' | 'DELETED';
  /** The object's JSON text without managedFields and the last-applied annotation (raw spellings). */
  readonly text: string;
  /** `text.slice(metadataStart, metadataEnd)` is the object's metadata, as JSON text. */
  readonly metadataStart: number;
  readonly metadataEnd: number;
}

const EVENT_TYPES: readonly (readonly [Uint8Array, LazyEvent['type']])[] = [
  [bytes('"ADDED"'), 'ADDED'],
  [bytes('"MODIFIED"'), 'MODIFIED'],
  [bytes('"DELETED"'), 'DELETED'],
];

/**
 * Finds, in bytes [start, end) of `buf` (one watch event, UTF-8), the event's type and its object's
 * text without managedFields and the last-applied annotation, and where the object's metadata is in
 * that text, without parsing the object. Undefined when the scan is unsure (see the soundness note
 * above), for a BOOKMARK or ERROR, for an event whose `type` does not come before its `object`, or
 * for an object without an object `metadata`: the caller decodes the line as before. The walk
 * checks the grammar of the event's members before the object and of the object's members up to
 * its metadata's end; the rest of the object (spec, status, data: most of its bytes) is not read
 * at all: it is taken to end at the line's last `}` but one (the object is the event's last
 * member, as the API server writes it). Whatever is wrong after the metadata (a grammar error,
 * a member after the object, a duplicate metadata) shows when the text is parsed, which the
 * informer checks against the metadata captured here.
 */
export function scanEventLazily(buf: Buffer, start: number, end: number): LazyEvent | undefined {
  const placed = placeInModule(buf, start, end);
  if (placed !== undefined) {
    end = PLACED_AT + end - start;
    start = PLACED_AT;
    buf = placed;
  }
  cuts.length = 0;
  scanToEnd = true;
  lazy = true;
  typeAt = typeEnd = objectAt = objectEnd = metadataAt = metadataEnd = -1;
  let result: number;
  try {
    const open = ws(buf, start, end);
    result = at(buf, open, end) === LBRACE ? walkObject(buf, open, end, EVENT) : FAIL;
  } finally {
    lazy = false;
  }
  if (result !== STOP || objectAt < 0 || metadataAt < 0 || typeAt < 0) return undefined;
  // The object is the event's last member, as the API server writes it: it ends at the last `}`
  // but one. The rest of it is not walked (most of its bytes). Bytes after it that are not the
  // event's end make the text invalid JSON, which its parse reports.
  objectEnd = lastBrace(buf, metadataEnd, end);
  if (objectEnd < 0) return undefined;
  objectEnd = lastBrace(buf, metadataEnd, objectEnd - 1);
  if (objectEnd < 0) return undefined;
  let type: LazyEvent['type'] | undefined;
  for (const [spelling, name] of EVENT_TYPES) {
    if (typeEnd - typeAt === spelling.length && matches(buf, typeAt, typeEnd, spelling)) type = name;
  }
  if (type === undefined) return undefined;
  // Every cut is inside the metadata: its start does not move, its end moves by what was cut.
  const removed = cutBytes();
  const size = objectEnd - objectAt - removed;
  const out = withoutCuts(buf, objectAt, objectEnd, size);
  let metadataStart = metadataAt - objectAt;
  let metadataEnd2 = metadataEnd - objectAt - removed;
  const text = out.toString('utf8', 0, size);
  // Byte offsets are string offsets while everything before the metadata's end is ASCII.
  if (text.length !== size && !isAscii(out.subarray(0, metadataEnd2))) {
    metadataStart = out.toString('utf8', 0, metadataStart).length;
    metadataEnd2 = out.toString('utf8', 0, metadataEnd2).length;
  }
  return { type, text, metadataStart, metadataEnd: metadataEnd2 };
}

/**
 * {@link scanEventLazily}, with the object's metadata parsed: undefined also when the metadata does
 * not parse or its annotations are present but not an object (the caller then decodes the event
 * whole and the transform decides). What the watch decoder and the LIST scan keep of an object.
 */
export function scanEventWithMetadata(buf: Buffer, start: number, end: number): { readonly scanned: LazyEvent; readonly metadata: ObjectMeta } | undefined {
  const scanned = scanEventLazily(buf, start, end);
  if (scanned === undefined) return undefined;
  let metadata: unknown;
  try {
    metadata = JSON.parse(scanned.text.slice(scanned.metadataStart, scanned.metadataEnd));
  } catch {
    return undefined;
  }
  const annotations = (metadata as { annotations?: unknown }).annotations;
  if (annotations !== undefined && (typeof annotations !== 'object' || annotations === null || Array.isArray(annotations))) return undefined;
  return { scanned, metadata: metadata as ObjectMeta };
}
