import { formatGvk, type GroupVersionKind } from './gvk.ts';

/**
 * The `Status` object the Kubernetes API returns as the body of a failed request, and inside an
 * ERROR watch event.
 */
export interface KubeStatus {
  readonly kind?: 'Status';
  readonly apiVersion?: string;
  readonly status?: 'Success' | 'Failure';
  readonly message?: string;
  readonly reason?: string;
  readonly code?: number;
  readonly details?: {
    readonly name?: string;
    readonly group?: string;
    readonly kind?: string;
    readonly retryAfterSeconds?: number;
    readonly causes?: readonly { readonly reason?: string; readonly message?: string; readonly field?: string }[];
  };
}

/**
 * Base of every error fleetcache throws or reports. Identify errors with `instanceof` or by their
 * stable `code`, never by the shape of their fields.
 */
export class FleetcacheError extends Error {
  /** Stable, machine-readable identifier of the failure (`ERR_...`). */
  readonly code: string;

  constructor(code: string, message: string, options?: ErrorOptions) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}

/** Where in the fleet a failure happened. */
export interface ErrorScope {
  /** The cluster's name as the registry or provider knows it. */
  readonly cluster: string;
  /** The resource being read or watched, when there is one. */
  readonly gvk?: GroupVersionKind | undefined;
}

function where(scope: ErrorScope): string {
  return scope.gvk === undefined ? `cluster ${scope.cluster}` : `cluster ${scope.cluster}, ${formatGvk(scope.gvk)}`;
}

/** The API server answered with a non-success HTTP status. */
export class KubeApiError extends FleetcacheError {
  readonly cluster: string;
  readonly gvk: GroupVersionKind | undefined;
  /** HTTP status code (from the response, or the `code` of an ERROR watch event). */
  readonly statusCode: number;
  /** The Status reason (`NotFound`, `Forbidden`, `Expired`, ...) or '' when the body had none. */
  readonly reason: string;
  /** The parsed Status body, when the server sent one. */
  readonly status: KubeStatus | undefined;
  /** Seconds the server asked us to wait (`Retry-After` or `details.retryAfterSeconds`). */
  readonly retryAfterSeconds: number | undefined;
  /** HTTP method and path (without the query string) of the failed request. */
  readonly request: { readonly method: string; readonly path: string } | undefined;

  constructor(
    scope: ErrorScope & {
      readonly statusCode: number;
      readonly status?: KubeStatus | undefined;
      readonly retryAfterSeconds?: number | undefined;
      readonly request?: { readonly method: string; readonly path: string } | undefined;
    },
    options?: ErrorOptions,
  ) {
    // The Status comes from the peer: its strings are bounded and escaped before they are kept.
    const status = scope.status === undefined ? undefined : boundedStatus(scope.status);
    const reason = status?.reason ?? '';
    const detail = status?.message ?? (reason === '' ? `HTTP ${scope.statusCode}` : reason);
    const req = scope.request === undefined ? '' : ` (${scope.request.method} ${scope.request.path})`;
    super('ERR_KUBE_API', `${where(scope)}: HTTP ${scope.statusCode}${reason === '' ? '' : ` ${reason}`}: ${detail}${req}`, options);
    this.cluster = scope.cluster;
    this.gvk = scope.gvk;
    this.statusCode = scope.statusCode;
    this.reason = reason;
    this.status = status;
    this.retryAfterSeconds = scope.retryAfterSeconds ?? status?.details?.retryAfterSeconds;
    this.request = scope.request;
  }

  /** 410 Gone / reason Expired: the requested resourceVersion (or continue token) is too old. */
  get isGone(): boolean {
    return this.statusCode === 410 || this.reason === 'Expired' || this.reason === 'Gone';
  }
}

/** The cluster could not be reached, or the connection broke mid-request. */
export class TransportError extends FleetcacheError {
  readonly cluster: string;
  readonly gvk: GroupVersionKind | undefined;

  constructor(scope: ErrorScope, message: string, options?: ErrorOptions) {
    super('ERR_TRANSPORT', `${where(scope)}: ${message}`, options);
    this.cluster = scope.cluster;
    this.gvk = scope.gvk;
  }
}

/** Discovery does not know the kind (CRD not installed, wrong version, typo). */
export class UnknownKindError extends FleetcacheError {
  readonly cluster: string;
  readonly gvk: GroupVersionKind;
  /** HTTP status of the discovery request that settled it (404 when the group/version is absent). */
  readonly statusCode: number;

  constructor(scope: ErrorScope & { readonly gvk: GroupVersionKind; readonly statusCode: number }, options?: ErrorOptions) {
    super('ERR_UNKNOWN_KIND', `${where(scope)}: the server does not serve this kind (HTTP ${scope.statusCode})`, options);
    this.cluster = scope.cluster;
    this.gvk = scope.gvk;
    this.statusCode = scope.statusCode;
  }
}

