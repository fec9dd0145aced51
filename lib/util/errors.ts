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
    const reason = scope.status?.reason ?? '';
    const detail = scope.status?.message ?? (reason === '' ? `HTTP ${scope.statusCode}` : reason);
    const req = scope.request === undefined ? '' : ` (${scope.request.method} ${scope.request.path})`;
    super('ERR_KUBE_API', `${where(scope)}: HTTP ${scope.statusCode}${reason === '' ? '' : ` ${reason}`}: ${detail}${req}`, options);
    this.cluster = scope.cluster;
    this.gvk = scope.gvk;
    this.statusCode = scope.statusCode;
    this.reason = reason;
    this.status = scope.status;
    this.retryAfterSeconds = scope.retryAfterSeconds ?? scope.status?.details?.retryAfterSeconds;
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
  /** The start of the offending line, for diagnosis (never more than 200 characters). */
  readonly excerpt: string;

  constructor(scope: ErrorScope & { readonly line: string }, options?: ErrorOptions) {
    const excerpt = scope.line.length > 200 ? `${scope.line.slice(0, 200)}…` : scope.line;
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
export type KubeconfigRule = 'exec' | 'auth-provider' | 'local-file' | 'cross-namespace';

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
