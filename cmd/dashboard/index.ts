/**
 * The service's live, read-only dashboard at `/dashboard/`: pipelines, clusters and caches,
 * pushed to a static page (no CDN, strict CSP, text only) as server-sent events that are
 * coalesced, bounded per client and ended on shutdown.
 */
export { Dashboard, DASHBOARD_PATH } from './dashboard.ts';
export type { DashboardOptions, DashboardRegistry } from './dashboard.ts';
export type { ClusterView, CacheView, CredentialsMissing, DashboardState, EnvironmentView, PipelineView, PromotionView, TargetView, TruncationView } from './model.ts';
