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
  /** `q` has applied its first complete LIST (its phase is now `synced`). */
  synced(q: QueryState): void;
}

/** Read through a call: the signal changes across `await`s behind the compiler's back. */
function isAborted(signal: AbortSignal): boolean {
  return signal.aborted;
}

/**
 * Opens a query's cache, retrying with backoff, and marks it synced after its first LIST. Resolves
 * once synced, or once `signal` aborts; the cache's events keep flowing to `port.onCache` after
 * that, until the accumulator releases `q.reader`.
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
      port.synced(q);
      return;
    } catch (err) {
      if (isAborted(signal)) return;
      if (reader !== undefined) {
        reader.release();
        if (q.reader === reader) q.reader = undefined;
      }
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
