/** A first-in first-out queue whose `shift` is O(1): taken items are cut off the front in bulk, once they are most of the array. */
export class Fifo<T> {
  #items: T[] = [];
  #head = 0;

  push(item: T): void {
    this.#items.push(item);
  }

  shift(): T | undefined {
    if (this.#head >= this.#items.length) return undefined;
    const item = this.#items[this.#head]!;
    this.#head++;
    if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
      this.#items.splice(0, this.#head);
      this.#head = 0;
    }
    return item;
  }
}
