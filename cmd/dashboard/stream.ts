// Server-sent events for the dashboard: every client gets the whole state when it connects and
// again whenever it changed, coalesced to at most one update per interval; a client that does not
// read is dropped once its unsent bytes pass a bound; each stream ends after a lifetime (so the
// viewer reconnects and is authorised again); one identity holds a bounded share of the clients;
// close() ends every stream.
import { functionOption, noopLogger, positiveInteger, positiveNumber, realClock, type Clock, type Logger, type Timer } from '../../lib/util/index.ts';

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
  /**
   * Unsent bytes a client may have before it is dropped (a slow or stalled reader). A client that
   * has read everything is always sent the next document whole, whatever its size (the snapshot
   * bounds that), so a client holds at most this plus one document. Default 1 048 576.
   */
  readonly maxBufferedBytes?: number;
  /** Clients at once; one more is answered 503. Default 16. */
  readonly maxClients?: number;
  /**
   * Clients of one identity at once, so that one viewer cannot take every slot; one more is
   * answered 429 with `Retry-After`, and other identities are unaffected. Default 4.
   */
  readonly maxClientsPerIdentity?: number;
  /**
   * Least time a stream lives, in milliseconds: it then ends with a `reconnect` event and the page
   * connects again, through the server's authentication and authorisation (a viewer whose access
   * was revoked is refused then). Each stream adds a random jitter of up to the same again
   * (kube-apiserver ends watches after its minimum request timeout the same way), so that viewers
   * do not all reconnect at once. Default 300 000 (5 to 10 minutes).
   */
  readonly lifetimeMs?: number;
  /** A number in [0, 1) that scales the lifetime's jitter. Default `Math.random`. */
  readonly random?: () => number;
  /** Extra headers of the stream's response (a Content-Security-Policy, say). Default none. */
  readonly headers?: Readonly<Record<string, string>>;
  /** Default: the wall clock. */
  readonly clock?: Clock;
  /** Default: discards everything. */
  readonly logger?: Logger;
}

/** One attached client. */
interface Client {
  /** The document it was last sent. */
  last: string;
  readonly identity: string;
  /** Ends the stream when its lifetime is over. */
  readonly expiry: Timer;
}

/**
 * A server-sent event stream of one JSON document (`event: state`), read through `snapshot`.
 *
 * Invariants: `#clients` holds exactly the attached sinks neither ended nor destroyed, each with
 * the document it was last sent and its armed expiry; `#perIdentity` counts them by identity (no
 * zero entries); timers run only while `#clients` is non-empty; at most one coalesced update
 * (`#pending`) is due at a time; after `close()` no sink is attached and none ever will be.
 */
export class EventStream {
  readonly #snapshot: () => string;
  readonly #minIntervalMs: number;
  readonly #refreshMs: number;
  readonly #heartbeatMs: number;
  readonly #maxBufferedBytes: number;
  readonly #maxClients: number;
  readonly #maxClientsPerIdentity: number;
  readonly #lifetimeMs: number;
  readonly #random: () => number;
  readonly #headers: Readonly<Record<string, string>>;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #clients = new Map<StreamSink, Client>();
  readonly #perIdentity = new Map<string, number>();
  #lastPublishAt = Number.NEGATIVE_INFINITY;
  #lastWriteAt = 0;
  /** The coalesced update, when one is due. */
  #pending: Timer | undefined;
  #refresh: Timer | undefined;
  #closed = false;
  #updates = 0;
  #dropped = 0;
  #refusedOverShare = 0;
  #expired = 0;

  /** `snapshot` returns the document now, as JSON on one line; it is called at most once per interval. */
  constructor(snapshot: () => string, options: EventStreamOptions = {}) {
    if (typeof snapshot !== 'function') throw new TypeError('EventStream snapshot must be a function');
    this.#snapshot = snapshot;
    this.#minIntervalMs = positiveNumber('EventStream', 'minIntervalMs', options.minIntervalMs ?? 250);
    this.#refreshMs = positiveNumber('EventStream', 'refreshMs', options.refreshMs ?? 2_000);
    this.#heartbeatMs = positiveNumber('EventStream', 'heartbeatMs', options.heartbeatMs ?? 15_000);
    this.#maxBufferedBytes = positiveInteger('EventStream', 'maxBufferedBytes', options.maxBufferedBytes ?? 1_048_576);
    this.#maxClients = positiveInteger('EventStream', 'maxClients', options.maxClients ?? 16);
    this.#maxClientsPerIdentity = positiveInteger('EventStream', 'maxClientsPerIdentity', options.maxClientsPerIdentity ?? 4);
    this.#lifetimeMs = positiveNumber('EventStream', 'lifetimeMs', options.lifetimeMs ?? 300_000);
    if (options.random !== undefined) functionOption('EventStream', 'random', options.random);
    this.#random = options.random ?? Math.random;
    this.#headers = { ...options.headers };
    this.#clock = options.clock ?? realClock;
    this.#logger = options.logger ?? noopLogger;
  }

