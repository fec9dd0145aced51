import * as http2 from 'node:http2';
import { isIP } from 'node:net';
import * as tls from 'node:tls';
import type { Clock, Timer } from '../util/index.ts';
import type { SlotHolder } from './budget.ts';

/** Liveness settings of an HTTP/2 session (client-go's ReadIdleTimeout and PingTimeout). */
export interface SessionLiveness {
  /** A PING is sent after this long without one; default 30 000. */
  readonly pingIntervalMs: number;
  /** A PING unanswered this long destroys the session; default 15 000. */
  readonly pingTimeoutMs: number;
  /**
   * The clock of the PING timers. Default: real timers that do not keep the process alive. Not the
   * connection's injected clock (see {@link H2Session}): only a test of the session itself sets it.
   */
  readonly clock?: Clock | undefined;
}

/** A real timer that does not keep the process alive. */
class UnrefTimer implements Timer {
  readonly #handle: NodeJS.Timeout;

  constructor(ms: number, fn: () => void) {
    this.#handle = setTimeout(fn, ms);
    this.#handle.unref();
  }

  cancel(): void {
    clearTimeout(this.#handle);
  }
}

/** The default clock of the PING timers. */
const unrefClock: Clock = {
  now: () => Date.now(),
  setTimer: (ms, fn) => new UnrefTimer(ms, fn),
};

/** Where a session goes and with what TLS material (one secure context per material). */
export interface SessionTarget {
  readonly host: string;
  readonly port: number;
  readonly servername: string | undefined;
  readonly secureContext: tls.SecureContext;
  readonly rejectUnauthorized: boolean;
}

/** The outcome of one TLS connection offering h2 first: a session, or the server chose HTTP/1.1. */
export type Negotiated = { readonly protocol: 'h2'; readonly session: H2Session } | { readonly protocol: 'http/1.1' };

/** Larger than HTTP/2's 64 KiB default so a LIST page streams at wire speed (Go uses 4 MiB). */
const STREAM_WINDOW = 4 * 1024 * 1024;
const SESSION_WINDOW = 32 * 1024 * 1024;

/**
 * ALPN `h2, http/1.1` in wire format, as a DataView: Node copies an array of names (or a Buffer) into
 * a slice of its 64 KiB Buffer pool and keeps that slice in the socket's options for the socket's
 * life, pinning a whole slab per few connections (about 5 KiB per cluster, issue 12); a DataView is
 * copied into an ArrayBuffer of its own 12 bytes instead.
 */
const ALPN = new DataView(new TextEncoder().encode('\x02h2\x08http/1.1').buffer);

/**
 * One TLS connection offering ALPN `h2, http/1.1`. Resolves once the handshake chose; rejects on a
 * failed connect or handshake. `abandon()` destroys a connection still handshaking (every waiter
 * gave up), `release` is called once when its socket closes, whatever happened.
 */
export function negotiate(target: SessionTarget, liveness: SessionLiveness, release: () => void): { readonly done: Promise<Negotiated>; readonly abandon: (reason: Error) => void } {
  const socket = tls.connect({
    host: target.host,
    port: target.port,
    // SNI carries host names only (RFC 6066); https.Agent leaves it out for an IP address too.
    ...(target.servername !== undefined ? { servername: target.servername } : isIP(target.host) === 0 ? { servername: target.host } : {}),
    secureContext: target.secureContext,
    rejectUnauthorized: target.rejectUnauthorized,
    ALPNProtocols: ALPN,
  });
  socket.once('close', release);
  let settled = false;
  const done = new Promise<Negotiated>((resolve, reject) => {
    const onError = (err: Error): void => { reject(err); };
    const onClose = (): void => { reject(new Error('the connection closed during the TLS handshake')); };
    socket.once('error', onError);
    socket.once('close', onClose);
    socket.once('secureConnect', () => {
      settled = true;
      // Neither is of use once the handshake is done, and both keep this call's context.
      socket.off('error', onError);
      socket.off('close', onClose);
      if (socket.alpnProtocol !== 'h2') {
        // This socket is not handed to the HTTP/1.1 agent (it makes its own): one extra handshake, once.
        socket.on('error', () => undefined);
        socket.destroy();
        resolve({ protocol: 'http/1.1' });
        return;
      }
      const session = http2.connect(`https://${target.host.includes(':') ? `[${target.host}]` : target.host}:${target.port}`, {
        createConnection: () => socket,
        settings: { enablePush: false, initialWindowSize: STREAM_WINDOW },
        maxSessionMemory: 64,
      });
      resolve({ protocol: 'h2', session: new H2Session(session, liveness) });
    });
  });
  return {
    done,
    abandon: (reason) => { if (!settled) socket.destroy(reason); },
  };
}

/**
 * One HTTP/2 client session: every request and watch to one cluster, multiplexed. It is usable
 * until the server sends GOAWAY, the socket closes or a PING goes unanswered for `pingTimeoutMs`
 * (a silently dead connection then fails every stream on it, so no watch is silently stale).
 *
 * PINGs run on real timers, not the connection's injected clock: they test a real socket's
 * liveness, and a test clock jumping ahead would declare a healthy session dead. The timers are
 * unref'd. A test of the session alone may give it a clock of its own (`liveness.clock`).
 *
 * It holds one slot of the socket budget: idle (no stream) it closes at once for a waiter; carrying
 * only watches it may yield its turn (the watches fail with the reason and resume elsewhere).
 *
 * Invariant: `#timer` is set iff the session is usable; `#streams` counts the streams opened
 * through `request()` whose 'close' has not been seen, `#long` those of them opened as watches.
 */
export class H2Session implements SlotHolder {
  readonly #session: http2.ClientHttp2Session;
  readonly #liveness: SessionLiveness;
  readonly #clock: Clock;
  #usable = true;
  #streams = 0;
  #long = 0;
  /** True once a stream was opened: a session fresh from its handshake is not idle, its requests are on their way. */
  #used = false;
  #timer: Timer | undefined;
  readonly #ended: Promise<void>;