/** A watch stream delivered something that is not a well-formed watch event. */
export class WatchDecodeError extends FleetcacheError {
  readonly cluster: string;
  readonly gvk: GroupVersionKind | undefined;
  /** The start of the offending line, for diagnosis (200 characters at most, escaped as {@link peerText} does). */
  readonly excerpt: string;

  constructor(scope: ErrorScope & { readonly line: string }, options?: ErrorOptions) {
    const excerpt = scope.line.length > 200 ? `${peerText(scope.line.slice(0, 200))}…` : peerText(scope.line);
    super('ERR_WATCH_DECODE', `${where(scope)}: malformed watch event: ${JSON.stringify(excerpt)}`, options);
    this.cluster = scope.cluster;
    this.gvk = scope.gvk;
    this.excerpt = excerpt;
  }
}

/** A kubeconfig could not be parsed or names no usable context/cluster/user. */
export class KubeconfigInvalidError extends FleetcacheError {
  readonly cluster: string;

  constructor(cluster: string, message: string, options?: ErrorOptions) {
    super('ERR_KUBECONFIG_INVALID', `cluster ${cluster}: invalid kubeconfig: ${message}`, options);
    this.cluster = cluster;
  }
}

/** Which safety rule refused a kubeconfig or a reference to one. */
export type KubeconfigRule = 'exec' | 'auth-provider' | 'local-file' | 'cross-namespace' | 'insecure-tls' | 'proxy';

/** An untrusted kubeconfig (or a reference to one) broke a safety rule that was not relaxed. */
export class KubeconfigRefusedError extends FleetcacheError {
  readonly cluster: string;
  readonly rule: KubeconfigRule;
  /** What was refused, e.g. `user "ci" exec command` or `Secret other-ns/kubeconfig`. */
  readonly subject: string;

  constructor(scope: { readonly cluster: string; readonly rule: KubeconfigRule; readonly subject: string; readonly hint: string }) {
    super('ERR_KUBECONFIG_REFUSED', `cluster ${scope.cluster}: refused ${scope.subject}: rule "${scope.rule}"; ${scope.hint}`);
    this.cluster = scope.cluster;
    this.rule = scope.rule;
    this.subject = scope.subject;
  }
}

/** A long-lived component was used after it was stopped or closed. */
export class ClosedError extends FleetcacheError {
  constructor(what: string) {
    super('ERR_CLOSED', `${what} is closed`);
  }
}

/** Turns whatever was thrown into an Error, so reporting paths never carry strings or undefined. */
export function toError(thrown: unknown): Error {
  if (thrown instanceof Error) return thrown;
  return new Error(typeof thrown === 'string' ? thrown : `non-error thrown: ${String(thrown)}`);
}

/** Characters of a peer's text (a Status message, a line excerpt) kept in errors and logs. */
export const MAX_PEER_TEXT = 1024;

/** Control, format (bidi overrides and isolates, zero-width), line/paragraph separators, lone surrogates. */
const UNSAFE_CHAR = /^[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]$/u;

/**
 * Makes text that came from a peer safe to keep in an error, a status or a log line: control, bidi
 * and other invisible characters are written as `\u{…}` escapes, so a hostile server cannot make a
 * line read differently from what it says, and the result (escapes included) is at most `max`
 * characters plus a marker saying how many were dropped, so it cannot flood a log either. Only
 * what is kept is ever scanned.
 */
export function peerText(text: string, max = MAX_PEER_TEXT): string {
  let out = '';
  let i = 0;
  while (i < text.length) {
    const cp = text.codePointAt(i) ?? 0;
    const ch = String.fromCodePoint(cp);
    const piece = UNSAFE_CHAR.test(ch) ? `\\u{${cp.toString(16)}}` : ch;
    if (out.length + piece.length > max) break;
    out += piece;
    i += ch.length;
  }
  return i < text.length ? `${out}…[${text.length - i} more characters]` : out;
}

/** A Status with its strings bounded and escaped ({@link peerText}) and at most 16 causes; fields of the wrong type dropped. */
function boundedStatus(status: KubeStatus): KubeStatus {
  // The Status came off the wire: nothing about its shape is trusted.
  const raw = status as Readonly<Record<string, unknown>>;
  const text = (value: unknown, max: number): string | undefined => (typeof value === 'string' ? peerText(value, max) : undefined);
  const out: { -readonly [K in keyof KubeStatus]: KubeStatus[K] } = {};
  if (raw.kind === 'Status') out.kind = 'Status';
  const apiVersion = text(raw.apiVersion, 64);
  if (apiVersion !== undefined) out.apiVersion = apiVersion;
  if (raw.status === 'Success' || raw.status === 'Failure') out.status = raw.status;
  const message = text(raw.message, MAX_PEER_TEXT);
  if (message !== undefined) out.message = message;
  const reason = text(raw.reason, 128);
  if (reason !== undefined) out.reason = reason;
  if (typeof raw.code === 'number') out.code = raw.code;
  const details: unknown = raw.details;
  if (typeof details === 'object' && details !== null) {
    const d = details as Readonly<Record<string, unknown>>;
    const kept: { name?: string; group?: string; kind?: string; retryAfterSeconds?: number; causes?: { reason?: string; message?: string; field?: string }[] } = {};
    const name = text(d.name, 256);
    if (name !== undefined) kept.name = name;
    const group = text(d.group, 256);
    if (group !== undefined) kept.group = group;
    const kind = text(d.kind, 128);
    if (kind !== undefined) kept.kind = kind;
    if (typeof d.retryAfterSeconds === 'number') kept.retryAfterSeconds = d.retryAfterSeconds;
    if (Array.isArray(d.causes)) {
      kept.causes = (d.causes as unknown[]).slice(0, 16).map((c) => {
        const from = typeof c === 'object' && c !== null ? c as Readonly<Record<string, unknown>> : {};
        const cause: { reason?: string; message?: string; field?: string } = {};
        const causeReason = text(from.reason, 128);
        const causeMessage = text(from.message, 256);
        const field = text(from.field, 256);
        if (causeReason !== undefined) cause.reason = causeReason;
        if (causeMessage !== undefined) cause.message = causeMessage;
        if (field !== undefined) cause.field = field;
        return cause;
      });
    }
    out.details = kept;
  }
  return out;
}