  /** Clients connected now. */
  get clients(): number {
    return this.#clients.size;
  }

  /**
   * Counters: documents sent (one per client each time), clients dropped for not reading, requests
   * refused for being over their identity's share, and streams ended by their lifetime.
   */
  stats(): { readonly sent: number; readonly dropped: number; readonly refusedOverShare: number; readonly expired: number } {
    return { sent: this.#updates, dropped: this.#dropped, refusedOverShare: this.#refusedOverShare, expired: this.#expired };
  }

  /** Clients of `identity` connected now. */
  clientsOf(identity: string): number {
    return this.#perIdentity.get(identity) ?? 0;
  }

  /**
   * Answers one request (`method` GET or HEAD) of `identity` (who the server authenticated) with
   * the stream: 503 when the stream is closed or `maxClients` are connected, 429 when `identity`
   * already holds `maxClientsPerIdentity`, headers only for HEAD, else the document of this moment
   * at once and every change after, until the stream's lifetime ends.
   */
  attach(res: StreamSink, method: string, identity: string): void {
    if (this.#closed || this.#clients.size >= this.#maxClients) {
      this.#refuse(res, method, 503, this.#closed ? 'shutting down\n' : 'too many dashboard clients\n');
      return;
    }
    if (this.clientsOf(identity) >= this.#maxClientsPerIdentity) {
      this.#refusedOverShare += 1;
      this.#refuse(res, method, 429, `too many dashboard streams for this identity (at most ${this.#maxClientsPerIdentity})\n`);
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
    const lifetime = this.#lifetimeMs * (1 + Math.min(Math.max(this.#random(), 0), 1));
    this.#clients.set(res, { last: current, identity, expiry: this.#clock.setTimer(lifetime, () => { this.#expire(res); }) });
    this.#perIdentity.set(identity, this.clientsOf(identity) + 1);
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
    for (const sink of sinks) this.#detach(sink);
    this.#stopTimers();
    for (const sink of sinks) sink.end();
  }

  #refuse(res: StreamSink, method: string, status: 429 | 503, body: string): void {
    res.writeHead(status, { ...this.#headers, 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store', 'retry-after': '5', 'content-length': String(Buffer.byteLength(body)) });
    if (method !== 'HEAD') res.write(body);
    res.end();
  }

  /** The stream's lifetime is over: the page is told to connect again (and be authorised again), then it ends. */
  #expire(sink: StreamSink): void {
    if (!this.#clients.has(sink)) return;
    this.#expired += 1;
    this.#write(sink, 'event: reconnect\ndata: {}\n\n');
    this.#detach(sink);
    sink.end();
  }

  /** Sends the document of now to every client that was last sent another one. */
  #publish(): void {
    if (this.#clients.size === 0) return;
    this.#lastPublishAt = this.#clock.now();
    const current = this.#snapshot();
    let frame: string | undefined;
    for (const [sink, client] of [...this.#clients]) {
      if (client.last === current) continue;
      frame ??= this.#event(current);
      client.last = current;
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

  /**
   * Writes `chunk` (true), or drops the client when that would leave more than the bound unsent
   * behind what it has not read yet. A client that has read everything always gets the chunk,
   * however large: the size of a document is the snapshot's to bound, never a reason to drop.
   */
  #write(sink: StreamSink, chunk: string): boolean {
    if (sink.destroyed) {
      this.#detach(sink);
      return false;
    }
    if (sink.writableLength > 0 && sink.writableLength + Buffer.byteLength(chunk) > this.#maxBufferedBytes) {
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
    const client = this.#clients.get(sink);
    if (client === undefined) return;
    this.#clients.delete(sink);
    client.expiry.cancel();
    const left = this.clientsOf(client.identity) - 1;
    if (left > 0) this.#perIdentity.set(client.identity, left);
    else this.#perIdentity.delete(client.identity);
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
