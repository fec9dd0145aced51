// What the scale benchmark's simulated objects look like (`--shape`, issue 27). `filler`: a run of
// one letter (the figures in docs/measured.md before issue 27's compressed objects; compresses to
// nothing). `realistic`: kinds shaped as a real cluster holds them (realistic.ts). `random`: the
// filler replaced by base64 of seeded random bytes of the same length, the incompressible worst case.
import { Prng, seedOf } from './prng.ts';
import { realisticObject, type ShapedObject } from './realistic.ts';

export const SHAPES = ['filler', 'realistic', 'random'] as const;
export type Shape = (typeof SHAPES)[number];

export function isShape(value: string): value is Shape {
  return (SHAPES as readonly string[]).includes(value);
}

const filler = 'x'.repeat(1_700);
/** The length-`length` text that stands in for content: the filler, or base64 of random bytes. */
function blob(shape: 'filler' | 'random', length: number, seed: number): string {
  if (shape === 'filler') return filler.slice(0, length);
  return new Prng(seed).bytes(Math.ceil((length * 3) / 4)).toString('base64').slice(0, length);
}

/** Object `index` of `kind` in cluster `cluster` (0-based), named `obj-<index>` in namespace `apps`, labelled `app: app-<index mod 10>`. */
export function shapedObject(shape: Shape, kind: string, apiVersion: string, cluster: number, index: number): ShapedObject {
  if (shape === 'realistic') return realisticObject(kind, apiVersion, cluster, index);
  const seed = seedOf(cluster, ...Buffer.from(kind), index);
  // The Secret's datum is base64 of 1,250 bytes (1,668 characters), as it was before shapes.
  const body = kind === 'Secret' ? { data: { blob: shape === 'filler' ? Buffer.from(filler.slice(0, 1_250)).toString('base64') : blob(shape, 1_668, seed) } }
    : kind === 'ConfigMap' ? { data: { blob: blob(shape, 1_700, seed) } }
      : { spec: { interval: '5m', blob: blob(shape, 1_700, seed) } };
  return { object: { apiVersion, kind, metadata: { name: `obj-${index}`, namespace: 'apps', labels: { app: `app-${index % 10}` } }, ...body } };
}
