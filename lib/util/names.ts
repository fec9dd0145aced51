// The names Kubernetes gives things, checked as the API server checks them (apimachinery's
// `validation` package): the one place that spells the DNS-1123 patterns and their length limits.
// Every room that checks a namespace, an object name, an API group or version, a label or a Secret
// key asks here; a CRD schema takes the same patterns as text.

/** Most characters in a DNS-1123 label: a namespace name, an API version, a resource name. */
export const DNS_LABEL_MAX_LENGTH = 63;
/** Most characters in a DNS-1123 subdomain: most object names, an API group. */
export const DNS_SUBDOMAIN_MAX_LENGTH = 253;

/** A DNS-1123 label, unanchored: lower-case letters, digits and `-` inside, for composing patterns. */
export const DNS_LABEL_SOURCE = '[a-z0-9]([-a-z0-9]*[a-z0-9])?';
/** A DNS-1123 subdomain, unanchored: labels joined by `.`. */
export const DNS_SUBDOMAIN_SOURCE = `${DNS_LABEL_SOURCE}(\\.${DNS_LABEL_SOURCE})*`;
/** A whole DNS-1123 label, as a CRD schema's `pattern` (the length is `maxLength`'s job). */
export const DNS_LABEL_PATTERN = `^${DNS_LABEL_SOURCE}$`;
/** A whole DNS-1123 subdomain, as a CRD schema's `pattern`. */
export const DNS_SUBDOMAIN_PATTERN = `^${DNS_SUBDOMAIN_SOURCE}$`;
/** A key of a Secret's or ConfigMap's data (at most {@link DNS_SUBDOMAIN_MAX_LENGTH} characters). */
export const SECRET_KEY_PATTERN = '^[-._a-zA-Z0-9]+$';
/** A kind as the API serves it: a letter, then letters and digits (at most {@link DNS_LABEL_MAX_LENGTH}). */
export const KIND_PATTERN = '^[A-Za-z][A-Za-z0-9]*$';

const dnsLabel = new RegExp(DNS_LABEL_PATTERN);
const dnsSubdomain = new RegExp(DNS_SUBDOMAIN_PATTERN);
const dns1035Label = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const secretKey = new RegExp(SECRET_KEY_PATTERN);
const kind = new RegExp(KIND_PATTERN);
const qualifiedName = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;

/** A DNS-1123 label of at most 63 characters: what namespace names and API versions are. */
export function isDnsLabel(value: unknown): value is string {
  return typeof value === 'string' && value.length <= DNS_LABEL_MAX_LENGTH && dnsLabel.test(value);
}

/**
 * A DNS-1123 subdomain of at most `maxLength` characters (default 253): what most object names
 * and API groups are. A smaller `maxLength` leaves room for a suffix derived from the name.
 */
export function isDnsSubdomain(value: unknown, maxLength = DNS_SUBDOMAIN_MAX_LENGTH): value is string {
  return typeof value === 'string' && value.length <= maxLength && dnsSubdomain.test(value);
}

/** A DNS-1035 label (a DNS-1123 label that starts with a letter): what a CRD's plural and singular are. */
export function isDns1035Label(value: unknown): value is string {
  return typeof value === 'string' && value.length <= DNS_LABEL_MAX_LENGTH && dns1035Label.test(value);
}

/** A namespace name: a DNS-1123 label. */
export function isNamespaceName(value: unknown): value is string {
  return isDnsLabel(value);
}

/**
 * The name of an object whose kind names it by DNS-1123 subdomain (Secrets, ServiceAccounts,
 * Leases, Pipelines and most others); `maxLength` as for {@link isDnsSubdomain}.
 */
export function isObjectName(value: unknown, maxLength = DNS_SUBDOMAIN_MAX_LENGTH): value is string {
  return isDnsSubdomain(value, maxLength);
}

/** A key of a Secret's data: letters, digits, `-`, `_` and `.`, at most 253 characters. */
export function isSecretKey(value: unknown): value is string {
  return typeof value === 'string' && value.length <= DNS_SUBDOMAIN_MAX_LENGTH && secretKey.test(value);
}

/** A kind (`HelmRelease`): a letter, then letters and digits, at most 63 characters. */
export function isKindName(value: unknown): value is string {
  return typeof value === 'string' && value.length <= DNS_LABEL_MAX_LENGTH && kind.test(value);
}

/**
 * A label or annotation key: a name of at most 63 alphanumerics with `-`, `_` and `.` inside,
 * optionally after a DNS-1123 subdomain prefix and `/`.
 */
export function isQualifiedName(value: unknown): value is string {
  if (typeof value !== 'string') return false;
  const slash = value.indexOf('/');
  const name = slash < 0 ? value : value.slice(slash + 1);
  if (name.length > DNS_LABEL_MAX_LENGTH || !qualifiedName.test(name)) return false;
  return slash < 0 || isDnsSubdomain(value.slice(0, slash));
}

/** A label value: empty, or at most 63 alphanumerics with `-`, `_` and `.` inside. */
export function isLabelValue(value: unknown): value is string {
  return typeof value === 'string' && (value === '' || (value.length <= DNS_LABEL_MAX_LENGTH && qualifiedName.test(value)));
}
