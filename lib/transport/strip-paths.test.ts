import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { PLACE_MAX, simdAvailable, usePlacing, useSimd } from './skip.ts';
import { SeededChoices } from '../util/seeded-random.ts';
import { outcome } from './strip-paths.test-util.ts';

// The pre-pass has three paths that must give the same answers: the event copied once into the
// WebAssembly module's memory and walked there (today's), every long value copied in its own
// window (the path before it), and JavaScript alone (no WebAssembly, as under --jitless).

const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration';

/** Random JSON events shaped like the API server's, with long strings and awkward bytes. */
class Events extends SeededChoices {
  /** A string of any length up to a few KiB: unicode, quotes, backslashes, brackets, JSON-looking text. */
  string(): string {
    const parts = ['a', 'managedFields', '"managedFields":[', '{', '}', '[', ']', '"', '\\', '\\"', 'é', '😀', '\u2028', '\u0001', '\n', ' ', ':', ','];
    const length = this.chance(0.3) ? this.int(3000) : this.int(40);
    let s = '';
    while (s.length < length) s += this.chance(0.5) ? 'x'.repeat(1 + this.int(200)) : this.pick(parts);
    return s;
  }

  value(depth: number): unknown {
    switch (this.int(depth > 4 ? 4 : 6)) {
      case 0: return this.string();
      case 1: return this.pick([0, -1.5e-3, 12345, true, false, null]);
      case 2: return this.chance(0.5) ? JSON.stringify(this.object(depth + 1)) : this.string();
      case 3: return this.pick(['', 'v1', 'ConfigMap']);
      case 4: return Array.from({ length: this.int(5) }, () => this.value(depth + 1));
      default: return this.object(depth + 1);
    }
  }

  object(depth: number): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    const n = this.int(5);
    for (let i = 0; i < n; i++) out[this.chance(0.2) ? this.pick(['managedFields', 'metadata', 'annotations', LAST_APPLIED]) : `k${String(this.int(50))}`] = this.value(depth);
    return out;
  }

  managedFields(): unknown {
    if (this.chance(0.1)) return this.value(3);
    return Array.from({ length: 1 + this.int(4) }, () => ({ manager: this.string(), operation: 'Update', fieldsType: 'FieldsV1', fieldsV1: this.fields(0) }));
  }

  /**
   * A fieldsV1 key, with no character JSON escapes: V8 13.6 (Node 24) JSON.parse sometimes misreads
   * an escaped key depending on what it parsed before (see strip.test.ts), which would make the
   * comparison across processes fail for a reason that is not the pre-pass's.
   */
  key(): string {
    // eslint-disable-next-line no-control-regex
    return `f:${this.string().slice(0, 30).replace(/["\\\u0000-\u001f]/g, '_')}`;
  }

  /** A fieldsV1 tree: deep and bracket-dense. */
  fields(depth: number): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    const n = depth > 4 ? 0 : this.int(4);
    for (let i = 0; i < n; i++) out[this.key()] = this.fields(depth + 1);
    return out;
  }

  /** Metadata with managedFields and the annotation anywhere among its members (or missing). */
  metadata(): unknown {
    if (this.chance(0.03)) return this.pick([null, 'x', []]);
    return this.metadataObject();
  }

  metadataObject(): Record<string, unknown> {
    const members: [string, unknown][] = [
      ['name', this.string().slice(0, 60)], ['namespace', 'ns'], ['uid', `u-${String(this.int(1e6))}`],
      ['resourceVersion', String(this.int(1e6))], ['labels', { app: this.string().slice(0, 20) }],
    ];
    if (this.chance(0.85)) members.push(['managedFields', this.managedFields()]);
    if (this.chance(0.85)) {
      const annotations: Record<string, unknown> = { keep: this.string() };
      if (this.chance(0.85)) annotations[LAST_APPLIED] = this.chance(0.9) ? JSON.stringify(this.object(0)) : this.value(2);
      members.push(['annotations', this.chance(0.03) ? this.pick([null, 'text', 3]) : annotations]);
    }
    // Shuffled: the removed members anywhere among the others.
    return Object.fromEntries(members.map((m) => [this.next(), m] as const).sort((a, b) => a[0] - b[0]).map(([, m]) => m));
  }

  item(): Record<string, unknown> {
    const members: [string, unknown][] = [['apiVersion', 'v1'], ['kind', 'ConfigMap'], ['metadata', this.metadata()], ['data', this.object(1)]];
    if (this.chance(0.3)) members.reverse();
    return Object.fromEntries(members);
  }

  /** One watch line; sometimes with whitespace, a duplicate key, or cut or corrupted. */
  line(): string {
    let text = JSON.stringify({ type: this.pick(['ADDED', 'MODIFIED', 'DELETED', 'BOOKMARK']), object: this.item() }, null, this.chance(0.1) ? 1 : undefined);
    if (this.chance(0.05)) text = text.replace('"metadata":{', '"metadata":{"managedFields":[1],');
    const corrupt = this.next();
    if (corrupt < 0.05) text = text.slice(0, this.int(text.length));
    else if (corrupt < 0.1) {
      const at = this.int(text.length);
      text = text.slice(0, at) + this.pick(['"', '}', ']', '{', '[', '\\', 'x']) + text.slice(at);
    }
    return text;
  }
}

