import { isIPv4, isIPv6 } from 'node:net';

// Which IP addresses a tenant-named endpoint (a webhook, a Git repository) may be reached at.
// Decided on the address a socket is about to connect to (every DNS answer, and IP literals as the
// URL parser normalised them), never on the host name, so that neither rebinding nor an odd
// notation of 127.0.0.1 gets in.

/**
 * Why an address is not one a webhook may reach:
 * - `loopback`: 127.0.0.0/8, ::1;
 * - `private`: RFC 1918, CGNAT 100.64.0.0/10, IPv6 ULA fc00::/7, site-local fec0::/10, local-use NAT64 64:ff9b:1::/48;
 * - `link-local`: 169.254.0.0/16 (cloud metadata services live there), fe80::/10;
 * - `unspecified`: 0.0.0.0/8, :: (Linux connects them to the local host);
 * - `multicast`: 224.0.0.0/4, ff00::/8;
 * - `reserved`: not globally reachable by the IANA special-purpose registries (240.0.0.0/4 and
 *   broadcast, 192.0.0.0/24, documentation and benchmarking ranges, discard, Teredo, the rest of ::/96).
 * IPv4-mapped (::ffff:0:0/96), NAT64 (64:ff9b::/96) and 6to4 (2002::/16) addresses are judged by
 * the IPv4 address they carry.
 */
export type AddressCategory = 'loopback' | 'private' | 'link-local' | 'unspecified' | 'multicast' | 'reserved';

/** Categories `allowPrivateNetworks` lets through; the others are never a webhook's address. */
export const PRIVATE_CATEGORIES: ReadonlySet<AddressCategory> = new Set(['loopback', 'private']);

/** [first address, prefix length, category] for IPv4. */
const ipv4Ranges: readonly (readonly [string, number, AddressCategory])[] = [
  ['0.0.0.0', 8, 'unspecified'],
  ['10.0.0.0', 8, 'private'],
  ['100.64.0.0', 10, 'private'],
  ['127.0.0.0', 8, 'loopback'],
  ['169.254.0.0', 16, 'link-local'],
  ['172.16.0.0', 12, 'private'],
  ['192.0.0.0', 24, 'reserved'],
  ['192.0.2.0', 24, 'reserved'],
  ['192.88.99.0', 24, 'reserved'],
  ['192.168.0.0', 16, 'private'],
  ['198.18.0.0', 15, 'reserved'],
  ['198.51.100.0', 24, 'reserved'],
  ['203.0.113.0', 24, 'reserved'],
  ['224.0.0.0', 4, 'multicast'],
  ['240.0.0.0', 4, 'reserved'],
];

function ipv4ToNumber(address: string): number {
  return address.split('.').reduce((n, octet) => n * 256 + Number(octet), 0);
}

const ipv4Table = ipv4Ranges.map(([first, bits, category]) => ({ first: ipv4ToNumber(first), size: 2 ** (32 - bits), category }));

function classifyIpv4(n: number): AddressCategory | undefined {
  return ipv4Table.find((r) => n >= r.first && n < r.first + r.size)?.category;
}

/** The eight 16-bit groups of a valid IPv6 address (`::` expanded, a dotted IPv4 tail converted). */
function ipv6Groups(address: string): number[] {
  let text = address;
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted?.[1] !== undefined) {
    const n = ipv4ToNumber(dotted[1]);
    text = `${text.slice(0, dotted.index)}${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const parse = (part: string): number[] => (part === '' ? [] : part.split(':').map((g) => Number.parseInt(g, 16)));
  const left = parse(head);
  const right = tail === undefined ? [] : parse(tail);
  return [...left, ...Array<number>(8 - left.length - right.length).fill(0), ...right];
}

function classifyIpv6(groups: readonly number[]): AddressCategory | undefined {
  const g = (i: number): number => groups[i] ?? 0;
  const embedded = (hi: number, lo: number): number => hi * 0x10000 + lo;
  const zeroUpTo = (n: number): boolean => groups.slice(0, n).every((x) => x === 0);
  if (zeroUpTo(8)) return 'unspecified';
  if (zeroUpTo(7) && g(7) === 1) return 'loopback';
  if (zeroUpTo(5) && g(5) === 0xffff) return classifyIpv4(embedded(g(6), g(7))); // ::ffff:a.b.c.d
  if (zeroUpTo(6)) return 'reserved'; // IPv4-compatible, deprecated
  if (g(0) === 0x64 && g(1) === 0xff9b && groups.slice(2, 6).every((x) => x === 0)) return classifyIpv4(embedded(g(6), g(7))); // NAT64
  if (g(0) === 0x64 && g(1) === 0xff9b && g(2) === 1) return 'private'; // local-use NAT64
  if (g(0) === 0x2002) return classifyIpv4(embedded(g(1), g(2))); // 6to4
  if (g(0) === 0x100 && g(1) === 0 && g(2) === 0 && g(3) === 0) return 'reserved'; // discard
  if (g(0) === 0x2001 && g(1) < 0x200) return 'reserved'; // IETF protocol assignments, Teredo
  if (g(0) === 0x2001 && g(1) === 0xdb8) return 'reserved'; // documentation
  if ((g(0) & 0xfe00) === 0xfc00) return 'private'; // ULA
  if ((g(0) & 0xffc0) === 0xfe80) return 'link-local';
  if ((g(0) & 0xffc0) === 0xfec0) return 'private'; // site-local, deprecated
  if ((g(0) & 0xff00) === 0xff00) return 'multicast';
  return undefined;
}

/**
 * The category of an IP address that a webhook must not reach by default, or undefined for a
 * globally reachable one. `address` is an IP as a resolver or a socket reports it (an IPv6 zone
 * is ignored); anything else throws a TypeError.
 */
export function classifyAddress(address: string): AddressCategory | undefined {
  const bare = address.replace(/%.*$/, '');
  if (isIPv4(bare)) return classifyIpv4(ipv4ToNumber(bare));
  if (isIPv6(bare)) return classifyIpv6(ipv6Groups(bare));
  throw new TypeError(`not an IP address: ${JSON.stringify(address.slice(0, 64))}`);
}
