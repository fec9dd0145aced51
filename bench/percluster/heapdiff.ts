// Compares two heap snapshots (`node bench/percluster/heapdiff.ts A.heapsnapshot B.heapsnapshot [per] [top]`):
// self size and count per node type and constructor name, B minus A, divided by `per` (the
// difference in clusters between the two, so the table reads "per cluster"). Top `top` rows (30).
import { readFileSync } from 'node:fs';

interface Snapshot {
  readonly snapshot: { readonly meta: { readonly node_fields: string[]; readonly node_types: [string[], ...unknown[]] } };
  readonly nodes: number[];
  readonly strings: string[];
}

function aggregate(path: string): Map<string, { count: number; bytes: number }> {
  const s = JSON.parse(readFileSync(path, 'utf8')) as Snapshot;
  const fields = s.snapshot.meta.node_fields;
  const width = fields.length;
  const typeAt = fields.indexOf('type');
  const nameAt = fields.indexOf('name');
  const sizeAt = fields.indexOf('self_size');
  const types = s.snapshot.meta.node_types[0];
  const out = new Map<string, { count: number; bytes: number }>();
  for (let i = 0; i < s.nodes.length; i += width) {
    const type = types[s.nodes[i + typeAt] ?? 0] ?? '?';
    let name = s.strings[s.nodes[i + nameAt] ?? 0] ?? '?';
    // Strings, closures and code are named by their content: group them by type alone.
    if (type === 'string' || type === 'concatenated string' || type === 'sliced string' || type === 'number') name = '';
    else if (type === 'closure') name = `${name}()`;
    else if (type === 'code' || type === 'hidden' || type === 'array') name = name.replace(/\d+/g, '#').slice(0, 60);
    const key = `${type}:${name}`;
    const entry = out.get(key) ?? { count: 0, bytes: 0 };
    entry.count += 1;
    entry.bytes += s.nodes[i + sizeAt] ?? 0;
    out.set(key, entry);
  }
  return out;
}

const [a = '', b = '', perArg = '1', topArg = '30'] = process.argv.slice(2);
const per = Number(perArg);
const before = aggregate(a);
const after = aggregate(b);
const rows = [...new Set([...before.keys(), ...after.keys()])].map((key) => ({
  key,
  count: ((after.get(key)?.count ?? 0) - (before.get(key)?.count ?? 0)) / per,
  bytes: ((after.get(key)?.bytes ?? 0) - (before.get(key)?.bytes ?? 0)) / per,
})).sort((x, y) => y.bytes - x.bytes);
const total = rows.reduce((sum, r) => sum + r.bytes, 0);
console.log(`total Δ self size per unit: ${(total / 1024).toFixed(1)} KiB`);
console.log('| type:constructor | count | bytes |');
for (const r of rows.slice(0, Number(topArg))) console.log(`| ${r.key} | ${r.count.toFixed(1)} | ${r.bytes.toFixed(0)} |`);
