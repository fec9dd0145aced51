// What a person may do from the dashboard, on their own rights: approve a promotion, or retry a
// wave whose rollout stopped there (the same right: the verb approve). The request
// carries the person's bearer token (the one the page already sends, never a cookie); the API
// server authenticates it (TokenReview) and decides the verb on the Pipeline (SubjectAccessReview);
// only then does the service write, as itself, the approval into the Pipeline's status.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RouteHandler } from '../../lib/manager/index.ts';
import { APPROVE_VERB, ApprovalError, approvalEvent, isRevision, PIPELINE_GVK, recordApproval, recordRetry, retryEvent, type ApprovalClient, type Approver } from '../../lib/pipeline/index.ts';
import { readBounded } from '../../lib/transport/index.ts';
import { functionOption, isDnsLabel, isNamespaceName, isObjectName, KubeApiError, noopLogger, positiveInteger, realClock, toError, type Clock, type Logger } from '../../lib/util/index.ts';
import { securityHeaders } from './page.ts';

/** Where approvals are posted. */
export const APPROVE_PATH = '/dashboard/api/approve';

/** Options of {@link ApprovalEndpoint}. */
export interface ApprovalEndpointOptions {
  /**
   * The management cluster as the service itself, for the reviews, the Pipeline's status and its
   * Events. Rejects while the dashboard is not running (answered 503). Required.
   */
  readonly management: () => Promise<ApprovalClient>;
  /** Default: discards everything. */
  readonly logger?: Logger;
  /** Default: the wall clock. */
  readonly clock?: Clock;
  /** Longest request body, in bytes; longer is 413. Default 4 096. */
  readonly maxBodyBytes?: number;
  /** Requests reviewed at once; more are answered 503 (each costs two reviews and a write). Default 8. */
  readonly maxInFlight?: number;
  /** Time to receive the body; a slower client is disconnected. Default 10 000. */
  readonly bodyTimeoutMs?: number;
}

/** What an approval request names. */
interface ApprovalBody {
  readonly namespace: string;
  readonly pipeline: string;
  readonly environment: string;
  readonly revision: string;
  /** `approve` (the default) or `retry`: carry out again the wave `environment` (`<env>/<wave>`) stopped at `revision`. */
  readonly action: 'approve' | 'retry';
}

/** Longest bearer token considered (service-account JWTs are ~1 KiB), as the metrics filter. */
const MAX_TOKEN = 16 * 1024;
const FIELDS = ['namespace', 'pipeline', 'environment', 'revision', 'action'] as const;

