// A self-signed serving certificate for the metrics server, made at start when no certificate is
// given (controller-runtime's metrics server does the same). Node can make keys and sign, but has
// no X.509 writer: the few DER structures a certificate needs are written here.
import { generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { isIPv4, isIPv6 } from 'node:net';
import path from 'node:path';
import { realClock, toError, type Clock, type Logger, type Timer } from '../util/index.ts';

/** PEM certificate and private key. */
export interface ServingCertificate {
  readonly cert: string;
  readonly key: string;
}

function length(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let left = n; left > 0; left = Math.floor(left / 256)) bytes.unshift(left % 256);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

function tlv(tag: number, ...content: readonly Buffer[]): Buffer {
  const body = Buffer.concat(content);
  return Buffer.concat([Buffer.from([tag]), length(body.length), body]);
}

const sequence = (...items: readonly Buffer[]): Buffer => tlv(0x30, ...items);
const set = (...items: readonly Buffer[]): Buffer => tlv(0x31, ...items);
const explicit = (n: number, content: Buffer): Buffer => tlv(0xa0 + n, content);
const octets = (content: Buffer): Buffer => tlv(0x04, content);
const bits = (content: Buffer, unused = 0): Buffer => tlv(0x03, Buffer.from([unused]), content);
const utf8 = (text: string): Buffer => tlv(0x0c, Buffer.from(text, 'utf8'));
const TRUE = tlv(0x01, Buffer.from([0xff]));

function integer(value: Buffer): Buffer {
  let bytes = value;
  while (bytes.length > 1 && bytes[0] === 0 && ((bytes[1] ?? 0) & 0x80) === 0) bytes = bytes.subarray(1);
  return tlv(0x02, ((bytes[0] ?? 0) & 0x80) === 0 ? bytes : Buffer.concat([Buffer.from([0]), bytes]));
}

function oid(dotted: string): Buffer {
  const [first = 0, second = 0, ...rest] = dotted.split('.').map(Number);
  const out = [first * 40 + second];
  for (const arc of rest) {
    const base128: number[] = [];
    for (let left = arc; ; left = Math.floor(left / 128)) {
      base128.unshift((left % 128) | (base128.length === 0 ? 0 : 0x80));
      if (left < 128) break;
    }
    out.push(...base128);
  }
  return tlv(0x06, Buffer.from(out));
}

/** UTCTime until 2049, GeneralizedTime after, as RFC 5280 asks. */
function time(date: Date): Buffer {
  const iso = date.toISOString().replace(/[-:T]/g, '').replace(/\.\d{3}Z$/, 'Z');
  return date.getUTCFullYear() < 2050 ? tlv(0x17, Buffer.from(iso.slice(2), 'ascii')) : tlv(0x18, Buffer.from(iso, 'ascii'));
}

function ipBytes(address: string): Buffer {
  if (isIPv4(address)) return Buffer.from(address.split('.').map(Number));
  const [head = '', tail] = address.split('::');
  const groups = (part: string): number[] => (part === '' ? [] : part.split(':').map((g) => Number.parseInt(g, 16)));
  const left = groups(head);
  const right = tail === undefined ? [] : groups(tail);
  const all = [...left, ...Array<number>(8 - left.length - right.length).fill(0), ...right];
  return Buffer.from(all.flatMap((g) => [g >> 8, g & 0xff]));
}

const ECDSA_WITH_SHA256 = sequence(oid('1.2.840.10045.4.3.2'));

/**
 * A new P-256 key and a self-signed certificate for it, valid from an hour ago for `validDays`,
 * naming `hosts` (DNS names and IP addresses) as subject alternative names, for server
 * authentication. It is its own issuer, so a client trusts it by trusting exactly it.
 */
export function selfSignedCertificate(options: { readonly commonName: string; readonly hosts: readonly string[]; readonly validDays?: number; readonly now?: Date }): ServingCertificate {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const now = options.now ?? new Date();
  const notBefore = new Date(now.getTime() - 3_600_000);
  const notAfter = new Date(now.getTime() + (options.validDays ?? 365) * 86_400_000);
  const name = sequence(set(sequence(oid('2.5.4.3'), utf8(options.commonName))));
  const altNames = [...new Set(options.hosts)].map((host) => {
    const bare = host.replace(/^\[(.*)\]$/, '$1');
    return isIPv4(bare) || isIPv6(bare) ? tlv(0x87, ipBytes(bare)) : tlv(0x82, Buffer.from(host, 'ascii'));
  });
  const extension = (id: string, critical: boolean, value: Buffer): Buffer => sequence(oid(id), ...(critical ? [TRUE] : []), octets(value));
  const extensions = sequence(
    extension('2.5.29.17', false, sequence(...altNames)),
    extension('2.5.29.19', true, sequence(TRUE)), // CA: it signs itself, and a client trusts it as its own root
    extension('2.5.29.15', true, bits(Buffer.from([0x84]), 2)), // digitalSignature, keyCertSign
    extension('2.5.29.37', false, sequence(oid('1.3.6.1.5.5.7.3.1'))), // serverAuth
  );
  const tbs = sequence(
    explicit(0, integer(Buffer.from([2]))), // v3
    integer(Buffer.concat([Buffer.from([0x01]), randomBytes(15)])),
    ECDSA_WITH_SHA256,
    name,
    sequence(time(notBefore), time(notAfter)),
    name,
    publicKey.export({ type: 'spki', format: 'der' }),
    explicit(3, extensions),
  );
  const signature = sign('sha256', tbs, privateKey);
  const der = sequence(tbs, ECDSA_WITH_SHA256, bits(signature));
  const pem = (label: string, data: Buffer): string => `-----BEGIN ${label}-----\n${(data.toString('base64').match(/.{1,64}/g) ?? []).join('\n')}\n-----END ${label}-----\n`;
  return { cert: pem('CERTIFICATE', der), key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() };
}

/** Where a certificate and its key are read from (`--metrics-cert-path` and the names in it). */
export interface CertificateFiles {
  readonly dir: string;
  readonly certName: string;
  readonly keyName: string;
}

/** Reads the certificate and key of `files`. */
export async function readCertificate(files: CertificateFiles): Promise<ServingCertificate> {
  const [cert, key] = await Promise.all([
    readFile(path.join(files.dir, files.certName), 'utf8'),
    readFile(path.join(files.dir, files.keyName), 'utf8'),
  ]);
  return { cert, key };
}

/**
 * Re-reads `files` every `intervalMs` (default 10 000) and calls `onChange` with the pair when it
 * changed, as controller-runtime's certwatcher does for a rotated certificate (cert-manager, a
 * mounted Secret). A pair that cannot be read or used is logged and the current one kept. Returns
 * the stop function.
 */
export function watchCertificate(options: {
  readonly files: CertificateFiles;
  readonly current: ServingCertificate;
  readonly onChange: (tls: ServingCertificate) => void;
  readonly logger: Logger;
  readonly clock?: Clock;
  readonly intervalMs?: number;
}): () => void {
  const clock = options.clock ?? realClock;
  const interval = options.intervalMs ?? 10_000;
  let current = options.current;
  let timer: Timer | undefined;
  let stopped = false;
  const poll = async (): Promise<void> => {
    try {
      const next = await readCertificate(options.files);
      if (stopped || (next.cert === current.cert && next.key === current.key)) return;
      options.onChange(next);
      current = next;
      options.logger.info('metrics: loaded the rotated certificate', { path: options.files.dir });
    } catch (err) {
      // Mid-rotation the two files may disagree for a moment: keep serving the current pair.
      options.logger.warn('metrics: could not load the certificate; keeping the current one', { path: options.files.dir, error: toError(err) });
    }
  };
  const schedule = (): void => {
    if (stopped) return;
    timer = clock.setTimer(interval, () => { void poll().finally(schedule); });
  };
  schedule();
  return () => {
    stopped = true;
    timer?.cancel();
  };
}
