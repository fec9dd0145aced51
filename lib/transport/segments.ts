import {
  DNS_LABEL_MAX_LENGTH, DNS_SUBDOMAIN_MAX_LENGTH, InvalidPathSegmentError, isDnsLabel, isDnsSubdomain, isKindName, type GroupVersionKind,
  type PathSegmentField,
} from '../util/index.ts';

function refuse(field: PathSegmentField, value: string, reason: string): never {
  throw new InvalidPathSegmentError({ field, value, reason });
}

/**
 * client-go's `IsValidPathSegmentName`: a value pasted into one segment of an API path must not be
 * `.` or `..` and must not contain `/` or `%`. Also refuses the empty string.
 */
export function checkPathSegment(field: PathSegmentField, value: string): void {
  // Callers in plain JavaScript may pass anything.
  const given: unknown = value;
  if (typeof given !== 'string' || given === '') refuse(field, String(given), 'must be a non-empty string');
  if (value === '.' || value === '..') refuse(field, value, 'may not be "." or ".."');
  if (value.includes('/')) refuse(field, value, 'may not contain "/"');
  if (value.includes('%')) refuse(field, value, 'may not contain "%"');
}

/** `valid` checks the name rule and its length limit, `max`, which the message states. */
function checkNamed(field: PathSegmentField, value: string, valid: (value: string) => boolean, max: number, what: string): void {
  checkPathSegment(field, value);
  if (!valid(value)) refuse(field, value, `must be ${what} of at most ${max} characters`);
}

/**
 * Checks a GVK before it reaches a URL: the group is '' or a DNS subdomain, the version a DNS
 * label, the kind a CamelCase identifier. Throws `InvalidPathSegmentError`.
 */
export function checkGvk(gvk: GroupVersionKind): void {
  const given: unknown = gvk;
  if (typeof given !== 'object' || given === null) throw new TypeError(`a GroupVersionKind must be an object, got ${given === null ? 'null' : typeof given}`);
  const group: unknown = gvk.group;
  if (typeof group !== 'string') refuse('group', String(group), 'must be a string');
  if (gvk.group !== '') checkNamed('group', gvk.group, isDnsSubdomain, DNS_SUBDOMAIN_MAX_LENGTH, 'a lowercase DNS subdomain');
  checkNamed('version', gvk.version, isDnsLabel, DNS_LABEL_MAX_LENGTH, 'a lowercase DNS label');
  checkNamed('kind', gvk.kind, isKindName, DNS_LABEL_MAX_LENGTH, 'letters and digits starting with a letter');
}

/** A resource (plural) name, as discovery gives it: a DNS label. */
export function checkResource(resource: string): void {
  checkNamed('resource', resource, isDnsLabel, DNS_LABEL_MAX_LENGTH, 'a lowercase DNS label');
}

/** A namespace: a DNS label. */
export function checkNamespace(namespace: string): void {
  checkNamed('namespace', namespace, isDnsLabel, DNS_LABEL_MAX_LENGTH, 'a lowercase DNS label');
}

/** An object name: any path segment (names of some kinds hold `:` or capitals), at most 253 characters. */
export function checkName(name: string): void {
  checkPathSegment('name', name);
  if (name.length > DNS_SUBDOMAIN_MAX_LENGTH) refuse('name', name, `must be at most ${DNS_SUBDOMAIN_MAX_LENGTH} characters`);
}

/**
 * The last guard before a request leaves: an absolute path of non-empty segments with no query,
 * fragment, dot segment or encoded slash, whichever code built it.
 */
export function checkRequestPath(path: string): void {
  const given: unknown = path;
  if (typeof given !== 'string' || !given.startsWith('/')) refuse('path', String(given), 'must be an absolute path');
  if (/[?#\s\\]/u.test(path) || /[\p{Cc}\p{Cf}]/u.test(path)) refuse('path', path, 'may not contain "?", "#", "\\", spaces or control characters');
  for (const raw of path.slice(1).split('/')) {
    let segment: string;
    try {
      segment = decodeURIComponent(raw);
    } catch {
      refuse('path', path, 'has a malformed percent-encoding');
    }
    if (segment === '') refuse('path', path, 'may not have an empty segment');
    if (segment === '.' || segment === '..') refuse('path', path, 'may not have a "." or ".." segment');
    if (segment.includes('/')) refuse('path', path, 'may not have an encoded "/" in a segment');
  }
}
