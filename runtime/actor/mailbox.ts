import { headers as makeHeaders, type NatsConnection } from "@nats-io/transport-node";
import { expectReply } from "../nats/requests.js";
import { publish, type PublishOutcome } from "../nats/jetstream.js";
import { partitionOf } from "../partitions/hash.js";
import { mailboxSubject } from "../topology.js";
import type { ActorAddress } from "./define.js";
import { answerCodec, commandCodec, HEADER_ID, HEADER_REPLY, type CommandAnswer } from "./wire.js";

/** An event for an actor: a `type` and whatever fields the actor's event schema accepts. */
export type CommandEvent = { type: string } & Record<string, unknown>;

/**
 * Sending commands to actors from anywhere (another service, a gateway, a test). A command is
 * stored in the actor's partition mailbox before `send` resolves; its `id` makes a retried send
 * harmless (duplicate window at the stream, applied-command window at the actor).
 */
export class MailboxClient {
  constructor(
    private readonly nc: NatsConnection,
    private readonly partitions: number,
    private readonly keyOf: (address: ActorAddress) => string = (a) => a.id,
  ) {}

  subjectOf(address: ActorAddress): string {
    return mailboxSubject(partitionOf(this.keyOf(address), this.partitions), address.kind, address.id);
  }

  send(address: ActorAddress, event: CommandEvent, id: string, reply?: string): Promise<PublishOutcome> {
    const h = makeHeaders();
    h.set(HEADER_ID, id);
    if (reply) h.set(HEADER_REPLY, reply);
    return publish(this.nc, this.subjectOf(address), commandCodec.encode({ event }), { headers: h, msgId: id });
  }

  /**
   * Sends a command and waits for the actor's closed answer, which comes only after the
   * transition is durably stored. Resolves `timeout` if no answer arrives in time; the command
   * may still be applied later (send it again with the same id to learn the outcome).
   */
  async request(
    address: ActorAddress,
    event: CommandEvent,
    id: string,
    timeoutMs = 5_000,
  ): Promise<CommandAnswer | { outcome: "timeout" } | { outcome: "not_stored"; detail: string }> {
    const expected = expectReply(this.nc, timeoutMs);
    const sent = await this.send(address, event, id, expected.subject);
    if (sent.outcome !== "stored") {
      expected.cancel();
      return { outcome: "not_stored", detail: "detail" in sent ? sent.detail : sent.outcome };
    }
    // The stream already holds a command with this id: it is (or will be) applied once, not again.
    if (sent.duplicate) {
      expected.cancel();
      return { outcome: "duplicate" };
    }
    const reply = await expected.reply;
    if (!reply.ok) return { outcome: "timeout" };
    const decoded = answerCodec.decode(reply.msg.data);
    return decoded.ok ? decoded.value : { outcome: "invalid_input", reason: `unreadable answer: ${decoded.detail}` };
  }
}
