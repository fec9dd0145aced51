// Server-sent events for the dashboard: every client gets the whole state when it connects and
// again whenever it changed, coalesced to at most one update per interval; a client that does not
// read is dropped once its unsent bytes pass a bound; close() ends every stream.
import { noopLogger, realClock, type Clock, type Logger, type Timer } from '../../lib/util/index.ts';

/** The part of a `ServerResponse` a stream writes to. */
export interface StreamSink {
  writeHead(status: number, headers: Readonly<Record<string, string>>): unknown;
  write(chunk: string): boolean;
  end(): unknown;
  destroy(): unknown;
  /** Bytes written and not yet handed to the socket. */
  readonly writableLength: number;
  readonly destroyed: boolean;
  once(event: 'close', listener: () => void): unknown;
}

/** Options of {@link EventStream}. */
export interface EventStreamOptions {
  /** Shortest gap between two updates, in milliseconds: changes within it are sent as one. Default 250. */
  readonly minIntervalMs?: number;
  /**
   * How often the state is read again while clients are connected, for what changes without
   * telling (request and object counts). Default 2 000.
   */
  readonly refreshMs?: number;
  /** A comment line is sent after this long without an update, so idle streams stay open through proxies. Default 15 000. */
  readonly heartbeatMs?: number;
  /** Unsent bytes a client may have before it is dropped (a slow or stalled reader). Default 1 048 576. */
  readonly maxBufferedBytes?: number;
  /** Clients at once; one more is answered 503. Default 16. */
  readonly maxClients?: number;
  /** Extra headers of the stream's response (a Content-Security-Policy, say). Default none. */
  readonly headers?: Readonly<Record<string, string>>;
  /** Default: the wall clock. */
  readonly clock?: Clock;
  /** Default: discards everything. */
  readonly logger?: Logger;
}

function positive(option: string, value: number, integer: boolean): number {
  if (!Number.isFinite(value) || value <= 0 || (integer && !Number.isInteger(value))) {
    throw new TypeError(`EventStream option ${option} must be a positive ${integer ? 'integer' : 'number'}, got ${value}`);
  }
  return value;
}

/**
 * A server-sent event stream of one JSON document (`event: state`), read through `snapshot`.
 *
 * Invariants: `#clients` holds exactly the attached sinks neither ended nor destroyed, each with
 * the document it was last sent; timers run only while it is non-empty; at most one coalesced
 * update (`#pending`) is due at a time; after `close()` no sink is attached and none ever will be.
 */
export class EventStream {
  readonly #snapshot: () => string;
  readonly #minIntervalMs: number;
  readonly #refreshMs: number;
  readonly #heartbeatMs: number;
  readonly #maxBufferedBytes: number;
  readonly #maxClients: number;
  readonly #headers: Readonly<Record<string, string>>;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #clients = new Map<StreamSink, string>();
  #lastPublishAt = Number.NEGATIVE_INFINITY;
  #lastWriteAt = 0;
  /** The coalesced update, when one is due. */
  #pending: Timer | undefined;
  #refresh: Timer | undefined;
  #closed = false;
  #updates = 0;
  #dropped = 0;

  /** `snapshot` returns the document now, as JSON on one line; it is called at most once per interval. */
  constructor(snapshot: () => string, options: EventStreamOptions = {}) {
    if (typeof snapshot !== 'function') throw new TypeError('EventStream snapshot must be a function');
    this.#snapshot = snapshot;
    this.#minIntervalMs = positive('minIntervalMs', options.minIntervalMs ?? 250, false);
    this.#refreshMs = positive('refreshMs', options.refreshMs ?? 2_000, false);
    this.#heartbeatMs = positive('heartbeatMs', options.heartbeatMs ?? 15_000, false);
    this.#maxBufferedBytes = positive('maxBufferedBytes', options.maxBufferedBytes ?? 1_048_576, true);
    this.#maxClients = positive('maxClients', options.maxClients ?? 16, true);
    this.#headers = { ...options.headers };
    this.#clock = options.clock ?? realClock;
    this.#logger = options.logger ?? noopLogger;
  }

  /** Clients connected now. */
  get clients(): number {
    return this.#clients.size;
  }

