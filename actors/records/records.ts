import type { NatsConnection } from "@nats-io/transport-node";
import { DeliverPolicy, jetstream } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { isRemovalOperation, partitionBucket } from "../../runtime/index.js";

/** The ids of every `<kind>.<id>` actor stored in partition `p` (a key listing of its bucket). */
export async function actorIdsIn(nc: NatsConnection, p: number, kind: string): Promise<string[]> {
  const kv = await new Kvm(nc).open(partitionBucket(p));
  const ids: string[] = [];
  for await (const key of await kv.keys(`${kind}.*`)) ids.push(key.slice(kind.length + 1));
  return ids;
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
