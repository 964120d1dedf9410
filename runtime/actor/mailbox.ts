import type { NatsConnection } from "@nats-io/transport-node";
import { expectReply, rawRequest } from "../nats/requests.js";
import { publish, type PublishOutcome } from "../nats/jetstream.js";
import { partitionOf } from "../partitions/hash.js";
import { askSubject, mailboxSubject } from "../topology.js";
import { ASK_MAILBOX, HEADER_ASK } from "./asks.js";
import type { ActorAddress } from "./define.js";
import { answerCodec, commandCodec, HEADER_ID, HEADER_REPLY, type CommandAnswer } from "./wire.js";
import { sentHeaders } from "../nats/headers.js";
import type { Asked } from "./protocol.js";

/** An event for an actor: a `type` and whatever fields the actor's event schema accepts. */
export type CommandEvent = { type: string } & Record<string, unknown>;

/**
 * Sending commands to actors from anywhere (another service, a gateway, a test). A command is
 * stored in the actor's partition mailbox before `send` resolves; its `id` makes a retried send
 * harmless (duplicate window at the stream, applied-command window at the actor).
 */
/** How long the command stream drops a second copy of a command id (its duplicate window, 2 min), less a margin. */
const STORED_MEMORY_MS = 110_000;
/** Ids remembered as stored at most (the oldest are forgotten first). */
const STORED_MEMORY_IDS = 50_000;

export class MailboxClient {
  /**
   * Ids this client stored in a mailbox, with when that stops protecting them: a request with
   * one of them goes through the mailbox again, never to the owner directly. A direct ask would
   * be applied at once while the stored copy may still be on its way; delivered after the actor's
   * applied window moved on, that copy would be applied a second time. Through the mailbox the
   * stream's duplicate window drops it instead.
   */
  readonly #stored = new Map<string, number>();

  constructor(
    private readonly nc: NatsConnection,
    private readonly partitions: number,
    private readonly keyOf: (address: ActorAddress) => string = (a) => a.id,
  ) {}

  subjectOf(address: ActorAddress): string {
    return mailboxSubject(partitionOf(this.keyOf(address), this.partitions), address.kind, address.id);
  }

  send(address: ActorAddress, event: CommandEvent, id: string, reply?: string): Promise<PublishOutcome> {
    return this.store(address, commandCodec.encode({ event }), id, reply);
  }

  private async store(address: ActorAddress, body: Uint8Array, id: string, reply?: string): Promise<PublishOutcome> {
    const h = sentHeaders();
    h.set(HEADER_ID, id);
    if (reply) h.set(HEADER_REPLY, reply);
    const sent = await publish(this.nc, this.subjectOf(address), body, { headers: h, msgId: id });
    if (sent.outcome === "stored") this.#remember(id);
    return sent;
  }

  #remember(id: string): void {
    this.#stored.delete(id);
    this.#stored.set(id, performance.now() + STORED_MEMORY_MS);
    if (this.#stored.size > STORED_MEMORY_IDS) this.#stored.delete(this.#stored.keys().next().value!);
  }

  /** Whether `id` was stored in a mailbox by this client recently enough for the stream to drop a second copy. */
  #wasStored(id: string): boolean {
    const until = this.#stored.get(id);
    if (until === undefined) return false;
    if (until > performance.now()) return true;
    this.#stored.delete(id);
    return false;
  }

  /**
   * Sends a command and waits for the actor's closed answer, given only after the transition is
   * stored; `timeout` leaves it possibly applied later (send again with the same id to learn). It is
   * asked of the owner directly first (asks.ts) and goes through the durable mailbox only if no
   * owner answers or the owner did not apply it; a direct ask that timed out is never re-sent durably,
   * since a stored copy arriving after the applied window moved on would apply twice. `through:
   * "mailbox"` orders the request after the caller's earlier un-awaited `send`s.
   */
  async request(address: ActorAddress, event: CommandEvent, id: string, timeoutMs = 5_000, options: { through?: "mailbox" } = {}): Promise<Asked<unknown>> {
    const started = performance.now();
    const body = commandCodec.encode({ event });
    // Built once: the mailbox fallback stores the very bytes the owner was asked with.
    if (options.through === "mailbox" || this.#wasStored(id)) return this.requestThroughMailbox(address, body, id, timeoutMs);
    const h = sentHeaders();
    h.set(HEADER_ID, id);
    const asked = await rawRequest(this.nc, askSubject(partitionOf(this.keyOf(address), this.partitions), address.kind, address.id), body, {
      headers: h,
      timeoutMs,
    });
    if (asked.ok && asked.msg.headers?.get(HEADER_ASK) !== ASK_MAILBOX) return decodeAnswer(asked.msg.data);
    if (!asked.ok && asked.reason === "timeout") return { outcome: "timeout" };
    if (!asked.ok && asked.reason === "closed") return { outcome: "not_stored", detail: "connection closed" };
    if (!asked.ok && asked.reason === "too_large") return { outcome: "not_stored", detail: "command over the server's max_payload" };
    // No responders, or the owner did not apply it: nothing of it is stored anywhere yet.
    return this.requestThroughMailbox(address, body, id, Math.max(1, timeoutMs - (performance.now() - started)));
  }

  private async requestThroughMailbox(address: ActorAddress, body: Uint8Array, id: string, timeoutMs: number): Promise<Asked<unknown>> {
    const expected = expectReply(this.nc, timeoutMs);
    const sent = await this.store(address, body, id, expected.subject);
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
    return decodeAnswer(reply.msg.data);
  }
}

function decodeAnswer(data: Uint8Array): CommandAnswer {
  const decoded = answerCodec.decode(data);
  return decoded.ok ? decoded.value : { outcome: "invalid_input", reason: `unreadable answer: ${decoded.detail}` };
}
