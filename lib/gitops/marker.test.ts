import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { Worker } from 'node:worker_threads';
import { GitOpsError } from './errors.ts';
import { checkRepositoryPath, markerFor, setMarkedValues, updateMarkers, type MarkerSelector } from './marker.ts';
import { splitComment, splitValue } from './scan.ts';

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
    assert.deepEqual(setMarkedValues(text, M, '1.2.3', 'f.yaml'), { text, found: 1, changed: 0, held: ['1.2.3'] });
  });

  it('refuses a marked line without a single-line scalar, and a revision that is not a plain name', () => {
    assert.equal(reasonOf(() => setMarkedValues('v: | # {"$promotion": "delivery:podinfo:prod"}\n', M, '1', 'f')), 'MarkerInvalid');
    assert.equal(reasonOf(() => setMarkedValues('v: # {"$promotion": "delivery:podinfo:prod"}\n', M, '1', 'f')), 'MarkerInvalid');
    for (const revision of ['1.0\nevil: true', '1 # x', '"1"', '-rf', '']) {
      assert.equal(reasonOf(() => setMarkedValues('v: 1 # {"$promotion": "delivery:podinfo:prod"}\n', M, revision, 'f')), 'InvalidInput', revision);
    }
  });
});

describe('setMarkedValues on a newer tip (a retried push)', () => {
  const text = (a: string, b: string): string => `a: ${a} # {"$promotion": "delivery:podinfo:prod"}\nb: "${b}" # {"$promotion": "delivery:podinfo:prod"}\n`;

  it('records what each marked line held, and re-applies over lines that still hold it', () => {
    const first = setMarkedValues(text('1.0.0', '1.0.0'), M, '1.1.0', 'f.yaml');
    assert.deepEqual(first.held, ['1.0.0', '1.0.0']);
    const again = setMarkedValues(`# moved\n${text('1.0.0', '1.1.0')}`, M, '1.1.0', 'f.yaml', first.held);
    assert.equal(again.text, `# moved\n${text('1.1.0', '1.1.0')}`, 'a line already at the revision is no conflict either');
  });

  it('refuses to overwrite a line pinned by hand since, naming file, line and environment but not the value', () => {
    let error: unknown;
    try {
      setMarkedValues(`# moved\n${text('1.0.0', 'hand-pinned-9')}`, M, '1.1.0', 'apps/prod.yaml', ['1.0.0', '1.0.0']);
    } catch (err) {
      error = err;
    }
    assert.ok(error instanceof GitOpsError && error.reason === 'MarkerConflict', String(error));
    assert.match(error.message, /^MarkerConflict: apps\/prod\.yaml:3: the line marked for delivery:podinfo:prod was changed by someone else/);
    assert.doesNotMatch(error.message, /hand-pinned/);
  });

  it('sets a marked line the promotion did not see when it began', () => {
    assert.equal(setMarkedValues(text('1.0.0', '0.9.0'), M, '1.1.0', 'f.yaml', ['1.0.0']).text, text('1.1.0', '1.1.0'));
  });
});