class HttpRefusal extends Error {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  constructor(status: number, message: string, headers: Readonly<Record<string, string>> = {}) {
    super(message);
    this.status = status;
    this.headers = headers;
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The body's four fields, each checked; anything else is refused (400) with what is wrong. */
function parseBody(text: string): ApprovalBody {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new HttpRefusal(400, 'the body is not JSON');
  }
  if (!isRecord(value)) throw new HttpRefusal(400, 'the body must be a JSON object {namespace, pipeline, environment, revision}');
  const unknown = Object.keys(value).filter((k) => !(FIELDS as readonly string[]).includes(k));
  if (unknown.length > 0) throw new HttpRefusal(400, `unknown field(s): ${unknown.slice(0, 4).map((k) => JSON.stringify(k.slice(0, 40))).join(', ')}`);
  const action = value.action ?? 'approve';
  if (action !== 'approve' && action !== 'retry') throw new HttpRefusal(400, 'action must be "approve" or "retry"');
  const field = (name: Exclude<(typeof FIELDS)[number], 'action'>, ok: (s: string) => boolean, what: string): string => {
    const v = value[name];
    if (typeof v !== 'string' || !ok(v)) throw new HttpRefusal(400, `${name} must be ${what}`);
    return v;
  };
  return {
    namespace: field('namespace', isNamespaceName, 'a namespace name'),
    pipeline: field('pipeline', isObjectName, 'a Pipeline name'),
    // `<environment>/<wave>` approves one wave of a fleet environment.
    environment: field('environment', (v) => v.split('/').length <= 2 && v.split('/').every(isDnsLabel), 'an environment name, or <environment>/<wave>'),
    revision: field('revision', isRevision, 'a revision (one printable token)'),
    action,
  };
}

/**
 * The request's body as text, at most `max` bytes (413 beyond, without reading the rest), within
 * `timeoutMs` (a slower client is disconnected).
 */
async function readBody(req: IncomingMessage, max: number, timeoutMs: number): Promise<string> {
  // Refused before reading, with the socket kept for the 413 (the reader would close it).
  const declared = Number(req.headers['content-length'] ?? NaN);
  if (Number.isFinite(declared) && declared > max) throw new HttpRefusal(413, `the body is larger than ${max} bytes`);
  const timer = setTimeout(() => { req.destroy(new HttpRefusal(408, 'the body came too slowly')); }, timeoutMs);
  try {
    const body = await readBounded(req, { limit: max });
    if (body === undefined) throw new HttpRefusal(413, `the body is larger than ${max} bytes`);
    return body.toString('utf8');
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Refuses what a browser sends on behalf of another site: `Sec-Fetch-Site` other than same-origin
 * or none (a person's own tool), or an `Origin` whose host is not this server's. The bearer token
 * in a header already keeps forged cross-site requests out (no cookie is ever honoured, and no
 * CORS answer lets a page elsewhere set that header); this says so at once.
 */
function refuseCrossSite(req: IncomingMessage): void {
  const site = req.headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin' && site !== 'none') throw new HttpRefusal(403, 'cross-site requests are refused');
  const origin = req.headers.origin;
  if (origin === undefined) return;
  let host: string;
  try {
    host = new URL(origin).host;
  } catch {
    throw new HttpRefusal(403, 'cross-site requests are refused');
  }
  if (host !== req.headers.host) throw new HttpRefusal(403, 'cross-site requests are refused');
}

interface ReviewedUser extends Approver {
  readonly groups?: readonly string[];
  readonly extra?: Readonly<Record<string, readonly string[]>>;
}

/**
 * `POST /dashboard/api/approve` with `{namespace, pipeline, environment, revision}` and the
 * person's bearer token: 401 unless a TokenReview authenticates the token; 403 unless a
 * SubjectAccessReview allows that user the verb `approve` on that Pipeline (group fleetcache.dev,
 * resource pipelines); then the approval is written to the Pipeline's status (404 when there is no
 * such Pipeline, said only to someone allowed to approve it; 422 when the environment does not
 * require approval), an Event names the approver, and the answer is 200 with the approval. With
 * `"action": "retry"` and `environment` `<env>/<wave>`: the same checks, then a retry of the wave
 * whose rollout of `revision` stopped there is recorded (`status.retries`; 422 when it is not
 * stopped there), answered `{retry, created}`.
 * Nothing is cached: a right withdrawn counts at once.
 *
 * Concurrency: `#inFlight` counts requests past their body (under review or being written) and
 * never exceeds `#maxInFlight`.
 */
export class ApprovalEndpoint {
  readonly #management: () => Promise<ApprovalClient>;
  readonly #logger: Logger;
  readonly #clock: Clock;
  readonly #maxBodyBytes: number;
  readonly #maxInFlight: number;
  readonly #bodyTimeoutMs: number;
  #inFlight = 0;

  constructor(options: ApprovalEndpointOptions) {
    functionOption('ApprovalEndpoint', 'management', options.management);
    this.#management = options.management;
    this.#logger = (options.logger ?? noopLogger).child({ action: 'approve' });
    this.#clock = options.clock ?? realClock;
    this.#maxBodyBytes = positiveInteger('ApprovalEndpoint', 'maxBodyBytes', options.maxBodyBytes ?? 4_096);
    this.#maxInFlight = positiveInteger('ApprovalEndpoint', 'maxInFlight', options.maxInFlight ?? 8);
    this.#bodyTimeoutMs = positiveInteger('ApprovalEndpoint', 'bodyTimeoutMs', options.bodyTimeoutMs ?? 10_000);
  }

  /** The route handler (every method; it answers 405 to all but POST). */
  readonly handle: RouteHandler = async (req, res) => {
    try {
      const answer = await this.#serve(req);
      reply(res, 200, answer);
    } catch (err) {
      if (err instanceof HttpRefusal) {
        // The rest of a refused body is never read: the connection ends after the answer.
        reply(res, err.status, { error: err.message }, req.complete ? err.headers : { ...err.headers, connection: 'close' });
        return;
      }
      this.#logger.error('approval failed', { error: toError(err) });
      reply(res, 500, { error: 'the approval could not be recorded' });
    }
  };

  async #serve(req: IncomingMessage): Promise<object> {
    if (req.method !== 'POST') throw new HttpRefusal(405, 'use POST', { allow: 'POST' });
    refuseCrossSite(req);
    const token = /^Bearer +(\S+) *$/i.exec(req.headers.authorization ?? '')?.[1];
    if (token === undefined || token.length > MAX_TOKEN) throw new HttpRefusal(401, 'a bearer token is needed', { 'www-authenticate': 'Bearer' });
    if (!/^application\/json\s*(;|$)/i.test(req.headers['content-type'] ?? '')) throw new HttpRefusal(415, 'the body must be application/json');
    // The body first (bounded in size and time), so that a slow client holds no review slot.
    const body = parseBody(await readBody(req, this.#maxBodyBytes, this.#bodyTimeoutMs));
    if (this.#inFlight >= this.#maxInFlight) throw new HttpRefusal(503, 'too many approvals at once; try again', { 'retry-after': '1' });
    this.#inFlight += 1;
    try {
      let client: ApprovalClient;
      try {
        client = await this.#management();
      } catch {
        throw new HttpRefusal(503, 'the service is not ready');
      }
      const user = await this.#authenticate(client, token);
      const where = `${body.namespace}/${body.pipeline}`;
      if (!(await this.#allowed(client, user, body))) {
        this.#logger.warn('approval refused: the verb is not allowed', { user: user.username, pipeline: where, environment: body.environment, revision: body.revision });
        throw new HttpRefusal(403, `user ${user.username} may not ${APPROVE_VERB} pipelines.${PIPELINE_GVK.group} ${body.pipeline} in namespace ${body.namespace}`);
      }
      if (body.action === 'retry') return await this.#retry(client, user, body);
      let recorded;
      try {
        recorded = await recordApproval(
          { namespace: body.namespace, name: body.pipeline, environment: body.environment, revision: body.revision, approver: { username: user.username, ...(user.uid === undefined ? {} : { uid: user.uid }) } },
          { client, clock: this.#clock },
        );
      } catch (err) {
        if (err instanceof ApprovalError) {
          this.#logger.info('approval not recorded', { user: user.username, pipeline: where, environment: body.environment, revision: body.revision, reason: err.reason });
          throw new HttpRefusal(err.reason === 'PipelineNotFound' ? 404 : err.reason === 'Conflict' ? 409 : 422, err.message);
        }
        throw err;
      }
      const { approval, created } = recorded;
      if (created) {
        this.#logger.info('approval recorded', { user: user.username, pipeline: where, environment: approval.environment, revision: approval.revision });
        try {
          await client.request({ method: 'POST', path: `/api/v1/namespaces/${encodeURIComponent(body.namespace)}/events`, body: approvalEvent(recorded.pipeline, approval, approval.approvedAt) });
        } catch (err) {
          this.#logger.warn('could not record an event', { reason: 'PromotionApproved', error: toError(err).message });
        }
      } else {
        this.#logger.info('approval already on record', { user: user.username, pipeline: where, environment: approval.environment, revision: approval.revision, approver: approval.approver.username });
      }
      return { approval, created };
    } finally {
      this.#inFlight -= 1;
    }
  }

  /** Records a retry of a stopped wave (the right was checked), with an Event naming who asked. */
  async #retry(client: ApprovalClient, user: ReviewedUser, body: ApprovalBody): Promise<object> {
    const where = `${body.namespace}/${body.pipeline}`;
    let recorded;
    try {
      recorded = await recordRetry(
        { namespace: body.namespace, name: body.pipeline, environment: body.environment, revision: body.revision, approver: { username: user.username, ...(user.uid === undefined ? {} : { uid: user.uid }) } },
        { client, clock: this.#clock },
      );
    } catch (err) {
      if (err instanceof ApprovalError) {
        this.#logger.info('retry not recorded', { user: user.username, pipeline: where, wave: body.environment, revision: body.revision, reason: err.reason });
        throw new HttpRefusal(err.reason === 'PipelineNotFound' ? 404 : err.reason === 'Conflict' ? 409 : 422, err.message);
      }
      throw err;
    }
    const { retry, created } = recorded;
    if (created) {
      this.#logger.info('retry recorded', { user: user.username, pipeline: where, wave: body.environment, revision: retry.revision, attempt: retry.attempt });
      try {
        await client.request({ method: 'POST', path: `/api/v1/namespaces/${encodeURIComponent(body.namespace)}/events`, body: retryEvent(recorded.pipeline, retry, retry.requestedAt) });
      } catch (err) {
        this.#logger.warn('could not record an event', { reason: 'WaveRetryRequested', error: toError(err).message });
      }
    }
    return { retry, created };
  }

  async #authenticate(client: ApprovalClient, token: string): Promise<ReviewedUser> {
    let answer: unknown;
    try {
      answer = await client.request({ method: 'POST', path: '/apis/authentication.k8s.io/v1/tokenreviews', body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token } } });
    } catch (err) {
      this.#logger.error('the TokenReview could not be made', { error: reviewError(err) });
      throw new HttpRefusal(500, 'authentication failed');
    }
    const status = isRecord(answer) && isRecord(answer.status) ? answer.status : {};
    const user = status.authenticated === true && isRecord(status.user) && typeof status.user.username === 'string' && status.user.username !== '' ? status.user : undefined;
    if (user === undefined) throw new HttpRefusal(401, 'the token was not accepted', { 'www-authenticate': 'Bearer' });
    return {
      username: user.username as string,
      ...(typeof user.uid === 'string' && user.uid !== '' ? { uid: user.uid } : {}),
      ...(Array.isArray(user.groups) ? { groups: user.groups.filter((g): g is string => typeof g === 'string') } : {}),
      ...(isRecord(user.extra) ? { extra: user.extra as Readonly<Record<string, readonly string[]>> } : {}),
    };
  }

  async #allowed(client: ApprovalClient, user: ReviewedUser, body: ApprovalBody): Promise<boolean> {
    let answer: unknown;
    try {
      answer = await client.request({
        method: 'POST',
        path: '/apis/authorization.k8s.io/v1/subjectaccessreviews',
        body: {
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SubjectAccessReview',
          spec: {
            user: user.username,
            ...(user.uid === undefined ? {} : { uid: user.uid }),
            ...(user.groups === undefined ? {} : { groups: user.groups }),
            ...(user.extra === undefined ? {} : { extra: user.extra }),
            resourceAttributes: { namespace: body.namespace, verb: APPROVE_VERB, group: PIPELINE_GVK.group, resource: 'pipelines', name: body.pipeline },
          },
        },
      });
    } catch (err) {
      this.#logger.error('the SubjectAccessReview could not be made', { error: reviewError(err), user: user.username });
      throw new HttpRefusal(500, `authorization for user ${user.username} failed`);
    }
    return isRecord(answer) && isRecord(answer.status) && answer.status.allowed === true;
  }
}

/** A review's failure for the log: the API server's status, never the request (it holds the token). */
function reviewError(err: unknown): string {
  return err instanceof KubeApiError ? `HTTP ${err.statusCode} ${err.reason}` : toError(err).message;
}

function reply(res: ServerResponse, status: number, body: object, headers: Readonly<Record<string, string>> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { ...securityHeaders, ...headers, 'content-type': 'application/json; charset=utf-8', 'content-length': String(Buffer.byteLength(text)), 'cache-control': 'no-store' });
  res.end(text);
}
