// A minimal reader of the Prometheus text format (0.0.4), for tests that scrape /metrics. It checks
// what a scraper relies on: one TYPE per family before its samples, every sample in a declared
// family, label values unescaped. Timestamps, exemplars and OpenMetrics are out of scope.
import assert from 'node:assert/strict';

/** One sample line. */
export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

/** A parsed scrape. */
export interface Exposition {
  readonly samples: readonly Sample[];
  /** The family's declared TYPE, undefined when not declared. */
  type(family: string): string | undefined;
  /** The value of the sample with exactly these labels, undefined when absent. */
  value(name: string, labels: Readonly<Record<string, string>>): number | undefined;
  /** The `le` values of a histogram's series with these labels (besides `le`), in order. */
  buckets(family: string, labels: Readonly<Record<string, string>>): string[];
}

const nameRe = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;

function parseLabels(text: string, line: string): Record<string, string> {
  const labels: Record<string, string> = {};
  let i = 0;
  while (i < text.length) {
    const name = /^[a-zA-Z_][a-zA-Z0-9_]*/.exec(text.slice(i));
    assert.ok(name !== null, `bad label name in: ${line}`);
    i += name[0].length;
    assert.equal(text.slice(i, i + 2), '="', `expected =" in: ${line}`);
    i += 2;
    let value = '';
    for (;;) {
      const ch = text[i];
      assert.ok(ch !== undefined, `unterminated label value in: ${line}`);
      if (ch === '"') { i += 1; break; }
      if (ch === '\\') {
        const next = text[i + 1];
        assert.ok(next === '\\' || next === '"' || next === 'n', `bad escape in: ${line}`);
        value += next === 'n' ? '\n' : next;
        i += 2;
        continue;
      }
      value += ch;
      i += 1;
    }
    assert.ok(!(name[0] in labels), `duplicate label ${name[0]} in: ${line}`);
    labels[name[0]] = value;
    if (text[i] === ',') i += 1;
  }
  return labels;
}

function parseValue(text: string, line: string): number {
  if (text === '+Inf') return Infinity;
  if (text === '-Inf') return -Infinity;
  // Prometheus reads values with Go's ParseFloat, case-insensitive for NaN (prom-client writes `Nan`).
  if (text.toLowerCase() === 'nan') return NaN;
  const value = Number(text);
  assert.ok(text !== '' && !Number.isNaN(value), `bad value in: ${line}`);
  return value;
}

/** The family a sample belongs to: histogram and summary samples carry a suffix. */
function familyOf(name: string, types: ReadonlyMap<string, string>): string | undefined {
  if (types.has(name)) return name;
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (name.endsWith(suffix)) {
      const base = name.slice(0, -suffix.length);
      const type = types.get(base);
      if (type === 'histogram' || (type === 'summary' && suffix !== '_bucket')) return base;
    }
  }
  return undefined;
}

function sameLabels(a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>): boolean {
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => a[k] === b[k]);
}

/** Parses a scrape; fails the test (assert) on any malformed line. */
export function parseExposition(text: string): Exposition {
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '') continue;
    if (line.startsWith('#')) {
      const type = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/.exec(line);
      const [, family, kind] = type ?? [];
      if (family !== undefined && kind !== undefined) {
        assert.ok(!types.has(family), `family ${family} declared twice`);
        types.set(family, kind);
      } else {
        assert.match(line, /^# HELP [a-zA-Z_:][a-zA-Z0-9_:]* /, `bad comment: ${line}`);
      }
      continue;
    }
    const name = nameRe.exec(line)?.[0];
    assert.ok(name !== undefined, `bad sample: ${line}`);
    let rest = line.slice(name.length);
    let labels: Record<string, string> = {};
    if (rest.startsWith('{')) {
      const close = rest.lastIndexOf('}');
      assert.ok(close > 0, `unclosed labels: ${line}`);
      labels = parseLabels(rest.slice(1, close), line);
      rest = rest.slice(close + 1);
    }
    assert.ok(rest.startsWith(' '), `no value: ${line}`);
    const value = parseValue(rest.slice(1).trim(), line);
    assert.ok(familyOf(name, types) !== undefined, `sample of an undeclared family: ${line}`);
    samples.push({ name, labels, value });
  }
  return {
    samples,
    type: (family) => types.get(family),
    value: (name, labels) => samples.find((s) => s.name === name && sameLabels(s.labels, labels))?.value,
    buckets: (family, labels) => samples
      .filter((s) => s.name === `${family}_bucket` && sameLabels(Object.fromEntries(Object.entries(s.labels).filter(([k]) => k !== 'le')), labels))
      .map((s) => s.labels.le ?? ''),
  };
}
