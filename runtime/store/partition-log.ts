import type { NatsConnection } from "@nats-io/transport-node";
import { z } from "zod";
import { RunwayFault } from "../errors.js";
import { isRemoval, publish, publishChain, readLast, streamLastSequence, type PublishOutcome, type ReadOutcome } from "../nats/jetstream.js";
import { kvSubject, partitionBucket, partitionStream } from "../topology.js";
import { sentHeaders } from "../nats/headers.js";

/**
 * The fenced writer of one partition. Every write names the stream's last sequence as this writer saw
 * it, so the server stores it only if nothing at all was written in between: neither another host's
 * write nor a new owner's `fence` record. One header carries both fences, so a process paused past a
 * takeover cannot land a write, whatever its clock says; the price is one write in flight per
 * partition. The `fence` key's revision is the authority epoch; it changes only on claim and release.
 */
export const FenceRecordSchema = z.object({
  partition: z.number().int().nonnegative(),
  owner: z.string().nullable(),
  incarnation: z.string().nullable(),
  at: z.number(),
  /**
   * On a release: its owner had settled what it took over (see `PartitionLog.settled`), so what
   * still runs elsewhere runs at that owner, alive. Absent or false, the next claim is a takeover.
   */
  settled: z.boolean().optional(),
});
export type FenceRecord = z.infer<typeof FenceRecordSchema>;

export const FENCE_KEY = "fence";

export interface Authority {
  node: string;
  incarnation: string;
}

export type FenceRead =
  { outcome: "found"; fence: FenceRecord; epoch: number } | { outcome: "missing"; lastSequence: number } | { outcome: "unavailable"; detail: string };

export type ClaimOutcome =
  { outcome: "claimed"; log: PartitionLog } | { outcome: "held"; fence: FenceRecord } | { outcome: "raced" } | { outcome: "unavailable"; detail: string };

export type LogWriteOutcome =
  | { outcome: "written"; revision: number }
  /** Something else landed in the partition: drop cached state, reload, decide again. */
  | { outcome: "stale" }
  /** Another owner holds the partition now; stop writing to it. */
  | { outcome: "fenced"; fence: FenceRecord | null }
  | { outcome: "unavailable"; detail: string }
  /** Refused before sending: the record and its headers exceed the server's `max_payload`. Nothing was written. */
  | { outcome: "too_large"; bytes: number; limit: number };

/** One key's value in a {@link PartitionLog.writeAll}. */
export interface LogEntry {
  key: string;
  value: Uint8Array;
  headers?: Record<string, string>;
}

/** The answers of {@link PartitionLog.writeAll}: `written` gives each entry's revision, in order; the others as for one write (nothing landed). */
export type LogBatchOutcome = { outcome: "written"; revisions: number[] } | Exclude<LogWriteOutcome, { outcome: "written" }>;

/**
 * The port an actor lane reads and writes its record through: a partition's fenced log
 * ({@link PartitionLog}), or a decorator of one (tests wrap it to inject faults).
 */
export interface ActorLog {
  readonly partition: number;
  readonly authority: Authority;
  readonly epoch: number;
  /** Cached state read under an older generation is stale. */
  readonly generation: number;
  readonly fenced: boolean;
  read(key: string): Promise<ReadOutcome>;
  write(key: string, value: Uint8Array, headers?: Record<string, string>): Promise<LogWriteOutcome>;
  /** Several keys in order, in one round trip, fenced like one write (see PartitionLog.writeAll). */
  writeAll(entries: readonly LogEntry[]): Promise<LogBatchOutcome>;
}

const encoder = new TextEncoder();

/** A fence write replaces the key's history: the partition stream keeps every message per subject (journals). */
function rollup() {
  const h = sentHeaders();
  h.set("Nats-Rollup", "sub");
  return h;
}

export async function readFence(nc: NatsConnection, partition: number): Promise<FenceRead> {
  const read = await readLast(nc, partitionStream(partition), kvSubject(partitionBucket(partition), FENCE_KEY));
  if (read.outcome === "unavailable") return read;
  if (read.outcome === "missing") return { outcome: "missing", lastSequence: 0 };
  if (isRemoval(read.message)) return { outcome: "missing", lastSequence: read.message.seq };
  try {
    const fence = FenceRecordSchema.parse(JSON.parse(new TextDecoder().decode(read.message.data)));
    return { outcome: "found", fence, epoch: read.message.seq };
  } catch (err) {
    throw new RunwayFault("corrupt_fence", `partition ${partition} fence record is unreadable: ${String(err)}`);
  }
}

