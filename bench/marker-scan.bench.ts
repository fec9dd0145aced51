// Time per MiB of the marker scan (lib/gitops/marker.ts's setMarkedValues), side by side with the
// two regular expressions it used before issue 21, run the same way on the same lines, in this
// process. Benign: a 1 MiB release file, one marked line in fifty. Hostile: one line of the marker
// word and spaces (what stalled the event loop), at sizes where the old expression still ends
// (it grows with the square of the line: 17 s for 64 KiB here, minutes for 1 MiB), and at 1 MiB for the scanner.
// Run: node bench/marker-scan.bench.ts. Prints a table; asserts nothing.
import { performance } from 'node:perf_hooks';
import { splitComment, splitValue } from '../lib/gitops/scan.ts';

const OLD_COMMENT = /^(?<before>.*?)(?<gap>\s+)(?<comment>#\s*(?<json>\{.*\}))\s*$/;
const OLD_BEFORE = /^(?<head>\s*(?:-\s+)?(?:(?:"(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^\s"'#{}[\],][^#]*?)\s*:\s+)?)(?<value>\S.*?)?\s*$/;
const MiB = 1_048_576;

/** The per-line work of the scan, without the YAML decoding both variants share. */
type Splitter = (line: string) => number;
const oldSplit: Splitter = (line) => {
  const comment = OLD_COMMENT.exec(line)?.groups;
  if (comment === undefined) return 0;
  return OLD_BEFORE.exec(comment.before ?? '')?.groups?.value?.length ?? 0;
};
const newSplit: Splitter = (line) => {
  const comment = splitComment(line);
  if (comment === undefined) return 0;
  return splitValue(comment.before).value?.length ?? 0;
};

function scan(text: string, split: Splitter): number {
  let sum = 0;
  for (const line of text.split('\n')) if (line.includes('$promotion')) sum += split(line);
  return sum;
}

/** Milliseconds per MiB: the best of `rounds` runs (each at least 50 ms of work). */
function perMiB(text: string, split: Splitter, rounds: number): number {
  let best = Infinity;
  for (let r = 0; r < rounds; r++) {
    let n = 0;
    const start = performance.now();
    do {
      scan(text, split);
      n++;
    } while (performance.now() - start < 50);
    best = Math.min(best, (performance.now() - start) / n);
  }
  return best / (text.length / MiB);
}

const benignLines: string[] = [];
for (let i = 0; benignLines.join('\n').length < MiB; i++) {
  benignLines.push(i % 50 === 0 ? `      version: 1.${i}.0 # {"$promotion": "delivery:podinfo:prod"}` : `      key${i}: value-${i} # a comment`);
}
const inputs: { readonly name: string; readonly text: string; readonly old: boolean }[] = [
  { name: 'benign release file, 1 MiB', text: benignLines.join('\n'), old: true },
  ...[16, 32].map((k) => ({ name: `hostile line, ${k} KiB`, text: `$promotion${' '.repeat(k * 1_024)}`, old: true })),
  { name: 'hostile line, 1 MiB', text: `$promotion${' '.repeat(MiB)}`, old: false },
];

const rows = [['input', 'old ms/MiB', 'new ms/MiB', 'old/new']];
for (const input of inputs) {
  const fresh = perMiB(input.text, newSplit, 5);
  const old = input.old ? perMiB(input.text, oldSplit, input.text.length > 20_000 ? 1 : 3) : undefined;
  rows.push([input.name, old === undefined ? 'minutes' : old.toFixed(1), fresh.toFixed(2), old === undefined ? '-' : `${(old / fresh).toFixed(old / fresh < 10 ? 2 : 0)}x`]);
}
const widths = rows[0]?.map((_, c) => Math.max(...rows.map((r) => (r[c] ?? '').length))) ?? [];
for (const row of rows) console.log(row.map((cell, c) => (c === 0 ? cell.padEnd(widths[c] ?? 0) : cell.padStart(widths[c] ?? 0))).join('  '));