/** The read limits of a cluster connection, by the name of the option that sets each. */
export type ReadLimit = 'maxWatchEventBytes' | 'maxListBytes' | 'maxResponseBytes' | 'maxErrorBytes';

/**
 * A peer sent more bytes than a read limit allows (one watch event, a LIST page, a response or an
 * error body). The read stopped at the limit and the stream was destroyed: the excess was never
 * buffered. The cache concerned backs off and retries like after any other failure.
 */
export class LimitExceededError extends FleetcacheError {
  readonly cluster: string;
  readonly gvk: GroupVersionKind | undefined;
  /** The option that sets the limit exceeded. */
  readonly limit: ReadLimit;
  /** Its value, in bytes. */
  readonly limitBytes: number;
  /** HTTP method and path (without the query string) of the request whose answer was too large. */
  readonly request: { readonly method: string; readonly path: string } | undefined;

  constructor(scope: ErrorScope & { readonly limit: ReadLimit; readonly limitBytes: number; readonly request?: { readonly method: string; readonly path: string } | undefined }) {
    const what: Record<ReadLimit, string> = {
      maxWatchEventBytes: 'a watch event',
      maxListBytes: 'a LIST response',
      maxResponseBytes: 'a response',
      maxErrorBytes: 'an error response',
    };
    const req = scope.request === undefined ? '' : ` (${scope.request.method} ${scope.request.path})`;
    super('ERR_LIMIT_EXCEEDED', `${where(scope)}: ${what[scope.limit]} exceeds ${scope.limitBytes} bytes, the limit ${scope.limit}${req}; the rest was not read`);
    this.cluster = scope.cluster;
    this.gvk = scope.gvk;
    this.limit = scope.limit;
    this.limitBytes = scope.limitBytes;
    this.request = scope.request;
  }
}

/** Which part of an API path a value was meant to be. */
export type PathSegmentField = 'group' | 'version' | 'kind' | 'resource' | 'namespace' | 'name' | 'path';

/**
 * A group, version, kind, resource, namespace or name cannot be used in an API path (it contains
 * `/` or `%`, is `.` or `..`, or breaks the field's character rules). Raised before any URL is
 * built, so nothing was requested.
 */
export class InvalidPathSegmentError extends FleetcacheError {
  readonly field: PathSegmentField;
  /** The refused value, bounded and escaped ({@link peerText}). */
  readonly value: string;
  /** Which rule it broke. */
  readonly reason: string;

  constructor(scope: { readonly field: PathSegmentField; readonly value: string; readonly reason: string }) {
    const value = peerText(scope.value, 120);
    super('ERR_INVALID_PATH_SEGMENT', `invalid ${scope.field} ${JSON.stringify(value)}: ${scope.reason}`);
    this.field = scope.field;
    this.value = value;
    this.reason = scope.reason;
  }
}

/**
 * An object the API server sent could not be taken into a cache (freezing it failed). It is left out alone; the rest of the cache carries on. Emitted as the informer's
 * `error` event with the original failure as `cause`.
 */
export class ObjectSkippedError extends FleetcacheError {
  readonly cluster: string;
  readonly gvk: GroupVersionKind | undefined;
  /** The object left out: its namespace ('' when cluster-scoped) and name. */
  readonly object: { readonly namespace: string; readonly name: string };

  constructor(scope: ErrorScope & { readonly namespace: string; readonly name: string }, options?: ErrorOptions) {
    const object = scope.namespace === '' ? scope.name : `${scope.namespace}/${scope.name}`;
    const detail = options?.cause instanceof Error ? `: ${peerText(options.cause.message, 200)}` : '';
    super('ERR_OBJECT_SKIPPED', `${where(scope)}: object ${JSON.stringify(peerText(object, 300))} left out of the cache${detail}`, options);
    this.cluster = scope.cluster;
    this.gvk = scope.gvk;
    this.object = { namespace: scope.namespace, name: scope.name };
  }
}