function inputs(seed: number): { line: Buffer; list: Buffer } {
  const events = new Events(seed);
  const line = Buffer.from(events.line());
  const list = Buffer.from(JSON.stringify({ kind: 'List', metadata: { resourceVersion: '1' }, items: Array.from({ length: events.int(4) }, () => events.item()) }));
  return { line, list };
}

/** True when the line's object has a managedFields that the event parsed by the pre-pass lacks. */
function removed(line: Buffer, outcome: string): boolean {
  const has = (event: unknown): boolean => {
    const metadata = (event as { object?: { metadata?: unknown } } | null)?.object?.metadata;
    return typeof metadata === 'object' && metadata !== null && 'managedFields' in metadata;
  };
  let original: unknown;
  try {
    original = JSON.parse(line.toString());
  } catch {
    return false;
  }
  const first = outcome.split('\n')[0] ?? '';
  return has(original) && !first.startsWith('threw') && !has(JSON.parse(first));
}

describe('the pre-pass, placed in WebAssembly memory, in windows, and in JavaScript alone', () => {
  it('gives identical results on thousands of random events and LIST pages', () => {
    assert.equal(simdAvailable(), true);
    let stripped = 0;
    for (let seed = 1; seed <= 2000; seed++) {
      const { line, list } = inputs(seed);
      const placed = outcome(line, list);
      usePlacing(false);
      let windows: string;
      try {
        windows = outcome(line, list);
      } finally {
        usePlacing(true);
      }
      useSimd(false);
      let js: string;
      try {
        js = outcome(line, list);
      } finally {
        useSimd(true);
      }
      assert.equal(placed, windows, `seed ${String(seed)} (placed vs windows): ${line.toString().slice(0, 200)}`);
      assert.equal(placed, js, `seed ${String(seed)} (placed vs JavaScript): ${line.toString().slice(0, 200)}`);
      if (removed(line, placed)) stripped++;
    }
    // The paths agree because they strip, not because they all gave up.
    assert.ok(stripped > 500, `managedFields removed in only ${String(stripped)} events`);
  });

  it('takes an event too big to place through the windows, with the same result', () => {
    const events = new Events(7);
    const metadata = { ...events.metadataObject(), managedFields: [{ manager: 'x'.repeat(PLACE_MAX), fieldsV1: events.fields(0) }] };
    const line = Buffer.from(JSON.stringify({ type: 'MODIFIED', object: { kind: 'ConfigMap', metadata, data: events.object(1) } }));
    assert.ok(line.length > PLACE_MAX);
    const big = outcome(line, Buffer.from('{"items":[]}'));
    assert.ok(removed(line, big));
    useSimd(false);
    try {
      assert.equal(outcome(line, Buffer.from('{"items":[]}')), big);
    } finally {
      useSimd(true);
    }
  });

  it('gives the same results where WebAssembly is unavailable (--jitless)', () => {
    // The global is removed after every module of the graph was loaded (type stripping needs it)
    // and before skip.ts runs, as under --jitless.
    const seeds = Array.from({ length: 300 }, (_, k) => inputs(k + 1));
    const skip = new URL('./skip.ts', import.meta.url).href;
    const util = new URL('./strip-paths.test-util.ts', import.meta.url).href;
    const script = `import 'data:text/javascript,delete globalThis.WebAssembly';
      import { simdAvailable } from ${JSON.stringify(skip)};
      import { outcome } from ${JSON.stringify(util)};
      import { readFileSync } from 'node:fs';
      const seeds = JSON.parse(readFileSync(0, 'utf8'));
      const out = [String(typeof WebAssembly), String(simdAvailable())];
      for (const { line, list } of seeds) out.push(outcome(Buffer.from(line, 'base64'), Buffer.from(list, 'base64')));
      process.stdout.write(JSON.stringify(out));`;
    const input = JSON.stringify(seeds.map(({ line, list }) => ({ line: line.toString('base64'), list: list.toString('base64') })));
    const child = JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', input, maxBuffer: 256 * 1024 * 1024 })) as string[];
    assert.deepEqual(child.slice(0, 2), ['undefined', 'false']);
    seeds.forEach(({ line, list }, k) => {
      const here = outcome(line, list);
      const there = child[k + 2] ?? '';
      let at = 0;
      while (at < here.length && here[at] === there[at]) at++;
      assert.equal(there, here, `seed ${String(k + 1)}, differing at ${String(at)}: …${here.slice(at - 100, at + 100)}… vs …${there.slice(at - 100, at + 100)}…`);
    });
  });
});
