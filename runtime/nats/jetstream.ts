import { nuid, type MsgHdrs, type NatsConnection } from "@nats-io/transport-node";
import { rawRequest, type RawReply } from "./requests.js";
import { sentHeaders } from "./headers.js";

/**
 * Raw JetStream publish and read, with every outcome a caller branches on made explicit.
 * The hot path publishes with precondition headers directly (one request, one JSON ack), and
 * never lets a revision conflict or an election surface as an exception.
 */
export type PublishOutcome =
  | { outcome: "stored"; seq: number; duplicate: boolean }
  /** A precondition failed: JetStream 10071 / 10164 "wrong last sequence". */
  | { outcome: "conflict"; lastSequence: number | undefined; code: number }
  /** Known not stored and worth retrying: no responders, 10163, JetStream not (yet) enabled. */
  | { outcome: "unavailable"; detail: string }
  /** The request timed out: the message may or may not have been stored. */
  | { outcome: "unknown"; detail: string }
  /** Refused for a reason retrying will not change (bad subject, limits, …). */
  | { outcome: "rejected"; code: number; detail: string }
  /**
   * Refused here, before sending: body and headers exceed the server's `max_payload`. A local
   * refusal, never a transport failure: retrying the same message cannot succeed.
   */
  | { outcome: "too_large"; bytes: number; limit: number; detail: string };

/** What a server that does not say (no INFO yet) is assumed to accept: nats-server's default. */
export const DEFAULT_MAX_PAYLOAD = 1024 * 1024;

/** The largest message (body and headers) the connected server accepts: its INFO `max_payload`. */
export function payloadLimit(nc: NatsConnection): number {
  return nc.info?.max_payload ?? DEFAULT_MAX_PAYLOAD;
}

/**
 * The size of a header block as the client sends it: its own encoding, which nats.js's
 * `publish` takes from every headers object (ours keep theirs, so it is made once).
 */
export function headerBytes(h: MsgHdrs | undefined): number {
  return h ? (h as MsgHdrs & { encode(): Uint8Array }).encode().length : 0;
}

// 10070: wrong last msg id (a chain's link, see publishChain).
export const CONFLICT_CODES: ReadonlySet<number> = new Set([10070, 10071, 10164]);
// 10163: expected-last-sequence temporarily unavailable; 10008: JetStream temporarily unavailable;
// 10039: JetStream not enabled (seen during elections).
export const RETRYABLE_CODES: ReadonlySet<number> = new Set([10163, 10008, 10039, 10076]);

interface PubAckJson {
  stream?: string;
  seq?: number;
  duplicate?: boolean;
  error?: { code: number; err_code?: number; description?: string };
}

function decodeAck(data: Uint8Array): PubAckJson | undefined {
  try {
    return JSON.parse(new TextDecoder().decode(data)) as PubAckJson;
  } catch {
    return undefined;
  }
}

export function parsePubAck(data: Uint8Array): PublishOutcome {
  return outcomeOf(decodeAck(data));
}

function outcomeOf(ack: PubAckJson | undefined): PublishOutcome {
  if (!ack) return { outcome: "unknown", detail: "unparseable publish ack" };
  if (ack.error) {
    const code = ack.error.err_code ?? ack.error.code;
    const detail = ack.error.description ?? "";
    if (CONFLICT_CODES.has(code)) {
      const m = /wrong last sequence: (\d+)/.exec(detail);
      return { outcome: "conflict", lastSequence: m ? Number(m[1]) : undefined, code };
    }
    if (RETRYABLE_CODES.has(code) || /not enabled|temporarily unavailable/i.test(detail)) {
      return { outcome: "unavailable", detail: `${code} ${detail}` };
    }
    return { outcome: "rejected", code, detail };
  }
  if (typeof ack.seq !== "number") return { outcome: "unknown", detail: "publish ack without seq" };
  return { outcome: "stored", seq: ack.seq, duplicate: ack.duplicate === true };
}

export interface PublishOptions {
  headers?: MsgHdrs;
  msgId?: string;
  expectLastSequence?: number;
  expectLastSubjectSequence?: number;
  ttl?: string;
  timeoutMs?: number;
}

