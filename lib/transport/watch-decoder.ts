import type { Readable } from 'node:stream';
import {
  abortReason,
  FleetcacheError,
  KubeApiError,
  LimitExceededError,
  TransportError,
  WatchDecodeError,
  type ErrorScope,
  type KubeStatus,
} from '../util/index.ts';
import { parseEventDroppingManagedFields, scanEventWithMetadata } from './strip.ts';
import type { WatchEvent } from './types.ts';

/** Options of {@link decodeWatchStream}. */
export interface DecodeOptions {
  /**
   * Leave `metadata.managedFields` and the last-applied-configuration annotation out of each
   * event's object while parsing (see strip.ts). Default false: objects arrive whole.
   */
  readonly dropManagedFields?: boolean | undefined;
  /** With `dropManagedFields`, objects as text (see `WatchOptions.objectText`). Default false. */
  readonly objectText?: boolean | undefined;
  /**
   * Largest event (one line, newline excluded) in bytes; a longer one fails the stream with a
   * `LimitExceededError` as soon as the limit is passed, without waiting for its end. Default
   * unbounded (the connection passes its `maxWatchEventBytes`).
   */
  readonly maxEventBytes?: number | undefined;
  /** The watch request, named by a `LimitExceededError`. */
  readonly request?: { readonly method: string; readonly path: string } | undefined;
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

/** The start of a bad line for its error: never the whole line, which may be megabytes long. */
function excerpt(buf: Buffer, start: number, end: number): string {
  const text = buf.toString('utf8', start, Math.min(end, start + 1024));
  return end - start > 1024 ? `${text}…` : text;
}

/**
 * The event with its object as text, when the scan vouches for it and its metadata parses to an
 * object whose annotations (if any) are an object; undefined otherwise (the line is decoded whole,
 * which reports a malformed one).
 */
function textEvent(buf: Buffer, start: number, end: number): WatchEvent | undefined {
  const found = scanEventWithMetadata(buf, start, end);
  return found === undefined ? undefined : { type: found.scanned.type, object: { metadata: found.metadata }, text: found.scanned };
}

/**
 * Decodes bytes [start, end) of `buf`, one line of a watch stream, into an event; undefined for
 * a blank line. ERROR events become a thrown `KubeApiError`, anything malformed a
 * `WatchDecodeError`.
 */
export function decodeWatchLine(buf: Buffer, start: number, end: number, scope: ErrorScope, options: DecodeOptions = {}): WatchEvent | undefined {
  if (isBlank(buf, start, end)) return undefined;
  if (options.objectText === true && options.dropManagedFields === true) {
    const event = textEvent(buf, start, end);
    if (event !== undefined) return event;
  }
  let parsed: unknown;
  try {
    parsed = options.dropManagedFields === true ? parseEventDroppingManagedFields(buf, start, end) : JSON.parse(buf.toString('utf8', start, end));
  } catch (err) {
    throw new WatchDecodeError({ ...scope, line: excerpt(buf, start, end) }, { cause: err });
  }
  if (typeof parsed !== 'object' || parsed === null) throw new WatchDecodeError({ ...scope, line: excerpt(buf, start, end) });
  const { type, object } = parsed as { type?: unknown; object?: unknown };
  if (typeof object !== 'object' || object === null || Array.isArray(object)) throw new WatchDecodeError({ ...scope, line: excerpt(buf, start, end) });
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
      throw new WatchDecodeError({ ...scope, line: excerpt(buf, start, end) });
  }
}

/**
 * Cuts a byte stream into lines and decodes each into an event. A line inside one chunk is decoded
 * from that chunk directly (UTF-8 never has a newline byte inside a character); only a line that
 * spans chunks is copied, once, when its end arrives.
 */
class LineDecoder {
  readonly #scope: ErrorScope;
  readonly #options: DecodeOptions;
  readonly #maxBytes: number;
  /** The bytes after the last newline seen (an event still arriving), in arrival order. */
  #pending: Buffer[] = [];
  /** Total length of `#pending`: never above `#maxBytes` (the stream fails first). */
  #pendingBytes = 0;

  constructor(scope: ErrorScope, options: DecodeOptions) {
    this.#scope = scope;
    this.#options = options;
    this.#maxBytes = options.maxEventBytes ?? Infinity;
  }

