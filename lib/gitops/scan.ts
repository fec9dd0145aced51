// Hand-written splitting of a marked YAML line, in one pass each: the line comes from a tenant's
// repository, and the regular expressions these replace backtracked quadratically (a 64 KiB line
// of spaces and the marker word stalled the event loop for 2 s). Each function looks at every
// character a bounded number of times (at most three), so the work is linear in the line's length.
//
// They give exactly what the expressions gave, which the tests check on random lines:
//   comment: /^(?<before>.*?)(?<gap>\s+)(?<comment>#\s*(?<json>\{.*\}))\s*$/
//   value:   /^(?<head>\s*(?:-\s+)?(?:(?:"(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^\s"'#{}[\],][^#]*?)\s*:\s+)?)(?<value>\S.*?)?\s*$/

/** JavaScript's `\s`. */
function isSpace(c: number): boolean {
  return c === 0x20 || (c >= 0x09 && c <= 0x0d) || c === 0xa0 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a)
    || c === 0x2028 || c === 0x2029 || c === 0x202f || c === 0x205f || c === 0x3000 || c === 0xfeff;
}

/** What JavaScript's `.` does not match. */
function isTerminator(c: number): boolean {
  return c === 0x0a || c === 0x0d || c === 0x2028 || c === 0x2029;
}

/** A line cut around its trailing JSON comment. */
export interface CommentSplit {
  /** Everything before the whitespace that precedes `#`. */
  readonly before: string;
  readonly gap: string;
  /** From `#` to the closing `}`. */
  readonly comment: string;
  /** From `{` to the closing `}`. */
  readonly json: string;
}

/**
 * The first `#` preceded by whitespace whose rest of line is `\s*{…}` up to trailing whitespace;
 * undefined when there is none. Linear: one pass to find the end, one over the candidates (the
 * whitespace after each `#` is looked at once more).
 */
export function splitComment(line: string): CommentSplit | undefined {
  const n = line.length;
  let last = n - 1;
  while (last >= 0 && isSpace(line.charCodeAt(last))) last--;
  if (last < 0 || line.charCodeAt(last) !== 0x7d) return undefined;
  // `.` crosses no line terminator: none may be in `before`, nor inside the braces.
  let firstTerminator = n;
  let lastTerminatorInside = -1;
  for (let i = 0; i < last; i++) {
    if (!isTerminator(line.charCodeAt(i))) continue;
    if (firstTerminator === n) firstTerminator = i;
    lastTerminatorInside = i;
  }
  let gapStart = -1;
  for (let p = 0; p < n; p++) {
    const c = line.charCodeAt(p);
    if (isSpace(c)) {
      if (gapStart < 0) gapStart = p;
      continue;
    }
    if (c === 0x23 && gapStart >= 0) {
      if (gapStart > firstTerminator) return undefined; // every later `before` holds the terminator
      let brace = p + 1;
      while (brace < n && isSpace(line.charCodeAt(brace))) brace++;
      if (brace < last && line.charCodeAt(brace) === 0x7b && lastTerminatorInside <= brace) {
        return { before: line.slice(0, gapStart), gap: line.slice(gapStart, p), comment: line.slice(p, last + 1), json: line.slice(brace, last + 1) };
      }
    }
    gapStart = -1;
  }
  return undefined;
}

/** A line's part before its comment, cut into the key (with indentation and `- `) and the value. */
export interface ValueSplit {
  /** Indentation, a sequence's `- `, and `key: ` when there is a key. */
  readonly head: string;
  /** From the first character after the head to the last non-space one; undefined when empty. */
  readonly value: string | undefined;
}

/** Index after a quoted or plain key at `k` followed by `\s*:` and whitespace; -1 when there is none. */
function keyEnd(text: string, k: number): number {
  const n = text.length;
  const first = text.charCodeAt(k);
  let i: number;
  if (first === 0x22) { // "…" with backslash escapes
    for (i = k + 1; ; i++) {
      if (i >= n) return -1;
      const c = text.charCodeAt(i);
      if (c === 0x22) break;
      if (c === 0x5c) {
        if (i + 1 >= n || isTerminator(text.charCodeAt(i + 1))) return -1;
        i++;
      }
    }
    i++;
    while (i < n && isSpace(text.charCodeAt(i))) i++;
    return text.charCodeAt(i) === 0x3a && i + 1 < n && isSpace(text.charCodeAt(i + 1)) ? i + 1 : -1;
  }
  if (first === 0x27) { // '…' with '' for a quote
    for (i = k + 1; ; i++) {
      if (i >= n) return -1;
      if (text.charCodeAt(i) !== 0x27) continue;
      if (text.charCodeAt(i + 1) !== 0x27) break;
      i++;
    }
    i++;
    while (i < n && isSpace(text.charCodeAt(i))) i++;
    return text.charCodeAt(i) === 0x3a && i + 1 < n && isSpace(text.charCodeAt(i + 1)) ? i + 1 : -1;
  }
  if (k >= n || isSpace(first) || '"\'#{}[],'.includes(text[k] ?? '')) return -1;
  // Plain: the first `: ` after the first character, with no `#` before it.
  for (i = k + 1; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x23) return -1;
    if (c === 0x3a && i + 1 < n && isSpace(text.charCodeAt(i + 1))) return i + 1;
  }
  return -1;
}

/** Cuts the part of a marked line before its comment (no line terminators in it). Linear. */
export function splitValue(text: string): ValueSplit {
  const n = text.length;
  let k = 0;
  while (k < n && isSpace(text.charCodeAt(k))) k++;
  if (text.charCodeAt(k) === 0x2d && k + 1 < n && isSpace(text.charCodeAt(k + 1))) {
    k += 1;
    while (k < n && isSpace(text.charCodeAt(k))) k++;
  }
  let head = k;
  const afterColon = keyEnd(text, k);
  if (afterColon >= 0) {
    head = afterColon;
    while (head < n && isSpace(text.charCodeAt(head))) head++;
  }
  let end = n;
  while (end > head && isSpace(text.charCodeAt(end - 1))) end--;
  return { head: text.slice(0, head), value: end > head ? text.slice(head, end) : undefined };
}
