// README.md and docs/*.md link to each other by file and heading: every relative link must reach a
// file that exists and, when it names one, a heading that file has (anchors as GitHub makes them).
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';

const root = path.resolve(import.meta.dirname, '..');
const documents = ['README.md', ...readdirSync(path.join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];

/** The text outside fenced code blocks: a `#` comment in a YAML block is no heading, a `](` in code no link. */
function prose(text: string): string {
  return text.replace(/^```[\s\S]*?^```$/gm, '');
}

/** GitHub's anchors for a document's headings: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const [, heading = ''] of prose(text).matchAll(/^#{1,6} (.+)$/gm)) {
    const slug = heading.trim().toLowerCase().replace(/[^\p{L}\p{N}_\- ]/gu, '').replace(/ /g, '-');
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    out.add(n === 0 ? slug : `${slug}-${String(n)}`);
  }
  return out;
}

describe('README and docs/', () => {
  it('link only to files that exist and headings those files have', () => {
    const broken: string[] = [];
    let checked = 0;
    for (const doc of documents) {
      const text = readFileSync(path.join(root, doc), 'utf8');
      for (const [, target = ''] of prose(text).matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(target)) continue; // https:, mailto:
        const [file = '', anchor] = target.split('#');
        const resolved = file === '' ? doc : path.normalize(path.join(path.dirname(doc), file));
        checked++;
        if (!existsSync(path.join(root, resolved))) {
          broken.push(`${doc}: ${target} (no file ${resolved})`);
          continue;
        }
        if (anchor !== undefined && resolved.endsWith('.md') && !anchors(readFileSync(path.join(root, resolved), 'utf8')).has(anchor)) broken.push(`${doc}: ${target} (no heading #${anchor} in ${resolved})`);
      }
    }
    assert.ok(checked >= 10, `${String(checked)} links checked`);
    assert.deepEqual(broken, []);
  });

  it('are each reachable from README', () => {
    const readme = readFileSync(path.join(root, 'README.md'), 'utf8');
    for (const doc of documents.filter((d) => d !== 'README.md')) assert.ok(readme.includes(`](${doc})`), `README links ${doc}`);
  });
});
