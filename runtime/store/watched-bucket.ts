import type { KV, KvEntry } from "@nats-io/kv";

/** How long a watch that ended waits before it starts again. */
const REWATCH_MS = 1_000;

/** Told of a key whose value changed (put again, or deleted: `null`), by this process or another. */
export type WatchedChange<T> = (key: string, value: T | null) => void;

interface Known<T> {
  revision: number;
  value: T | null;
}

/**
 * A small KV bucket's values kept in memory and current by a watch, so a hot read (a tool call's
 * server, a model call's provider, a bearer token's key) costs no store read. Entries keep their
 * revision: an older read never overwrites a newer value. A key not yet seen is read from the
 * bucket. When the watch ends (the connection was lost) the copy is dropped, not trusted, and
 * another watch starts, which replays every key's last value: a change made meanwhile (a revoked
 * key, a deleted server) is never answered from a stale copy.
 */
export class WatchedBucket<T> {
  private readonly known = new Map<string, Known<T>>();
  private readonly listeners: WatchedChange<T>[] = [];
  private watcher: Promise<{ stop(): void }> | undefined;
  private closed = false;

  /**
   * @param open the bucket, opened once by the caller
   * @param decode a stored entry's value; `null` for one this version cannot read (treated as absent)
   */
  constructor(
    private readonly open: () => Promise<KV>,
    private readonly decode: (entry: KvEntry) => T | null,
    private readonly rewatchMs = REWATCH_MS,
  ) {}

  /** Starts the watch now (the node's start), rather than on the first read. */
  async start(): Promise<void> {
    this.watch();
    await this.watcher?.catch(() => undefined);
  }

  /** Calls `listener` for every change learned of (from this process's writes and from the watch). */
  onChange(listener: WatchedChange<T>): void {
    this.listeners.push(listener);
  }

  /** The key's value: from memory once seen, else read from the bucket; `null` when absent. */
  async get(key: string): Promise<T | null> {
    this.watch();
    const cached = this.known.get(key);
    if (cached) return cached.value;
    const e = await (await this.open()).get(key);
    if (!e) return null;
    this.remember(key, e.revision, e.operation === "PUT" ? this.decode(e) : null);
    return this.known.get(key)?.value ?? null;
  }

  /** What a write of this process stored (or deleted: `null`) at `revision`. */
  remember(key: string, revision: number, value: T | null): void {
    const known = this.known.get(key);
    if (known && known.revision > revision) return;
    this.known.set(key, { revision, value });
    if (known?.revision !== revision) for (const listener of this.listeners) listener(key, value);
  }

  /**
   * A key this process deleted, whose value it read at `revision`: absent from now on. The
   * tombstone's revision is newer than the value's, so a late watched put cannot bring it back.
   */
  removed(key: string, revision: number): void {
    this.remember(key, revision + 1, null);
  }

  /** A key purged by this process: no revision is left to compare, so it is forgotten and announced. */
  forget(key: string): void {
    this.known.delete(key);
    for (const listener of this.listeners) listener(key, null);
  }

  /** Stops the watch (the node is stopping). */
  async close(): Promise<void> {
    this.closed = true;
    const w = this.watcher;
    this.watcher = undefined;
    (await w?.catch(() => undefined))?.stop();
    this.known.clear();
  }

  private watch(): void {
    if (this.watcher || this.closed) return;
    const watching = (async () => {
      const iterator = await (await this.open()).watch({ key: ">" });
      void (async () => {
        for await (const e of iterator) this.remember(e.key, e.revision, e.operation === "PUT" ? this.decode(e) : null);
      })()
        .catch(() => undefined)
        .finally(() => {
          if (this.watcher === watching) this.watcher = undefined;
          this.known.clear();
          if (!this.closed) setTimeout(() => this.watch(), this.rewatchMs).unref();
        });
      return iterator;
    })();
    this.watcher = watching;
    watching.catch(() => {
      if (this.watcher === watching) this.watcher = undefined;
    });
  }
}
