import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GitOpsError } from './errors.ts';
import { checkUrl, pinUrl } from './url.ts';

describe('checkUrl and pinUrl', () => {
  it('never repeats the URL (which may carry a token) in the refusal', () => {
    try {
      checkUrl('https://user:ghp_secret@github.com/o/r.git', {});
      assert.fail('accepted');
    } catch (err) {
      assert.ok(err instanceof GitOpsError);
      assert.doesNotMatch(err.message, /ghp_secret/);
    }
  });
  it('accepts https, and ssh with a user name only when asked to', () => {
    assert.equal(checkUrl('https://github.com/o/r.git', {}).port, 443);
    assert.equal(checkUrl('ssh://git@github.com/o/r.git', { allowSsh: true }).port, 22);
    assert.throws(() => checkUrl('ssh://git@github.com/o/r.git', {}), GitOpsError);
    assert.throws(() => checkUrl('ssh://git:pw@github.com/o/r.git', { allowSsh: true }), GitOpsError);
  });
  it('checks every address a name resolves to and pins the first', async () => {
    const pinned = await pinUrl(checkUrl('https://git.example/o/r.git', {}), { lookup: () => Promise.resolve(['93.184.216.34', '140.82.112.3']) });
    assert.equal(pinned.address, '93.184.216.34');
    await assert.rejects(pinUrl(checkUrl('https://git.example/o/r.git', {}), { lookup: () => Promise.resolve(['93.184.216.34', '10.0.0.1']) }), GitOpsError);
    const allowed = await pinUrl(checkUrl('https://git.example/o/r.git', {}), { allowPrivateNetworks: true, lookup: () => Promise.resolve(['10.0.0.1']) });
    assert.equal(allowed.address, '10.0.0.1');
  });
  it('keeps link-local (cloud metadata), unspecified, multicast and reserved addresses out even when private networks are allowed', async () => {
    const allow = { allowPrivateNetworks: true } as const;
    for (const address of ['169.254.169.254', 'fe80::1', '0.0.0.0', '224.0.0.1', '240.0.0.1', '::ffff:169.254.169.254']) {
      await assert.rejects(pinUrl(checkUrl('https://git.example/o/r.git', {}), { ...allow, lookup: () => Promise.resolve([address]) }), (err: unknown) => err instanceof GitOpsError && err.reason === 'AddressRefused' && !err.message.includes('unless'), address);
    }
    for (const address of ['127.0.0.1', '::1', '192.168.1.1', '100.64.0.1', 'fd00::1', '::ffff:10.0.0.1']) {
      assert.equal((await pinUrl(checkUrl('https://git.example/o/r.git', {}), { ...allow, lookup: () => Promise.resolve([address]) })).address, address);
      await assert.rejects(pinUrl(checkUrl('https://git.example/o/r.git', {}), { lookup: () => Promise.resolve([address]) }), GitOpsError, address);
    }
  });
});
