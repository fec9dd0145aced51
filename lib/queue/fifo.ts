/**
 * A first-in first-out list with O(1) push and shift. `Array.prototype.shift` copies the whole
 * backing store once an array is large, which turns a busy queue quadratic; this keeps a head index
 * instead and compacts only when the consumed prefix outweighs the live part.
 *
 * Invariant: the live items are `#items[#head .. #items.length)`; slots before `#head` are cleared
 * so that consumed items can be garbage-collected.
 */
export class Fifo<T> {
  #items: (T | undefined)[] = [];
  #head = 0;

  get length(): number {
    return this.#items.length - this.#head;
  }

  push(item: T): void {
    this.#items.push(item);
  }

  /** Removes and returns the oldest item. Precondition: `length > 0`. */
  shift(): T {
    const item = this.#items[this.#head] as T;
    this.#items[this.#head] = undefined;
    this.#head++;
    if (this.#head === this.#items.length) {
      this.#items = [];
      this.#head = 0;
    } else if (this.#head >= 1024 && this.#head * 2 >= this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    return item;
  }

  clear(): void {
    this.#items = [];
    this.#head = 0;
  }
}
