// Following one query's cache: opening it (retried with backoff), taking its events, and catching up
// with its whole contents after its first LIST and after a replacement cache has listed.
import type { InformerHandler } from '../informer/index.ts';
import type { KubeObject } from '../transport/index.ts';
import { Backoff, sleep, toError, type BackoffOptions, type Clock, type Logger } from '../util/index.ts';
import { keyOf, type QueryState } from './query.ts';
import type { SnapshotSource, SourceReader } from './source.ts';

/** What following a query needs of its accumulator. */
export interface FollowPort {
  readonly source: SnapshotSource;
  /** Between attempts to open the cache. */
  readonly backoff: BackoffOptions;
  readonly clock: Clock;
  readonly logger: Logger;
  /** A cache event: the cache's new state of one object (`present` false: it is gone). */
  onCache(q: QueryState, obj: KubeObject, present: boolean, finalStateUnknown: boolean): void;
  /** `q` has applied a complete LIST (its phase is now `synced`, its freshness `live`). */
  synced(q: QueryState): void;
  /** `q`'s cache was dropped: everything it holds goes, with `finalStateUnknown` (its freshness is now `gone`). */
  left(q: QueryState): void;
}

/** Read through a call: the signal changes across `await`s behind the compiler's back. */
function isAborted(signal: AbortSignal): boolean {
  return signal.aborted;
}

/**
 * Follows a query's cache until `signal` aborts (and the accumulator's close calls `q.left`): opens
 * it, retrying with backoff, and marks it synced after its first LIST; the cache's events flow to
 * `port.onCache`. When a check finds the cache dropped (its cluster left the fleet), the query's
 * objects go, the reader is released, and the cache is opened again with backoff, so a cluster
 * that comes back is followed again.
 */
export async function followQuery(q: QueryState, port: FollowPort, signal: AbortSignal): Promise<void> {
  const backoff = new Backoff(port.clock, port.backoff);
  const handler: InformerHandler = {
    add: (obj, initial) => {
      port.onCache(q, obj, true, false);
      // A replacement cache (the registry rebuilt it after a credential rotation) replays its
      // objects as initial adds: what it no longer holds must go too, once it has listed.
      if (initial && q.phase === 'synced') catchUpLater(q, port, signal);
    },
    update: (_old, obj) => { port.onCache(q, obj, true, false); },
    delete: (obj, finalStateUnknown) => { port.onCache(q, obj, false, finalStateUnknown); },
    resync: (obj) => { port.onCache(q, obj, true, false); },
  };
  while (!signal.aborted) {
    let reader: SourceReader | undefined;
    try {
      q.phase = 'opening';
      reader = await port.source.open(q.source, handler, signal);
      if (isAborted(signal)) {
        reader.release();
        return;
      }
      q.reader = reader;
      q.openError = undefined;
      q.phase = 'listing';
      await reader.waitForSync(signal);
      catchUp(q, port, reader);
      q.phase = 'synced';
      q.freshness = 'live';
      q.syncedAt = port.clock.now();
      port.synced(q);
      const reason = await untilLeft(q);
      if (reason === undefined) return; // closed
      throw reason;
    } catch (err) {
      if (isAborted(signal)) return;
      if (q.phase === 'synced') {
        port.left(q);
        port.logger.warn('snapshot query lost its cache (its cluster left the fleet?); opening it again', { query: q.name, error: toError(err).message });
      }
      if (reader !== undefined) {
        reader.release();
        if (q.reader === reader) q.reader = undefined;
      }
      q.phase = 'opening';
      q.openError = toError(err);
      const delay = backoff.next();
      port.logger.warn('snapshot query could not open its cache; retrying', { query: q.name, error: q.openError.message, retryInMs: Math.round(delay) });
      try {
        await sleep(delay, signal, port.clock);
      } catch {
        return;
      }
    }
  }
}

/** Resolves with the reason `q`'s cache is gone (a check found it dropped), or undefined on close. */
function untilLeft(q: QueryState): Promise<Error | undefined> {
  return new Promise((resolve) => {
    q.left = (reason) => {
      q.left = undefined;
      resolve(reason);
    };
  });
}

/** Schedules one {@link catchUp} for the whole replay of a replacement cache. */
function catchUpLater(q: QueryState, port: FollowPort, signal: AbortSignal): void {
  if (q.catchingUp) return;
  q.catchingUp = true;
  queueMicrotask(() => {
    const reader = q.reader;
    if (reader === undefined) {
      q.catchingUp = false;
      return;
    }
    reader.waitForSync(signal).then(() => {
      q.catchingUp = false;
      if (q.reader === reader) catchUp(q, port, reader);
    }, () => { q.catchingUp = false; });
  });
}

/**
 * Reconciles a query with its cache's complete contents: after the first LIST (a cache that was
 * already synced replays adds the handler may race), and after a replacement cache listed. What
 * the cache no longer holds is deleted with `finalStateUnknown`.
 */
function catchUp(q: QueryState, port: FollowPort, reader: SourceReader): void {
  const listed = new Set<string>();
  for (const obj of reader.list()) {
    listed.add(keyOf(obj));
    if (q.entries.get(keyOf(obj))?.cache !== obj) port.onCache(q, obj, true, false);
  }
  for (const [key, entry] of [...q.entries]) {
    if (entry.cache !== undefined && !listed.has(key)) port.onCache(q, entry.cache, false, true);
  }
}
