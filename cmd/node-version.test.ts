import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { minimumNode, unsupportedNode } from './node-version.ts';

describe('unsupportedNode', () => {
  it('refuses every Node older than 22.19.0, in one line naming both versions', () => {
    for (const version of ['20.20.2', '22.18.9', '22.9.0', '21.99.99', '18.0.0', '4.0.0']) {
      assert.equal(unsupportedNode(version), `fleetcache needs Node.js 22.19.0 or newer; this is Node.js ${version}`, version);
    }
  });

  it('accepts 22.19.0 and everything after', () => {
    for (const version of ['22.19.0', '22.19.1', '22.20.0', '23.0.0', '24.21.0', '100.0.0']) assert.equal(unsupportedNode(version), undefined, version);
  });

  it('agrees with package.json engines', () => {
    const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { engines: { node: string } };
    assert.equal(pkg.engines.node, `>=${minimumNode.replace(/\.0$/, '')}`);
  });
});
