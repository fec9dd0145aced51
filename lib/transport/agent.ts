import * as http from 'node:http';
import * as https from 'node:https';
import type { Duplex } from 'node:stream';
import { childController } from '../util/index.ts';
import type { SlotHolder, SocketBudget } from './budget.ts';

/**
 * The request option carrying the request's signal to the agent's `createConnection` (Node copies
 * a request's own symbol keys into the options the agent gets, and drops `signal`), so a request
 * aborted while it waits for the budget leaves the line.
 */
export const SLOT_SIGNAL: unique symbol = Symbol('fleetcache.socketBudgetSignal');

/** Never aborts: a request made without a signal waits as long as it takes. */
const FOREVER = new AbortController().signal;

/** What the budget may do with one socket; `idle` while in the agent's free pool, `long` while it carries a watch. */
interface SocketUse {
  idle: boolean;
  long: boolean;
}

/**
 * What the budget may do with one socket of an agent. A class of its own, as are the listeners
 * below: whatever a socket keeps for its life must not close over `Sockets.create`, whose context
 * holds the agent's callback, and through it the request that opened the socket with all it
 * refers to (its LIST page, for one) for as long as the keep-alive socket lives.
 */
class AgentSocketHolder implements SlotHolder {
  readonly #socket: Duplex;
  readonly #use: SocketUse;

  constructor(socket: Duplex, use: SocketUse) {
    this.#socket = socket;
    this.#use = use;
  }

  idle(): boolean {
    return this.#use.idle;
  }

  yieldable(): boolean {
    return this.#use.idle || this.#use.long;
  }

  reclaim(reason: Error): void {
    this.#socket.destroy(this.#use.idle ? undefined : reason);
  }
}

/**
 * An 'error' listener that keeps an error from going unhandled where the error reaches whoever
 * needs it another way (a request's own listeners, a body's reader). Module-level: a closure made
 * per socket or stream would keep its caller's context alive as long as the listener.
 */
export function ignoreError(): void {
  // Nothing to do: see above.
}

/**
 * The budget side of a keep-alive agent: every socket it makes takes a slot first (waiting its
 * turn, abortable through {@link SLOT_SIGNAL}) and gives it back on 'close', whatever closed it. A
 * connect failing with EMFILE/ENFILE waits and is tried again (the budget's `open`), so the request
 * never sees it. A socket that falls idle while someone waits is closed rather than kept alive.
 *
 * Invariants: `#uses` has an entry for every socket this agent made that reached 'connect';
 * `#pending` holds one controller per socket being waited for or connected, removed when it settles.
 * Once `#closed`, no socket is handed over or kept: one that connects late is closed at once.
 */
class Sockets {
  readonly #budget: SocketBudget;
  readonly #uses = new WeakMap<Duplex, SocketUse>();
  readonly #pending = new Set<AbortController>();
  #closed = false;

  constructor(budget: SocketBudget) {
    this.#budget = budget;
  }

