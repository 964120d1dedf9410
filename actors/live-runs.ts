import type { NatsConnection } from "@nats-io/transport-node";
import { headers as makeHeaders } from "@nats-io/transport-node";
import { Kvm } from "@nats-io/kv";
import { kvSubject, partitionOf, publish, RunwayFault, type Effect } from "../runtime/index.js";

/** KV bucket of the live-run index: `p<partition>.<run>` for every run that may be live. */
export const LIVE_BUCKET = "rw_live";

export interface LiveEntry {
  tenant: string;
  at: number;
}

/**
 * The live-run index: one key per run that may still be live, `p<partition>.<run>` in bucket
 * `rw_live`, so recovery at partition claim and the sweep list a partition's live runs (a key
 * listing filtered to the partition) instead of every run it ever stored.
 *
 * Contract (the run actor keeps it, `run-actor.ts`):
 * - **add before the record**: a run's create adds its key in `prepare`, before the create is
 *   stored, so no live record ever lacks its key (a crash after the add and before the record
 *   leaves a key without a record: harmless, removed by the sweep);
 * - **remove after the end**: the transition that ends a run removes its key with a
 *   `runway.store` effect (its outbox, last of the durable entries, so the key outlives anything
 *   else the end published and a crash re-publishes it on the next load);
 * - **readers check the record**: an entry is a hint. Recovery and the sweep read the run's
 *   record and remove an entry whose run ended (or never got a record, after two sweeps).
 *
 * Writes are plain KV puts and purges, not fenced: both are idempotent and monotone for a run
 * (added before it exists, removed only once it ended, and an ended run never lives again), so
 * a paused process that writes late cannot make the index wrong for long.
 */
export class LiveRunIndex {
  constructor(
    private readonly nc: NatsConnection,
    private readonly partitions: number,
  ) {}

  static key(partition: number, run: string): string {
    return `p${partition}.${run}`;
  }

  keyOf(run: string): string {
    return LiveRunIndex.key(partitionOf(run, this.partitions), run);
  }

  /** Adds `run` (idempotent). Throws a retryable fault when the store does not answer. */
  async add(run: string, entry: LiveEntry): Promise<void> {
    const stored = await publish(this.nc, kvSubject(LIVE_BUCKET, this.keyOf(run)), new TextEncoder().encode(JSON.stringify(entry)));
    if (stored.outcome !== "stored") throw new RunwayFault("store_unavailable", `live index of ${run}: ${stored.outcome}`, { kind: "retryable" });
  }

  /**
   * The effect that removes `run`'s entry after the transition that ended it is stored: last,
   * after its tenant heard of the end (`last`), so a crash before that leaves the run in the index
   * for recovery to load it and send again.
   */
  removal(run: string): Effect {
    return { type: "runway.store", bucket: LIVE_BUCKET, key: this.keyOf(run), value: null, last: true };
  }

  /** Removes `run`'s entry now (a reader that found it ended or missing). */
  async remove(run: string): Promise<void> {
    const h = makeHeaders();
    h.set("KV-Operation", "PURGE");
    h.set("Nats-Rollup", "sub");
    h.set("Nats-TTL", "60s");
    await publish(this.nc, kvSubject(LIVE_BUCKET, this.keyOf(run)), new Uint8Array(), { headers: h });
  }

  /** The runs of `partition` in the index: one filtered key listing, O(its live runs). */
  async list(partition: number): Promise<string[]> {
    const kv = await new Kvm(this.nc).open(LIVE_BUCKET);
    const prefix = `p${partition}.`;
    const out: string[] = [];
    for await (const key of await kv.keys(`${prefix}*`)) out.push(key.slice(prefix.length));
    return out;
  }
}