export class PartitionLog implements ActorLog {
  readonly partition: number;
  readonly bucket: string;
  readonly stream: string;
  readonly authority: Authority;
  /** Revision of the fence record this writer acts under. */
  readonly epoch: number;
  /**
   * Whether the claim took the partition as its previous owner released it, settled (a hand-over:
   * that owner is alive, and what it still executes reports here), not from a dead or fenced
   * owner, nor from one that let it go before it had recovered what a dead owner left.
   */
  readonly fromRelease: boolean;
  /**
   * Set by the owner once it has settled what it took over (its recovery pass reached every live
   * run): a release says so, and only then is the next claim a hand-over (see `fromRelease`).
   */
  settled = false;
  /** How a chain of writes is linked: by sequence on a replicated stream (see `publishChain`). */
  private readonly links: "msgid" | "sequence";
  /** Increments whenever this writer's view of the partition is rebuilt; cached state from an older generation is stale. */
  generation = 0;
  private head: number;
  private tail: Promise<unknown> = Promise.resolve();
  private needsResync = false;
  private fencedBy: FenceRecord | null | undefined;
  /** Counted for benchmarks and tests: refused writes by cause. */
  readonly stats = { writes: 0, stale: 0, fenced: 0, unavailable: 0 };

  private constructor(
    private readonly nc: NatsConnection,
    partition: number,
    authority: Authority,
    epoch: number,
    head: number,
    fromRelease = false,
    replicated = false,
  ) {
    this.fromRelease = fromRelease;
    this.links = replicated ? "sequence" : "msgid";
    this.partition = partition;
    this.bucket = partitionBucket(partition);
    this.stream = partitionStream(partition);
    this.authority = authority;
    this.epoch = epoch;
    this.head = head;
  }

  /**
   * Takes the partition if `mayTake` agrees with the current fence record: a revision-checked
   * write of a new fence record, whose revision becomes the new epoch. Every write of the
   * previous owner that has not landed yet is refused from this moment on.
   */
  static async claim(
    nc: NatsConnection,
    partition: number,
    authority: Authority,
    mayTake: (current: FenceRecord | undefined) => boolean,
    now: number,
    options: { replicated?: boolean } = {},
  ): Promise<ClaimOutcome> {
    const current = await readFence(nc, partition);
    if (current.outcome === "unavailable") return current;
    const fence = current.outcome === "found" ? current.fence : undefined;
    if (!mayTake(fence)) return { outcome: "held", fence: fence! };
    const expected = current.outcome === "found" ? current.epoch : current.lastSequence;
    const record: FenceRecord = { partition, owner: authority.node, incarnation: authority.incarnation, at: now };
    const bucket = partitionBucket(partition);
    const written = await publish(nc, kvSubject(bucket, FENCE_KEY), encoder.encode(JSON.stringify(record)), {
      expectLastSubjectSequence: expected,
      headers: rollup(),
    });
    switch (written.outcome) {
      case "stored":
        return {
          outcome: "claimed",
          log: new PartitionLog(nc, partition, authority, written.seq, written.seq, fence?.owner === null && fence.settled === true, options.replicated),
        };
      case "conflict":
        return { outcome: "raced" };
      case "rejected":
        throw new RunwayFault("claim_rejected", `claim of partition ${partition} rejected: ${written.code} ${written.detail}`);
      default:
        return { outcome: "unavailable", detail: written.detail };
    }
  }

  /**
   * Joins the epoch of an existing fence record without claiming. Only tests use it, to put two
   * hosts under one authority and show that the sequence fence alone keeps their writes apart.
   */
  static async attach(nc: NatsConnection, partition: number, authority: Authority): Promise<PartitionLog> {
    const fence = await readFence(nc, partition);
    if (fence.outcome !== "found") throw new RunwayFault("not_claimed", `partition ${partition} has no owner to attach to`);
    const head = await streamLastSequence(nc, partitionStream(partition));
    if (typeof head !== "number") throw new RunwayFault("store_unavailable", head.unavailable, { kind: "retryable" });
    return new PartitionLog(nc, partition, authority, fence.epoch, head);
  }

  get fenced(): boolean {
    return this.fencedBy !== undefined;
  }

  read(key: string): Promise<ReadOutcome> {
    return readLast(this.nc, this.stream, kvSubject(this.bucket, key));
  }

  /** Serialised: one write in flight per partition, each naming the last sequence it saw. */
  write(key: string, value: Uint8Array, headers?: Record<string, string>): Promise<LogWriteOutcome> {
    return this.serialised(async () => {
      const result = await this.writeNow(key, (expect) =>
        publish(this.nc, kvSubject(this.bucket, key), value, { headers: this.headersOf(headers), expectLastSequence: expect }),
      );
      if (result.outcome !== "stored") return result;
      this.stats.writes++;
      return { outcome: "written", revision: result.seq };
    });
  }

