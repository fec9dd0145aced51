// Assembles lib/transport/skip.wat into lib/transport/skip-wasm.ts (the module's bytes, base64), so
// the library needs no build step and no assembler at run time. Run through `make wasm`; a test
// (lib/transport/skip.test.ts) fails when the committed bytes are not the .wat file's.
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import wabt from 'wabt';

const SOURCE = fileURLToPath(new URL('../lib/transport/skip.wat', import.meta.url));
const TARGET = fileURLToPath(new URL('../lib/transport/skip-wasm.ts', import.meta.url));

/** The module's bytes, assembled from the .wat source. */
export async function assemble(): Promise<Uint8Array> {
  const assembler = await wabt();
  const module = assembler.parseWat('skip.wat', readFileSync(SOURCE, 'utf8'), { simd: true });
  try {
    module.validate();
    return module.toBinary({}).buffer;
  } finally {
    module.destroy();
  }
}

/** The text of skip-wasm.ts for these bytes. */
export function render(bytes: Uint8Array): string {
  return `// Generated from skip.wat by \`make wasm\` (tools/wasm.ts): do not edit.\nexport const SKIP_WASM = '${Buffer.from(bytes).toString('base64')}';\n`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(TARGET, render(await assemble()));
  process.stdout.write(`wrote ${TARGET}\n`);
}
