import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GitOpsError } from './errors.ts';
import { sparsePatterns, TreeListing } from './tree.ts';

const LIMITS = { maxBytes: 1_000, maxFiles: 5, maxFileBytes: 100 };

/** `git ls-tree -r -l -z` records. */
function listing(...entries: [mode: string, size: number | '-', path: string][]): Buffer {
  return Buffer.concat(entries.map(([mode, size, file]) => Buffer.from(`${mode} ${mode === '160000' ? 'commit' : 'blob'} ${'a'.repeat(40)} ${String(size).padStart(7)}\t${file}\0`)));
}

function reasonOf(error: GitOpsError | undefined): string | undefined {
  return error?.reason;
}

describe('TreeListing', () => {
  it('adds up sizes and files across chunks cut anywhere, and lists the oversized YAML under the path', () => {
    const bytes = listing(['100644', 50, 'apps/a.yaml'], ['100644', 200, 'apps/big.YML'], ['100644', 300, 'other/big.yaml'], ['120000', 10, 'apps/l'], ['160000', '-', 'sub']);
    for (const cut of [1, 7, 13, bytes.length]) {
      const tree = new TreeListing('apps', LIMITS);
      for (let i = 0; i < bytes.length; i += cut) assert.equal(tree.push(bytes.subarray(i, i + cut)), undefined);
      assert.deepEqual(tree.summary(), { bytes: 560, files: 5, oversized: ['apps/big.YML'] });
    }
  });

  it('stops at the first record past the size or file bound, naming the option', () => {
    const big = new TreeListing('.', LIMITS);
    const error = big.push(listing(['100644', 600, 'a'], ['100644', 600, 'b'], ['100644', 1, 'c']));
    assert.equal(reasonOf(error), 'RepositoryTooLarge');
    assert.match(error?.message ?? '', /more than 1000 bytes \(maxRepositoryBytes\)/);
    assert.throws(() => big.summary(), GitOpsError);
    const many = new TreeListing('.', LIMITS);
    assert.match(many.push(listing(...Array.from({ length: 6 }, (_, i): [string, number, string] => ['100644', 1, `f${i}`])))?.message ?? '', /more than 5 files \(maxRepositoryFiles\)/);
  });

  it('refuses a path whose ancestor, or itself, is a symbolic link', () => {
    for (const link of ['apps', 'apps/prod']) {
      const tree = new TreeListing('apps/prod', LIMITS);
      const error = tree.push(listing(['100644', 1, 'README'], ['120000', 4, link]));
      assert.equal(reasonOf(error), 'PathRefused', link);
    }
    assert.equal(new TreeListing('apps/prod', LIMITS).push(listing(['120000', 4, 'apps/production'], ['120000', 4, 'app'])), undefined, 'only the path\'s own segments');
  });

  it('refuses a record that never ends, and output cut in a record', () => {
    assert.equal(reasonOf(new TreeListing('.', LIMITS).push(Buffer.alloc(70_000, 0x61))), 'RepositoryTooLarge');
    const cut = new TreeListing('.', LIMITS);
    cut.push(listing(['100644', 1, 'a']).subarray(0, 10));
    assert.throws(() => cut.summary(), (err: unknown) => err instanceof GitOpsError && err.reason === 'CloneFailed');
  });
});

describe('sparsePatterns', () => {
  it('checks out the YAML under the path only, its special characters taken literally, less the oversized files', () => {
    assert.equal(sparsePatterns('.', []), '/**/*.[yY][aA][mM][lL]\n/**/*.[yY][mM][lL]\n');
    assert.equal(sparsePatterns('apps/a*b [x]!#', ['apps/a*b [x]!#/big.yaml', 'apps/line\nbreak.yaml']),
      '/apps/a\\*b\\ \\[x\\]\\!\\#/**/*.[yY][aA][mM][lL]\n/apps/a\\*b\\ \\[x\\]\\!\\#/**/*.[yY][mM][lL]\n!/apps/a\\*b\\ \\[x\\]\\!\\#/big.yaml\n');
  });
});
