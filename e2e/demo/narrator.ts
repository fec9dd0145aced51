/**
 * The demo's voice: lines of narration, and long waits shown while they last so that a person (or a
 * CI log) can tell it is working — on a terminal a spinner line redrawn in place with what it waits
 * for and the time elapsed, otherwise a "still waiting" line every few seconds.
 */
import { realClock, type Clock, type Timer } from '../../lib/util/index.ts';

/** Where the narrator writes: the subset of a `tty.WriteStream` it uses. */
export interface NarratorOutput {
  /** True on a terminal: waits are drawn as one line updated in place. */
  readonly isTTY?: boolean | undefined;
  /** Terminal width; a spinner line is cut to fit, since a wrapped line cannot be redrawn in place. */
  readonly columns?: number | undefined;
  write(text: string): unknown;
}

export interface NarratorOptions {
  /** Where everything is written. Default: `process.stdout`. */
  readonly out?: NarratorOutput;
  /** Time source for elapsed times and redraws. Default: the wall clock. */
  readonly clock?: Clock;
  /** Off a terminal: milliseconds between "still waiting" lines. Default 5000. */
  readonly lineIntervalMs?: number;
  /** On a terminal: milliseconds between spinner frames. Default 100. */
  readonly frameIntervalMs?: number;
}

/** A wait in progress, as its work sees it. */
export interface Wait {
  /** Says what is awaited now (a later phase of the same wait); the elapsed time keeps running. */
  update(what: string): void;
}

interface Active {
  what: string;
  readonly started: number;
}

const frames = '⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏';
const erase = '\r\u001b[K';

function positive(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isFinite(value) || value <= 0) throw new TypeError(`Narrator: ${name} must be a positive number of milliseconds, got ${value}`);
  return value;
}

export class Narrator {
  readonly #out: NarratorOutput;
  readonly #clock: Clock;
  readonly #tty: boolean;
  readonly #lineIntervalMs: number;
  readonly #frameIntervalMs: number;
  // Waits in progress, innermost last: the one shown. The timer runs if and only if this is non-empty.
  readonly #waits: Active[] = [];
  #timer: Timer | undefined;
  #frame = 0;
  // On a terminal: a spinner line is on screen (and must be erased before anything else is written).
  #drawn = false;

  constructor(options: NarratorOptions = {}) {
    this.#out = options.out ?? process.stdout;
    this.#clock = options.clock ?? realClock;
    this.#tty = this.#out.isTTY === true;
    this.#lineIntervalMs = positive('lineIntervalMs', options.lineIntervalMs, 5000);
    this.#frameIntervalMs = positive('frameIntervalMs', options.frameIntervalMs, 100);
  }

  /** Writes one line of narration (above the spinner, on a terminal). */
  line(text: string): void {
    this.#erase();
    this.#out.write(`${text}\n`);
    this.#draw();
  }

  /**
   * Runs `work` while showing that it waits for `what`, with the time elapsed; resolves or rejects as
   * `work` does. Nothing is left on screen or pending once it settles: the caller narrates the outcome.
   */
  async wait<T>(what: string, work: (wait: Wait) => Promise<T>): Promise<T> {
    const active: Active = { what, started: this.#clock.now() };
    this.#waits.push(active);
    this.#draw();
    this.#schedule();
    try {
      return await work({ update: (next) => { active.what = next; if (this.#waits.at(-1) === active) this.#draw(); } });
    } finally {
      this.#waits.splice(this.#waits.indexOf(active), 1);
      this.#erase();
      if (this.#waits.length === 0) {
        this.#timer?.cancel();
        this.#timer = undefined;
      } else {
        this.#draw();
      }
    }
  }

  #schedule(): void {
    if (this.#timer !== undefined) return;
    this.#timer = this.#clock.setTimer(this.#tty ? this.#frameIntervalMs : this.#lineIntervalMs, () => {
      this.#timer = undefined;
      const shown = this.#waits.at(-1);
      if (shown === undefined) return;
      if (this.#tty) {
        this.#frame = (this.#frame + 1) % frames.length;
        this.#draw();
      } else {
        this.#out.write(`  … still waiting for ${shown.what} (${this.#elapsed(shown, 0)})\n`);
      }
      this.#schedule();
    });
  }

  #elapsed(active: Active, digits: number): string {
    return `${((this.#clock.now() - active.started) / 1000).toFixed(digits)} s`;
  }

  #draw(): void {
    const shown = this.#waits.at(-1);
    if (!this.#tty || shown === undefined) return;
    let text = `${frames[this.#frame] ?? ''} waiting for ${shown.what} (${this.#elapsed(shown, 1)})`;
    const width = this.#out.columns;
    if (width !== undefined && width > 1 && text.length > width - 1) text = `${text.slice(0, width - 2)}…`;
    this.#out.write(`${erase}${text}`);
    this.#drawn = true;
  }

  #erase(): void {
    if (!this.#drawn) return;
    this.#out.write(erase);
    this.#drawn = false;
  }
}
