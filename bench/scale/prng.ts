// A small seeded pseudo-random generator for the scale benchmark's simulated objects: the same
// seed gives the same objects in every run (no Math.random), and seeds made of a cluster's and an
// object's numbers give every object its own content.

/** 32-bit avalanche of `x` (a SplitMix32-style finaliser). */
function mix(x: number): number {
  let z = x >>> 0;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
  return (z ^ (z >>> 16)) >>> 0;
}

/** One seed from several non-negative integers (a cluster, a kind, an object index…). */
export function seedOf(...parts: readonly number[]): number {
  let h = 0x2545f491;
  for (const part of parts) h = mix(h ^ mix(part + 0x9e3779b9));
  return h;
}

const BASE64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const HEX = '0123456789abcdef';

/** Deterministic for a seed; not for cryptography. */
export class Prng {
  #state: number;

  constructor(seed: number) {
    this.#state = seed >>> 0;
  }

  /** The next unsigned 32-bit integer (a Weyl sequence, avalanched). */
  next(): number {
    this.#state = (this.#state + 0x9e3779b9) >>> 0;
    return mix(this.#state);
  }

  /** An integer in [min, max] (the modulo bias is irrelevant here). */
  int(min: number, max: number): number {
    return min + (this.next() % (max - min + 1));
  }

  /** True with probability `p`. */
  chance(p: number): boolean {
    return this.next() / 0x1_0000_0000 < p;
  }

  pick<T>(items: readonly T[]): T {
    const item = items[this.next() % items.length];
    if (item === undefined) throw new RangeError('pick from an empty list');
    return item;
  }

  /** `n` random bytes. */
  bytes(n: number): Buffer {
    const out = Buffer.allocUnsafe(n);
    for (let i = 0; i < n; i += 4) {
      const word = this.next();
      for (let j = 0; j < 4 && i + j < n; j++) out[i + j] = (word >>> (j * 8)) & 0xff;
    }
    return out;
  }

  /** `n` lowercase hexadecimal digits. */
  hex(n: number): string {
    let s = '';
    for (let i = 0; i < n; i++) s += HEX[this.next() & 15] ?? '0';
    return s;
  }

  /** `n` characters of the base64 alphabet (a token's text). */
  base64Chars(n: number): string {
    let s = '';
    for (let i = 0; i < n; i++) s += BASE64[this.next() & 63] ?? 'A';
    return s;
  }
}
