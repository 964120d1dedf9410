import type { NatsConnection } from "@nats-io/transport-node";
import { DeliverPolicy, jetstream } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import {
  actorRecordCodec,
  isRemoval,
  isRemovalOperation,
  kvSubject,
  partitionBucket,
  partitionOf,
  partitionStream,
  readFirst,
  readLast,
  type ActorRecord,
} from "../../runtime/index.js";

/** An actor's stored machine snapshot: its state value and context. */
export interface StoredSnapshot<C> {
  value: unknown;
  context: C | undefined;
}

export type SnapshotRead<C> =
  | { outcome: "found"; snapshot: StoredSnapshot<C> }
  | { outcome: "missing" }
  | { outcome: "unavailable"; detail: string }
  | { outcome: "corrupt"; detail: string };

/**
 * Reads the latest stored snapshot of actor `<kind>.<id>` straight from its partition's bucket
 * (one direct read; no actor is woken). Every reader of actor records outside the host goes
 * through here: the API's run and tenant reads, and the recovery sweep.
 */
export async function readSnapshot<C>(nc: NatsConnection, partitions: number, kind: string, id: string): Promise<SnapshotRead<C>> {
  const p = partitionOf(id, partitions);
  const read = await readLast(nc, partitionStream(p), kvSubject(partitionBucket(p), `${kind}.${id}`));
  if (read.outcome !== "found") return read;
  // A deleted or purged key's last message is its marker: no record.
  if (isRemoval(read.message)) return { outcome: "missing" };
  const decoded = actorRecordCodec.decode(read.message.data);
  if (!decoded.ok) return { outcome: "corrupt", detail: decoded.detail };
  const snapshot = decoded.value.snapshot as { value?: unknown; context?: C };
  return { outcome: "found", snapshot: { value: snapshot.value, context: snapshot.context } };
}

/** The ids of every `<kind>.<id>` actor stored in partition `p` (a key listing of its bucket). */
export async function actorIdsIn(nc: NatsConnection, p: number, kind: string): Promise<string[]> {
  const kv = await new Kvm(nc).open(partitionBucket(p));
  const ids: string[] = [];
  for await (const key of await kv.keys(`${kind}.*`)) ids.push(key.slice(kind.length + 1));
  return ids;
}

/** The first record a journaled actor stored (its journal's first entry), or undefined. */
export async function readFirstRecord(nc: NatsConnection, partitions: number, kind: string, id: string): Promise<ActorRecord | undefined> {
  const p = partitionOf(id, partitions);
  const read = await readFirst(nc, partitionStream(p), kvSubject(partitionBucket(p), `${kind}.${id}`));
  if (read.outcome !== "found") return undefined;
  const decoded = actorRecordCodec.decode(read.message.data);
  return decoded.ok ? decoded.value : undefined;
}

/** One key's last stored value, as listed by {@link lastValues}. */
export interface ListedValue {
  /** The key (the subject without `$KV.<bucket>.`). */
  key: string;
  revision: number;
  data: Uint8Array;
}

/**
 * The last value of every key of `bucket` matching `filter` (a subject filter over keys, e.g.
 * `tenant.acme.m.*`), deleted and purged keys left out: one ordered consumer that delivers the
 * last message per subject, so the cost follows the keys that match, not the bucket's size.
 */
export async function lastValues(nc: NatsConnection, bucket: string, filter: string): Promise<ListedValue[]> {
  const prefix = `$KV.${bucket}.`;
  const consumer = await jetstream(nc).consumers.get(`KV_${bucket}`, { filter_subjects: [`${prefix}${filter}`], deliver_policy: DeliverPolicy.LastPerSubject });
  const info = await consumer.info(true);
  const out: ListedValue[] = [];
  if (info.num_pending === 0) {
    await consumer.delete().catch(() => undefined);
    return out;
  }
  const messages = await consumer.consume();
  try {
    for await (const m of messages) {
      if (!isRemovalOperation(m.headers?.get("KV-Operation"))) out.push({ key: m.subject.slice(prefix.length), revision: m.seq, data: m.data });
      if (m.info.pending === 0) break;
    }
  } finally {
    messages.stop();
  }
  return out;
}