  /** Decodes every line `chunk` completes into `out`; throws at the first bad or oversized line. */
  push(chunk: Buffer, out: WatchEvent[]): void {
    let nl = chunk.indexOf(NEWLINE);
    if (nl === -1) {
      this.#keep(chunk);
      return;
    }
    if (this.#pending.length > 0) {
      this.#check(this.#pendingBytes + nl);
      this.#pending.push(chunk.subarray(0, nl));
      const line = Buffer.concat(this.#pending);
      this.#pending = [];
      this.#pendingBytes = 0;
      this.#decode(line, 0, line.length, out);
    } else {
      this.#check(nl);
      this.#decode(chunk, 0, nl, out);
    }
    let start = nl + 1;
    nl = chunk.indexOf(NEWLINE, start);
    while (nl !== -1) {
      this.#check(nl - start);
      this.#decode(chunk, start, nl, out);
      start = nl + 1;
      nl = chunk.indexOf(NEWLINE, start);
    }
    if (start < chunk.length) this.#keep(chunk.subarray(start));
  }

  #keep(part: Buffer): void {
    this.#check(this.#pendingBytes + part.length);
    this.#pending.push(part);
    this.#pendingBytes += part.length;
  }

  /** Throws once an event is longer than the limit, before its bytes are kept. */
  #check(length: number): void {
    if (length <= this.#maxBytes) return;
    // Whatever was held goes now; the stream is destroyed by the caller.
    this.#pending = [];
    this.#pendingBytes = 0;
    throw new LimitExceededError({ ...this.#scope, limit: 'maxWatchEventBytes', limitBytes: this.#maxBytes, request: this.#options.request });
  }

  /** True when the stream stopped in the middle of an event. */
  get partial(): boolean {
    return this.#pending.some((part) => !isBlank(part, 0, part.length));
  }

  #decode(buf: Buffer, start: number, end: number, out: WatchEvent[]): void {
    const event = decodeWatchLine(buf, start, end, this.#scope, this.#options);
    if (event !== undefined) out.push(event);
  }
}

/** Decoded events waiting for the consumer: above this many, the socket is paused. */
const HIGH_WATER = 256;

/**
 * Decodes a watch response body (one JSON event per line) into events, yielded in batches of
 * everything decoded since the consumer last took one (never empty). The socket is released
 * when the stream ends, fails, or the consumer leaves early. A stream that breaks, or ends in the
 * middle of a line, throws a `TransportError`; the caller resumes from the last event it applied.
 * A bad line throws after the events before it were yielded.
 *
 * `res` is the response body on either protocol (an HTTP/1.1 IncomingMessage or an HTTP/2 stream).
 * Chunks are taken from `data` events as they arrive (no re-concatenation of buffered chunks, as
 * the stream's own iterator does) and decoded at once; a backlog pauses the socket.
 *
 * The iterator behaves as an async generator would (nothing happens before the first `next()`,
 * calls made while one is pending wait for it, `return()` releases the socket): see {@link WatchBatches}.
 */
export function decodeWatchStream(res: Readable, scope: ErrorScope, signal: AbortSignal, options: DecodeOptions = {}): AsyncIterableIterator<readonly WatchEvent[], undefined, undefined> {
  return new WatchBatches(res, scope, signal, options);
}

type Batch = IteratorResult<readonly WatchEvent[], undefined>;

const DONE: Batch = Object.freeze({ done: true, value: undefined });

/**
 * The iterator of {@link decodeWatchStream}. A class rather than an async generator: every cache
 * keeps a watch open for minutes, and a generator suspended on it kept its frame (a register file
 * of about 30 slots), its request queue and its await chain besides the state this object holds
 * (issue 12).
 *
 * Invariants: `#queue` holds decoded events not yet handed out, in stream order; the response is
 * paused only while the queue is at least HIGH_WATER long; nothing is decoded after a failure.
 * Listeners are attached only while `#phase` is 'open' ('new' until the first `next()`, 'done'
 * once the stream ended, failed or was left). `#resolve` is set only while a `next()` waits
 * (`#pending` is its promise), and `#scheduled` only while the delivery to it is queued.
 */
class WatchBatches implements AsyncIterableIterator<readonly WatchEvent[], undefined, undefined> {
  readonly #res: Readable;
  readonly #scope: ErrorScope;
  readonly #signal: AbortSignal;
  readonly #lines: LineDecoder;
  #queue: WatchEvent[] = [];
  #failure: { readonly error: unknown } | undefined;
  #ended = false;
  #phase: 'new' | 'open' | 'done' = 'new';
  #pending: Promise<Batch> | undefined;
  #resolve: ((result: Batch | Promise<Batch>) => void) | undefined;
  #scheduled = false;

  constructor(res: Readable, scope: ErrorScope, signal: AbortSignal, options: DecodeOptions) {
    this.#res = res;
    this.#scope = scope;
    this.#signal = signal;
    this.#lines = new LineDecoder(scope, options);
  }

  readonly #onData = (chunk: Buffer): void => {
    if (this.#failure !== undefined) return;
    try {
      this.#lines.push(chunk, this.#queue);
    } catch (err) {
      this.#failure = { error: err };
      // Stop reading at once: an oversized line must not keep arriving while the consumer catches up.
      this.#res.destroy();
    }
    if (this.#queue.length >= HIGH_WATER) this.#res.pause();
    this.#notify();
  };

  readonly #onEnd = (): void => {
    this.#ended = true;
    this.#notify();
  };

  readonly #onError = (err: Error): void => {
    this.#failure ??= { error: err };
    this.#notify();
  };

  readonly #onClose = (): void => {
    if (!this.#ended) this.#failure ??= { error: new Error('the connection closed before the stream ended') };
    this.#notify();
  };

  /** Hands the waiting `next()` what there is, a microtask after the news (as a generator resumes). */
  readonly #deliver = (): void => {
    this.#scheduled = false;
    const resolve = this.#resolve;
    if (resolve === undefined) return;
    const result = this.#take();
    if (result === undefined) return;
    this.#resolve = undefined;
    this.#pending = undefined;
    resolve(result);
  };