describe('Flux image-automation setters', () => {
  const S = { promotion: M, imagePolicy: 'flux-system:podinfo-prod' };
  const D = 'sha256:' + 'ab'.repeat(32);
  const file = [
    'spec:',
    '  containers:',
    '    - name: app',
    '      image: ghcr.io/stefanprodan/podinfo:6.2.0 # {"$imagepolicy": "flux-system:podinfo-prod"}',
    '    - name: sidecar',
    '      image: "registry.local:5000/side:1.0@sha256:' + 'cd'.repeat(32) + '" # {"$imagepolicy": "flux-system:podinfo-prod"}',
    'values:',
    '  image:',
    '    repository: ghcr.io/stefanprodan/podinfo # {"$imagepolicy": "flux-system:podinfo-prod:name"}',
    '    tag: 6.2.0 # {"$imagepolicy": "flux-system:podinfo-prod:tag"}',
    '  other:',
    '    tag: 6.2.0 # {"$imagepolicy": "flux-system:podinfo-staging:tag"}',
    '    also: 6.2.0 # {"$imagepolicy": "flux-system:podinfo-prod:unknown"}',
    '  version: 6.2.0 # {"$promotion": "delivery:podinfo:prod"}',
    '',
  ].join('\n');

  it('sets the whole reference (name kept, digest dropped), the tag, and leaves the name, beside $promotion', () => {
    const result = setMarkedValues(file, S, '6.3.0', 'f.yaml');
    assert.equal(result.found, 5);
    assert.equal(result.changed, 4);
    assert.deepEqual(result.held, ['ghcr.io/stefanprodan/podinfo:6.2.0', `registry.local:5000/side:1.0@sha256:${'cd'.repeat(32)}`, 'ghcr.io/stefanprodan/podinfo', '6.2.0', '6.2.0']);
    assert.equal(result.text, file
      .replace('podinfo:6.2.0 #', 'podinfo:6.3.0 #')
      .replace(`"registry.local:5000/side:1.0@sha256:${'cd'.repeat(32)}"`, '"registry.local:5000/side:6.3.0"')
      .replace('    tag: 6.2.0 # {"$imagepolicy": "flux-system:podinfo-prod:tag"}', '    tag: 6.3.0 # {"$imagepolicy": "flux-system:podinfo-prod:tag"}')
      .replace('version: 6.2.0', 'version: 6.3.0'));
    assert.match(result.text, /podinfo-staging:tag"\}/);
    assert.match(result.text, / {4}tag: 6\.2\.0 # \{"\$imagepolicy": "flux-system:podinfo-staging:tag"\}/, 'another policy is left alone');
    assert.equal(setMarkedValues(result.text, S, '6.3.0', 'f.yaml').changed, 0, 'a re-run changes nothing');
  });

  it('writes tag@digest into the whole reference and the digest into :digest, and refuses :digest from a tag alone', () => {
    const digestFile = `image: app:1 # {"$imagepolicy": "flux-system:podinfo-prod"}\ndigest: "sha256:${'00'.repeat(32)}" # {"$imagepolicy": "flux-system:podinfo-prod:digest"}\n`;
    assert.equal(setMarkedValues(digestFile, S, `2.0.0@${D}`, 'f.yaml').text, `image: app:2.0.0@${D} # {"$imagepolicy": "flux-system:podinfo-prod"}\ndigest: "${D}" # {"$imagepolicy": "flux-system:podinfo-prod:digest"}\n`);
    assert.equal(reasonOf(() => setMarkedValues(digestFile, S, '2.0.0', 'f.yaml')), 'MarkerInvalid');
  });

  it('refuses a revision that is no image tag for an image setter, and ignores $imagepolicy without a policy to own', () => {
    assert.equal(reasonOf(() => setMarkedValues(file, S, 'main@sha1:0123', 'f.yaml')), 'MarkerInvalid');
    assert.equal(setMarkedValues(file, M, '6.3.0', 'f.yaml').found, 1, 'only $promotion without imagePolicy');
  });
});

// The expressions the scanner replaced (quadratic on hostile lines): the reference it must agree with.
const OLD_COMMENT = /^(?<before>.*?)(?<gap>\s+)(?<comment>#\s*(?<json>\{.*\}))\s*$/;
const OLD_BEFORE = /^(?<head>\s*(?:-\s+)?(?:(?:"(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^\s"'#{}[\],][^#]*?)\s*:\s+)?)(?<value>\S.*?)?\s*$/;

/** Runs setMarkedValues on `text` in a worker, so that a quadratic scan is stopped after `limitMs` instead of stalling the test. */
async function inWorker(text: string, limitMs: number, marker: string | MarkerSelector = M): Promise<{ found?: number; changed?: number; error?: string } | 'stalled'> {
  const url = new URL('./marker.ts', import.meta.url).href;
  const worker = new Worker(`
    const { parentPort, workerData } = require('node:worker_threads');
    import(workerData.url).then((m) => {
      try {
        const r = m.setMarkedValues(workerData.text, workerData.marker, '9.9.9', 'hostile.yaml');
        parentPort.postMessage({ found: r.found, changed: r.changed });
      } catch (err) {
        parentPort.postMessage({ error: err.reason ?? String(err) });
      }
    });`, { eval: true, workerData: { url, text, marker } });
  let timer: NodeJS.Timeout | undefined;
  try {
    return await new Promise((resolve, reject) => {
      timer = setTimeout(() => { resolve('stalled'); }, limitMs);
      worker.once('message', resolve);
      worker.once('error', reject);
    });
  } finally {
    clearTimeout(timer);
    await worker.terminate();
  }
}

describe('the marker scan on hostile lines', () => {
  it('agrees with the expressions it replaced on random lines', () => {
    let seed = 42;
    const next = (): number => { seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648; return seed; };
    const alphabet = [' ', ' ', '\t', '#', '#', '{', '}', '"', "'", '\\', ':', ':', '-', 'a', 'b', '1', '.', ',', '[', '\r', '\u2028', '\u00a0', '$promotion'];
    for (let n = 0; n < 30_000; n++) {
      let line = '';
      const length = next() % 24;
      for (let i = 0; i < length; i++) line += alphabet[next() % alphabet.length] ?? '';
      const old = OLD_COMMENT.exec(line)?.groups;
      const split = splitComment(line);
      assert.deepEqual(split, old === undefined ? undefined : { before: old.before, gap: old.gap, comment: old.comment, json: old.json }, JSON.stringify(line));
      if (line.includes('\r') || line.includes('\u2028')) continue; // a `before` never holds a line terminator
      const value = OLD_BEFORE.exec(line)?.groups;
      assert.ok(value !== undefined);
      assert.deepEqual(splitValue(line), { head: value.head, value: value.value }, JSON.stringify(line));
    }
  });

  it('scans 1 MiB lines of spaces, colons and marker words in linear time (the old expression ran for minutes)', async () => {
    const MiB = 1_048_576;
    const marked = '# {"$promotion": "delivery:podinfo:prod"}';
    const hostile = [
      `$promotion${' '.repeat(MiB)}`,                                   // the marker word and spaces: no comment
      `v: 1${' '.repeat(MiB)}# {"$promotion" ${' '.repeat(MiB / 4)}`,   // a comment that never closes
      `${' #'.repeat(MiB / 2)} {"$promotion": "x"}`,                     // many candidate comments
      `k${' :'.repeat(MiB / 2)} 1 ${marked}`,                           // many candidate keys before a real marker
      `- ${'x '.repeat(MiB / 2)}${marked}`,                              // a long marked value
    ];
    const outcomes = [];
    for (const line of hostile) {
      const result = await inWorker(`a: 1\n${line}\n`, 30_000);
      assert.notEqual(result, 'stalled', `a ${line.length}-character line took more than 30 s: ${JSON.stringify(line.slice(0, 40))}…`);
      outcomes.push(result);
    }
    assert.deepEqual(outcomes, [{ found: 0, changed: 0 }, { found: 0, changed: 0 }, { found: 0, changed: 0 }, { error: 'MarkerInvalid' }, { found: 1, changed: 1 }]);
  });

  it('scans 1 MiB lines of $imagepolicy setters in linear time', async () => {
    const MiB = 1_048_576;
    const selector = { promotion: M, imagePolicy: 'ns:p' };
    const hostile = [
      `$imagepolicy${' '.repeat(MiB)}`,
      `image: ${'a/'.repeat(MiB / 2)}x:1 # {"$imagepolicy": "ns:p"}`,            // a long name of many segments
      `image: ${'a:'.repeat(MiB / 2)}1 # {"$imagepolicy": "ns:p"}`,              // many colons
      `${' #'.repeat(MiB / 2)} {"$imagepolicy": "ns:p:tag"}`,
    ];
    const outcomes = [];
    for (const line of hostile) {
      const result = await inWorker(`a: 1\n${line}\n`, 30_000, selector);
      assert.notEqual(result, 'stalled', `a ${line.length}-character line took more than 30 s`);
      outcomes.push(result);
    }
    assert.deepEqual(outcomes, [{ found: 0, changed: 0 }, { found: 1, changed: 1 }, { found: 1, changed: 1 }, { error: 'MarkerInvalid' }]);
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
    assert.deepEqual(update, { found: 1, changedFiles: ['apps/prod/release.yaml'], held: new Map([['apps/prod/release.yaml', ['1.0.0']]]) });
    assert.equal(await readFile(path.join(root, 'apps/prod/release.yaml'), 'utf8'), 'version: 1.1.0 # {"$promotion": "delivery:podinfo:prod"}\n');
    assert.match(await readFile(outside, 'utf8'), /1\.0\.0/, 'a symlink is never followed');
    assert.match(await readFile(path.join(root, 'apps/prod/notes.txt'), 'utf8'), /1\.0\.0/, 'only YAML files');
    await assert.rejects(updateMarkers(root, 'apps', markerFor('delivery', 'podinfo', 'qa'), '1.1.0'), (err: unknown) => err instanceof GitOpsError && err.reason === 'MarkerNotFound');
  });

  it('refuses a path through a symbolic link leading out of the work tree, and leaves the outside file untouched', async (t) => {
    const scratch = await mkdtemp(path.join(tmpdir(), 'fleetcache-marker-'));
    t.after(() => rm(scratch, { recursive: true, force: true }));
    const root = path.join(scratch, 'clone');
    const outside = path.join(scratch, 'outside');
    await mkdir(path.join(outside, 'prod'), { recursive: true });
    await mkdir(path.join(root, 'apps'), { recursive: true });
    const victim = path.join(outside, 'prod/release.yaml');
    const text = 'version: 1.0.0 # {"$promotion": "delivery:podinfo:prod"}\n';
    await writeFile(victim, text);
    await symlink(outside, path.join(root, 'apps/env'));   // an intermediate directory
    await symlink(path.join(outside, 'prod'), path.join(root, 'last'));  // the last segment
    for (const subdir of ['apps/env/prod', 'apps/env', 'last', './apps/env/prod/']) {
      await assert.rejects(updateMarkers(root, subdir, M, '2.0.0'), (err: unknown) => err instanceof GitOpsError && err.reason === 'PathRefused' && err.message.includes('symbolic link'), subdir);
    }
    assert.equal(await readFile(victim, 'utf8'), text);
    await writeFile(path.join(root, 'apps/file'), 'x');
    await assert.rejects(updateMarkers(root, 'apps/file/x', M, '2.0.0'), (err: unknown) => err instanceof GitOpsError && err.reason === 'MarkerNotFound');
  });

  it('bounds the YAML read in one promotion, across its attempts', async (t) => {
    const root = await mkdtemp(path.join(tmpdir(), 'fleetcache-marker-'));
    t.after(() => rm(root, { recursive: true, force: true }));
    const line = 'version: 1.0.0 # {"$promotion": "delivery:podinfo:prod"}\n';
    for (const name of ['a', 'b', 'c']) await writeFile(path.join(root, `${name}.yaml`), line);
    const budget = { bytesRead: 0 };
    await updateMarkers(root, '.', M, '1.0.0', { maxScanBytes: line.length * 4, budget });
    assert.equal(budget.bytesRead, line.length * 3);
    await assert.rejects(updateMarkers(root, '.', M, '1.0.0', { maxScanBytes: line.length * 4, budget }), (err: unknown) => {
      assert.ok(err instanceof GitOpsError && err.reason === 'ScanLimitExceeded', String(err));
      assert.match(err.message, new RegExp(`more than ${line.length * 4} bytes .*maxScanBytes`));
      return true;
    });
  });

  it('keeps the path inside the repository', () => {
    for (const bad of ['../x', '/etc', 'a/../../b', '-x', 'a\\b']) assert.throws(() => checkRepositoryPath(bad), GitOpsError, bad);
    assert.equal(checkRepositoryPath('./apps/'), 'apps');
    assert.equal(checkRepositoryPath(''), '.');
  });
});
