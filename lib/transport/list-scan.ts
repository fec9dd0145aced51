/**
 * A LIST page for lazy objects (issue 27): each item's stripped text and parsed metadata, found in
 * one pass as a watch event's are, never a parse of the whole item followed by a `JSON.stringify`
 * back. The page's envelope (everything but the items) is parsed; each item is handed to the watch
 * event's lazy scan ({@link scanEventWithMetadata}) as the object of an event, so LIST items and watch
 * objects are vouched for by the same walk and carry the same contract: the item's body after its
 * metadata is followed only for its strings and brackets, and a grammar error in it shows when the
 * text is parsed (the informer checks the parse against the metadata captured here).
 */
import { parseEventDroppingManagedFields, parseListDroppingManagedFields, scanEventWithMetadata, ws } from './strip.ts';
import { FAIL, skipContainerOrString } from './skip.ts';
import type { KubeList, KubeObject, ObjectMeta, ObjectText } from './types.ts';

const TAB = 0x09;
const LF = 0x0a;
const CR = 0x0d;
const SPACE = 0x20;
const QUOTE = 0x22;
const COMMA = 0x2c;
const COLON = 0x3a;
const LBRACKET = 0x5b;
const RBRACKET = 0x5d;
const LBRACE = 0x7b;
const RBRACE = 0x7d;

/** What an item is wrapped in to be scanned as a watch event's object. */
const EVENT_PREFIX = Buffer.from('{"type":"ADDED","object":');
const ITEMS_KEY = Buffer.from('"items"');

/** One reused buffer for the wrapped item (the scan is synchronous and never re-entered). */
let wrapped = Buffer.allocUnsafe(64 * 1024);

/** A number, `true`, `false` or `null` at `i`: the index after it (checked by the envelope's parse). */
function skipScalar(b: Uint8Array, i: number, n: number): number {
  while (i < n) {
    const c = b[i];
    if (c === COMMA || c === RBRACE || c === RBRACKET || c === SPACE || c === LF || c === CR || c === TAB) return i;
    i++;
  }
  return FAIL;
}

function skipAny(b: Uint8Array, i: number, n: number): number {
  const c = b[i];
  return c === QUOTE || c === LBRACE || c === LBRACKET ? skipContainerOrString(b, i, n) : skipScalar(b, i, n);
}

/** Where the page's items are: [open, close) of the `[...]` and each object item's [start, end). */
interface ItemRanges {
  readonly open: number;
  readonly close: number;
  readonly ranges: number[];
}

/** Finds the one top-level `items` array and its object items; undefined when unsure (the page is then parsed). */
function findItems(b: Buffer): ItemRanges | undefined {
  const n = b.length;
  let i = ws(b, 0, n);
  if (b[i] !== LBRACE) return undefined;
  i = ws(b, i + 1, n);
  let found: ItemRanges | undefined;
  if (b[i] === RBRACE) return undefined;
  for (;;) {
    if (b[i] !== QUOTE) return undefined;
    const key = i;
    const keyEnd = skipContainerOrString(b, i, n);
    if (keyEnd < 0) return undefined;
    i = ws(b, keyEnd, n);
    if (b[i] !== COLON) return undefined;
    i = ws(b, i + 1, n);
    if (keyEnd - key === ITEMS_KEY.length && b.compare(ITEMS_KEY, 0, ITEMS_KEY.length, key, keyEnd) === 0) {
      // A second `items` (JSON.parse keeps the last) is left to the parser.
      if (found !== undefined || b[i] !== LBRACKET) return undefined;
      const open = i;
      const ranges: number[] = [];
      i = ws(b, i + 1, n);
      if (b[i] !== RBRACKET) {
        for (;;) {
          if (b[i] !== LBRACE) return undefined;
          const end = skipContainerOrString(b, i, n);
          if (end < 0) return undefined;
          ranges.push(i, end);
          i = ws(b, end, n);
          if (b[i] === RBRACKET) break;
          if (b[i] !== COMMA) return undefined;
          i = ws(b, i + 1, n);
        }
      }
      i++;
      found = { open, close: i, ranges };
    } else {
      i = skipAny(b, i, n);
      if (i < 0) return undefined;
    }
    i = ws(b, i, n);
    if (b[i] === RBRACE) break;
    if (b[i] !== COMMA) return undefined;
    i = ws(b, i + 1, n);
  }
  if (ws(b, i + 1, n) !== n) return undefined;
  return found;
}

/** Bytes [start, end) of `body` wrapped as `{"type":"ADDED","object":<item>}` in the reused buffer; returns its length. */
function wrap(body: Buffer, start: number, end: number): number {
  const length = EVENT_PREFIX.length + (end - start) + 1;
  if (length > wrapped.length) wrapped = Buffer.allocUnsafe(Math.max(length, wrapped.length * 2));
  EVENT_PREFIX.copy(wrapped, 0);
  body.copy(wrapped, EVENT_PREFIX.length, start, end);
  wrapped[length - 1] = RBRACE;
  return length;
}

/** One item as text and its metadata, or undefined when the scan is unsure or the metadata is unusable. */
function itemAsText(length: number): { readonly meta: ObjectMeta; readonly text: ObjectText } | undefined {
  // As for watch events: metadata that does not parse, or annotations that are not an object, keep the item whole (the transform decides).
  const found = scanEventWithMetadata(wrapped, 0, length);
  if (found === undefined) return undefined;
  const { scanned, metadata } = found;
  return { meta: metadata, text: { text: scanned.text, metadataStart: scanned.metadataStart, metadataEnd: scanned.metadataEnd } };
}

/**
 * Parses a LIST response body (UTF-8) into a page whose `texts[i]`, where set, is item `i` as
 * stripped text (see `ListOptions.objectText`), `items[i]` then holding only its metadata; an item
 * the scan cannot vouch for is parsed as {@link parseListDroppingManagedFields} would. A body the
 * walk is unsure of is parsed whole that way (every item parsed, no texts), so a malformed body
 * throws the parser's own error.
 */
export function parseListLazily(body: Buffer): unknown {
  const found = findItems(body);
  if (found === undefined) return parseListDroppingManagedFields(body);
  let envelope: unknown;
  try {
    envelope = JSON.parse(`${body.toString('utf8', 0, found.open)}[]${body.toString('utf8', found.close)}`);
  } catch {
    return parseListDroppingManagedFields(body);
  }
  if (typeof envelope !== 'object' || envelope === null || Array.isArray(envelope)) return parseListDroppingManagedFields(body);
  const count = found.ranges.length / 2;
  const items: KubeObject[] = new Array<KubeObject>(count);
  const texts: (ObjectText | undefined)[] = new Array<ObjectText | undefined>(count);
  for (let k = 0; k < count; k++) {
    const length = wrap(body, found.ranges[2 * k] ?? 0, found.ranges[2 * k + 1] ?? 0);
    const lazy = itemAsText(length);
    if (lazy !== undefined) {
      items[k] = { metadata: lazy.meta };
      texts[k] = lazy.text;
      continue;
    }
    try {
      items[k] = (parseEventDroppingManagedFields(wrapped, 0, length) as { object: KubeObject }).object;
    } catch {
      // The item does not parse: the whole body is parsed, which reports it.
      return parseListDroppingManagedFields(body);
    }
    texts[k] = undefined;
  }
  return { ...(envelope), items, texts } satisfies Partial<KubeList>;
}
