import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PassThrough } from 'node:stream';
import { after, describe, it } from 'node:test';
import { ClusterConnection } from '../lib/transport/index.ts';
import { FakeClock, toError } from '../lib/util/index.ts';
import { createLogger } from './logging.ts';
import { kubeConfigFor } from '../fixtures/support/index.ts';

function capture(): { readonly stream: PassThrough; readonly text: () => string; readonly lines: () => Record<string, unknown>[] } {
  const stream = new PassThrough();
  const chunks: Buffer[] = [];
  stream.on('data', (c: Buffer) => chunks.push(c));
  const text = (): string => Buffer.concat(chunks).toString('utf8');
  return { stream, text, lines: () => text().split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as Record<string, unknown>) };
}

describe('createLogger', () => {
  it('writes JSON lines with zap\'s keys (level, ts, logger, msg) and the fields of every child', () => {
    const out = capture();
    const logger = createLogger({ level: 'info', stream: out.stream, clock: new FakeClock(1_700_000_000_123) });
    logger.child({ cluster: 'secret:team-a/prod' }).child({ pipeline: 'team-a/app' }).info('synced', { objects: 3 });
    logger.debug('not at info');
    const [line, ...rest] = out.lines();
    assert.equal(rest.length, 0, 'debug is below the level');
    assert.equal(line?.level, 'info');
    assert.deepEqual(Object.keys(line).slice(0, 4), ['level', 'ts', 'logger', 'msg'], 'zap\'s order');
    assert.equal(line.msg, 'synced');
    assert.equal(line.ts, 1_700_000_000.123, 'epoch seconds as a float, as zap\'s production config');
    assert.equal(line.message, undefined);
    assert.equal(line.cluster, 'secret:team-a/prod');
    assert.equal(line.pipeline, 'team-a/app');
    assert.equal(line.objects, 3);
    assert.equal(line.logger, 'fleetcache');
    assert.equal(line.timestamp, undefined);
  });

  it('keeps fields named like the line\'s own keys, renamed, instead of letting them overwrite it', () => {
    const out = capture();
    const logger = createLogger({ stream: out.stream, clock: new FakeClock(5_000) });
    logger.child({ msg: 'from child' }).warn('real message', { level: 'not-a-level', message: 'a field', ts: 'x' });
    const [line] = out.lines();
    assert.equal(line?.level, 'warn');
    assert.equal(line.msg, 'real message');
    assert.equal(line.ts, 5);
    assert.equal(line.field_level, 'not-a-level');
    assert.equal(line.field_message, 'a field');
    assert.equal(line.field_ts, 'x');
    assert.equal(line.field_msg, 'from child');
  });

  it('--log-format=console writes zap\'s console layout: time, LEVEL, logger, message, fields', () => {
    const out = capture();
    const logger = createLogger({ stream: out.stream, format: 'console', clock: new FakeClock(Date.UTC(2026, 0, 2, 3, 4, 5, 6)) });
    logger.child({ controller: 'pipeline' }).info('reconciled', { pipeline: 'apps/web' });
    logger.error('no fields');
    assert.equal(out.text(), '2026-01-02T03:04:05.006Z\tINFO\tfleetcache\treconciled\t{"controller":"pipeline","pipeline":"apps/web"}\n2026-01-02T03:04:05.006Z\tERROR\tfleetcache\tno fields\n');
  });

  it('turns Error fields into name, message and code instead of {}', () => {
    const out = capture();
    const logger = createLogger({ stream: out.stream });
    const err = Object.assign(new Error('boom'), { code: 'ERR_X' });
    logger.warn('failed', { error: err });
    assert.deepEqual(out.lines()[0]?.error, { name: 'Error', message: 'boom', code: 'ERR_X' });
  });

  it('redacts credential fields and credential shapes in text', () => {
    const out = capture();
    const logger = createLogger({ stream: out.stream });
    const jwt = 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQifQ.c2lnbmF0dXJl';
    logger.info(`header Authorization: Bearer opaque-secret-1 and ${jwt}`, {
      token: 'opaque-secret-2',
      user: { name: 'ci', 'client-key-data': 'opaque-secret-3', password: 'opaque-secret-4' },
      detail: '{"token":"opaque-secret-5"}',
      secret: { data: { kubeconfig: 'b3BhcXVlLXNlY3JldC02' } },
      pem: '-----BEGIN RSA PRIVATE KEY-----\nopaque-secret-7\n-----END RSA PRIVATE KEY-----',
    });
    const text = out.text();
    assert.doesNotMatch(text, /opaque-secret|b3BhcXVlLXNlY3JldC02|eyJ/);
    assert.match(text, /\[REDACTED\]/);
    assert.equal(out.lines()[0]?.user && (out.lines()[0]?.user as { name: string }).name, 'ci', 'other fields stay');
  });
});

