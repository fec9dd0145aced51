import { readFileSync } from 'node:fs';
import { abortReason, FleetcacheError, integerAtLeast, noopLogger, onAbort, realClock, type Clock, type Logger, type Timer } from '../util/index.ts';

/** Slots the default budget leaves out of the soft descriptor limit: at least 32, else 1/16 of it. */
function reserveOf(soft: number): number {
  return Math.max(32, Math.floor(soft / 16));
}

/** The budget when the descriptor limit cannot be read: 1,024 (the common soft limit) less its reserve. */
const FALLBACK_MAX_SOCKETS = 1024 - reserveOf(1024);

/** An unlimited soft limit is read as this many descriptors. */
const UNLIMITED_DESCRIPTORS = 65_536;

/**
 * The default number of sockets: the soft `RLIMIT_NOFILE` (Linux: `/proc/self/limits`, which Node has
 * already raised to the hard limit at start-up) less a reserve of max(32, limit/16) descriptors for
 * everything else the process opens; 960 when it cannot be read (1,024 less 64).
 */
export function defaultMaxSockets(limitsText?: string): number {
  let text = limitsText;
  if (text === undefined) {
    try {
      text = readFileSync('/proc/self/limits', 'utf8');
    } catch {
      return FALLBACK_MAX_SOCKETS;
    }
  }
  const match = /^Max open files\s+(\S+)/m.exec(text);
  if (match === null) return FALLBACK_MAX_SOCKETS;
  const soft = match[1] === 'unlimited' ? UNLIMITED_DESCRIPTORS : Number(match[1]);
  if (!Number.isSafeInteger(soft) || soft < 1) return FALLBACK_MAX_SOCKETS;
  return Math.max(1, soft - reserveOf(soft));
}

/** True for a failure to open a socket because the process (EMFILE) or the system (ENFILE) has no descriptor left. */
export function isDescriptorExhaustion(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as NodeJS.ErrnoException).code;
  return code === 'EMFILE' || code === 'ENFILE';
}

/**
 * The budget took a socket back so that a connection that waited its turn gets one: the requests
 * and watches on it fail with this (as their `cause`), and retry, waiting their own turn.
 */
export class SocketReclaimedError extends FleetcacheError {
  constructor(message: string) {
    super('ERR_SOCKET_RECLAIMED', message);
  }
}

/** What holds a slot once its socket is open: lets the budget take the socket back for a waiter. */
export interface SlotHolder {
  /** True when no request uses the socket (a keep-alive socket, an HTTP/2 session without streams). */
  idle(): boolean;
  /** True when closing it now costs only long-running streams (watches), which resume elsewhere. */
  yieldable(): boolean;
  /** Closes the socket; its 'close' releases the slot. */
  reclaim(reason: Error): void;
}

/** One socket's place in the budget. */
export interface SocketSlot {
  /**
   * Gives the place back. Idempotent: call it on every close path. A function of its own (no
   * `this`, and it keeps nothing of the caller), so a socket's 'close' can take it as it is.
   */
  readonly release: () => void;
  /** Says what holds the place once the socket is open, so the budget can reclaim it. */
  hold(holder: SlotHolder): void;
}

/** Options of {@link SocketBudget}. */
export interface SocketBudgetOptions {
  /**
   * Most sockets open at once, process-wide (HTTP/2 sessions and HTTP/1.1 sockets alike). Default
   * {@link defaultMaxSockets}: the soft descriptor limit less max(32, limit/16), or 960 when the
   * limit cannot be read.
   */
  readonly maxSockets?: number;
  /**
   * How long the first waiter waits, every slot being held, before the socket held longest that can
   * yield (idle, or carrying only watches) is closed for it: connections beyond the budget take
   * turns instead of starving. Idle sockets are closed for a waiter at once. Default 10 000.
   */
  readonly turnMs?: number;
  /**
   * After a connect failed with EMFILE or ENFILE, the budget holds to the sockets open at that
   * moment for this long, then tries its whole `maxSockets` again. Default 5 000.
   */
  readonly recoverMs?: number;
  /** Default: the wall clock. */
  readonly clock?: Clock;
  /** Default: discards everything. */
  readonly logger?: Logger;
}

interface Waiter {
  readonly resolve: (slot: SocketSlot) => void;
  readonly since: number;
  detach: () => void;
}

