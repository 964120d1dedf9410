import type { NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import { actorRecordCodec, type ActorRecord } from "../actor/wire.js";
import { isRemovalOperation } from "../nats/jetstream.js";
import { partitionOf } from "../partitions/hash.js";
import { kvSubject, partitionBucket, partitionStream } from "../topology.js";

/** One stored transition of a journaled actor, with its place in the partition stream. */
export interface JournalEntry {
  seq: number;
  record: ActorRecord;
}

export type JournalRead =
  /** `more`: the read stopped at its `limit`, and the journal may hold records after the last one read. */
  | { outcome: "read"; entries: JournalEntry[]; more: boolean }
  | { outcome: "unavailable"; detail: string }
  | { outcome: "corrupt"; seq: number; detail: string };

const managers = new WeakMap<NatsConnection, Promise<JetStreamManager>>();
const BATCH = 512;

/**
 * Reads the journal of actor `<kind>.<id>` (an actor with `history: "journal"`): every record
 * its key holds, oldest first, from stream sequence `from` on (at most `limit` of them), in
 * batched direct reads (one request per `BATCH` records). A direct read may be served by a replica behind the leader, so a
 * reader that must see a write it knows of checks what it read against the actor's current
 * record (read from the leader) and reads again when it is behind.
 */
export async function readJournal(
  nc: NatsConnection,
  partitions: number,
  kind: string,
  id: string,
  key = id,
  from = 1,
  limit = Number.POSITIVE_INFINITY,
): Promise<JournalRead> {
  const p = partitionOf(key, partitions);
  const stream = partitionStream(p);
  const subject = kvSubject(partitionBucket(p), `${kind}.${id}`);
  let jsm: JetStreamManager;
  try {
    let pending = managers.get(nc);
    if (!pending) managers.set(nc, (pending = jetstreamManager(nc, { timeout: 5_000 })));
    jsm = await pending;
  } catch (err) {
    managers.delete(nc);
    return { outcome: "unavailable", detail: String(err) };
  }
  const entries: JournalEntry[] = [];
  for (let seq = from; ;) {
    let got = 0;
    const want = Math.min(BATCH, limit - entries.length);
    try {
      const batch = await jsm.direct.getBatch(stream, { seq, next_by_subj: subject, batch: want });
      for await (const m of batch) {
        got++;
        seq = m.seq + 1;
        if (isRemovalOperation(m.header?.get("KV-Operation"))) {
          entries.length = 0;
          continue;
        }
        const decoded = actorRecordCodec.decode(m.data);
        if (!decoded.ok) return { outcome: "corrupt", seq: m.seq, detail: decoded.detail };
        entries.push({ seq: m.seq, record: decoded.value });
      }
    } catch (err) {
      // No message at or after `seq` is an empty read, not a fault.
      if (/no message|not found|404/i.test(String((err as Error).message ?? err))) return { outcome: "read", entries, more: false };
      return { outcome: "unavailable", detail: String(err) };
    }
    if (got < want) return { outcome: "read", entries, more: false };
    if (entries.length >= limit) return { outcome: "read", entries, more: true };
  }
}

/**
 * The records of `<kind>.<id>`'s journal from stream sequence `from` on, as the stream's leader
 * holds them: the tail a direct read missed when a replica behind the leader served it (a get
 * through the stream's API, one request a record, answered by the leader only). `reset`: a removal
 * came first, so the records before `from` are not the journal's any more.
 */
export async function readJournalTail(
  nc: NatsConnection,
  partitions: number,
  kind: string,
  id: string,
  from: number,
): Promise<
  | { outcome: "read"; entries: JournalEntry[]; reset: boolean }
  | { outcome: "unavailable"; detail: string }
  | { outcome: "corrupt"; seq: number; detail: string }
> {
  const p = partitionOf(id, partitions);
  const api = `$JS.API.STREAM.MSG.GET.${partitionStream(p)}`;
  const subject = kvSubject(partitionBucket(p), `${kind}.${id}`);
  const entries: JournalEntry[] = [];
  let reset = false;
  for (let seq = from; ;) {
    let answer: { message?: { seq: number; data?: string; hdrs?: string }; error?: { code: number; description?: string } };
    try {
      const reply = await nc.request(api, JSON.stringify({ seq, next_by_subj: subject }), { timeout: 5_000 });
      answer = JSON.parse(new TextDecoder().decode(reply.data)) as typeof answer;
    } catch (err) {
      return { outcome: "unavailable", detail: String(err) };
    }
    if (answer.error?.code === 404) return { outcome: "read", entries, reset };
    if (!answer.message) return { outcome: "unavailable", detail: answer.error?.description ?? "no message in the answer" };
    const m = answer.message;
    seq = m.seq + 1;
    const headers = m.hdrs ? Buffer.from(m.hdrs, "base64").toString("utf8") : "";
    if (isRemovalOperation(/KV-Operation:\s*(\S+)/i.exec(headers)?.[1])) {
      entries.length = 0;
      reset = true;
      continue;
    }
    const decoded = actorRecordCodec.decode(new Uint8Array(Buffer.from(m.data ?? "", "base64")));
    if (!decoded.ok) return { outcome: "corrupt", seq: m.seq, detail: decoded.detail };
    entries.push({ seq: m.seq, record: decoded.value });
  }
}