  /** Counters: documents sent (one per client each time) and clients dropped for not reading. */
  stats(): { readonly sent: number; readonly dropped: number } {
    return { sent: this.#updates, dropped: this.#dropped };
  }

  /**
   * Answers one request (`method` GET or HEAD) with the stream: 503 when `maxClients` are
   * connected or the stream is closed, headers only for HEAD, else the document of this moment at
   * once and every change after.
   */
  attach(res: StreamSink, method: string): void {
    if (this.#closed || this.#clients.size >= this.#maxClients) {
      const body = this.#closed ? 'shutting down\n' : 'too many dashboard clients\n';
      res.writeHead(503, { ...this.#headers, 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store', 'retry-after': '5', 'content-length': String(Buffer.byteLength(body)) });
      if (method !== 'HEAD') res.write(body);
      res.end();
      return;
    }
    res.writeHead(200, {
      ...this.#headers,
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      // nginx and its kin buffer responses unless told not to.
      'x-accel-buffering': 'no',
    });
    if (method === 'HEAD') {
      res.end();
      return;
    }
    const current = this.#snapshot();
    this.#clients.set(res, current);
    res.once('close', () => { this.#detach(res); });
    if (this.#write(res, `retry: 2000\n${this.#event(current)}`)) this.#updates += 1;
    this.#refresh ??= this.#clock.setTimer(this.#refreshMs, () => { this.#onRefresh(); });
    // Others may hold an older document: they get this one on the coalesced path.
    this.notify();
  }

  /** Something shown may have changed: an update goes out within `minIntervalMs` (one for many calls). */
  notify(): void {
    if (this.#closed || this.#clients.size === 0 || this.#pending !== undefined) return;
    const wait = Math.max(0, this.#lastPublishAt + this.#minIntervalMs - this.#clock.now());
    this.#pending = this.#clock.setTimer(wait, () => {
      this.#pending = undefined;
      this.#publish();
    });
  }

  /** Ends every stream and answers later requests 503; timers are released. Idempotent. */
  close(): void {
    this.#closed = true;
    const sinks = [...this.#clients.keys()];
    this.#clients.clear();
    this.#stopTimers();
    for (const sink of sinks) sink.end();
  }

  /** Sends the document of now to every client that was last sent another one. */
  #publish(): void {
    if (this.#clients.size === 0) return;
    this.#lastPublishAt = this.#clock.now();
    const current = this.#snapshot();
    let frame: string | undefined;
    for (const [sink, last] of [...this.#clients]) {
      if (last === current) continue;
      frame ??= this.#event(current);
      this.#clients.set(sink, current);
      if (this.#write(sink, frame)) this.#updates += 1;
    }
  }

  #onRefresh(): void {
    this.#refresh = undefined;
    if (this.#pending === undefined) this.#publish();
    if (this.#clients.size > 0 && this.#clock.now() - this.#lastWriteAt >= this.#heartbeatMs) {
      for (const sink of [...this.#clients.keys()]) this.#write(sink, ': keep-alive\n\n');
    }
    if (this.#clients.size > 0) this.#refresh = this.#clock.setTimer(this.#refreshMs, () => { this.#onRefresh(); });
  }

  #event(document: string): string {
    // JSON.stringify escapes newlines, so the document is one `data:` line. "now" lets the page
    // turn absolute times into "in 12 s" against the server's clock.
    return `event: state\ndata: {"now":${this.#clock.now()},"state":${document}}\n\n`;
  }

  /** Writes `chunk` (true), or drops the client when that would leave more than the bound unsent. */
  #write(sink: StreamSink, chunk: string): boolean {
    if (sink.destroyed) {
      this.#detach(sink);
      return false;
    }
    if (sink.writableLength + Buffer.byteLength(chunk) > this.#maxBufferedBytes) {
      this.#dropped += 1;
      this.#logger.info('dashboard: dropping a client that does not keep up', { unsentBytes: sink.writableLength });
      this.#detach(sink);
      sink.destroy();
      return false;
    }
    this.#lastWriteAt = this.#clock.now();
    sink.write(chunk);
    return true;
  }

  #detach(sink: StreamSink): void {
    if (!this.#clients.delete(sink)) return;
    if (this.#clients.size === 0) this.#stopTimers();
  }

  #cancelPending(): void {
    this.#pending?.cancel();
    this.#pending = undefined;
  }

  #stopTimers(): void {
    this.#cancelPending();
    this.#refresh?.cancel();
    this.#refresh = undefined;
  }
}
