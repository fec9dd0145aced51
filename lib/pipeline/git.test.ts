import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GitOpsError, type GitPromoter } from '../gitops/index.ts';
import { PromotionError } from './errors.ts';
import { gitCredentials, promoteThroughGit } from './git.ts';
import type { ResolvedGitPromotion } from './validate.ts';

describe('gitCredentials', () => {
  it('reads HTTPS username/password, a bare token, or an SSH key with known_hosts', () => {
    assert.deepEqual(gitCredentials({ username: 'bot', password: 'p' }, 'ns/s'), { kind: 'basic', username: 'bot', password: 'p' });
    assert.deepEqual(gitCredentials({ token: 't' }, 'ns/s'), { kind: 'basic', username: 'git', password: 't' });
    assert.deepEqual(gitCredentials({ identity: 'KEY', known_hosts: 'h ssh-ed25519 AAA' }, 'ns/s'), { kind: 'ssh', identity: 'KEY', knownHosts: 'h ssh-ed25519 AAA' });
  });
  it('refuses an SSH key without known_hosts (no trust on first use) and a Secret without credentials, naming neither value', () => {
    assert.throws(() => gitCredentials({ identity: 'SECRET-KEY' }, 'ns/s'), (err: unknown) => err instanceof PromotionError && err.message.includes('no known_hosts') && !err.message.includes('SECRET-KEY'));
    assert.throws(() => gitCredentials({ user: 'x' }, 'ns/s'), (err: unknown) => err instanceof PromotionError && err.message.includes('none of the keys password, token or identity'));
  });
});

describe('promoteThroughGit', () => {
  it('hands the promoter the environment\'s $promotion marker and the ImagePolicy whose Flux setters it owns', async () => {
    const seen: unknown[] = [];
    const promoter = { promote: (r: unknown) => { seen.push(r); return Promise.resolve({ kind: 'commit', sha: 'abc', created: true, attempts: 1 }); } } as unknown as GitPromoter;
    const promotion = { strategy: 'git', url: 'https://git.example/fleet.git', branch: 'main', path: 'apps', pullRequest: undefined, secretName: undefined } as unknown as ResolvedGitPromotion;
    await promoteThroughGit(promoter, promotion, { namespace: 'delivery', pipeline: 'podinfo', environment: 'prod', revision: '6.3.0' }, () => Promise.resolve({}));
    await promoteThroughGit(promoter, promotion, { namespace: 'delivery', pipeline: 'podinfo', environment: 'Prod_1', revision: '6.3.0' }, () => Promise.resolve({}));
    assert.deepEqual(seen.map((r) => (r as { imagePolicy?: string }).imagePolicy), ['delivery:podinfo-prod', undefined], 'no policy where the name could not be one');
    assert.deepEqual((seen[0] as { marker: unknown }).marker, { namespace: 'delivery', pipeline: 'podinfo', environment: 'prod' });
  });

  it('hands the promoter the ImagePolicy the environment names (imagePolicy), in the Pipeline\'s namespace, instead of the convention', async () => {
    const seen: unknown[] = [];
    const promoter = { promote: (r: unknown) => { seen.push(r); return Promise.resolve({ kind: 'commit', sha: 'abc', created: true, attempts: 1 }); } } as unknown as GitPromoter;
    const promotion = { strategy: 'git', url: 'https://git.example/fleet.git', branch: 'main', path: 'apps', pullRequest: undefined, secretName: undefined } as unknown as ResolvedGitPromotion;
    await promoteThroughGit(promoter, promotion, { namespace: 'delivery', pipeline: 'podinfo', environment: 'prod', revision: '6.3.0', imagePolicy: 'podinfo-stable' }, () => Promise.resolve({}));
    assert.equal((seen[0] as { imagePolicy?: string }).imagePolicy, 'delivery:podinfo-stable');
  });

  it('turns each refusal into a PromotionError whose message (what status records) is the reason and the limit', async () => {
    const refusals = [
      new GitOpsError('RepositoryTooLarge', "the branch's files add up to more than 134217728 bytes (maxRepositoryBytes)"),
      new GitOpsError('ScanLimitExceeded', 'more than 33554432 bytes of YAML to scan in one promotion (maxScanBytes)'),
      new GitOpsError('PathRefused', 'the path "apps/x" goes through a symbolic link in the repository ("apps"); links are never followed'),
      new GitOpsError('DeadlineExceeded', 'the promotion did not finish within its deadline of 180000 ms (promotionTimeoutMs)'),
    ];
    const promotion = { strategy: 'git', url: 'https://git.example/fleet.git', branch: 'main', path: 'apps', pullRequest: undefined, secretName: undefined } as unknown as ResolvedGitPromotion;
    const request = { namespace: 'ns', pipeline: 'p', environment: 'prod', revision: '1.0.0' };
    for (const refusal of refusals) {
      const promoter = { promote: () => Promise.reject(refusal) } as unknown as GitPromoter;
      await assert.rejects(promoteThroughGit(promoter, promotion, request, () => Promise.resolve({})), (err: unknown) => {
        assert.ok(err instanceof PromotionError && err.cause === refusal);
        assert.equal(err.message, `git: ${refusal.message}`);
        assert.match(err.message, new RegExp(`^git: ${refusal.reason}: .*\\((maxRepositoryBytes|maxScanBytes|promotionTimeoutMs)\\)$|links are never followed$`));
        return true;
      });
    }
  });
});
