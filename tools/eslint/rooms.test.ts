import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, it } from 'node:test';
import { Linter } from 'eslint';
import rooms from './rooms.js';

const root = path.resolve(import.meta.dirname, '../..');

function lint(file: string, code: string): string[] {
  const linter = new Linter({ cwd: root });
  const messages = linter.verify(code, {
    files: ['**/*.ts'],
    plugins: { fleetcache: rooms },
    rules: { 'fleetcache/rooms': 'error' },
  }, path.join(root, file));
  return messages.map((m) => m.message);
}

describe('rooms lint rule', () => {
  it('lets a room import the rooms beneath it through their index.ts', () => {
    assert.deepEqual(lint('lib/registry/registry.ts', "import { x } from '../informer/index.ts';"), []);
    assert.deepEqual(lint('lib/cluster/keeper.ts', "import { x } from '../transport/index.ts';"), []);
    assert.deepEqual(lint('cmd/main.ts', "import { x } from '../lib/pipeline/index.ts';"), []);
    assert.deepEqual(lint('e2e/fleet.ts', "import { x } from '../cmd/main.ts';"), []);
  });

  it('refuses an upward or sideways import', () => {
    assert.match(lint('lib/transport/connection.ts', "import { x } from '../cluster/index.ts';")[0] ?? '', /lib\/transport\/ may not import lib\/cluster\//);
    assert.match(lint('lib/informer/informer.ts', "import { x } from '../registry/index.ts';")[0] ?? '', /may not import lib\/registry/);
    assert.match(lint('lib/util/abort.ts', "export { x } from '../queue/index.ts';")[0] ?? '', /may not import lib\/queue/);
    assert.match(lint('lib/registry/registry.ts', "import { x } from '../../cmd/main.ts';")[0] ?? '', /may not import cmd/);
    assert.match(lint('fixtures/sim/server.ts', "import { x } from '../../lib/transport/index.ts';")[0] ?? '', /may not import lib\/transport/);
    assert.match(lint('cmd/gen-manifests.ts', "import { x } from '../fixtures/crds/index.ts';")[0] ?? '', /cmd\/ may not import fixtures\//);
    assert.match(lint('fixtures/crds/index.ts', "import { x } from '../../lib/pipeline/index.ts';")[0] ?? '', /fixtures\/ may not import lib\/pipeline\//);
  });

  it('refuses reaching past another room\'s index.ts', () => {
    assert.match(lint('lib/informer/reflector.ts', "import { x } from '../transport/strip.ts';")[0] ?? '', /through its index\.ts/);
  });

  it('leaves tests free to import test support', () => {
    assert.deepEqual(lint('lib/informer/informer.test.ts', "import { x } from '../transport/testing.ts';"), []);
  });
});
