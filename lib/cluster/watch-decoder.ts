import type { IncomingMessage } from 'node:http';
import {
  abortReason,
  FleetcacheError,
  KubeApiError,
  TransportError,
  WatchDecodeError,
  type ErrorScope,
  type KubeStatus,
} from '../util/index.ts';
import { parseEventDroppingManagedFields } from './strip.ts';
import type { WatchEvent } from './types.ts';

/** Options of {@link decodeWatchStream}. */
export interface DecodeOptions {
  /**
   * Leave `metadata.managedFields` and the last-applied-configuration annotation out of each
   * event's object while parsing (see strip.ts). Default false: objects arrive whole.
   */
  readonly dropManagedFields?: boolean | undefined;
}

const NEWLINE = 0x0a;

/** True when bytes [start, end) are only ASCII whitespace (a keep-alive or a CRLF remainder). */
function isBlank(buf: Buffer, start: number, end: number): boolean {
  for (let i = start; i < end; i++) {
    const c = buf[i];
    if (c !== 0x20 && c !== 0x09 && c !== 0x0d && c !== 0x0b && c !== 0x0c) return false;
  }
  return true;
}

/**
 * Decodes bytes [start, end) of `buf`, one line of a watch stream, into an event; undefined for
 * a blank line. ERROR events become a thrown `KubeApiError`, anything malformed a
 * `WatchDecodeError`.
 */
export function decodeWatchLine(buf: Buffer, start: number, end: number, scope: ErrorScope, options: DecodeOptions = {}): WatchEvent | undefined {
  if (isBlank(buf, start, end)) return undefined;
  let parsed: unknown;
  try {
    parsed = options.dropManagedFields === true ? parseEventDroppingManagedFields(buf, start, end) : JSON.parse(buf.toString('utf8', start, end));
  } catch (err) {
    throw new WatchDecodeError({ ...scope, line: buf.toString('utf8', start, end) }, { cause: err });
  }
  if (typeof parsed !== 'object' || parsed === null) throw new WatchDecodeError({ ...scope, line: buf.toString('utf8', start, end) });
  const { type, object } = parsed as { type?: unknown; object?: unknown };
  if (typeof object !== 'object' || object === null || Array.isArray(object)) throw new WatchDecodeError({ ...scope, line: buf.toString('utf8', start, end) });
  switch (type) {
    case 'ADDED':
    case 'MODIFIED':
    case 'DELETED':
    case 'BOOKMARK':
      return parsed as WatchEvent;
    case 'ERROR': {
      const status = object as KubeStatus;
      throw new KubeApiError({ ...scope, statusCode: typeof status.code === 'number' ? status.code : 500, status });
    }
    default:
      throw new WatchDecodeError({ ...scope, line: buf.toString('utf8', start, end) });
  }
}

/**
 * Decodes a watch response body (one JSON event per line) into events. The socket is released
 * when the stream ends, fails, or the consumer leaves early. A stream that breaks, or ends in the
 * middle of a line, throws a `TransportError`; the caller resumes from the last event it applied.
 *
 * Lines are found and decoded in the bytes as received: a line inside one chunk is decoded from
 * that chunk directly (UTF-8 never splits at a newline byte), and only a line that spans chunks is
 * copied, once, when its end arrives.
 */
export async function* decodeWatchStream(res: IncomingMessage, scope: ErrorScope, signal: AbortSignal, options: DecodeOptions = {}): AsyncGenerator<WatchEvent, void, undefined> {
  // The bytes after the last newline seen (the start of an event still arriving), in arrival order.
  let pending: Buffer[] = [];
  try {
    for await (const chunk of res as AsyncIterable<Buffer>) {
      let nl = chunk.indexOf(NEWLINE);
      if (nl === -1) {
        pending.push(chunk);
        continue;
      }
      if (pending.length > 0) {
        pending.push(chunk.subarray(0, nl));
        const line = Buffer.concat(pending);
        pending = [];
        const event = decodeWatchLine(line, 0, line.length, scope, options);
        if (event !== undefined) yield event;
      } else if (nl > 0) {
        const event = decodeWatchLine(chunk, 0, nl, scope, options);
        if (event !== undefined) yield event;
      }
      let start = nl + 1;
      nl = chunk.indexOf(NEWLINE, start);
      while (nl !== -1) {
        const event = decodeWatchLine(chunk, start, nl, scope, options);
        if (event !== undefined) yield event;
        start = nl + 1;
        nl = chunk.indexOf(NEWLINE, start);
      }
      if (start < chunk.length) pending.push(chunk.subarray(start));
    }
  } catch (err) {
    if (signal.aborted) throw abortReason(signal);
    if (err instanceof FleetcacheError) throw err;
    throw new TransportError(scope, `watch stream broke: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  } finally {
    res.destroy();
  }
  if (signal.aborted) throw abortReason(signal);
  if (pending.some((part) => !isBlank(part, 0, part.length))) throw new TransportError(scope, 'watch stream ended in the middle of an event');
}
