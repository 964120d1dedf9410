/**
 * Direct requests to the actors of a partition served here (`rw.ask.<partition>.<kind>.<id>`):
 * the fast path of `MailboxClient.request`. Nothing is stored on the way in (the requester holds the
 * command), and the answer comes only after the transition is stored. Whatever this owner did not
 * apply is answered `mailbox` (header `Rw-Ask`) and only then sent durably, so a command that may
 * have been applied is never also stored. One queue group per partition: one owner per request.
 */
import type { Msg, NatsConnection, Subscription } from "@nats-io/transport-node";
import type { Logger } from "../log.js";
import { askFilter } from "../topology.js";
import type { ActorAddress } from "./define.js";
import { readInbound } from "./inbound.js";
import type { HostStats } from "./delivery.js";
import { answerCodec, HEADER_ID, type CommandAnswer } from "./wire.js";
import { sentHeaders } from "../nats/headers.js";

/** Header of a direct answer that is no answer: send the command through the mailbox. */
export const HEADER_ASK = "Rw-Ask";
export const ASK_MAILBOX = "mailbox";

/** What answering a partition's requests needs from the host that serves it. */
export interface AskRouting {
  nc: NatsConnection;
  logger: Logger;
  stats: HostStats;
  hasKind(kind: string): boolean;
  partitionOf(address: ActorAddress): number;
  /** Applies a command on its actor's lane here (`ActorHost.dispatch`). */
  dispatch(address: ActorAddress, event: unknown, id: string): Promise<CommandAnswer | { outcome: "not_served" } | { outcome: "kept"; reason: string }>;
}

/** Starts answering `partition`'s direct requests; unsubscribe before the partition is released. */
export function serveAsks(routing: AskRouting, partition: number): Subscription {
  return routing.nc.subscribe(askFilter(partition), {
    queue: `rw.ask.${partition}`,
    callback(err, msg) {
      if (!err) answer(routing, partition, msg);
    },
  });
}

function answer(routing: AskRouting, partition: number, msg: Msg): void {
  // A command nobody waits for belongs in the mailbox, where it is stored before it is taken.
  if (!msg.reply) return;
  // Nothing was stored, so nothing is dead-lettered: the requester hears why.
  const read = readInbound(msg.subject, msg.data, partition, routing);
  if (!read.ok) return respond(routing, msg, read.answer);
  const commandId = msg.headers?.get(HEADER_ID);
  if (!commandId) return respond(routing, msg, { outcome: "invalid_input", reason: "missing_id" });
  routing.stats.asked++;
  void routing.dispatch(read.address, read.event, commandId).then(
    (settled) => respond(routing, msg, settled.outcome === "not_served" || settled.outcome === "kept" ? undefined : settled),
    (err: unknown) => {
      routing.logger.error("direct request failed", { subject: msg.subject, error: String(err) });
      respond(routing, msg, undefined);
    },
  );
}

const toMailbox = sentHeaders();
toMailbox.set(HEADER_ASK, ASK_MAILBOX);

/** Sends the closed answer, or (`undefined`) tells the requester to use the mailbox; never throws into a lane. */
function respond(routing: AskRouting, msg: Msg, settled: CommandAnswer | undefined): void {
  try {
    if (settled) msg.respond(answerCodec.encode(settled));
    else msg.respond(new Uint8Array(), { headers: toMailbox });
  } catch (err) {
    routing.logger.warn("direct answer not sent", { subject: msg.subject, outcome: settled?.outcome, error: String(err) });
    try {
      msg.respond(answerCodec.encode({ outcome: "invalid_input", reason: "answer_unsendable" }));
    } catch {
      // The connection is closed: the requester times out and goes to the mailbox.
    }
  }
}