  [Symbol.asyncIterator](): this {
    return this;
  }

  next(): Promise<Batch> {
    const pending = this.#pending;
    if (pending !== undefined) {
      const after = (): Promise<Batch> => this.next();
      return pending.then(after, after);
    }
    if (this.#phase === 'new') this.#open();
    const result = this.#take();
    if (result !== undefined) return result;
    const waiting = new Promise<Batch>((resolve) => { this.#resolve = resolve; });
    this.#pending = waiting;
    return waiting;
  }

  /** The consumer leaves: the socket is released (never started: nothing to release). */
  return(): Promise<Batch> {
    const pending = this.#pending;
    if (pending !== undefined) {
      const after = (): Promise<Batch> => this.return();
      return pending.then(after, after);
    }
    if (this.#phase === 'open') this.#close();
    this.#phase = 'done';
    return Promise.resolve(DONE);
  }

  #open(): void {
    this.#phase = 'open';
    const res = this.#res;
    res.on('data', this.#onData);
    res.on('end', this.#onEnd);
    res.on('error', this.#onError);
    res.on('close', this.#onClose);
    // Opened at the consumer's first next(), some turns after the response arrived: a connection
    // reset in between destroyed the response before anyone listened, and no event will come to
    // say so. Without this the stream would sit silent until the inactivity deadline. The events
    // missed are replayed through the same handlers.
    if (res.readableEnded) this.#onEnd();
    if (res.errored !== null) this.#onError(res.errored);
    if (res.destroyed) this.#onClose();
  }

  /** Detaches and releases the socket. The error listener stays: an error the destroyed socket still reports is of no interest. */
  #close(): void {
    const res = this.#res;
    res.off('data', this.#onData);
    res.off('end', this.#onEnd);
    res.off('close', this.#onClose);
    res.destroy();
  }

  #notify(): void {
    if (this.#resolve === undefined || this.#scheduled) return;
    this.#scheduled = true;
    queueMicrotask(this.#deliver);
  }

  /** What a `next()` gets now (a settled promise), or undefined when it has to wait. */
  #take(): Promise<Batch> | undefined {
    if (this.#phase === 'done') return Promise.resolve(DONE);
    if (this.#queue.length > 0) {
      const batch = this.#queue;
      this.#queue = [];
      return Promise.resolve({ done: false, value: batch });
    }
    const failure = this.#failure;
    if (failure !== undefined) {
      this.#close();
      this.#phase = 'done';
      return Promise.reject(this.#broke(failure.error));
    }
    if (this.#ended) {
      this.#close();
      this.#phase = 'done';
      if (this.#signal.aborted) return Promise.reject(abortReason(this.#signal));
      if (this.#lines.partial) return Promise.reject(new TransportError(this.#scope, 'watch stream ended in the middle of an event'));
      return Promise.resolve(DONE);
    }
    if (this.#res.isPaused()) this.#res.resume();
    return undefined;
  }

  /** The error a failure of the stream is reported as. */
  #broke(err: unknown): Error {
    if (this.#signal.aborted) return abortReason(this.#signal);
    if (err instanceof FleetcacheError) return err;
    return new TransportError(this.#scope, `watch stream broke: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
}
