/**
 * The receiving end of a partition's mailbox: takes over its durable consumer (pinned to this
 * owner), turns each message into a delivery for its actor's lane, and settles the message as
 * the lane decides — ack, nak with a backoff, terminate, or file as a dead letter. A message no
 * actor here can read is answered and dead-lettered at once. The sending end is `mailbox.ts`.
 */
import type { NatsConnection } from "@nats-io/transport-node";
import { jetstream, AckPolicy, DeliverPolicy, type ConsumerMessages, type JsMsg, type JetStreamManager } from "@nats-io/jetstream";
import type { Logger } from "../log.js";
import { CMD_STREAM, mailboxFilter, partitionConsumer } from "../topology.js";
import type { ActorAddress } from "./define.js";
import { readInbound } from "./inbound.js";
import type { Delivery, HostStats } from "./delivery.js";
import { DeadLetterReason, type DeadLetterBox, type DeadLetter } from "./dead-letters.js";
import { answerCodec, HEADER_ID, HEADER_REPLY, type CommandAnswer } from "./wire.js";

const OWNER_GROUP = "owner";

/** What the consumer needs from the host that serves the partition. */
export interface MailboxRouting {
  nc: NatsConnection;
  logger: Logger;
  stats: HostStats;
  deadLetters: DeadLetterBox;
  manager(): Promise<JetStreamManager>;
  hasKind(kind: string): boolean;
  partitionOf(address: ActorAddress): number;
  /** The fields of a dead letter about `address` (its closed reason, partition, kind and id). */
  letterFields(
    partition: number,
    address: ActorAddress,
    reason: string | undefined,
    detail: string | undefined,
  ): Pick<DeadLetter, "reason" | "detail" | "partition" | "kind" | "id">;
  pinTimeoutMs?: number;
  prefetch?: number;
  redeliveryBaseMs?: number;
}

/** The partition served here whose mailbox is consumed. */
export interface ServedPartition {
  partition: number;
  /** False once the partition is being released or its writer was fenced: the loop stops. */
  active(): boolean;
  /** Queues a delivery on the actor's lane. */
  enqueue(address: ActorAddress, delivery: Delivery): void;
}

/** A partition's mailbox being consumed: `messages.stop()` ends the pull; `done` settles when the loop has. */
export interface ConsumingMailbox {
  messages: ConsumerMessages;
  done: Promise<void>;
}

/**
 * Takes over partition `partition`'s consumer — unpinned from any previous owner and reset, so
 * every unacknowledged command is delivered again now rather than after its ack wait — and
 * routes its messages while `served.active()` holds.
 */
export async function consumeMailbox(routing: MailboxRouting, served: ServedPartition): Promise<ConsumingMailbox> {
  const partition = served.partition;
  const jsm = await routing.manager();
  const name = partitionConsumer(partition);
  try {
    await jsm.consumers.info(CMD_STREAM, name);
    // A previous owner may hold the pin and unacknowledged messages: take both over now.
    await jsm.consumers.unpin(CMD_STREAM, name, OWNER_GROUP).catch(() => undefined);
    await jsm.consumers.reset(CMD_STREAM, name);
  } catch (err) {
    if ((err as { code?: number }).code !== 10014 && !/consumer not found/i.test(String(err))) throw err;
    await jsm.consumers.add(CMD_STREAM, {
      durable_name: name,
      description: `Runway mailbox of partition ${partition}; read only by the partition's owner`,
      filter_subject: mailboxFilter(partition),
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: 30_000_000_000,
      max_ack_pending: 2_000,
      priority_groups: [OWNER_GROUP],
      priority_policy: "pinned_client",
      priority_timeout: (routing.pinTimeoutMs ?? 10_000) * 1_000_000,
      metadata: { partition: String(partition) },
    } as never);
  }
  const consumer = await jetstream(routing.nc).consumers.get(CMD_STREAM, name);
  const messages = await consumer.consume({ group: OWNER_GROUP, max_messages: routing.prefetch ?? 256, expires: 5_000 } as never);
  const done = (async () => {
    for await (const msg of messages) {
      if (!served.active()) break;
      route(routing, served, msg);
    }
  })();
  return { messages, done };
}

/**
 * The longest a kept command waits before it is delivered again. Kept commands are mostly ones a
 * store outage held back (a server restarting, a leader moving): a short cap makes them go through
 * within a few seconds of the store's return, where a 30 s cap left runs idle for ~15 s after a
 * server kill (the soak's finding); a command that faults its actor is still dead-lettered after
 * `maxDeliveries`.
 */
const MAX_REDELIVERY_MS = 4_000;

/**
 * Command types whose way through the mailbox is logged (`RUNWAY_TRACE_COMMANDS=run.cancel,…`):
 * when the mailbox delivered each (and how long after it was stored), and how its actor settled it
 * (and how long it waited in the lane). For looking into a command that took effect late.
 */