export async function publish(nc: NatsConnection, subject: string, data: Uint8Array, options: PublishOptions = {}): Promise<PublishOutcome> {
  const h = options.headers ?? sentHeaders();
  if (options.msgId !== undefined) h.set("Nats-Msg-Id", options.msgId);
  if (options.expectLastSequence !== undefined) h.set("Nats-Expected-Last-Sequence", String(options.expectLastSequence));
  if (options.expectLastSubjectSequence !== undefined) h.set("Nats-Expected-Last-Subject-Sequence", String(options.expectLastSubjectSequence));
  if (options.ttl !== undefined) h.set("Nats-TTL", options.ttl);
  const limit = payloadLimit(nc);
  // The client would refuse it too, but as an exception that reads like a closed connection.
  const bytes = data.length + headerBytes(h);
  if (bytes > limit) return tooLarge(subject, bytes, limit);
  const reply = await rawRequest(nc, subject, data, { headers: h, timeoutMs: options.timeoutMs ?? 2_000 });
  if (!reply.ok) return reply.reason === "too_large" ? tooLarge(subject, bytes, limit) : failedReply(reply);
  return parsePubAck(reply.msg.data);
}

/** One message of a chain (see {@link publishChain}). */
export interface ChainMessage {
  subject: string;
  data: Uint8Array;
  headers?: MsgHdrs;
}

/** The answers of {@link publishChain}: every message stored (their sequences, in order), or how it failed and how many landed before. */
export type ChainOutcome =
  | { outcome: "stored"; seqs: number[] }
  /** `landed` messages (a prefix) are stored; `first` is the first answer that was not `stored` (an `unknown` one may have landed too). */
  | { outcome: "failed"; landed: number; first: Exclude<PublishOutcome, { outcome: "stored" }> };

/**
 * Publishes `messages` to one stream, each stored only right behind its predecessor, the first
 * behind `expectLastSequence`. So a chain lands as a prefix and one foreign message stops the
 * rest: the fence of one write. Two ways to link them:
 * - `msgid` (a stream of one replica): all in flight at once, one round trip, each later message
 *   naming its predecessor's fresh `Nats-Msg-Id` (`Nats-Expected-Last-Msg-Id`). Ids are fresh,
 *   so the duplicate window never drops one.
 * - `sequence` (a replicated stream): one after another, each naming the sequence the one before
 *   got, a round trip a message. A replica checks message-id links again as it applies them, and
 *   one that caught up after a restart does not know its last message's id: it refuses the link
 *   and stays behind (the soak found it; nats-server's `processJetStreamMsg`).
 * Sizes are checked before anything is sent.
 */
export async function publishChain(
  nc: NatsConnection,
  messages: readonly ChainMessage[],
  options: { expectLastSequence: number; timeoutMs?: number; links?: "msgid" | "sequence" },
): Promise<ChainOutcome> {
  if (messages.length === 0) return { outcome: "failed", landed: 0, first: { outcome: "rejected", code: 0, detail: "a chain of no messages" } };
  const limit = payloadLimit(nc);
  const bySequence = options.links === "sequence";
  let previous = "";
  const sized = messages.map((m, i) => {
    const h = m.headers ?? sentHeaders();
    // Linked by sequence, each is sized with the longest it can name; the real one is set as it is sent.
    if (i === 0 || bySequence) h.set("Nats-Expected-Last-Sequence", String(i === 0 ? options.expectLastSequence : Number.MAX_SAFE_INTEGER));
    else h.set("Nats-Expected-Last-Msg-Id", previous);
    // The last one's id would be named by nothing: none, so the duplicate window keeps fewer.
    if (!bySequence && i < messages.length - 1) h.set("Nats-Msg-Id", (previous = nuid.next()));
    return { ...m, headers: h, bytes: m.data.length + headerBytes(h) };
  });
  const over = sized.find((m) => m.bytes > limit);
  if (over) return { outcome: "failed", landed: 0, first: tooLarge(over.subject, over.bytes, limit) };
  const send = async (m: (typeof sized)[number]): Promise<PublishOutcome> => {
    const reply = await rawRequest(nc, m.subject, m.data, { headers: m.headers, timeoutMs: options.timeoutMs ?? 2_000 });
    if (!reply.ok) return reply.reason === "too_large" ? tooLarge(m.subject, m.bytes, limit) : failedReply(reply);
    return parsePubAck(reply.msg.data);
  };
  const seqs: number[] = [];
  if (bySequence) {
    for (const [i, m] of sized.entries()) {
      if (i > 0) m.headers.set("Nats-Expected-Last-Sequence", String(seqs[i - 1]));
      const answer = await send(m);
      if (answer.outcome !== "stored") return { outcome: "failed", landed: seqs.length, first: answer };
      seqs.push(answer.seq);
    }
    return { outcome: "stored", seqs };
  }
  for (const answer of await Promise.all(sized.map(send))) {
    if (answer.outcome !== "stored") return { outcome: "failed", landed: seqs.length, first: answer };
    seqs.push(answer.seq);
  }
  return { outcome: "stored", seqs };
}

