import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PromotionError } from './errors.ts';
import { gitCredentials } from './git.ts';

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
