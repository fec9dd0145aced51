/**
 * Finding where a JSON string, object or array ends, for the pre-pass in strip.ts: it skips the
 * values it removes or does not look into (a last-applied annotation is a kilobyte-long string, a
 * managedFields array a deep tree) and those are most of the bytes it reads.
 *
 * Strings are followed through their escapes (a backslash hides the byte after it) and brackets
 * outside strings must pair up, which is exact on valid JSON; nothing else inside is checked (what
 * is kept is checked by JSON.parse). The scan is a WebAssembly SIMD loop of 16 bytes per step
 * (skip.wat), about three times faster than JavaScript on long strings. A watch event up to
 * {@link PLACE_MAX} bytes is copied into the module's memory once ({@link placeInModule}) and the
 * pre-pass walks that copy, so every value is scanned where it lies; in other text (a big LIST
 * page) a value longer than {@link SHORT} bytes is copied into the module in a window. Where
 * WebAssembly is unavailable (`--jitless`), or a value is longer than the largest window the
 * module holds, the JavaScript scan does it all.
 */
import { SKIP_WASM } from './skip-wasm.ts';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const LBRACE = 0x7b;
const RBRACE = 0x7d;
const LBRACKET = 0x5b;
const RBRACKET = 0x5d;

/** Returned when the text is malformed (or ends inside the value). */
export const FAIL = -1;
/** Returned by `follow` when it reached its limit inside the value. */
const MORE = -3;

/**
 * Containers deeper than this make a scan give up (here, in strip.ts, and in skip.wat, which has
 * the number written out); JSON.parse of the original text still handles them.
 */
export const MAX_DEPTH = 512;

/** Values up to this many bytes are scanned in JavaScript: copying them out would cost more. */
const SHORT = 128;

/** Where the text starts in the module's memory, and the windows tried, smallest first. */
const DATA = 1024;
const WINDOWS = [4096, 32_768, 262_144] as const;
/** The largest text {@link placeInModule} takes: the module's largest window. */
export const PLACE_MAX = 262_144;

/** Open containers of `follow` (the opening character code). */
const containers = new Uint8Array(MAX_DEPTH);

/**
 * `start` is at a quote, `{` or `[`: the index after the value, FAIL, or MORE when `limit` comes
 * first (only possible when `limit` < `n`).
 */
function follow(b: Uint8Array, start: number, limit: number): number {
  if (b[start] === QUOTE) {
    for (let i = start + 1; i < limit; i++) {
      const d = b[i];
      if (d === QUOTE) return i + 1;
      if (d === BACKSLASH) i++;
    }
    return MORE;
  }
  let depth = 0;
  for (let i = start; i < limit; i++) {
    const c = b[i];
    if (c === QUOTE) {
      for (i++; i < limit; i++) {
        const d = b[i];
        if (d === QUOTE) break;
        if (d === BACKSLASH) i++;
      }
    } else if (c === LBRACE || c === LBRACKET) {
      if (depth === MAX_DEPTH) return FAIL;
      containers[depth++] = c;
    } else if (c === RBRACE || c === RBRACKET) {
      // `{` + 2 is `}` and `[` + 2 is `]`.
      if (depth === 0 || containers[--depth] !== c - 2) return FAIL;
      if (depth === 0) return i + 1;
    }
  }
  return MORE;
}

/** The JavaScript scan alone (`start` at a quote, `{` or `[`): the index after the value, or FAIL. */
export function skipJs(b: Uint8Array, start: number, n: number): number {
  const end = follow(b, start, n);
  return end === MORE ? FAIL : end;
}

/** The part of the WebAssembly global used here (the project's `lib` has no WebAssembly types). */
declare const WebAssembly: {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object) => { readonly exports: Record<string, unknown> };
};

interface Simd {
  readonly skip: (i: number, n: number) => number;
  readonly memory: Uint8Array;
  /** The same memory as a Buffer: text placed in it is walked by strip.ts like any other Buffer. */
  readonly view: Buffer;
}

function load(): Simd | undefined {
  try {
    const instance = new WebAssembly.Instance(new WebAssembly.Module(Buffer.from(SKIP_WASM, 'base64')));
    const { skip, memory } = instance.exports as { skip: (i: number, n: number) => number; memory: { buffer: ArrayBuffer } };
    // The memory never grows (nothing here asks it to), so these views never detach.
    return { skip, memory: new Uint8Array(memory.buffer), view: Buffer.from(memory.buffer) };
  } catch {
    // No WebAssembly (--jitless) or no SIMD: the JavaScript scan does it all.
    return undefined;
  }
}

let simd = load();

/** True when the WebAssembly scan is in use. */
export function simdAvailable(): boolean {
  return simd !== undefined;
}

/** Turns the WebAssembly scan off (false) or back on (true); for tests comparing both paths. */
export function useSimd(on: boolean): void {
  simd = on ? load() : undefined;
}

/** False: {@link placeInModule} declines, so every long value is copied in its own window (the path before it); for tests. */
let placing = true;

/** Turns {@link placeInModule} off (false) or back on (true); for tests comparing both paths. */
export function usePlacing(on: boolean): void {
  placing = on;
}

/**
 * Copies bytes [start, end) of `b` (one watch event, or a small LIST page) into the module's
 * memory, once, and returns that memory as a Buffer holding them at [{@link PLACED_AT},
 * PLACED_AT + end - start): a walk over it skips long values where they lie, with no window
 * copied per value. Undefined without WebAssembly or for a text over {@link PLACE_MAX} bytes
 * (the caller walks `b` itself). The bytes stay until the next call here or to
 * {@link skipContainerOrString} with another buffer: the caller uses them synchronously.
 */
export function placeInModule(b: Buffer, start: number, end: number): Buffer | undefined {
  const s = simd;
  if (s === undefined || !placing || end - start > PLACE_MAX) return undefined;
  b.copy(s.view, DATA, start, end);
  return s.view;
}

/** Where {@link placeInModule} puts the text's first byte. */
export const PLACED_AT = DATA;

/**
 * `start` is at a quote, `{` or `[` of text that ends at `n`: the index after the value, or FAIL.
 * When `b` is the memory {@link placeInModule} returned, the value is scanned where it lies in
 * WebAssembly. Otherwise the first bytes are scanned in JavaScript; a value still open after them
 * is scanned again from its start in WebAssembly, in a copy of a window of the text (the window
 * grows when the value does not end inside it).
 */
export function skipContainerOrString(b: Uint8Array, start: number, n: number): number {
  const s = simd;
  // Placed by placeInModule: scanned where it lies, short or long (a call costs less than the
  // JavaScript scan of a few dozen bytes).
  if (b === s?.view) return s.skip(start, n);
  if (s === undefined || n - start <= SHORT) return skipJs(b, start, n);
  const early = follow(b, start, start + SHORT);
  if (early !== MORE) return early;
  for (const window of WINDOWS) {
    const size = Math.min(n - start, window);
    s.memory.set(b.subarray(start, start + size), DATA);
    const end = s.skip(DATA, DATA + size);
    if (end >= 0) return start + end - DATA;
    // -1 with the whole rest in the window: the text is malformed or ends inside the value.
    if (size === n - start) return FAIL;
  }
  return skipJs(b, start, n);
}
