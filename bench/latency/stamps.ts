// The two in-process stamps of the registry latency benchmark, on one monotonic clock
// (`performance.now()`): when the bytes of an event reach the connection (the connection's
// `onWatchChunk` observer, before decoding) and when its owner is added to the requeue queue (a
// queue passed as the registry's `queue` option). Neither exists unless a benchmark installs it.
import { performance } from 'node:perf_hooks';
import { RateLimitingWorkQueue } from '../../lib/queue/index.ts';
import type { OwnerKey } from '../../lib/registry/index.ts';

const MARKER = Buffer.from('"seq":"');
const QUOTE = 0x22;
/** Bytes kept from a chunk's end: a marker and the longest sequence number with its quote. */
const CARRY = MARKER.length + 16;

/**
 * One measured window: updates `from` … `from + total - 1`, object `seq mod objects` carrying
 * `data.seq = seq` (bench/latency/sim-host.ts). `arrived[seq - from]` is when the chunk holding
 * that event's sequence number reached the connection; `requeued[seq - from]` when its owner was
 * added to the queue; NaN until then.
 */
export class Window {
  readonly from: number;
  readonly total: number;
  readonly objects: number;
  readonly arrived: Float64Array;
  readonly requeued: Float64Array;
  /** Adds seen per object in this window: the j-th add of owner k is the one for seq from + k + j·objects. */
  readonly #adds: Uint32Array;
  /** The last bytes of the previous chunk, when a sequence number may have been cut there. */
  #carry: Buffer | undefined;

  constructor(from: number, total: number, objects: number) {
    if (from % objects !== 0 || total % objects !== 0) throw new TypeError('a window starts and ends on a multiple of the object count');
    this.from = from;
    this.total = total;
    this.objects = objects;
    this.arrived = new Float64Array(total).fill(Number.NaN);
    this.requeued = new Float64Array(total).fill(Number.NaN);
    this.#adds = new Uint32Array(objects);
  }

  /**
   * The connection's observer: stamps each sequence number that ends in this chunk with its
   * arrival (one cut by the previous chunk's end included: the event is not whole before).
   */
  chunk(chunk: Buffer): void {
    const at = performance.now();
    const carry = this.#carry;
    this.#carry = undefined;
    if (carry !== undefined) this.#scan(Buffer.concat([carry, chunk.subarray(0, CARRY)]), carry.length, at);
    this.#scan(chunk, 0, at);
  }

  /** Stamps the sequence numbers of `buf` whose closing quote is at `minEnd` or later; keeps a cut one's bytes. */
  #scan(buf: Buffer, minEnd: number, at: number): void {
    let pos = buf.indexOf(MARKER);
    while (pos !== -1) {
      let seq = 0;
      let i = pos + MARKER.length;
      for (; i < buf.length; i++) {
        const c = buf[i] ?? QUOTE;
        if (c === QUOTE) break;
        seq = c >= 0x30 && c <= 0x39 ? seq * 10 + (c - 0x30) : Number.NaN;
      }
      if (i === buf.length) break;
      if (i >= minEnd && seq >= this.from && seq < this.from + this.total) this.arrived[seq - this.from] = at;
      pos = buf.indexOf(MARKER, i);
    }
    // A marker or its digits may run past the end: the next chunk completes them.
    if (minEnd === 0 && buf.at(-1) !== 0x0a) this.#carry = Buffer.from(buf.subarray(Math.max(0, buf.length - CARRY)));
  }

  /** The queue's observer: owner k was added. */
  requeue(k: number): void {
    const at = performance.now();
    const j = this.#adds[k] ?? 0;
    this.#adds[k] = j + 1;
    const index = k + j * this.objects;
    if (index < this.total) this.requeued[index] = at;
  }
}

/** The registry's requeue queue, telling the current window which object's owner each add is for. */
export class StampedQueue extends RateLimitingWorkQueue<OwnerKey> {
  readonly #objectOf: ReadonlyMap<OwnerKey, number>;
  window: Window | undefined;

  constructor(objectOf: ReadonlyMap<OwnerKey, number>) {
    super({ name: 'owners' });
    this.#objectOf = objectOf;
  }

  override add(item: OwnerKey): void {
    const window = this.window;
    if (window !== undefined) {
      const k = this.#objectOf.get(item);
      if (k !== undefined) window.requeue(k);
    }
    super.add(item);
  }
}
