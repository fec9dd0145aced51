// The periodic check of a followed query's cache: its freshness (listed and watching, or not), and
// whether the registry dropped it. A dropped cache sends no event: its reader only reads as
// unsynced, and its `waitForSync` rejects (`CacheGoneError` on a registry) instead of waiting.
import { toError } from '../util/index.ts';
import type { QueryState } from './query.ts';

/** What a check needs of its accumulator. */
export interface CheckPort {
  /** `q`'s freshness state changed (`live` and `stale` here; `gone` is decided by following it). */
  freshnessChanged(q: QueryState): void;
}

/**
 * Checks one query at clock time `now`: live while its cache is synced with no LIST/WATCH failure
 * (`syncedAt` moves to `now`), else stale; an unsynced cache is first asked whether it still exists.
 * Only a listed query (phase `synced`) is checked: before that it is not followed yet, or gone.
 */
export function checkQuery(q: QueryState, now: number, port: CheckPort, signal: AbortSignal): void {
  const reader = q.reader;
  if (q.phase !== 'synced' || reader === undefined) return;
  const synced = reader.synced;
  if (!synced && !q.checking) {
    // Unsynced: a rebuilt cache still listing (it resolves), or a dropped one (it rejects at once,
    // and the query is gone). Its freshness waits for the answer or the next check, so consumers
    // see `gone` alone rather than `stale` first.
    q.checking = true;
    reader.waitForSync(signal).then(() => { q.checking = false; }, (err: unknown) => {
      q.checking = false;
      if (!signal.aborted && q.reader === reader) q.left?.(toError(err));
    });
    return;
  }
  const state = synced && reader.lastError === undefined ? 'live' : 'stale';
  if (state === 'live') q.syncedAt = now;
  if (q.freshness !== state) {
    q.freshness = state;
    port.freshnessChanged(q);
  }
}
