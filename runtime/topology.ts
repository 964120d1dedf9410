import type { NatsConnection } from "@nats-io/transport-node";
import { DiscardPolicy, jetstreamManager, RetentionPolicy, StorageType, type JetStreamManager, type StreamConfig } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { RunwayFault } from "./errors.js";

/**
 * Names of everything Runway keeps in JetStream, and the one function that creates them.
 * Names are stable and readable so that `nats kv`, `nats stream` and `nats consumer` are
 * useful operator tools.
 */
export interface TopologyConfig {
  /** P: actor keys hash to one of P partitions. Fixed for the life of a cluster. */
  partitions: number;
  /** Replicas for every stream and bucket (1 for a single server, 3 for a cluster). */
  replicas: number;
}

export const DEFAULT_TOPOLOGY: TopologyConfig = { partitions: 32, replicas: 1 };

export const CMD_STREAM = "RUNWAY_CMD";
/** Commands and effects that could not be applied or published, with why (see actor/dead-letters.ts). */
export const DLQ_STREAM = "RUNWAY_DLQ";
export const NODES_BUCKET = "rw_nodes";
export const META_BUCKET = "rw_meta";

export function partitionBucket(partition: number): string {
  return `rw_p${partition}`;
}
export function partitionStream(partition: number): string {
  return `KV_${partitionBucket(partition)}`;
}
export function kvSubject(bucket: string, key: string): string {
  return `$KV.${bucket}.${key}`;
}
export function mailboxSubject(partition: number, kind: string, id: string): string {
  return `rw.cmd.${partition}.${kind}.${id}`;
}
export function mailboxFilter(partition: number): string {
  return `rw.cmd.${partition}.>`;
}
/**
 * Where a requester asks the owner of `partition` directly (core NATS request-reply, nothing
 * stored on the way): the fast path of `MailboxClient.request`, backed by the mailbox.
 */
export function askSubject(partition: number, kind: string, id: string): string {
  return `rw.ask.${partition}.${kind}.${id}`;
}
export function askFilter(partition: number): string {
  return `rw.ask.${partition}.>`;
}
export function timerSubject(partition: number, kind: string, id: string, name: string): string {
  return `rw.timer.${partition}.${kind}.${id}.${name}`;
}
/** Where a dead letter for actor `<kind>.<id>` of `partition` is filed: follow one actor, a kind or a partition by filter. */
export function deadLetterSubject(partition: number, kind: string, id: string): string {
  return `rw.dlq.${partition}.${kind}.${id}`;
}
export function partitionConsumer(partition: number): string {
  return `rw-mailbox-p${partition}`;
}

/**
 * Every stream the server has, with its config: one listing, so a node restarting against a
 * cluster that is already set up checks its ~40 streams without an info call for each (a
 * quarter second of every start).
 */
export async function streamConfigs(jsm: JetStreamManager): Promise<Map<string, StreamConfig>> {
  const out = new Map<string, StreamConfig>();
  for await (const info of jsm.streams.list()) out.set(info.config.name, info.config);
  return out;
}

/** Every field `wanted` names has that value in `have` (what the server echoes of what we set). */
function configMatches(have: StreamConfig, wanted: Partial<StreamConfig>): boolean {
  return Object.entries(wanted).every(([key, value]) => JSON.stringify((have as unknown as Record<string, unknown>)[key]) === JSON.stringify(value));
}

async function ensureStream(jsm: JetStreamManager, config: Partial<StreamConfig> & { name: string }, have: Map<string, StreamConfig>): Promise<void> {
  const existing = have.get(config.name);
  if (existing && configMatches(existing, config)) return;
  if (existing) return void (await jsm.streams.update(config.name, config));
  try {
    await jsm.streams.add(config);
  } catch (err) {
    // Another node created it since the listing: ours to bring to this config.
    if ((err as { api_error?: { err_code?: number } }).api_error?.err_code !== 10058 && !/already in use/i.test(String((err as Error).message))) throw err;
    await jsm.streams.update(config.name, config);
  }
}

/** Creates bucket `name` unless the server has its stream; an existing bucket with another history/TTL is still ours. */
export async function ensureBucket(kvm: Kvm, name: string, options: Record<string, unknown>, have: Map<string, StreamConfig>): Promise<void> {
  if (have.has(`KV_${name}`)) return;
  try {
    await kvm.create(name, options);
  } catch (err) {
    if (!/already in use|exists/i.test(String((err as Error).message))) throw err;
    await kvm.open(name);
  }
}

