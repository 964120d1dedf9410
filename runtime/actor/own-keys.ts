import type { NatsConnection } from "@nats-io/transport-node";
import type { Clock } from "../clock.js";
import type { Logger } from "../log.js";
import { isRemoval, publish, readLast, type PublishOutcome, type ReadOutcome } from "../nats/jetstream.js";
import type { ActorLog, LogBatchOutcome, LogEntry, PartitionLog } from "../store/partition-log.js";
import { kvSubject, partitionBucket, partitionStream } from "../topology.js";
import type { ActorAddress } from "./define.js";
import type { StoreEffect } from "./outbox.js";
import { sentHeaders } from "../nats/headers.js";

/**
 * What a key of the partition held as this process last wrote or read it: its value's bytes and
 * sequence (`null`: nothing, never written, removed or purged). Kept small: a tenant with 10,000
 * running runs keeps 10,000 of these.
 */
type Known = { data: Uint8Array | null; seq: number; expires: number };

/**
 * The keys actors keep beside their records, as this owner wrote or read them, so a tenant reading
 * its members does not ask the server for what it wrote itself. Sound because the partition's owner
 * is their only writer: an entry is trusted only under the log generation it was learnt in, until its
 * TTL, and a failed write forgets its key. Bounded by `limit`.
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

  /**
   * Writes `effects` through `log` as one chain (ActorLog.writeAll), behind `lead` when given (an
   * actor's record): their keys are forgotten while it is in flight and known again from what
   * landed. The revisions are the chain's, `lead`'s first.
   */
  async writeThrough(log: ActorLog, effects: readonly StoreEffect[], generation: number, clock: Clock, lead?: LogEntry): Promise<LogBatchOutcome> {
    const entries = effects.map(keyWrite);
    for (const e of entries) this.forget(e.key);
    const written = await log.writeAll(lead ? [lead, ...entries] : entries);
    if (written.outcome !== "written") return written;
    const revisions = lead ? written.revisions.slice(1) : written.revisions;
    const now = clock.now();
    effects.forEach((effect, i) => {
      const expires = effect.ttl_ms === undefined ? undefined : now + effect.ttl_ms;
      this.set(effect.key, entries[i]!.remove ? null : { data: entries[i]!.value, seq: revisions[i]! }, generation, expires);
    });
    return written;
  }
}

/** Whether `effect` sets a key `self` keeps beside its record: no bucket, and under the actor's own namespace. */
export function isOwnKeyOf(self: ActorAddress, effect: StoreEffect): boolean {
  return !effect.bucket && effect.key.startsWith(`${self.kind}.${self.id}.`);
}

/** A `runway.store` entry as it is written, in any bucket: a KV put with its history rolled up, or a purge (with a TTL, so the marker goes too). */
function keyWrite(effect: StoreEffect): { key: string; value: Uint8Array; headers: Record<string, string>; remove: boolean } {
  const remove = effect.value === null || effect.value === undefined;
  const headers: Record<string, string> = remove ? { "KV-Operation": "PURGE", "Nats-Rollup": "sub" } : { "Nats-Rollup": "sub" };
  if (remove || effect.ttl_ms !== undefined) headers["Nats-TTL"] = `${Math.max(1, Math.ceil((effect.ttl_ms ?? 60_000) / 1_000))}s`;
  const value = remove ? new Uint8Array() : new TextEncoder().encode(JSON.stringify(effect.value));
  return { key: effect.key, value, headers, remove };
}

/** A partition this host serves, as ActorKeys sees it. */
export interface ServedPartition {
  log: PartitionLog;
  keys: OwnKeys;
}

/**
 * The keys actors keep beside their records (`runway.store`): in another bucket a plain put (or
 * purge); in the actor's own partition bucket a write through the partition's fenced log, so it
 * lands only while this node still holds the partition (a new owner re-applies it when it loads
 * the record), remembered by the partition's OwnKeys so that the actor's own reads of it are
 * answered from memory.
 */
