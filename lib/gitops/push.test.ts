import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pushOutcome } from './push.ts';

const REF = 'refs/heads/main';
const porcelain = (line: string): string => `To http://127.0.0.1:1/fleet.git\n${line}\nDone\n`;

describe('pushOutcome', () => {
  it('reads a pushed ref and one the remote already had (the same commit pushed by another writer)', () => {
    assert.equal(pushOutcome(0, porcelain(' \tHEAD:refs/heads/main\t1111111..2222222'), '', REF), 'pushed');
    assert.equal(pushOutcome(0, porcelain('*\tHEAD:refs/heads/main\t[new branch]'), '', REF), 'pushed');
    assert.equal(pushOutcome(0, porcelain('=\tHEAD:refs/heads/main\t[up to date]'), '', REF), 'present');
    assert.equal(pushOutcome(0, 'Everything up-to-date\n', '', REF), 'pushed', 'no line, exit 0: as before');
  });

  it('recognises every form of a lost race, from our git and from the server', () => {
    for (const summary of [
      '[rejected] (fetch first)',
      '[rejected] (non-fast-forward)',
      '[rejected] (stale info)',
      '[remote rejected] (failed to update ref)',
      "[remote rejected] (cannot lock ref 'refs/heads/main': is at 0123 but expected 4567)",
      '[remote rejected] (incorrect old value provided)',
      '[remote rejected] (stale info)',
      '[remote rejected] (fetch first)',
      '[remote rejected] (non-fast-forward)',
      '[remote rejected] (failed to lock)',
    ]) assert.equal(pushOutcome(1, porcelain(`!\tHEAD:refs/heads/main\t${summary}`), '', REF), 'lost', summary);
    assert.equal(pushOutcome(1, '', "error: failed to push some refs\nhint: Updates were rejected because the remote contains work that you do not\nhint: have locally. (fetch first)\n", REF), 'lost', 'stderr only');
  });

  it('leaves every other refusal a failure', () => {
    assert.equal(pushOutcome(1, porcelain('!\tHEAD:refs/heads/main\t[remote rejected] (pre-receive hook declined)'), '', REF), 'failed');
    assert.equal(pushOutcome(1, porcelain('!\tHEAD:refs/heads/main\t[remote rejected] (protected branch hook declined)'), '', REF), 'failed');
    assert.equal(pushOutcome(128, '', 'fatal: Authentication failed\n', REF), 'failed');
    assert.equal(pushOutcome(1, porcelain('!\tHEAD:refs/heads/other\t[rejected] (fetch first)'), '', REF), 'failed', 'another ref\'s line does not decide');
  });

  it('is linear on a hostile answer', () => {
    const line = `!\tHEAD:${REF}\t[remote rejected] (${'f'.repeat(2_000_000)})`;
    const begun = performance.now();
    assert.equal(pushOutcome(1, line, 'x'.repeat(2_000_000), REF), 'failed');
    assert.ok(performance.now() - begun < 500);
  });
});