const TRACED: ReadonlySet<string> = new Set((process.env.RUNWAY_TRACE_COMMANDS ?? "").split(",").filter(Boolean));

function route(routing: MailboxRouting, served: ServedPartition, msg: JsMsg): void {
  const partition = served.partition;
  const reply = msg.headers?.get(HEADER_REPLY) || undefined;
  const read = readInbound(msg.subject, msg.data, partition, routing);
  if (!read.ok) return undeliverable(routing, partition, msg, read.address, reply, read.reason, read.detail, read.answer);
  const address = read.address;
  const commandId = msg.headers?.get(HEADER_ID) || msg.headers?.get("Nats-Msg-Id") || `seq-${msg.seq}`;
  const deliveries = msg.info.deliveryCount;
  const tracedAt = TRACED.size > 0 && TRACED.has(read.event.type) ? Date.now() : 0;
  if (tracedAt > 0)
    routing.logger.info("command delivered", {
      subject: msg.subject,
      id: commandId,
      type: read.event.type,
      deliveries,
      storedAgoMs: tracedAt - Math.round(msg.info.timestampNanos / 1e6),
    });
  served.enqueue(address, {
    id: commandId,
    event: read.event,
    deliveries,
    // A method, not an arrow function: under tsx every named closure costs a `__name` call.
    settle(answer, how, reason, detail) {
      if (tracedAt > 0)
        routing.logger.info("command settled", { subject: msg.subject, id: commandId, how, outcome: answer?.outcome, reason, inLaneMs: Date.now() - tracedAt });
      if (how === "keep") {
        // Fenced: the partition's next owner takes it. Otherwise it comes back after a backoff.
        if (reason === "fenced") return;
        const delayMs = Math.min((routing.redeliveryBaseMs ?? 500) * 2 ** (deliveries - 1), MAX_REDELIVERY_MS);
        // Rare outside an outage, and the one trace of a command that reached its actor late.
        if (reason !== "withdrawn") routing.logger.info("command kept", { subject: msg.subject, reason, detail, deliveries, redeliverInMs: delayMs });
        msg.nak(delayMs);
        return;
      }
      sendAnswer(routing, reply, answer);
      if (how === "dead") void bury(routing, partition, msg, address, reason, detail);
      else if (how === "term") {
        routing.logger.warn("mailbox message terminated", { reason, subject: msg.subject, seq: msg.seq });
        msg.term(reason);
      } else msg.ack();
    },
  });
}

/** A message no actor here can ever read: answered, filed as a dead letter, never delivered again. */
function undeliverable(
  routing: MailboxRouting,
  partition: number,
  msg: JsMsg,
  address: ActorAddress,
  reply: string | undefined,
  reason: DeadLetterReason,
  detail: string,
  answer: CommandAnswer,
): void {
  routing.stats.terminated++;
  routing.logger.warn("mailbox message dead-lettered", { reason, detail, subject: msg.subject, seq: msg.seq });
  sendAnswer(routing, reply, answer);
  void bury(routing, partition, msg, address, reason, detail);
}

/** Sends a command's closed answer to its requester; an answer that cannot be sent is logged, never thrown into the actor's lane. */
function sendAnswer(routing: MailboxRouting, reply: string | undefined, answer: CommandAnswer | undefined): void {
  if (!reply || !answer) return;
  try {
    routing.nc.publish(reply, answerCodec.encode(answer));
  } catch (err) {
    routing.logger.warn("answer not sent", { reply, outcome: answer.outcome, error: String(err) });
    try {
      routing.nc.publish(reply, answerCodec.encode({ outcome: "invalid_input", reason: "answer_unsendable" }));
    } catch {
      // The connection is closed: the requester times out.
    }
  }
}

/** Files `msg` as a dead letter, then terminates it; if the letter cannot be stored, the message comes back later. */
async function bury(
  routing: MailboxRouting,
  partition: number,
  msg: JsMsg,
  address: ActorAddress,
  reason: string | undefined,
  detail: string | undefined,
): Promise<void> {
  const headers: Record<string, string> = {};
  if (msg.headers) for (const [k, v] of msg.headers) headers[k] = v.join(", ");
  const filed = await routing.deadLetters.put({
    ...routing.letterFields(partition, address, reason, detail),
    subject: msg.subject,
    headers,
    data: msg.data,
    deliveries: msg.info.deliveryCount,
    seq: msg.seq,
    ...(msg.headers?.get(HEADER_ID) ? { command: msg.headers.get(HEADER_ID) } : {}),
  });
  if (filed) msg.term(reason ?? "dead_letter");
  else msg.nak(5_000);
}
