// What fleetcache prints from outside (a peer's error message, an object's name or revision, a
// webhook's URL) goes through here before it reaches a status, an Event or a log line: bounded,
// with control and bidi characters escaped, and URLs stripped of what may be a credential.

/** Default cap of {@link sanitizeForDisplay}, in UTF-16 code units. */
export const DEFAULT_DISPLAY_LENGTH = 1_024;

/**
 * True for characters that change how text reads rather than what it says: C0 and C1 controls (a
 * newline forges a log line, an escape sequence repaints a terminal), the bidi embeddings,
 * overrides, isolates and implicit marks (Trojan Source, CVE-2021-42574), line and paragraph
 * separators and the byte-order mark.
 */
function isUnsafe(code: number): boolean {
  return code <= 0x1f || (code >= 0x7f && code <= 0x9f) || code === 0x61c || code === 0x200e || code === 0x200f
    || code === 0x2028 || code === 0x2029 || (code >= 0x202a && code <= 0x202e) || (code >= 0x2066 && code <= 0x2069) || code === 0xfeff;
}

function escapeCode(code: number): string {
  switch (code) {
    case 0x0a: return '\\n';
    case 0x0d: return '\\r';
    case 0x09: return '\\t';
    default: return code < 0x100 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
  }
}

/**
 * `text` made safe to show: every control, bidi and separator character (and every lone
 * surrogate) replaced by a visible escape (`\n`, `\x1b`, `\u202e`), then cut to `maxLength` code
 * units, never inside a surrogate pair or an escape, with a marker saying how many characters were
 * dropped (`…[+123 chars]`). The result never exceeds `maxLength`; the work is bounded by it too,
 * so a 1 GiB string costs what a short one does.
 *
 * @param maxLength an integer of at least 32. Default {@link DEFAULT_DISPLAY_LENGTH}.
 */
export function sanitizeForDisplay(text: string, maxLength: number = DEFAULT_DISPLAY_LENGTH): string {
  if (!Number.isInteger(maxLength) || maxLength < 32) throw new TypeError(`sanitizeForDisplay: maxLength must be an integer of at least 32, got ${maxLength}`);
  const pieces: string[] = [];
  const steps: number[] = [];
  let width = 0;
  let i = 0;
  while (i < text.length) {
    const code = text.charCodeAt(i);
    let piece: string;
    let step = 1;
    if (code >= 0xd800 && code <= 0xdbff && i + 1 < text.length && text.charCodeAt(i + 1) >= 0xdc00 && text.charCodeAt(i + 1) <= 0xdfff) {
      piece = text.slice(i, i + 2);
      step = 2;
    } else if (isUnsafe(code) || (code >= 0xd800 && code <= 0xdfff)) {
      piece = escapeCode(code);
    } else {
      piece = text.charAt(i);
    }
    if (width + piece.length > maxLength) break;
    pieces.push(piece);
    steps.push(step);
    width += piece.length;
    i += step;
  }
  if (i >= text.length) return pieces.join('');
  // It does not fit: give back whole pieces until the marker fits too.
  const budget = maxLength - `…[+${text.length} chars]`.length;
  while (width > budget) {
    width -= pieces.pop()?.length ?? 0;
    i -= steps.pop() ?? 0;
  }
  return `${pieces.join('')}…[+${text.length - i} chars]`;
}

const REDACTED = 'REDACTED';

/**
 * A URL as it may be printed: user information, query and fragment replaced by `REDACTED`
 * (`https://user:pw@host/p?token=x#y` → `https://REDACTED@host/p?REDACTED#REDACTED`); scheme,
 * host, port and path kept. Text that is not an absolute URL becomes `<invalid URL>`, since it may
 * be a credential pasted in the wrong place. The one function every URL is printed through.
 */
export function redactUrl(raw: string | URL): string {
  let url: URL;
  try {
    url = typeof raw === 'string' ? new URL(raw) : new URL(raw.href);
  } catch {
    return '<invalid URL>';
  }
  if (url.host === '') return `${url.protocol}<redacted>`; // mailto:, data:, file:///…: nothing worth showing
  const userinfo = url.username !== '' || url.password !== '' ? `${REDACTED}@` : '';
  const query = url.search !== '' || /^[^#]*\?/.test(url.href) ? `?${REDACTED}` : '';
  const fragment = url.hash !== '' ? `#${REDACTED}` : '';
  return `${url.protocol}//${userinfo}${url.host}${url.pathname}${query}${fragment}`;
}

/** Absolute http(s)/ws(s) URLs inside free text, up to the first character no URL holds unescaped. */
const urlInText = /\b(?:https?|wss?):\/\/[^\s"'<>`\\]+/gi;

/**
 * `text` with every http(s) URL in it that carries user information, a query or a fragment passed
 * through {@link redactUrl}; other URLs are left exactly as written.
 */
export function redactUrlsInText(text: string): string {
  return text.replace(urlInText, (match) => (/[@?#]/.test(match) ? redactUrl(match) : match));
}
