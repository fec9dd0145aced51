import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { assemble, render } from '../../tools/wasm.ts';
import { FAIL, PLACE_MAX, PLACED_AT, placeInModule, simdAvailable, skipContainerOrString, skipJs, useSimd } from './skip.ts';
import { SKIP_WASM } from './skip-wasm.ts';
import { seededRandom as random } from '../util/seeded-random.ts';

/**
 * Random text starting with a string, object or array: mostly well-formed, with runs of plain
 * bytes of any length (so escapes and brackets land on every offset of a 16-byte block), escapes,
 * deep nesting, and sometimes a corruption (a stray or missing bracket or quote, a cut).
 */
function text(r: () => number, size: number): Buffer {
  const out: string[] = [];
  let budget = size;
  const run = (): string => 'abcdefghijklmnopqrstuvwxyz 0123456789,:é😀'.repeat(Math.ceil(r() * r() * 200)).slice(0, Math.floor(r() * r() * 400));
  const value = (depth: number): void => {
    budget -= 1;
    const pick = r();
    if (depth > 700 || budget <= 0 || pick < 0.45) {
      out.push('"', run());
      while (r() < 0.5) out.push(['\\"', '\\\\', '\\n', '\\u00e9', '\\/'][Math.floor(r() * 5)] ?? '', run());
      out.push('"');
      budget -= 20;
      return;
    }
    const object = pick < 0.75;
    out.push(object ? '{' : '[');
    const count = r() < 0.1 ? 0 : Math.floor(r() * 6) + 1;
    for (let k = 0; k < count && budget > 0; k++) {
      if (k > 0) out.push(',');
      if (object) out.push(`"k${String(k)}":`);
      value(r() < 0.05 ? depth + 200 : depth + 1);
    }
    out.push(object ? '}' : ']');
  };
  value(0);
  let s = out.join('');
  const corrupt = r();
  if (corrupt < 0.1) s = s.slice(0, Math.floor(r() * s.length));
  else if (corrupt < 0.2) {
    const at = Math.floor(r() * s.length);
    s = s.slice(0, at) + (['"', '}', ']', '{', '[', '\\'][Math.floor(r() * 6)] ?? '') + s.slice(at);
  }
  return Buffer.from(`${s}${r() < 0.5 ? ',"next":1}' : ''}`);
}

describe('skip', () => {
  it('ships the bytes skip.wat assembles to', async () => {
    assert.equal(render(await assemble()), render(Buffer.from(SKIP_WASM, 'base64')), 'run `make wasm` after changing skip.wat');
  });

  it('uses WebAssembly SIMD on this Node', () => {
    assert.equal(simdAvailable(), true);
  });

  it('finds the same end as the JavaScript scan on thousands of random values', () => {
    // Sizes from a few bytes to past the largest window (256 KiB), where the JS scan takes over.
    for (let seed = 1; seed <= 3000; seed++) {
      const r = random(seed);
      const size = seed % 500 === 0 ? 400_000 : seed % 50 === 0 ? 40_000 : Math.floor(r() * 3000);
      const buf = text(r, size);
      // Sometimes the value starts inside a bigger buffer, as it does inside a watch line.
      const pad = Math.floor(r() * 20);
      const padded = Buffer.concat([Buffer.alloc(pad, 0x20), buf]);
      const expected = skipJs(padded, pad, padded.length);
      assert.equal(skipContainerOrString(padded, pad, padded.length), expected, `seed ${String(seed)}`);
    }
  });

  it('finds the same end in text placed in the module as the JavaScript scan', () => {
    for (let seed = 1; seed <= 2000; seed++) {
      const r = random(seed);
      const buf = text(r, seed % 100 === 0 ? 40_000 : Math.floor(r() * 3000));
      // What strip.ts sends: a value starting with a quote, `{` or `[`, in a text that fits.
      if (buf.length > PLACE_MAX || !'"{['.includes(String.fromCharCode(buf[0] ?? 0))) continue;
      const pad = Math.floor(r() * 20);
      const padded = Buffer.concat([Buffer.from('x'.repeat(pad)), buf, Buffer.from('tail')]);
      const placed = placeInModule(padded, pad, pad + buf.length);
      assert.ok(placed !== undefined);
      const expected = skipJs(buf, 0, buf.length);
      const end = skipContainerOrString(placed, PLACED_AT, PLACED_AT + buf.length);
      assert.equal(end === FAIL ? FAIL : end - PLACED_AT, expected, `seed ${String(seed)}`);
    }
    assert.equal(placeInModule(Buffer.alloc(PLACE_MAX + 1), 0, PLACE_MAX + 1), undefined, 'too big to place: the caller walks its own buffer');
  });

  it('follows escapes and brackets exactly, by hand', () => {
    const end = (s: string): number => skipContainerOrString(Buffer.from(s), 0, Buffer.byteLength(s));
    const long = 'x'.repeat(300);
    assert.equal(end(`"${long}\\"${long}"tail`), 604);
    assert.equal(end(`"${long}\\\\"tail`), 304);
    assert.equal(end(`{"a":"${long}}"}x`), 309);
    assert.equal(end(`[${'{"a":['.repeat(100)}${']}'.repeat(100)}]`), 2 + 800);
    assert.equal(end(`[${"[".repeat(511)}${"]".repeat(511)}"${long}"]`), 1 + 511 + 511 + 302 + 1);
    assert.equal(end(`[${'['.repeat(512)}${']'.repeat(512)}"${long}"]`), FAIL, 'more than 512 open containers');
    assert.equal(end(`{"a":"${long}"]`), FAIL, 'brackets that do not pair');
    assert.equal(end(`"${long}\\"`), FAIL, 'the text ends inside the string');
    assert.equal(end(`{"a":"${long}"`), FAIL, 'the text ends inside the object');
  });

  it('gives the same answers with WebAssembly turned off', () => {
    useSimd(false);
    try {
      assert.equal(simdAvailable(), false);
      for (let seed = 1; seed <= 300; seed++) {
        const buf = text(random(seed), 2000);
        assert.equal(skipContainerOrString(buf, 0, buf.length), skipJs(buf, 0, buf.length), `seed ${String(seed)}`);
      }
    } finally {
      useSimd(true);
    }
  });

  it('loads and works where WebAssembly is unavailable', () => {
    // The global is removed after every module of the graph was loaded (type stripping needs it)
    // and before skip.ts runs, as under --jitless.
    const module = new URL('./skip.ts', import.meta.url).href;
    const script = `import 'data:text/javascript,delete globalThis.WebAssembly'; import * as m from ${JSON.stringify(module)};
      const b = Buffer.from('{"a":"' + 'x'.repeat(500) + '"}'); console.log(typeof WebAssembly, m.simdAvailable(), m.skipContainerOrString(b, 0, b.length));`;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
    assert.equal(out.trim(), 'undefined false 508');
  });
});
