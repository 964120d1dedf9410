/**
 * The last `capacity` items pushed, oldest first: pushing beyond it drops the oldest. Push is
 * O(1) and memory is fixed, so in-memory bookkeeping kept for metrics and tests (a dispatcher's
 * recent grants) cannot grow with a node's uptime.
 */
export class Ring<T> {
  private readonly items: (T | undefined)[];
  private start = 0;
  private size = 0;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity <= 0) throw new RangeError(`ring capacity must be a positive integer, not ${capacity}`);
    this.items = new Array<T | undefined>(capacity);
  }

  get length(): number {
    return this.size;
  }

  push(item: T): void {
    this.items[(this.start + this.size) % this.capacity] = item;
    if (this.size < this.capacity) this.size++;
    else this.start = (this.start + 1) % this.capacity;
  }

  /** The items held, oldest first (a copy). */
  toArray(): T[] {
    const out: T[] = [];
    for (let i = 0; i < this.size; i++) out.push(this.items[(this.start + i) % this.capacity] as T);
    return out;
  }
}
