import type { NatsConnection } from "@nats-io/transport-node";
import { DeliverPolicy, jetstream, jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
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

/** One manager per connection for {@link listedValues} (made without the API check: one round trip less). */
const managers = new WeakMap<NatsConnection, Promise<JetStreamManager>>();

/**
 * {@link lastValues} for a listing a person or a poller reads (an inbox, a page): one batched
 * direct get, which any replica may answer, so a value written a moment ago may be missing from a
 * replicated bucket's answer. It makes no consumer: on a loaded cluster a consumer's create is a
 * proposal to the meta leader and took seconds (the soak's `approvals.list` timed out at 10 s).
 * Past the server's 1,024 keys for one batch (`413`), or where the stream allows no direct get,
 * it lists through {@link lastValues}.
 */
export async function listedValues(nc: NatsConnection, bucket: string, filter: string): Promise<ListedValue[]> {
  const prefix = `$KV.${bucket}.`;
  let jsm = managers.get(nc);
  if (!jsm) managers.set(nc, (jsm = jetstreamManager(nc, { checkAPI: false })));
  try {
    const out: ListedValue[] = [];
    for await (const m of await (await jsm).direct.getLastMessagesFor(`KV_${bucket}`, { multi_last: [`${prefix}${filter}`] })) {
      if (!isRemovalOperation(m.header?.get("KV-Operation"))) out.push({ key: m.subject.slice(prefix.length), revision: m.seq, data: m.data });
    }
    return out;
  } catch (err) {
    // No matching key is an empty answer.
    const code = (err as { code?: unknown }).code;
    if (code === 404) return [];
    // Too many keys for one batch (413), or a stream that allows no direct get (no responders,
    // 503): the consumer lists them. Any other fault (a timeout) is the caller's: a second, slower
    // listing behind it would only double the wait.
    if (code === 413 || code === 503) return lastValues(nc, bucket, filter);
    throw err;
  }
}
