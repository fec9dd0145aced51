/**
 * The service's live dashboard at `/dashboard/`: pipelines, clusters and caches (and, sharded, this
 * replica's view of its shard group), pushed to a static page (no CDN, strict CSP, text only) as
 * server-sent events that are coalesced, bounded per client and ended on shutdown;
 * and one action, approving a promotion, on the caller's own rights.
 */
export { Dashboard, DASHBOARD_PATH } from './dashboard.ts';
export type { DashboardActionsRegistry, DashboardOptions, DashboardRegistry } from './dashboard.ts';
export { APPROVE_PATH } from './actions.ts';
export type { KeyList, ShardPeerView, ShardSource, ShardView, UnownedKeyView } from './shards.ts';
export type { ClusterView, CacheView, CredentialsMissing, DashboardState, EnvironmentView, PipelineView, PromotionView, TargetView, TruncationView } from './model.ts';