function tooLarge(subject: string, bytes: number, limit: number): Extract<PublishOutcome, { outcome: "too_large" }> {
  return { outcome: "too_large", bytes, limit, detail: `${subject}: ${bytes} bytes with headers, above the server's max_payload of ${limit}` };
}

function failedReply(reply: Extract<RawReply, { ok: false }>): PublishOutcome {
  // A timed-out request may have reached the server; "no responders" and "closed" did not store.
  return reply.reason === "timeout" ? { outcome: "unknown", detail: "timeout" } : { outcome: "unavailable", detail: reply.reason };
}

export interface StoredMessage {
  subject: string;
  seq: number;
  data: Uint8Array;
  headers: Record<string, string>;
  /** When the stream stored it (RFC 3339), if the server said. */
  time?: string;
}

export type ReadOutcome = { outcome: "found"; message: StoredMessage } | { outcome: "missing" } | { outcome: "unavailable"; detail: string };

/** A KV message's `KV-Operation` header that marks a delete or a purge: the key holds nothing. */
export function isRemovalOperation(op: string | undefined | null): boolean {
  return op === "DEL" || op === "PURGE";
}

/** A KV key's last message that is its delete or purge marker: the key holds nothing. */
export function isRemoval(message: StoredMessage): boolean {
  return isRemovalOperation(message.headers["KV-Operation"]);
}

interface MsgGetJson {
  message?: { subject: string; seq: number; hdrs?: string; data?: string; time?: string };
  error?: { code: number; err_code?: number; description?: string };
}

function parseHeaderBlock(block: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (!block) return out;
  const text = Buffer.from(block, "base64").toString("utf8");
  for (const line of text.split("\r\n").slice(1)) {
    const i = line.indexOf(":");
    if (i > 0) out[line.slice(0, i).trim()] = line.slice(i + 1).trim();
  }
  return out;
}

/**
 * Reads the last message on a subject from the stream leader (not a direct-get replica), so an
 * owner that reloads after a conflict never sees a lagging replica's past.
 */
export function readLast(nc: NatsConnection, stream: string, subject: string, timeoutMs = 2_000): Promise<ReadOutcome> {
  return messageGet(nc, stream, { last_by_subj: subject }, timeoutMs);
}

/** Reads the message at `seq` from the stream leader (`missing`: deleted, or never there). */
export function readSequence(nc: NatsConnection, stream: string, seq: number, timeoutMs = 2_000): Promise<ReadOutcome> {
  return messageGet(nc, stream, { seq }, timeoutMs);
}

/** The first message a subject holds, from the stream leader (a journal's first entry). */
export function readFirst(nc: NatsConnection, stream: string, subject: string, timeoutMs = 2_000): Promise<ReadOutcome> {
  return messageGet(nc, stream, { seq: 1, next_by_subj: subject }, timeoutMs);
}

