import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { classifyAddress } from './address.ts';

describe('classifyAddress', () => {
  it('sorts inside addresses into their categories', () => {
    const table: Record<string, string> = {
      '127.0.0.1': 'loopback', '127.255.255.254': 'loopback', '::1': 'loopback', '::ffff:127.0.0.1': 'loopback', '::ffff:7f00:1': 'loopback',
      '64:ff9b::7f00:1': 'loopback', '2002:7f00:1::': 'loopback',
      '10.0.0.1': 'private', '172.16.0.1': 'private', '172.31.255.255': 'private', '192.168.0.1': 'private', '100.64.0.1': 'private',
      '100.127.255.255': 'private', 'fc00::1': 'private', 'fdff::1': 'private', 'fec0::1': 'private', '64:ff9b:1::1': 'private', '::ffff:192.168.1.1': 'private',
      '169.254.169.254': 'link-local', 'fe80::1': 'link-local', 'fe80::1%eth0': 'link-local', 'febf::1': 'link-local',
      '0.0.0.0': 'unspecified', '0.1.2.3': 'unspecified', '::': 'unspecified', '::ffff:0.0.0.0': 'unspecified',
      '224.0.0.1': 'multicast', '239.255.255.250': 'multicast', 'ff02::1': 'multicast',
      '255.255.255.255': 'reserved', '240.0.0.1': 'reserved', '192.0.2.1': 'reserved', '198.18.0.1': 'reserved', '203.0.113.9': 'reserved',
      '2001:db8::1': 'reserved', '100::1': 'reserved', '2001::1': 'reserved', '::7f00:1': 'reserved',
    };
    for (const [address, category] of Object.entries(table)) assert.equal(classifyAddress(address), category, address);
  });

  it('lets globally reachable addresses through, including the neighbours of inside ranges', () => {
    for (const address of ['8.8.8.8', '1.1.1.1', '93.184.215.14', '172.15.255.255', '172.32.0.0', '100.63.255.255', '100.128.0.0', '11.0.0.0',
      '126.255.255.255', '128.0.0.0', '169.253.255.255', '223.255.255.255', '2606:4700::1111', '2a00:1450::1', '::ffff:8.8.8.8', '64:ff9b::808:808', 'fbff::1']) {
      assert.equal(classifyAddress(address), undefined, address);
    }
  });

  it('throws on what is not an IP address', () => {
    assert.throws(() => classifyAddress('localhost'), TypeError);
    assert.throws(() => classifyAddress('127.1'), TypeError, 'only the URL parser normalises short forms');
  });
});
