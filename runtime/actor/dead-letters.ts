import type { NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "../log.js";
import { jsonBytes } from "../json-size.js";
import { headerBytes, payloadLimit, publish, readSequence, withRetry, type PublishOutcome } from "../nats/jetstream.js";
import { rawRequest } from "../nats/requests.js";
import { deadLetterSubject, DLQ_STREAM } from "../topology.js";
import { ID_PATTERN, KIND_PATTERN } from "./define.js";
import { commandCodec } from "./wire.js";
import { sentHeaders } from "../nats/headers.js";

/**
 * Why a message left its mailbox (or an outbox) for the dead-letter stream: the `reason` of a
 * letter and of the `dead_letters{kind,reason}` metric. A closed set.
 */
export const DeadLetterReason = {
  /** The mailbox subject names no actor of this partition (token count, id, partition). */
  BadSubject: "bad_subject",
  /** The subject names an actor kind this node does not define. */
  UnknownKind: "unknown_kind",
  /** The body is not a command this runtime reads (not msgpack, another schema or version, no event). */
  Undecodable: "undecodable",
  /** The actor's machine threw on it: a bug, deterministic, so it is not tried again. */
  MachineFault: "machine_fault",
  /** The state it produces cannot be encoded (nested too deep). */
  StateUnencodable: "state_unencodable",
  /** The state it produces exceeds the server's max payload. */
  StateTooLarge: "state_too_large",
  /** Its actor's stored record cannot be read. */
  CorruptRecord: "corrupt_record",
  /** Applying it faulted its actor on every one of N deliveries. */
  Poison: "poison",
  /** A stored transition's effect (a send, a publish, a timer) exceeds the server's max payload. */
  EffectTooLarge: "effect_too_large",
} as const;
export type DeadLetterReason = (typeof DeadLetterReason)[keyof typeof DeadLetterReason];

const REASONS: ReadonlySet<string> = new Set(Object.values(DeadLetterReason));

/** `value` as a dead-letter reason, if it is one. */
export function asDeadLetterReason(value: string | undefined): DeadLetterReason | undefined {
  return value !== undefined && REASONS.has(value) ? (value as DeadLetterReason) : undefined;
}

/** A message given up, with why. Filed under the actor it was for (an effect: the actor that emitted it). */
export interface DeadLetter {
  reason: DeadLetterReason;
  detail: string;
  /** The subject the message was sent to: a mailbox, or an effect's target. */
  subject: string;
  headers: Record<string, string>;
  data: Uint8Array;
  partition: number;
  kind: string;
  id: string;
  /** Deliveries of the original by its mailbox (0: it never came from one). */
  deliveries: number;
  /** Its sequence in the command stream, when it came from a mailbox: a second copy of it is a duplicate. */
  seq?: number;
  /** Its command id (`Rw-Id`), when known. */
  command?: string;
}

/** A letter as `runway.v1.ops.dead_letters` shows it: JSON, the body decoded when it is a command. */
export interface DeadLetterView {
  seq: number;
  at: number;
  node: string;
  reason: string;
  detail: string;
  subject: string;
  partition: number;
  kind: string;
  id: string;
  deliveries: number;
  stream_seq: number | null;
  command: string | null;
  headers: Record<string, string>;
  bytes: number;
  /** The body was not stored (the letter would have exceeded the server's max payload). */
  truncated: boolean;
  /** The command's event, when the body decodes as one and is small. */
  event?: unknown;
  /** The body, base64, when it is small and no command. */
  data_base64?: string;
}

const H = {
  reason: "Rw-Dlq-Reason",
  detail: "Rw-Dlq-Detail",
  subject: "Rw-Dlq-Subject",
  seq: "Rw-Dlq-Seq",
  deliveries: "Rw-Dlq-Deliveries",
  node: "Rw-Dlq-Node",
  at: "Rw-Dlq-At",
  headers: "Rw-Dlq-Headers",
  bytes: "Rw-Dlq-Bytes",
  truncated: "Rw-Dlq-Truncated",
  command: "Rw-Dlq-Command",
} as const;

/** Room kept in a letter for the headers JetStream adds on its way (message id and the like). */
const LETTER_MARGIN = 1024;
const MAX_DETAIL = 1024;
const MAX_HEADERS_JSON = 4096;
/** Bodies shown in a listing at most this large; a larger one is read with `nats stream get`. */
const VIEW_BODY_LIMIT = 4096;

/** A header value: one line, bounded. */
function headerValue(text: string, max: number): string {
  const line = text.replace(/[\r\n]+/g, " ");
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

const token = (t: string, pattern: RegExp) => (pattern.test(t) ? t : "_");

/**
 * Files dead letters in `RUNWAY_DLQ` (`rw.dlq.<partition>.<kind>.<id>`): the original body as
 * it was, its headers and why it was given up in `Rw-Dlq-*` headers. A letter whose original has
 * a stream sequence is stored once (its message id is derived from it), so copying it again
 * after a crash between the copy and the original's `term` is harmless. Counts what it stored,
 * by actor kind and reason, for the node's metrics.
 */
export class DeadLetterBox {
  private readonly counts = new Map<string, { kind: string; reason: DeadLetterReason; count: number }>();

  constructor(private readonly deps: { nc: NatsConnection; node: string; now(): number; logger: Logger }) {}

  /** Stores `letter`; true once the stream holds it (a duplicate included). Retries an unavailable stream for a few seconds. */
  async put(letter: DeadLetter): Promise<boolean> {
    const h = sentHeaders();
    h.set(H.reason, letter.reason);
    h.set(H.detail, headerValue(letter.detail || "-", MAX_DETAIL));
    h.set(H.subject, letter.subject);
    h.set(H.deliveries, String(letter.deliveries));
    h.set(H.node, this.deps.node);
    h.set(H.at, String(this.deps.now()));
    h.set(H.bytes, String(letter.data.length));
    if (letter.seq !== undefined) h.set(H.seq, String(letter.seq));
    if (letter.command) h.set(H.command, headerValue(letter.command, 512));
    const original = JSON.stringify(letter.headers);
    h.set(H.headers, original.length <= MAX_HEADERS_JSON ? original : JSON.stringify({ truncated: String(original.length) }));
    const msgId = letter.seq !== undefined ? `dlq/${letter.seq}` : `dlq/${letter.partition}/${letter.command ?? this.deps.now()}/${letter.reason}`;
    let data = letter.data;
    // Headers as they will be sent, message id included (set by `publish`).
    if (data.length + headerBytes(h) + msgId.length + 20 + LETTER_MARGIN > payloadLimit(this.deps.nc)) {
      h.set(H.truncated, "true");
      data = new Uint8Array();
    }
    const subject = deadLetterSubject(letter.partition, token(letter.kind, KIND_PATTERN), token(letter.id, ID_PATTERN));
    const stored = await withRetry(
      () => publish(this.deps.nc, subject, data, { headers: h, msgId }),
      (o: PublishOutcome) => o.outcome === "unavailable" || o.outcome === "unknown",
      { deadlineMs: 5_000 },
    );
    if (stored.outcome !== "stored") {
      this.deps.logger.error("dead letter not stored", { subject, reason: letter.reason, outcome: stored.outcome });
      return false;
    }
    if (!stored.duplicate) {
      const key = `${letter.kind}\u0000${letter.reason}`;
      const entry = this.counts.get(key) ?? { kind: letter.kind, reason: letter.reason, count: 0 };
      entry.count++;
      this.counts.set(key, entry);
    }
    return true;
  }

  /** Letters this node stored, by actor kind and reason. */
  stats(): { kind: string; reason: DeadLetterReason; count: number }[] {
    return [...this.counts.values()].map((c) => ({ ...c }));
  }
}

/**
 * The newest dead letters, newest first: at most `limit`, and no more than `maxBytes` of JSON
 * together (`truncated` says the listing stopped early). Reads the stream leader one message at
 * a time, from the last sequence down.
 */
export async function listDeadLetters(
  nc: NatsConnection,
  options: { limit: number; maxBytes?: number },
): Promise<{ outcome: "ok"; letters: DeadLetterView[]; total: number; truncated: boolean } | { outcome: "unavailable"; detail: string }> {
  const info = await streamInfo(nc);
  if ("unavailable" in info) return { outcome: "unavailable", detail: info.unavailable };
  const maxBytes = options.maxBytes ?? Math.min(256 * 1024, Math.floor(payloadLimit(nc) / 2));
  const letters: DeadLetterView[] = [];
  let bytes = 0;
  let truncated = false;
  // Deleted letters leave gaps; look at no more than this many sequences.
  const floor = Math.max(info.first, info.last - options.limit - 1_000);
  for (let seq = info.last; seq >= floor && seq > 0 && letters.length < options.limit; seq--) {
    const read = await readSequence(nc, DLQ_STREAM, seq);
    if (read.outcome === "missing") continue;
    if (read.outcome === "unavailable") return { outcome: "unavailable", detail: read.detail };
    const view = viewOf(read.message);
    const size = jsonBytes(view);
    if (bytes + size > maxBytes) {
      truncated = true;
      break;
    }
    bytes += size;
    letters.push(view);
  }
  return { outcome: "ok", letters, total: info.messages, truncated };
}

async function streamInfo(nc: NatsConnection): Promise<{ first: number; last: number; messages: number } | { unavailable: string }> {
  const reply = await rawRequest(nc, `$JS.API.STREAM.INFO.${DLQ_STREAM}`, "", { timeoutMs: 2_000 });
  if (!reply.ok) return { unavailable: reply.reason };
  const body = JSON.parse(new TextDecoder().decode(reply.msg.data)) as {
    state?: { first_seq: number; last_seq: number; messages: number };
    error?: { code: number; description?: string };
  };
  // No stream (yet): no letters.
  if (body.error?.code === 404) return { first: 0, last: 0, messages: 0 };
  if (body.error || !body.state) return { unavailable: body.error ? `${body.error.code} ${body.error.description ?? ""}` : "no stream state" };
  return { first: body.state.first_seq, last: body.state.last_seq, messages: body.state.messages };
}

function viewOf(m: { subject: string; seq: number; data: Uint8Array; headers: Record<string, string>; time?: string }): DeadLetterView {
  const h = m.headers;
  const [, , partition, kind, id] = m.subject.split(".");
  let headers: Record<string, string> = {};
  try {
    headers = JSON.parse(h[H.headers] ?? "{}") as Record<string, string>;
  } catch {
    headers = {};
  }
  const view: DeadLetterView = {
    seq: m.seq,
    at: Number(h[H.at] ?? (m.time ? Date.parse(m.time) : 0)),
    node: h[H.node] ?? "",
    reason: h[H.reason] ?? "",
    detail: h[H.detail] ?? "",
    subject: h[H.subject] ?? "",
    partition: Number(partition),
    kind: kind ?? "",
    id: id ?? "",
    deliveries: Number(h[H.deliveries] ?? 0),
    stream_seq: h[H.seq] !== undefined ? Number(h[H.seq]) : null,
    command: h[H.command] ?? null,
    headers,
    bytes: Number(h[H.bytes] ?? m.data.length),
    truncated: h[H.truncated] === "true",
  };
  if (m.data.length > 0 && m.data.length <= VIEW_BODY_LIMIT) {
    const decoded = commandCodec.decode(m.data);
    if (decoded.ok) view.event = decoded.value.event;
    else view.data_base64 = Buffer.from(m.data).toString("base64");
  }
  return view;
}
