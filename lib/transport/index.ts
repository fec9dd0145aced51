/**
 * How bytes travel between fleetcache and an API server: the per-cluster connection (kubeconfig
 * credentials, one HTTP/2 session with a keep-alive HTTP/1.1 agent as the fallback, a slot of the
 * process-wide socket budget, request and LIST limiters, discovery of GVK → resource and scope),
 * the wire types, the watch decoder and the pre-pass that drops managedFields before JSON.parse.
 * The one way out to a host a tenant names (resolve once, refuse inside addresses, pin, bound,
 * one deadline) and the one reader of a capped body live here too.
 * Knows nothing about who a cluster is: `lib/cluster` decides that.
 *
 * Layout of the connection: `connection.ts` (options, limiters, observation, close), `transport.ts`
 * (HTTP/2 or HTTP/1.1 to the server), `discovery.ts` (GVK → resource and scope),
 * `resource-client.ts` (paginated LIST with a page fetched ahead, and WATCH), `path.ts` (API paths,
 * pasted only from segments `segments.ts` has checked), `read-limits.ts` (the bounds on what an
 * answer may make this process hold).
 */
export { ClusterConnection } from './connection.ts';
export type { ClusterConnectionOptions, RequestObservation, RequestOptions } from './connection.ts';
export { DEFAULT_READ_LIMITS, readLimitsOf } from './read-limits.ts';
export type { ReadLimits } from './read-limits.ts';
export { resourcePath } from './path.ts';
export { PEEK_BYTES, readBounded } from './bounded.ts';
export type { BoundedRead, Peek } from './bounded.ts';
export { checkAddress, OutboundError, resolveHost, sendOutbound } from './outbound.ts';
export type { AddressPolicy, HostResolver, OutboundAnswer, OutboundFailure, OutboundRequest, OutboundStage, ResolvedAddress } from './outbound.ts';
export { checkGvk, checkName, checkNamespace, checkPathSegment } from './segments.ts';
export { createListLimiter } from './limiter.ts';
export { ConcurrencyLimiter } from './limiter.ts';
export { defaultMaxSockets, defaultSocketBudget, SocketBudget, SocketReclaimedError } from './budget.ts';
export type { SocketBudgetOptions } from './budget.ts';
export type { Impersonation } from './transport.ts';
export type {
  KubeList,
  KubeObject,
  ListOptions,
  ObjectMeta,
  ObjectText,
  ResourceClient,
  ResourceInfo,
  ResourceResolver,
  SelectorOptions,
  WatchEvent,
  WatchOptions,
  Wire,
} from './types.ts';