interface Held {
  readonly since: number;
  holder: SlotHolder | undefined;
  reclaimed: boolean;
}

/**
 * A process-wide budget of sockets (one instance shared by every connection). A connection takes a
 * slot before it opens a socket (an HTTP/2 session or an HTTP/1.1 socket) and gives it back when the
 * socket closes. When every slot is held, connections wait in order of arrival (FIFO, abortable);
 * an idle socket is closed at once for a waiter, and after `turnMs` the socket held longest that
 * carries only watches is closed too, so every cache gets its turn. A connect failing with
 * EMFILE/ENFILE is not an error: the budget shrinks to what is open and the connect waits again at
 * the head of the line (logged once per episode).
 *
 * Invariants: `#held` holds exactly the slots given out and not released, oldest first; `#waiters`
 * holds exactly the pending `acquire` calls, in the order they are to be served; a waiter exists
 * only while `#held.size >= #limit` or a grant is under way; `#timer` is set only while someone waits.
 */
export class SocketBudget {
  readonly #max: number;
  readonly #turnMs: number;
  readonly #recoverMs: number;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #held = new Set<Held>();
  #waiters: Waiter[] = [];
  /** The limit in force: `#max`, or less during an EMFILE episode. */
  #limit: number;
  /** When the EMFILE episode ends (clock time); undefined outside one. */
  #episodeUntil: number | undefined;
  #timer: Timer | undefined;
  /** When the timer last fired: turns come at most once per `turnMs`. */
  #lastTurn = -Infinity;

  constructor(options: SocketBudgetOptions = {}) {
    this.#max = options.maxSockets === undefined ? defaultMaxSockets() : integerAtLeast('SocketBudget', 'maxSockets', options.maxSockets, 1);
    this.#turnMs = integerAtLeast('SocketBudget', 'turnMs', options.turnMs ?? 10_000, 0);
    this.#recoverMs = integerAtLeast('SocketBudget', 'recoverMs', options.recoverMs ?? 5_000, 0);
    this.#clock = options.clock ?? realClock;
    this.#logger = options.logger ?? noopLogger;
    this.#limit = this.#max;
  }

  /** The configured `maxSockets`. */
  get maxSockets(): number {
    return this.#max;
  }

  /** The limit in force now: `maxSockets`, or the sockets open when EMFILE/ENFILE was last seen. */
  get limit(): number {
    return this.#limit;
  }

  /** Slots held now (sockets open or opening). */
  get inUse(): number {
    return this.#held.size;
  }

  /** Connections waiting for a slot. */
  get waiting(): number {
    return this.#waiters.length;
  }

  /**
   * Takes a slot: at once when one is free and nobody waits, else in turn. Rejects with the
   * signal's reason once it aborts (its place in line goes to the next).
   */
  acquire(signal: AbortSignal): Promise<SocketSlot> {
    return this.#acquire(signal, false);
  }

  /**
   * Opens a socket inside a slot: `connect` gets the slot and must release it when its socket
   * closes (and `hold` it once open). A connect failing with EMFILE/ENFILE shrinks the budget to the
   * sockets open now and is tried again when a slot frees, ahead of later arrivals; any other
   * failure releases the slot and rejects.
   */
  async open<T>(signal: AbortSignal, connect: (slot: SocketSlot) => Promise<T>): Promise<T> {
    let retry = false;
    for (;;) {
      const slot = await this.#acquire(signal, retry);
      try {
        return await connect(slot);
      } catch (err) {
        slot.release();
        if (!isDescriptorExhaustion(err) || signal.aborted) throw err;
        this.#exhausted(err as NodeJS.ErrnoException);
        retry = true;
      }
    }
  }

  #acquire(signal: AbortSignal, first: boolean): Promise<SocketSlot> {
    if (signal.aborted) return Promise.reject(abortReason(signal));
    this.#recover();
    if (this.#waiters.length === 0 && this.#held.size < this.#limit) return Promise.resolve(this.#grant());
    return new Promise<SocketSlot>((resolve, reject) => {
      const waiter: Waiter = { resolve, since: this.#clock.now(), detach: () => undefined };
      // The waiter's own signal (one request or one connection attempt), never a shared one.
      waiter.detach = onAbort(signal, () => {
        const at = this.#waiters.indexOf(waiter);
        if (at !== -1) this.#waiters.splice(at, 1);
        reject(abortReason(signal));
        this.#settle();
      });
      if (first) this.#waiters.unshift(waiter);
      else this.#waiters.push(waiter);
      this.#settle();
    });
  }

  #grant(): SocketSlot {
    const held: Held = { since: this.#clock.now(), holder: undefined, reclaimed: false };
    this.#held.add(held);
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.#held.delete(held);
        this.#settle();
      },
      hold: (holder) => {
        if (released) return;
        held.holder = holder;
        // Someone already waits: an idle socket goes at once.
        if (this.#waiters.length > 0) this.#settle();
      },
    };
  }