  constructor(session: http2.ClientHttp2Session, liveness: SessionLiveness) {
    this.#session = session;
    this.#liveness = liveness;
    this.#clock = liveness.clock ?? unrefClock;
    session.on('error', () => { this.#retire(); });
    session.on('goaway', () => { this.#retire(); });
    this.#ended = new Promise((resolve) => {
      session.once('close', () => {
        this.#retire();
        resolve();
      });
    });
    session.once('connect', () => { session.setLocalWindowSize(SESSION_WINDOW); });
    this.#arm();
  }

  /** True until GOAWAY, close, error or a missed PING: new requests may use it. */
  get usable(): boolean {
    return this.#usable && !this.#session.closed && !this.#session.destroyed;
  }

  /** Streams opened and not yet closed. */
  get streams(): number {
    return this.#streams;
  }

  /** Resolves once the session's socket closed. */
  get ended(): Promise<void> {
    return this.#ended;
  }

  /** Opens one stream (`long`: a watch, held open) with raw headers (name, value...); its 'close' is counted. */
  request(headers: readonly string[], options: http2.ClientSessionRequestOptions, long = false): http2.ClientHttp2Stream {
    const stream = this.#session.request(headers, options);
    this.#used = true;
    this.#streams += 1;
    if (long) this.#long += 1;
    // `on`, not `once`: a stream closes once, and a once-wrapper costs more than the listener.
    stream.on('close', () => {
      this.#streams -= 1;
      if (long) this.#long -= 1;
    });
    return stream;
  }

  idle(): boolean {
    return this.#used && this.#streams === 0;
  }

  /** Only watches are open: a LIST or request in flight is never cut for another's turn. */
  yieldable(): boolean {
    return this.#streams === this.#long;
  }

  reclaim(reason: Error): void {
    if (this.#streams === 0) this.drain();
    else this.destroy(reason);
  }

  /** No new streams; the open ones finish (a rotated certificate's session). */
  drain(): void {
    this.#retire();
    if (!this.#session.closed) this.#session.close();
  }

  /** Ends every stream now. */
  destroy(reason?: Error): void {
    this.#retire();
    this.#session.destroy(reason);
  }

  #retire(): void {
    this.#usable = false;
    this.#timer?.cancel();
    this.#timer = undefined;
  }

  #arm(): void {
    if (!this.#usable) return;
    this.#timer = this.#clock.setTimer(this.#liveness.pingIntervalMs, () => { this.#ping(); });
  }

  #ping(): void {
    this.#timer = undefined;
    if (!this.usable) return;
    if (this.#streams === 0) {
      // Idle for a whole interval: give the descriptor back; the next request connects again.
      this.drain();
      return;
    }
    let answered = false;
    const deadline = this.#clock.setTimer(this.#liveness.pingTimeoutMs, () => {
      if (!answered) this.destroy(new Error(`HTTP/2 PING unanswered for ${this.#liveness.pingTimeoutMs} ms: the connection is dead`));
    });
    const sent = this.#session.ping((err) => {
      answered = true;
      deadline.cancel();
      if (err !== null) {
        this.destroy(err);
        return;
      }
      this.#arm();
    });
    if (!sent) {
      deadline.cancel();
      this.#arm();
    }
  }
}
