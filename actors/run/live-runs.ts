import type { NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import { MEMBER_PREFIX, tenantKey } from "../../machines/index.js";
import {
  isRemovalOperation,
  kvSubject,
  partitionBucket,
  partitionOf,
  partitionStream,
  publish,
  RunwayFault,
  sentHeaders,
  type Effect,
} from "../../runtime/index.js";
import { lastValues } from "../records/index.js";
import { runOfMemberKey } from "../tenant/index.js";

/** KV bucket of the live-run index: `p<partition>.<run>` for every run that may be live. */
export const LIVE_BUCKET = "rw_live";

export interface LiveEntry {
  tenant: string;
  at: number;
}

/**
 * The live-run index (`p<partition>.<run>` in `rw_live`), so recovery and the sweep list a partition's
 * live runs, not every run stored. Contract: a run's key is added in `prepare`, before its record, and
 * removed by the transition that ends it, last of its durable effects; an entry is a hint that
 * readers check against the record. Unfenced puts are safe because both writes are idempotent and
 * monotone. A run its tenant counts has no key: its tenant's member key keeps the same contract.
 */
export class LiveRunIndex {
  private jsm: JetStreamManager | undefined;
  private readonly counted: CountedRuns;

  constructor(
    private readonly nc: NatsConnection,
    private readonly partitions: number,
    /** Replicas of the index's stream (with more than one, a direct get may be answered by a lagging follower); default: read from the stream at the first listing. */
    private replicas?: number,
  ) {
    this.counted = new CountedRuns(nc, partitions, replicas);
  }

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
    const h = sentHeaders();
    h.set("KV-Operation", "PURGE");
    h.set("Nats-Rollup", "sub");
    h.set("Nats-TTL", "60s");
    await publish(this.nc, kvSubject(LIVE_BUCKET, this.keyOf(run)), new Uint8Array(), { headers: h });
  }

  /** Every run of `partition` the index lists: its own keys and the runs tenants count. */
  async list(partition: number): Promise<string[]> {
    return everyRun(await this.entries(partition));
  }

  /**
   * The runs of `partition` the index lists, by where: `indexed` have a key here (a reader removes
   * those of ended runs), `counted` are their tenants' members (their tenants remove those). A run
   * may be in both (a run a person admitted first, once its tenant counts it).
   */
  async entries(partition: number): Promise<{ indexed: string[]; counted: string[] }> {
    const [indexed, counted] = await Promise.all([this.indexed(partition), this.counted.byPartition()]);
    return { indexed, counted: counted.get(partition) ?? [] };
  }

  /** {@link entries} of several partitions, with one listing of the member keys for all of them (a sweep pass). */
  async entriesOf(partitions: readonly number[]): Promise<Map<number, { indexed: string[]; counted: string[] }>> {
    const [indexed, counted] = await Promise.all([Promise.all(partitions.map((p) => this.indexed(p))), this.counted.byPartition()]);
    return new Map(partitions.map((p, i) => [p, { indexed: indexed[i]!, counted: counted.get(p) ?? [] }]));
  }

  /**
   * Listings of the tenants' member keys made so far (metric `live_index_member_listings`): each
   * reads the counted runs of the whole cluster, so this is what recovery and the sweep cost as
   * the cluster grows. A claim wave shares one, a sweep pass makes one.
   */
  get memberListings(): number {
    return this.counted.listings;
  }

  /**
   * The runs of `partition` with a key here, by one batched direct get (an ordered consumer per
   * partition is too slow when a node claims them all). The server answers at most 1,024 keys so,
   * and a lagging replica could miss a run created just before a crash: those cases use the leader's
   * ordered consumer.
   */
  async indexed(partition: number): Promise<string[]> {
    this.jsm ??= await jetstreamManager(this.nc, { timeout: 10_000 });
    this.replicas ??= (await this.jsm.streams.info(`KV_${LIVE_BUCKET}`)).config.num_replicas;
    const prefix = `p${partition}.`;
    return (await liveKeys(this.nc, this.jsm, this.replicas, LIVE_BUCKET, `${prefix}*`)).map((key) => key.slice(prefix.length));
  }
}

/** The runs of a partition's {@link LiveRunIndex.entries}, each once. */
export function everyRun(entries: { indexed: readonly string[]; counted: readonly string[] }): string[] {
  return [...new Set([...entries.indexed, ...entries.counted])];
}

/**
 * The keys of `bucket` matching `filter` whose last entry is not a removal. On an unreplicated
 * stream, one batched direct get; past the server's 1,024 keys for one (`413`), and on a
 * replicated stream (a lagging follower may answer a direct get), an ordered consumer.
 */
async function liveKeys(nc: NatsConnection, jsm: JetStreamManager, replicas: number, bucket: string, filter: string): Promise<string[]> {
  const prefix = kvSubject(bucket, "");
  if (replicas === 1) {
    try {
      const out: string[] = [];
      for await (const m of await jsm.direct.getLastMessagesFor(`KV_${bucket}`, { multi_last: [`${prefix}${filter}`] })) {
        if (!isRemovalOperation(m.header?.get("KV-Operation"))) out.push(m.subject.slice(prefix.length));
      }
      return out;
    } catch (err) {
      // No matching key is an empty answer; past 1,024, the consumer below.
      if ((err as { code?: unknown }).code === 404) return [];
      if ((err as { code?: unknown }).code !== 413) throw err;
    }
  }
  return (await lastValues(nc, bucket, filter)).map((v) => v.key);
}

const MEMBER_FILTER = tenantKey("*", `${MEMBER_PREFIX}*`);

/**
 * The runs tenants count, by partition. A tenant keeps its members in its own partition's bucket, so
 * one listing reads every bucket's member keys. A caller that asks during a listing gets the next
 * one, started after it asked: a new owner thus sees every run its predecessor could have created.
 */
class CountedRuns {
  private jsm: JetStreamManager | undefined;
  /** A listing not started yet: callers join it. */
  private next: Promise<Map<number, string[]>> | undefined;
  private running: Promise<unknown> = Promise.resolve();
  /** Listings made (each reads every partition bucket's member keys). */
  listings = 0;

  constructor(
    private readonly nc: NatsConnection,
    private readonly partitions: number,
    private replicas?: number,
  ) {}

  /** The counted runs of every partition, by partition, from a listing that starts after this call. */
  byPartition(): Promise<Map<number, string[]>> {
    if (!this.next) {
      const listing: Promise<Map<number, string[]>> = this.running.then(() => {
        if (this.next === listing) this.next = undefined;
        const scan = this.scan();
        this.running = scan.catch(() => undefined);
        return scan;
      });
      this.next = listing;
    }
    return this.next;
  }

  private async scan(): Promise<Map<number, string[]>> {
    this.listings++;
    const byPartition = new Map<number, string[]>();
    const buckets = await Promise.all(Array.from({ length: this.partitions }, (_, b) => this.membersIn(b)));
    for (const runs of buckets)
      for (const run of runs) {
        const p = partitionOf(run, this.partitions);
        const list = byPartition.get(p);
        if (list) list.push(run);
        else byPartition.set(p, [run]);
      }
    return byPartition;
  }

  /** The runs counted by the tenants of partition `b`'s bucket. */
  private async membersIn(b: number): Promise<string[]> {
    this.jsm ??= await jetstreamManager(this.nc, { timeout: 10_000 });
    this.replicas ??= (await this.jsm.streams.info(partitionStream(0))).config.num_replicas;
    return (await liveKeys(this.nc, this.jsm, this.replicas, partitionBucket(b), MEMBER_FILTER)).map(runOfMemberKey);
  }
}