export class ActorKeys {
  constructor(
    private readonly deps: {
      nc: NatsConnection;
      clock: Clock;
      logger: Logger;
      partitionOf(address: ActorAddress): number;
      served(): Iterable<ServedPartition>;
      servedAt(partition: number): ServedPartition | undefined;
    },
  ) {}

  async store(self: ActorAddress, effect: StoreEffect): Promise<PublishOutcome> {
    const entry = keyWrite(effect);
    if (effect.bucket) {
      const h = sentHeaders();
      for (const [k, v] of Object.entries(entry.headers)) h.set(k, v);
      return publish(this.deps.nc, kvSubject(effect.bucket, effect.key), entry.value, { headers: h });
    }
    return this.storeOwn(self, [effect]);
  }

  /**
   * Stores keys the actor keeps beside its record (`runway.store` without a bucket), in order, in
   * one round trip (PartitionLog.writeAll: a tenant's decision sets a member key per run it admits
   * or ends, and its next decision reads them).
   */
  async storeOwn(self: ActorAddress, effects: readonly StoreEffect[]): Promise<PublishOutcome> {
    const outside = effects.find((e) => !isOwnKeyOf(self, e));
    if (outside) {
      this.deps.logger.error("runway.store outside the actor's keys", { actor: `${self.kind}.${self.id}`, key: outside.key });
      return { outcome: "rejected", code: 0, detail: `key ${outside.key} is not under ${self.kind}.${self.id}.` };
    }
    for (let attempt = 0; attempt < 5; attempt++) {
      const part = this.deps.servedAt(this.deps.partitionOf(self));
      if (!part) return { outcome: "unavailable", detail: "partition not served here" };
      try {
        const written = await part.keys.writeThrough(part.log, effects, part.log.generation, this.deps.clock);
        if (written.outcome === "written") return { outcome: "stored", seq: written.revisions.at(-1) ?? 0, duplicate: false };
        if (written.outcome === "fenced") return { outcome: "rejected", code: 0, detail: "fenced" };
        if (written.outcome === "unavailable") return { outcome: "unavailable", detail: written.detail };
        if (written.outcome === "too_large") return { outcome: "too_large", bytes: written.bytes, limit: written.limit, detail: "a key beside the record" };
      } catch (err) {
        this.deps.logger.error("runway.store refused", { actor: `${self.kind}.${self.id}`, keys: effects.map((e) => e.key), error: String(err) });
        return { outcome: "rejected", code: 0, detail: String(err) };
      }
      // stale: something else landed in the partition; the log has caught up, write again.
    }
    return { outcome: "unavailable", detail: "partition busy" };
  }

  /**
   * The last value of `key`, a key `actor` keeps beside its record (`runway.store` without a
   * bucket), from the partition's stream leader; from memory when this process, serving the
   * partition, wrote or read it since its view of the partition was last rebuilt. A key that
   * was removed reads `missing`.
   */
  async read(actor: ActorAddress, key: string): Promise<ReadOutcome> {
    const partition = this.deps.partitionOf(actor);
    const subject = kvSubject(partitionBucket(partition), key);
    const part = this.deps.servedAt(partition);
    if (!part) return readLast(this.deps.nc, partitionStream(partition), subject);
    const generation = part.log.generation;
    const known = part.keys.get(key, generation, this.deps.clock.now());
    if (known !== undefined) return known ? { outcome: "found", message: { subject, ...known, headers: {} } } : { outcome: "missing" };
    const read = await part.log.read(key);
    if (read.outcome === "unavailable") return read;
    if (read.outcome === "missing" || isRemoval(read.message)) {
      part.keys.set(key, null, generation, undefined, true);
      return { outcome: "missing" };
    }
    // A value with a TTL of its own expires at a time this process does not know: not kept.
    if (read.message.headers["Nats-TTL"] === undefined) part.keys.set(key, read.message, generation, undefined, true);
    return read;
  }

  /** Reads answered from memory and from the server, summed over the partitions served now. */
  reads(): { hits: number; misses: number } {
    let hits = 0;
    let misses = 0;
    for (const part of this.deps.served()) {
      hits += part.keys.stats.hits;
      misses += part.keys.stats.misses;
    }
    return { hits, misses };
  }
}
