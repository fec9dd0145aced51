import assert from 'node:assert/strict';
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { createServer, request } from 'node:https';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { selfSignedCertificate } from './certificate.ts';

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
