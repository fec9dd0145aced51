import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isNonPublicAddress } from './address.ts';
import { GitOpsError } from './errors.ts';
import { checkUrl, pinUrl } from './url.ts';

describe('isNonPublicAddress', () => {
  it('classifies loopback, private, shared, link-local, multicast and mapped addresses as non-public', () => {
    for (const a of ['127.0.0.1', '127.8.9.10', '10.1.2.3', '172.16.0.1', '172.31.255.255', '192.168.1.1', '100.64.0.1', '169.254.169.254', '0.0.0.0', '224.0.0.1', '255.255.255.255',
      '::1', '::', 'fe80::1', 'fd00::1', 'fc00::5', 'ff02::1', '::ffff:127.0.0.1', '::ffff:7f00:1', '::ffff:10.0.0.1', '64:ff9b::a00:1', 'not-an-ip']) {
      assert.equal(isNonPublicAddress(a), true, a);
    }
  });
  it('lets public unicast addresses through', () => {
    for (const a of ['93.184.216.34', '140.82.112.3', '172.32.0.1', '2606:50c0:8000::153', '::ffff:8.8.8.8', '1.1.1.1']) assert.equal(isNonPublicAddress(a), false, a);
  });
});

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
});