describe('a kubeconfig bearer token never reaches the logs', () => {
  const token = 'fleetcache-test-token-7f3a9c1e5b';
  // A server that quotes the credentials back in its error, as some proxies do.
  const server = createServer((req, res) => {
    res.writeHead(401, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ kind: 'Status', status: 'Failure', reason: 'Unauthorized', code: 401, message: `invalid credentials: ${req.headers.authorization ?? ''}` }));
  });
  after(() => { server.close(); });

  it('when the server echoes it in an error, or the connection fails, at every level', async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const out = capture();
    const logger = createLogger({ level: 'debug', stream: out.stream });

    const echoing = new ClusterConnection({ name: 'echo', kubeConfig: kubeConfigFor(`http://127.0.0.1:${port}`, { token }), logger });
    const refused = new ClusterConnection({ name: 'refused', kubeConfig: kubeConfigFor('https://127.0.0.1:1', { token, skipTLSVerify: false }), logger });
    after(async () => { await Promise.all([echoing.close(), refused.close()]); });
    for (const connection of [echoing, refused]) {
      const err = await connection.request({ method: 'GET', path: '/api/v1/namespaces' }).then(() => undefined, toError);
      assert.ok(err !== undefined, `${connection.name} must fail`);
      const cluster = logger.child({ cluster: connection.name });
      cluster.error(`cannot list namespaces: ${err.message}`, { error: err, cause: err.cause });
      cluster.debug('failure detail', { detail: String(err.stack) });
    }
    const text = out.text();
    assert.match(text, /invalid credentials: Bearer \[REDACTED\]/, 'the echo was logged, scrubbed');
    assert.match(text, /"cluster":"refused"/);
    assert.ok(!text.includes(token), text);
    assert.ok(!text.includes(token.slice(8)), 'not even part of it');
  });
});

describe('what outside text can do to a log line', () => {
  it('redacts URL credentials and query strings in messages, fields and errors', () => {
    const out = capture();
    const logger = createLogger({ stream: out.stream });
    const url = 'http://hook-user:hook-pass@hooks.example.com/deploy?token=tok-9f2';
    logger.warn(`promotion failed: Request cannot be constructed from a URL that includes credentials: ${url}`, { url, error: new Error(`POST ${url} failed`) });
    const text = out.text();
    for (const leak of ['hook-pass', 'hook-user', 'tok-9f2']) assert.ok(!text.includes(leak), leak);
    const [line] = out.lines();
    assert.equal(line?.url, 'http://REDACTED@hooks.example.com/deploy?REDACTED');
    assert.match(String(line.msg), /includes credentials: http:\/\/REDACTED@hooks\.example\.com\/deploy\?REDACTED$/);
  });

  it('escapes control and bidi characters, so a peer cannot forge a line or reorder one', () => {
    const out = capture();
    const logger = createLogger({ stream: out.stream });
    const forged = 'watch failed\n{"level":"info","message":"leader elected"}\u001b[2J\u202eevil';
    logger.error(forged, { error: new Error(forged), name: 'obj\u2066x\u2069' });
    const [line, ...rest] = out.lines();
    assert.equal(rest.length, 0);
    assert.equal(line?.msg, 'watch failed\\n{"level":"info","message":"leader elected"}\\x1b[2J\\u202eevil');
    assert.equal((line.error as { message: string }).message, line.msg);
    assert.equal(line.name, 'obj\\u2066x\\u2069');
    assert.doesNotMatch(out.text(), /\u202e|\u2066|\\u001b/, 'no raw bidi or escape survives, not even JSON-escaped');
  });

  it('caps every string: a 1 MiB error message is logged as 4 KiB with a marker', () => {
    const out = capture();
    const logger = createLogger({ stream: out.stream });
    const huge = 'x'.repeat(1024 * 1024);
    logger.warn('watch error', { error: new Error(huge), detail: huge });
    const [line] = out.lines();
    const message = (line?.error as { message: string }).message;
    assert.ok(message.length <= 4_096, String(message.length));
    assert.match(message, /…\[\+\d+ chars\]$/);
    assert.ok(String(line?.detail).length <= 4_096);
    assert.ok(out.text().length < 16 * 1024, `the line is ${out.text().length} characters`);
  });
});
