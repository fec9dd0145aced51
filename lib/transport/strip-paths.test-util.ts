// What the pre-pass's entry points make of a watch line and a LIST page, as one text, for the
// tests comparing its paths (strip-paths.test.ts), in this process and in one without WebAssembly.
import { parseEventDroppingManagedFields, parseListDroppingManagedFields, scanEventLazily } from './strip.ts';

/** What every entry point makes of a line (or a LIST of lines' objects): values and errors, as text. */
export function outcome(line: Buffer, list: Buffer): string {
  const attempt = (f: () => unknown): string => {
    try {
      const value = f();
      return value === undefined ? 'undefined' : JSON.stringify(value);
    } catch (err) {
      return `threw ${String(err)}`;
    }
  };
  // Inside a bigger buffer, as a watch chunk holds it.
  const padded = Buffer.concat([Buffer.from('xx\n'), line, Buffer.from('\nyy')]);
  return [
    attempt(() => parseEventDroppingManagedFields(padded, 3, 3 + line.length)),
    attempt(() => scanEventLazily(padded, 3, 3 + line.length)),
    attempt(() => parseListDroppingManagedFields(list)),
  ].join('\n');
}

