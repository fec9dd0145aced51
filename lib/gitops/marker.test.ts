import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { GitOpsError } from './errors.ts';
import { checkRepositoryPath, markerFor, setMarkedValues, updateMarkers } from './marker.ts';

const M = markerFor('delivery', 'podinfo', 'prod');

function reasonOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof GitOpsError, String(err));
    return err.reason;
  }
  return 'no error';
}

describe('setMarkedValues', () => {
  it('sets the value of the marked line only, keeping the comment and everything else', () => {
    const text = [
      'spec:',
      '  chart:',
      '    spec:',
      '      version: 6.2.0 # {"$promotion": "delivery:podinfo:prod"}',
      '      other: 6.2.0 # {"$promotion": "delivery:podinfo:staging"}',
      '      untouched: 6.2.0 # a comment',
      '',
    ].join('\n');
    const result = setMarkedValues(text, M, '6.3.0', 'f.yaml');
    assert.equal(result.found, 1);
    assert.equal(result.changed, 1);
    assert.equal(result.text, text.replace('version: 6.2.0', 'version: 6.3.0'));
  });

  it('keeps the quoting style, and quotes a plain value YAML would read as a number', () => {
    const text = 'a: "1.0" # {"$promotion": "delivery:podinfo:prod"}\nb: \'1.0\' # {"$promotion":"delivery:podinfo:prod"}\nc: v1 # {"$promotion": "delivery:podinfo:prod"}\n- 1.0.0 # {"$promotion": "delivery:podinfo:prod"}\r\n';
    const result = setMarkedValues(text, M, '2', 'f.yaml');
    assert.equal(result.found, 4);
    assert.equal(result.text, 'a: "2" # {"$promotion": "delivery:podinfo:prod"}\nb: \'2\' # {"$promotion":"delivery:podinfo:prod"}\nc: "2" # {"$promotion": "delivery:podinfo:prod"}\n- "2" # {"$promotion": "delivery:podinfo:prod"}\r\n');
  });

  it('changes nothing when the value is already the revision', () => {
    const text = 'version: "1.2.3" # {"$promotion": "delivery:podinfo:prod"}\n';
    assert.deepEqual(setMarkedValues(text, M, '1.2.3', 'f.yaml'), { text, found: 1, changed: 0 });
  });

  it('refuses a marked line without a single-line scalar, and a revision that is not a plain name', () => {
    assert.equal(reasonOf(() => setMarkedValues('v: | # {"$promotion": "delivery:podinfo:prod"}\n', M, '1', 'f')), 'MarkerInvalid');
    assert.equal(reasonOf(() => setMarkedValues('v: # {"$promotion": "delivery:podinfo:prod"}\n', M, '1', 'f')), 'MarkerInvalid');
    for (const revision of ['1.0\nevil: true', '1 # x', '"1"', '-rf', '']) {
      assert.equal(reasonOf(() => setMarkedValues('v: 1 # {"$promotion": "delivery:podinfo:prod"}\n', M, revision, 'f')), 'InvalidInput', revision);
    }
  });
});

describe('updateMarkers', () => {
  it('walks the path, rewrites marked YAML files, skips symlinks and .git, and says when no marker exists', async (t) => {
    const root = await mkdtemp(path.join(tmpdir(), 'fleetcache-marker-'));
    t.after(() => rm(root, { recursive: true, force: true }));
    await mkdir(path.join(root, 'apps/prod'), { recursive: true });
    await mkdir(path.join(root, '.git'), { recursive: true });
    await writeFile(path.join(root, 'apps/prod/release.yaml'), 'version: 1.0.0 # {"$promotion": "delivery:podinfo:prod"}\n');
    await writeFile(path.join(root, 'apps/prod/notes.txt'), 'version: 1.0.0 # {"$promotion": "delivery:podinfo:prod"}\n');
    await writeFile(path.join(root, '.git/x.yaml'), 'version: 1.0.0 # {"$promotion": "delivery:podinfo:prod"}\n');
    const outside = path.join(root, 'outside.yaml');
    await writeFile(outside, 'version: 1.0.0 # {"$promotion": "delivery:podinfo:prod"}\n');
    await symlink(outside, path.join(root, 'apps/prod/link.yaml'));

    const update = await updateMarkers(root, 'apps', M, '1.1.0');
    assert.deepEqual(update, { found: 1, changedFiles: ['apps/prod/release.yaml'] });
    assert.equal(await readFile(path.join(root, 'apps/prod/release.yaml'), 'utf8'), 'version: 1.1.0 # {"$promotion": "delivery:podinfo:prod"}\n');
    assert.match(await readFile(outside, 'utf8'), /1\.0\.0/, 'a symlink is never followed');
    assert.match(await readFile(path.join(root, 'apps/prod/notes.txt'), 'utf8'), /1\.0\.0/, 'only YAML files');
    await assert.rejects(updateMarkers(root, 'apps', markerFor('delivery', 'podinfo', 'qa'), '1.1.0'), (err: unknown) => err instanceof GitOpsError && err.reason === 'MarkerNotFound');
  });

  it('keeps the path inside the repository', () => {
    for (const bad of ['../x', '/etc', 'a/../../b', '-x', 'a\\b']) assert.throws(() => checkRepositoryPath(bad), GitOpsError, bad);
    assert.equal(checkRepositoryPath('./apps/'), 'apps');
    assert.equal(checkRepositoryPath(''), '.');
  });
});
