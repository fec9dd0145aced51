import assert from 'node:assert/strict';
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { createServer, request } from 'node:https';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { FakeClock } from '../util/index.ts';
import { selfSignedCertificate, watchCertificate, type ServingCertificate } from './certificate.ts';
import { HttpServer } from './server.ts';
import { eventually, EVERY_TURN, RecordingLogger } from '../../fixtures/support/index.ts';

describe('selfSignedCertificate', () => {
  const { cert, key } = selfSignedCertificate({ commonName: 'fleetcache-metrics', hosts: ['localhost', 'fleetcache.example', '127.0.0.1', '::1'], now: new Date('2026-01-01T00:00:00Z'), validDays: 30 });

  it('is a parseable X.509 v3 certificate, signed by its own key, naming every host', () => {
    const x509 = new X509Certificate(cert);
    assert.equal(x509.subject, 'CN=fleetcache-metrics');
    assert.equal(x509.issuer, 'CN=fleetcache-metrics');
    assert.ok(x509.verify(x509.publicKey), 'self-signed');
    assert.ok(x509.checkPrivateKey(createPrivateKey(key)));
    assert.equal(x509.subjectAltName, 'DNS:localhost, DNS:fleetcache.example, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1');
    assert.equal(new Date(x509.validFrom).toISOString(), '2025-12-31T23:00:00.000Z');
    assert.equal(new Date(x509.validTo).toISOString(), '2026-01-31T00:00:00.000Z');
    assert.deepEqual(x509.keyUsage, ['1.3.6.1.5.5.7.3.1']);
  });

  it('serves TLS that a client trusting exactly this certificate accepts, by IP and by name', async () => {
    const fresh = selfSignedCertificate({ commonName: 'fleetcache-metrics', hosts: ['localhost', '127.0.0.1'] });
    const server = createServer({ cert: fresh.cert, key: fresh.key }, (_req, res) => { res.end('ok'); });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      for (const host of ['127.0.0.1', 'localhost']) {
        const body = await new Promise<string>((resolve, reject) => {
          request({ host, port, ca: fresh.cert }, (res) => {
            let text = '';
            res.on('data', (c: Buffer) => { text += c.toString(); });
            res.on('end', () => { resolve(text); });
          }).on('error', reject).end();
        });
        assert.equal(body, 'ok', host);
      }
      // A different certificate is not trusted.
      const other = selfSignedCertificate({ commonName: 'other', hosts: ['127.0.0.1'] });
      await assert.rejects(new Promise((resolve, reject) => {
        request({ host: '127.0.0.1', port, ca: other.cert }, resolve).on('error', reject).end();
      }));
    } finally {
      server.close();
    }
  });
});

/** Status of a GET over HTTPS trusting exactly `ca`, or the error's code. */
function tryGet(url: string, ca: string): Promise<number | string> {
  return new Promise((resolve) => {
    request(url, { ca, agent: false }, (res) => { res.resume(); resolve(res.statusCode ?? 0); })
      .on('error', (err: NodeJS.ErrnoException) => { resolve(err.code ?? err.message); })
      .end();
  });
}

describe('certificate rotation in --metrics-cert-path', () => {
  it('serves a rotated pair to new connections, and keeps the current one when the files disagree', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'fleetcache-certs-'));
    const files = { dir, certName: 'tls.crt', keyName: 'tls.key' };
    const write = (tls: ServingCertificate): void => {
      writeFileSync(path.join(dir, 'tls.crt'), tls.cert);
      writeFileSync(path.join(dir, 'tls.key'), tls.key);
    };
    const first = selfSignedCertificate({ commonName: 'first', hosts: ['127.0.0.1'] });
    const second = selfSignedCertificate({ commonName: 'second', hosts: ['127.0.0.1'] });
    write(first);
    const server = await HttpServer.start({ name: 'metrics', address: { host: '127.0.0.1', port: 0 }, routes: { '/metrics': () => ({ status: 200, contentType: 'text/plain', body: '' }) }, tls: first });
    const clock = new FakeClock();
    const logger = new RecordingLogger();
    let loaded = 0;
    const stop = watchCertificate({ files, current: first, clock, logger, onChange: (tls) => { server.setCertificate(tls); loaded += 1; } });
    try {
      assert.equal(await tryGet(`${server.url}/metrics`, first.cert), 200);
      clock.advance(10_000);
      // The poll reads the files, then schedules the next one: once it has, it has decided.
      await eventually('the poll read the unchanged files', () => clock.pendingTimers === 1, EVERY_TURN);
      assert.equal(loaded, 0, 'unchanged files are not reloaded');

      write(second);
      // Each poll schedules the next once its reads finish: keep moving time until one sees the change.
      await eventually('the rotated pair is loaded', () => {
        clock.advance(10_000);
        return loaded === 1;
      });
      assert.equal(await tryGet(`${server.url}/metrics`, second.cert), 200);
      assert.notEqual(await tryGet(`${server.url}/metrics`, first.cert), 200, 'the old certificate is no longer served');

      // Mid-rotation: a new certificate next to the old key does not load; the current pair stays.
      writeFileSync(path.join(dir, 'tls.crt'), first.cert);
      await eventually('the mismatch is reported', () => {
        clock.advance(10_000);
        return logger.messages('warn').length > 0;
      });
      assert.equal(loaded, 1);
      assert.equal(await tryGet(`${server.url}/metrics`, second.cert), 200);
    } finally {
      stop();
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    }
    assert.equal(clock.pendingTimers, 0, 'stop() cancels the next poll');
  });
});
