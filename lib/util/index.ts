/**
 * Small pieces shared by every part of fleetcache: typed errors, group/version/kind helpers, an
 * injectable clock, abort-signal helpers, backoff, the logger interface and what makes outside text
 * safe to print, the names Kubernetes gives things (DNS-1123 and the rest) and the checks of
 * constructor options. Imports nothing else from the project. Internal: the package's root entry
 * names only the typed errors, the logger interface and its adapters, and the clock,
 * backoff-options and GVK types; `fleetcache/testing` adds `FakeClock`. The rest stays inside.
 */
export * from './errors.ts';
export * from './gvk.ts';
export * from './clock.ts';
export * from './abort.ts';
export * from './backoff.ts';
export * from './logger.ts';
export * from './sanitize.ts';
export * from './address.ts';
export * from './names.ts';
export * from './options.ts';
export * from './object.ts';