  /**
   * Writes several keys in order, all in flight at once (one round trip), fenced like one write:
   * the first names the last sequence this writer saw, each later one the one before it
   * (publishChain). What lands is a prefix; when not all did, the view is rebuilt (`stale`).
   */
  writeAll(entries: readonly LogEntry[]): Promise<LogBatchOutcome> {
    if (entries.length === 0) return Promise.resolve({ outcome: "written", revisions: [] });
    return this.serialised(async () => {
      let seqs: number[] = [];
      const messages = entries.map((e) => ({ subject: kvSubject(this.bucket, e.key), data: e.value, headers: this.headersOf(e.headers) }));
      const result = await this.writeNow(`${entries.length} keys from ${entries[0]?.key}`, async (expect) => {
        const chain = await publishChain(this.nc, messages, { expectLastSequence: expect, links: this.links });
        if (chain.outcome === "stored") {
          seqs = chain.seqs;
          return { outcome: "stored", seq: chain.seqs[chain.seqs.length - 1]!, duplicate: false };
        }
        // Some landed: the head moved under us; rebuilt like after a write that may have landed.
        return chain.landed > 0 ? { outcome: "unknown", detail: `${chain.landed} of ${entries.length} keys landed` } : chain.first;
      });
      if (result.outcome !== "stored") return result;
      this.stats.writes += entries.length;
      return { outcome: "written", revisions: seqs };
    });
  }

  private serialised<T>(write: () => Promise<T>): Promise<T> {
    const run = this.tail.then(write);
    this.tail = run.catch(() => undefined);
    return run;
  }

  private headersOf(extra: Record<string, string> | undefined) {
    const h = sentHeaders();
    h.set("Rw-Writer", `${this.authority.node}/${this.epoch}`);
    if (extra) for (const [k, v] of Object.entries(extra)) h.set(k, v);
    return h;
  }

  /** Sends under the fence (the last sequence this writer saw); moves the head on `stored`, and maps every other answer to the log's. */
  private async writeNow(
    what: string,
    send: (expectLastSequence: number) => Promise<PublishOutcome>,
  ): Promise<Extract<PublishOutcome, { outcome: "stored" }> | Exclude<LogWriteOutcome, { outcome: "written" }>> {
    if (this.fencedBy !== undefined) return { outcome: "fenced", fence: this.fencedBy };
    if (this.needsResync) {
      const resynced = await this.resync();
      if (resynced.outcome !== "current")
        return resynced.outcome === "fenced" ? { outcome: "fenced", fence: resynced.fence } : { outcome: "unavailable", detail: resynced.detail };
      return { outcome: "stale" };
    }
    const result = await send(this.head);
    switch (result.outcome) {
      case "stored":
        this.head = result.seq;
        return result;
      case "conflict":
      case "unknown": {
        // Someone else wrote, or our own write may have landed: rebuild the view either way.
        this.stats.stale++;
        const resynced = await this.resync();
        if (resynced.outcome === "fenced") return { outcome: "fenced", fence: resynced.fence };
        if (resynced.outcome === "unavailable") return { outcome: "unavailable", detail: resynced.detail };
        return { outcome: "stale" };
      }
      case "unavailable":
        this.stats.unavailable++;
        return { outcome: "unavailable", detail: result.detail };
      case "too_large":
        return { outcome: "too_large", bytes: result.bytes, limit: result.limit };
      case "rejected":
        throw new RunwayFault("write_rejected", `write of ${what} in partition ${this.partition} rejected: ${result.code} ${result.detail}`);
    }
  }

  /**
   * Re-reads the partition head, then the fence. Order matters: anything that lands after the
   * head was read makes the next write fail, so a fence read after it is current enough.
   */
  private async resync(): Promise<{ outcome: "current" } | { outcome: "fenced"; fence: FenceRecord | null } | { outcome: "unavailable"; detail: string }> {
    this.needsResync = true;
    const head = await streamLastSequence(this.nc, this.stream);
    if (typeof head !== "number") return { outcome: "unavailable", detail: head.unavailable };
    const fence = await readFence(this.nc, this.partition);
    if (fence.outcome === "unavailable") return fence;
    if (fence.outcome === "missing" || fence.epoch !== this.epoch) {
      this.fencedBy = fence.outcome === "found" ? fence.fence : null;
      this.stats.fenced++;
      return { outcome: "fenced", fence: this.fencedBy };
    }
    this.head = head;
    this.generation++;
    this.needsResync = false;
    return { outcome: "current" };
  }

  /** Checks that this writer still holds the partition (used by the ownership loop). */
  async verify(): Promise<"owned" | "fenced" | "unavailable"> {
    if (this.fencedBy !== undefined) return "fenced";
    const fence = await readFence(this.nc, this.partition);
    if (fence.outcome === "unavailable") return "unavailable";
    if (fence.outcome === "missing" || fence.epoch !== this.epoch) {
      this.fencedBy = fence.outcome === "found" ? fence.fence : null;
      return "fenced";
    }
    return "owned";
  }

  /** Gives the partition up: an unowned fence record, written after our last write. */
  release(now: number): Promise<void> {
    const run = this.tail.then(async () => {
      if (this.fencedBy !== undefined) return;
      const record: FenceRecord = { partition: this.partition, owner: null, incarnation: null, at: now, settled: this.settled };
      await publish(this.nc, kvSubject(this.bucket, FENCE_KEY), encoder.encode(JSON.stringify(record)), {
        expectLastSubjectSequence: this.epoch,
        headers: rollup(),
      });
      this.fencedBy = record;
    });
    this.tail = run.catch(() => undefined);
    return run;
  }
}
