// JSON pointers (RFC 6901) as the Pipeline API uses them: where a revision is read from, and where
// the patch strategy writes it. The root pointer '' is never meaningful here, so it is refused.

/** A non-root JSON pointer: `/a/b~1c` (`~1` is `/`, `~0` is `~`). The CRD schema uses the same pattern. */
export const JSON_POINTER_PATTERN = '^(/([^/~]|~[01])*)+$';
const pointerRe = new RegExp(JSON_POINTER_PATTERN);

export function isJsonPointer(value: unknown): value is string {
  return typeof value === 'string' && pointerRe.test(value);
}

/** The unescaped reference tokens of a pointer. Throws a TypeError for anything else. */
export function parsePointer(pointer: string): string[] {
  if (!isJsonPointer(pointer)) throw new TypeError(`not a JSON pointer: ${JSON.stringify(pointer)}`);
  // Unescape ~1 before ~0, as RFC 6901 requires ("~01" is "~1", not "/").
  return pointer.slice(1).split('/').map((token) => token.replaceAll('~1', '/').replaceAll('~0', '~'));
}

function escapeToken(token: string): string {
  return token.replaceAll('~', '~0').replaceAll('/', '~1');
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Array index token: `0` or no leading zero. */
const indexRe = /^(0|[1-9][0-9]*)$/;

/** The value at `pointer` in `doc`, or undefined when any step is missing. */
export function getAtPointer(doc: unknown, pointer: string): unknown {
  let current = doc;
  for (const token of parsePointer(pointer)) {
    if (Array.isArray(current)) {
      if (!indexRe.test(token)) return undefined;
      current = current[Number(token)];
    } else if (isRecord(current) && Object.hasOwn(current, token)) {
      current = current[token];
    } else {
      return undefined;
    }
  }
  return current;
}

/** A JSON Patch (RFC 6902) operation, of the kinds the patch strategy sends. */
export type JsonPatchOp =
  | { readonly op: 'test'; readonly path: string; readonly value: unknown }
  | { readonly op: 'add' | 'replace'; readonly path: string; readonly value: unknown };

/**
 * The one operation that sets `value` at `pointer` in `doc`: `replace` when the member exists,
 * otherwise `add` at the first missing object member, carrying the nested objects below it (a
 * plain `add` fails when a parent is missing). Throws a TypeError when a step runs through
 * something that is not an object (a string, a number, or an array, whose shape we do not guess).
 */
export function setAtPointerOp(doc: unknown, pointer: string, value: unknown): JsonPatchOp {
  const tokens = parsePointer(pointer);
  let current: unknown = doc;
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i] ?? '';
    if (!isRecord(current)) {
      const at = `/${tokens.slice(0, i).map(escapeToken).join('/')}`;
      throw new TypeError(`cannot set ${pointer}: ${at} is not an object`);
    }
    if (!Object.hasOwn(current, token)) {
      let nested: unknown = value;
      for (let j = tokens.length - 1; j > i; j--) nested = { [tokens[j] ?? '']: nested };
      return { op: 'add', path: `/${tokens.slice(0, i + 1).map(escapeToken).join('/')}`, value: nested };
    }
    current = current[token];
  }
  return { op: 'replace', path: pointer, value };
}
