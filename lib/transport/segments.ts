import { InvalidPathSegmentError, type GroupVersionKind, type PathSegmentField } from '../util/index.ts';

/** A DNS-1123 label: what versions, namespaces and resource names are. */
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
/** A DNS-1123 subdomain: what API groups are. */
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
/** Kinds are CamelCase identifiers. */
const KIND = /^[A-Za-z][A-Za-z0-9]*$/;

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

function checkPattern(field: PathSegmentField, value: string, pattern: RegExp, max: number, what: string): void {
  checkPathSegment(field, value);
  if (value.length > max || !pattern.test(value)) refuse(field, value, `must be ${what} of at most ${max} characters`);
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
  if (gvk.group !== '') checkPattern('group', gvk.group, DNS_SUBDOMAIN, 253, 'a lowercase DNS subdomain');
  checkPattern('version', gvk.version, DNS_LABEL, 63, 'a lowercase DNS label');
  checkPattern('kind', gvk.kind, KIND, 63, 'letters and digits starting with a letter');
}

/** A resource (plural) name, as discovery gives it: a DNS label. */
export function checkResource(resource: string): void {
  checkPattern('resource', resource, DNS_LABEL, 63, 'a lowercase DNS label');
}

/** A namespace: a DNS label. */
export function checkNamespace(namespace: string): void {
  checkPattern('namespace', namespace, DNS_LABEL, 63, 'a lowercase DNS label');
}

/** An object name: any path segment (names of some kinds hold `:` or capitals), at most 253 characters. */
export function checkName(name: string): void {
  checkPathSegment('name', name);
  if (name.length > 253) refuse('name', name, 'must be at most 253 characters');
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
