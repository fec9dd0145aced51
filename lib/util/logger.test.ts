// The library's Logger over real pino and winston loggers: every field of a line and of its
// parents' child() arrives, and nothing a field is called overwrites the line's own keys.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import pino from 'pino';
import winston from 'winston';
import { fromPino, fromWinston, type Logger } from './logger.ts';

/** A stream that keeps each written JSON line, parsed. */
function lines(): { readonly stream: Writable; readonly parsed: Record<string, unknown>[] } {
  const parsed: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line !== '') parsed.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { stream, parsed };
}

/** What the library does with a Logger: children per cluster and reconcile, fields on the line. */
function logThroughLibrary(logger: Logger): void {
  logger.child({ cluster: 'secret:apps/prod' }).child({ controller: 'pipeline', reconcileID: 'r-1' }).info('synced', { objects: 3, gvk: { group: 'apps', version: 'v1', kind: 'Deployment' } });
  logger.warn('clash', { level: 'x', msg: 'y', time: 'z', message: 'w' });
  logger.debug('below the level');
}

describe('fromPino', () => {
  it('delivers every field of a real pino logger, children included', () => {
    const out = lines();
    const base = pino({ level: 'info' }, out.stream);
    logThroughLibrary(fromPino(base));
    assert.equal(out.parsed.length, 2, out.parsed.map((l) => JSON.stringify(l)).join('\n'));
    const [synced, clash] = out.parsed;
    assert.equal(synced?.msg, 'synced');
    assert.equal(synced.level, 30);
    assert.equal(synced.cluster, 'secret:apps/prod');
    assert.equal(synced.controller, 'pipeline');
    assert.equal(synced.reconcileID, 'r-1');
    assert.equal(synced.objects, 3);
    assert.deepEqual(synced.gvk, { group: 'apps', version: 'v1', kind: 'Deployment' });
    assert.equal(clash?.msg, 'clash');
    assert.equal(clash.level, 40, 'a field named level does not change the line\'s level');
    assert.equal(typeof clash.time, 'number');
    assert.deepEqual([clash.field_level, clash.field_msg, clash.field_time, clash.message], ['x', 'y', 'z', 'w']);
  });

  it('is needed: a raw pino logger is refused where a Logger is expected (it would drop the fields)', () => {
    const out = lines();
    const raw = pino({ level: 'info' }, out.stream);
    // @ts-expect-error -- pino's info(message, fields) treats fields as format arguments and drops them.
    const unwrapped: Logger = raw;
    unwrapped.info('synced', { objects: 3 });
    assert.equal(out.parsed[0]?.msg, 'synced');
    assert.equal(out.parsed[0].objects, undefined, 'what fromPino exists to prevent');
  });
});

describe('fromWinston', () => {
  it('delivers every field of a real winston logger, children included, and keeps the message whole', () => {
    const out = lines();
    const base = winston.createLogger({ level: 'info', format: winston.format.json(), transports: [new winston.transports.Stream({ stream: out.stream })] });
    logThroughLibrary(fromWinston(base));
    assert.equal(out.parsed.length, 2);
    const [synced, clash] = out.parsed;
    assert.equal(synced?.message, 'synced');
    assert.equal(synced.cluster, 'secret:apps/prod');
    assert.equal(synced.controller, 'pipeline');
    assert.equal(synced.reconcileID, 'r-1');
    assert.equal(synced.objects, 3);
    assert.equal(clash?.message, 'clash', 'winston would append a message field to the message');
    assert.equal(clash.level, 'warn');
    assert.deepEqual([clash.field_level, clash.field_message, clash.msg, clash.time], ['x', 'w', 'y', 'z']);
  });
});