  create(options: http.ClientRequestArgs, make: (options: http.ClientRequestArgs) => Duplex, ready: 'connect' | 'secureConnect', callback: (err: Error | null, socket?: Duplex) => void): void {
    const given = (options as Record<symbol, unknown>)[SLOT_SIGNAL];
    // Aborted by the request or by the agent's destroy(): one controller each, no shared listener.
    const pending = childController(given instanceof AbortSignal ? given : FOREVER);
    this.#pending.add(pending.controller);
    const signal = pending.controller.signal;
    const settle = (): void => {
      this.#pending.delete(pending.controller);
      pending.dispose();
    };
    if (this.#closed) pending.controller.abort(new Error('the agent was destroyed'));
    this.#budget.open(signal, (slot) => new Promise<Duplex>((resolve, reject) => {
      const socket = make(options);
      socket.once('close', slot.release);
      socket.on('error', ignoreError);
      const onError = (err: Error): void => { reject(err); };
      socket.once('error', onError);
      socket.once(ready, () => {
        socket.off('error', onError);
        if (this.#closed) {
          socket.destroy();
          reject(new Error('the agent was destroyed'));
          return;
        }
        const use: SocketUse = { idle: false, long: false };
        this.#uses.set(socket, use);
        slot.hold(new AgentSocketHolder(socket, use));
        resolve(socket);
      });
    })).then((socket) => {
      settle();
      callback(null, socket);
    }, (err: unknown) => {
      settle();
      callback(err instanceof Error ? err : new Error(String(err)));
    });
  }

  /** The agent was destroyed: waits end, late sockets close. */
  close(): void {
    this.#closed = true;
    for (const controller of this.#pending) controller.abort(new Error('the agent was destroyed'));
  }

  /** False (the agent closes it) when someone waits for a slot: a turn is not kept by idling. */
  keep(socket: Duplex): boolean {
    if (this.#closed || this.#budget.waiting > 0) return false;
    const use = this.#uses.get(socket);
    if (use !== undefined) {
      use.idle = true;
      use.long = false;
    }
    return true;
  }

  reuse(socket: Duplex): void {
    const use = this.#uses.get(socket);
    if (use !== undefined) use.idle = false;
  }

  /** The socket now carries a watch: it may yield its turn. */
  markLong(socket: Duplex): void {
    const use = this.#uses.get(socket);
    if (use !== undefined) use.long = true;
  }
}

/** The socket Node's own `createConnection` returns synchronously (it always does). */
function made(socket: Duplex | null | undefined): Duplex {
  if (socket === null || socket === undefined) throw new Error('the agent made no socket');
  return socket;
}

/** An agent whose sockets are counted by a {@link SocketBudget}. */
export interface BudgetedAgent extends http.Agent {
  /** Marks the socket of a request that holds it open (a watch). */
  markLong(socket: Duplex): void;
}

/** A keep-alive `http.Agent` whose sockets take slots of `budget`. */
export class BudgetedHttpAgent extends http.Agent implements BudgetedAgent {
  readonly #sockets: Sockets;

  constructor(budget: SocketBudget, options: http.AgentOptions) {
    super(options);
    this.#sockets = new Sockets(budget);
  }

  override createConnection(options: http.ClientRequestArgs, callback?: (err: Error | null, stream: Duplex) => void): undefined {
    this.#sockets.create(options, (o) => made(super.createConnection(o)), 'connect', callback as (err: Error | null, socket?: Duplex) => void);
    return undefined;
  }

  override keepSocketAlive(socket: Duplex): boolean {
    if (!this.#sockets.keep(socket)) return false;
    super.keepSocketAlive(socket);
    return true;
  }

  override reuseSocket(socket: Duplex, request: http.ClientRequest): void {
    this.#sockets.reuse(socket);
    super.reuseSocket(socket, request);
  }

  markLong(socket: Duplex): void {
    this.#sockets.markLong(socket);
  }

  override destroy(): void {
    this.#sockets.close();
    super.destroy();
  }
}

/** A keep-alive `https.Agent` whose sockets take slots of `budget`. */
export class BudgetedHttpsAgent extends https.Agent implements BudgetedAgent {
  readonly #sockets: Sockets;

  constructor(budget: SocketBudget, options: https.AgentOptions) {
    super(options);
    this.#sockets = new Sockets(budget);
  }

  override createConnection(options: http.ClientRequestArgs, callback?: (err: Error | null, stream: Duplex) => void): undefined {
    this.#sockets.create(options, (o) => made(super.createConnection(o)), 'secureConnect', callback as (err: Error | null, socket?: Duplex) => void);
    return undefined;
  }

  override keepSocketAlive(socket: Duplex): boolean {
    if (!this.#sockets.keep(socket)) return false;
    super.keepSocketAlive(socket);
    return true;
  }

  override reuseSocket(socket: Duplex, request: http.ClientRequest): void {
    this.#sockets.reuse(socket);
    super.reuseSocket(socket, request);
  }

  markLong(socket: Duplex): void {
    this.#sockets.markLong(socket);
  }

  override destroy(): void {
    this.#sockets.close();
    super.destroy();
  }
}