async function messageGet(nc: NatsConnection, stream: string, request: object, timeoutMs: number): Promise<ReadOutcome> {
  const reply = await rawRequest(nc, `$JS.API.STREAM.MSG.GET.${stream}`, JSON.stringify(request), { timeoutMs });
  if (!reply.ok) return { outcome: "unavailable", detail: reply.reason };
  try {
    const body = JSON.parse(new TextDecoder().decode(reply.msg.data)) as MsgGetJson;
    if (body.error) {
      const code = body.error.err_code ?? body.error.code;
      if (code === 10037 || body.error.code === 404) return { outcome: "missing" };
      return { outcome: "unavailable", detail: `${code} ${body.error.description ?? ""}` };
    }
    const m = body.message;
    if (!m) return { outcome: "unavailable", detail: "empty message get reply" };
    return {
      outcome: "found",
      message: {
        subject: m.subject,
        seq: m.seq,
        data: m.data ? new Uint8Array(Buffer.from(m.data, "base64")) : new Uint8Array(),
        headers: parseHeaderBlock(m.hdrs),
        ...(m.time ? { time: m.time } : {}),
      },
    };
  } catch (err) {
    return { outcome: "unavailable", detail: err instanceof Error ? err.message : String(err) };
  }
}

/** The stream's last sequence, from the leader. */
export async function streamLastSequence(nc: NatsConnection, stream: string, timeoutMs = 2_000): Promise<number | { unavailable: string }> {
  try {
    const reply = await nc.request(`$JS.API.STREAM.INFO.${stream}`, "", { timeout: timeoutMs });
    const body = JSON.parse(new TextDecoder().decode(reply.data)) as { state?: { last_seq: number }; error?: { code: number; description?: string } };
    if (body.error || !body.state) return { unavailable: body.error ? `${body.error.code} ${body.error.description ?? ""}` : "no state" };
    return body.state.last_seq;
  } catch (err) {
    return { unavailable: err instanceof Error ? err.message : String(err) };
  }
}

/** Retries `op` while it reports a retryable outcome, with capped backoff, until the deadline. */
export async function withRetry<T>(
  op: () => Promise<T>,
  isRetryable: (value: T) => boolean,
  options: { deadlineMs?: number; baseMs?: number; maxMs?: number } = {},
): Promise<T> {
  const deadline = performance.now() + (options.deadlineMs ?? 30_000);
  let delay = options.baseMs ?? 25;
  for (;;) {
    const value = await op();
    if (!isRetryable(value) || performance.now() + delay > deadline) return value;
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, options.maxMs ?? 1_000);
  }
}

/**
 * Adds `by` to a JetStream counter subject (a stream with `allow_msg_counter`, `Nats-Incr`):
 * the counter's new total, or why it is unavailable. One round trip; every caller sees one total.
 */
export async function incrementCounter(nc: NatsConnection, subject: string, by: number, timeoutMs = 2_000): Promise<number | string> {
  const h = sentHeaders();
  h.set("Nats-Incr", String(by));
  const reply = await rawRequest(nc, subject, "", { headers: h, timeoutMs });
  if (!reply.ok) return reply.reason;
  const ack = JSON.parse(reply.msg.string()) as { val?: string; error?: { description?: string } };
  if (ack.error || ack.val === undefined) return ack.error?.description ?? "no counter value";
  return Number(ack.val);
}

/** What an increment keyed by a message id did: added (the new total), already added under that id, or why it is unavailable. */
export type KeyedIncrement = { outcome: "added"; total: number } | { outcome: "duplicate" } | { outcome: "unavailable"; detail: string };

/**
 * Adds `by` to a counter subject once per `id` (`Nats-Msg-Id`): a repeat with the same id inside
 * the stream's duplicate window adds nothing and answers `duplicate`. So a step that crashed after
 * an increment and does it again (same id) is counted once.
 */
export async function incrementCounterOnce(nc: NatsConnection, subject: string, by: number, id: string, timeoutMs = 2_000): Promise<KeyedIncrement> {
  const h = sentHeaders();
  h.set("Nats-Incr", String(by));
  h.set("Nats-Msg-Id", id);
  const reply = await rawRequest(nc, subject, "", { headers: h, timeoutMs });
  if (!reply.ok) return { outcome: "unavailable", detail: reply.reason };
  const ack = JSON.parse(reply.msg.string()) as { val?: string; duplicate?: boolean; error?: { description?: string } };
  if (ack.error) return { outcome: "unavailable", detail: ack.error.description ?? "counter refused" };
  if (ack.duplicate) return { outcome: "duplicate" };
  if (ack.val === undefined) return { outcome: "unavailable", detail: "no counter value" };
  return { outcome: "added", total: Number(ack.val) };
}