/** Turns `flags` on in stream `name` unless its config (listed, or read now) has them already. */
export async function ensureFlags(
  jsm: JetStreamManager,
  name: string,
  flags: Partial<StreamConfig> & Record<string, unknown>,
  have: Map<string, StreamConfig>,
): Promise<void> {
  const listed = have.get(name);
  if (listed && configMatches(listed, flags)) return;
  const config = listed ?? (await jsm.streams.info(name)).config;
  if (configMatches(config, flags)) return;
  await jsm.streams.update(name, { ...config, ...flags } as Partial<StreamConfig>);
}

/**
 * Records a partition keeps per key: in effect every transition of a journaled actor. Finite,
 * because KV clients (the `nats` CLI among them) take a bucket with no per-key limit for
 * something else.
 */
export const JOURNAL_LIMIT = 100_000_000;

/**
 * Creates (or confirms) the command stream, the dead-letter stream, the membership and meta buckets and one KV bucket
 * per partition. Idempotent; every node runs it at start. Refuses to run against a cluster
 * that was created with a different partition count, since keys would hash elsewhere.
 */
export async function ensureTopology(nc: NatsConnection, config: TopologyConfig): Promise<void> {
  const jsm = await jetstreamManager(nc, { timeout: 10_000 });
  const kvm = new Kvm(nc);
  const have = await streamConfigs(jsm);
  await ensureStream(
    jsm,
    {
      name: CMD_STREAM,
      description: "Runway actor mailboxes (rw.cmd.<partition>.<kind>.<id>) and durable timers (rw.timer.…)",
      subjects: ["rw.cmd.>", "rw.timer.>"],
      retention: RetentionPolicy.Workqueue,
      storage: StorageType.File,
      num_replicas: config.replicas,
      duplicate_window: 120_000_000_000,
      allow_msg_schedules: true,
      allow_msg_ttl: true,
    } as Partial<StreamConfig> & { name: string },
    have,
  );
  await ensureStream(
    jsm,
    {
      name: DLQ_STREAM,
      description: "Runway dead letters (rw.dlq.<partition>.<kind>.<id>): the original message, with why it could not be applied",
      subjects: ["rw.dlq.>"],
      retention: RetentionPolicy.Limits,
      storage: StorageType.File,
      num_replicas: config.replicas,
      // Bounded: the oldest letters go first.
      max_msgs: 100_000,
      max_bytes: 1024 * 1024 * 1024,
      max_age: 30 * 24 * 3600 * 1_000_000_000,
      discard: DiscardPolicy.Old,
      duplicate_window: 120_000_000_000,
    },
    have,
  );
  await ensureBucket(kvm, META_BUCKET, { history: 1, replicas: config.replicas, storage: "file" }, have);
  const meta = await kvm.open(META_BUCKET);
  const wanted = JSON.stringify({ partitions: config.partitions });
  try {
    await meta.create("topology", wanted);
  } catch {
    const existing = await meta.get("topology");
    const stored = existing ? (existing.json() as { partitions: number }) : undefined;
    if (stored && stored.partitions !== config.partitions) {
      throw new RunwayFault("topology_mismatch", `cluster was created with ${stored.partitions} partitions, this node is configured for ${config.partitions}`);
    }
  }
  // markerTTL turns on per-message TTL and delete markers, so an expired node lease is seen by watchers.
  await ensureBucket(kvm, NODES_BUCKET, { history: 1, replicas: config.replicas, storage: "file", markerTTL: 60_000 }, have);
  await Promise.all(
    Array.from({ length: config.partitions }, async (_, p) => {
      await ensureBucket(
        kvm,
        partitionBucket(p),
        { history: 1, replicas: config.replicas, storage: "file", description: `Runway actor state, partition ${p}` },
        have,
      );
      // Journals (see JOURNAL_LIMIT), and per-message TTL with no delete markers (an expiry must
      // not move a partition's last sequence, the fence every write names): actors keep keys
      // beside their records that the server removes after a while (`runway.store` with
      // `ttl_ms`, records with an actor definition's `ttl`). Turned on in place for buckets made
      // before they were used.
      await ensureFlags(jsm, partitionStream(p), { max_msgs_per_subject: JOURNAL_LIMIT, allow_rollup_hdrs: true, allow_msg_ttl: true }, have);
    }),
  );
}