  /** Serves waiters while slots are free, then reclaims idle sockets for the rest; arms the turn timer. */
  #settle(): void {
    this.#recover();
    while (this.#waiters.length > 0 && this.#held.size < this.#limit) {
      const waiter = this.#waiters.shift();
      if (waiter === undefined) break;
      waiter.detach();
      waiter.resolve(this.#grant());
    }
    if (this.#waiters.length === 0) {
      this.#timer?.cancel();
      this.#timer = undefined;
      return;
    }
    let wanted = this.#waiters.length - this.#reclaiming();
    for (const held of this.#held) {
      if (wanted <= 0) break;
      if (held.reclaimed || held.holder?.idle() !== true) continue;
      this.#reclaim(held, 'an idle socket was closed for a connection waiting for the socket budget');
      wanted -= 1;
    }
    this.#arm();
  }

  #reclaiming(): number {
    let n = 0;
    for (const held of this.#held) if (held.reclaimed) n += 1;
    return n;
  }

  #reclaim(held: Held, why: string): void {
    held.reclaimed = true;
    held.holder?.reclaim(new SocketReclaimedError(why));
  }

  /** One timer while anyone waits: the first waiter's turn, or the end of an EMFILE episode. */
  #arm(): void {
    if (this.#timer !== undefined) return;
    const head = this.#waiters[0];
    if (head === undefined) return;
    const now = this.#clock.now();
    let at = Math.max(head.since, this.#lastTurn) + this.#turnMs;
    if (this.#episodeUntil !== undefined) at = Math.min(at, this.#episodeUntil);
    this.#timer = this.#clock.setTimer(Math.max(0, at - now), () => {
      this.#timer = undefined;
      this.#turn();
    });
  }

  /**
   * A turn: for each waiter that has waited `turnMs` (and no socket is closing for yet), the socket
   * held longest, at least `turnMs`, that can yield is closed. Every waiter due gets its turn in
   * the same round, so a long line does not wait one turn per place in it.
   */
  #turn(): void {
    this.#recover();
    const now = this.#clock.now();
    this.#lastTurn = now;
    let due = -this.#reclaiming();
    for (const waiter of this.#waiters) if (now - waiter.since >= this.#turnMs) due += 1;
    for (const held of this.#held) {
      if (due <= 0) break;
      if (held.reclaimed || now - held.since < this.#turnMs || held.holder?.yieldable() !== true) continue;
      this.#reclaim(held, `the socket was closed after ${now - held.since} ms for a connection that waited its turn in the socket budget`);
      due -= 1;
    }
    this.#settle();
  }

  /** EMFILE/ENFILE: hold to what is open now until the episode ends. */
  #exhausted(err: NodeJS.ErrnoException): void {
    const now = this.#clock.now();
    if (this.#episodeUntil === undefined) {
      this.#logger.warn('out of file descriptors: connections wait for a socket to close', {
        code: err.code, open: this.#held.size, maxSockets: this.#max, waiting: this.#waiters.length,
      });
    }
    this.#episodeUntil = now + this.#recoverMs;
    this.#limit = Math.min(this.#limit, this.#held.size);
    // The episode's end may come before the turn the timer waits for.
    this.#timer?.cancel();
    this.#timer = undefined;
  }

  /** Ends an EMFILE episode whose time is up. */
  #recover(): void {
    if (this.#episodeUntil === undefined || this.#clock.now() < this.#episodeUntil) return;
    this.#episodeUntil = undefined;
    this.#limit = this.#max;
    this.#logger.info('socket budget restored', { maxSockets: this.#max, open: this.#held.size });
  }
}

let processBudget: SocketBudget | undefined;

/** The process-wide budget connections use when given none ({@link defaultMaxSockets} sockets). */
export function defaultSocketBudget(): SocketBudget {
  processBudget ??= new SocketBudget();
  return processBudget;
}
