/**
 * What a key of the partition held as this process last wrote or read it: its value's bytes and
 * sequence (`null`: nothing, never written, removed or purged). Kept small: a tenant with 10,000
 * running runs keeps 10,000 of these.
 */
type Known = { data: Uint8Array | null; seq: number; expires: number };

/**
 * The keys actors keep beside their records (`runway.store` without a bucket), as this owner
 * wrote or read them, so an actor that reads its own keys before deciding (a tenant's members)
 * does not ask the server for what it wrote itself. Sound because the partition's owner is
 * their only writer (every write goes through its fenced log): an entry is trusted only under
 * the log generation it was learnt in (a resync or a conflict forgets it; a new claim starts a new
 * cache), until its TTL, and a write that did not land forgets its key. Bounded: past `limit`
 * keys it starts over.
 */
export class OwnKeys {
  private readonly known = new Map<string, Known>();
  private generation = -1;
  /** Reads answered from memory and reads that had to ask the server, for tests and metrics. */
  readonly stats = { hits: 0, misses: 0 };

  constructor(private readonly limit = 100_000) {}

  /** The key as known under `generation` at `now`, or undefined when it must be read. */
  get(key: string, generation: number, now: number): { data: Uint8Array; seq: number } | null | undefined {
    const k = generation === this.generation ? this.known.get(key) : undefined;
    if (!k || k.expires <= now) {
      if (k) this.known.delete(key);
      this.stats.misses++;
      return undefined;
    }
    this.stats.hits++;
    return k.data === null ? null : { data: k.data, seq: k.seq };
  }

  /** What this owner wrote (or read: `read` only fills a key not learnt meanwhile, so a read never hides a newer write). */
  set(key: string, value: { data: Uint8Array; seq: number } | null, generation: number, expires = Number.POSITIVE_INFINITY, read = false): void {
    if (generation < this.generation) return;
    if (generation !== this.generation) {
      this.known.clear();
      this.generation = generation;
    }
    if (read && this.known.has(key)) return;
    if (this.known.size >= this.limit) this.known.clear();
    this.known.set(key, value === null ? { data: null, seq: 0, expires } : { data: value.data, seq: value.seq, expires });
  }

  forget(key: string): void {
    this.known.delete(key);
  }
}
