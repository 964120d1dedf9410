import { headers as makeHeaders, type NatsConnection } from "@nats-io/transport-node";
import { publish, withRetry, type PublishOutcome } from "../nats/jetstream.js";
import { partitionOf } from "../partitions/hash.js";
import { CMD_STREAM, mailboxSubject, timerSubject } from "../topology.js";
import { DeadLetterReason, type DeadLetterBox } from "./dead-letters.js";
import type { ActorAddress, Effect } from "./define.js";
import { eventId, type LiveEvents } from "./live-events.js";
import { commandCodec, HEADER_ID, type OutboxEntry } from "./wire.js";

/** Timers due this soon are delivered straight to the mailbox instead of being scheduled. */
const IMMEDIATE_TIMER_MS = 20;

export interface OutboxContext {
  nc: NatsConnection;
  partitions: number;
  /** Partition key of an address (the actor definition's `key`, or the id). */
  keyOf(address: ActorAddress): string;
  now(): number;
  /** Where `runway.event` entries go: published live, never stored again nor awaited (see LiveEvents). */
  events: LiveEvents;
  /** Where a durable entry too large to publish is filed instead (it can never be published). */
  deadLetters?: DeadLetterBox;
  /** Applies a `runway.store` entry (see EffectSchema): the host writes it through the partition's fenced log. */
  store(self: ActorAddress, effect: StoreEffect): Promise<PublishOutcome>;
  /**
   * Applies a `runway.send` in this process when its receiver takes it in memory (see
   * `ActorDefinition.inbox`): `delivered` once the receiver stored (or answered) it;
   * `publish` when it must go through the mailbox instead.
   */
  deliver?(self: ActorAddress, to: ActorAddress, event: unknown, id: string): Promise<"delivered" | "publish">;
}

export type StoreEffect = Extract<Effect, { type: "runway.store" }>;

function retryable(o: PublishOutcome): boolean {
  return o.outcome === "unavailable" || o.outcome === "unknown";
}

/**
 * Publishes the effects of a stored transition. Each entry has a deterministic id (the command
 * id and the effect's position), used as `Nats-Msg-Id` and as the receiver's `Rw-Id`, so a
 * re-publish after a crash is dropped by the stream's duplicate window and, beyond it, by the
 * receiver's applied-command window. Returns false if some durable entry (a send, a timer, a
 * `runway.publish`) could not be published. `runway.event` entries are published live at once,
 * in entry order, each with its id (`revision`, the stored record's, and its place among the
 * record's events), and never make this false or wait. A durable
 * entry larger than the server's max payload can never be published: it is filed as a dead
 * letter (`effect_too_large`, the body left out) and counts as done, so the actor is not wedged.
 */
export async function publishOutbox(ctx: OutboxContext, self: ActorAddress, entries: readonly OutboxEntry[], revision: number): Promise<boolean> {
  const durable: OutboxEntry[] = [];
  const own: StoreEffect[] = [];
  const indexes: StoreEffect[] = [];
  let events = 0;
  for (const entry of entries) {
    const effect = entry.effect;
    if (effect.type === "runway.event") ctx.events.publish(effect.subject, eventBody(eventId(revision, events++), effect.data));
    else if (effect.type === "runway.store") (effect.bucket ? indexes : own).push(effect);
    else durable.push(entry);
  }
  // State kept beside the record first, in order (a later entry for a key must land last).
  if (!(await storeInOrder(ctx, self, own))) return false;
  if (durable.length > 0) {
    const results = await Promise.all(
      durable.map(async (entry) => {
        if (entry.effect.type === "runway.send" && ctx.deliver && (await ctx.deliver(self, entry.effect.to, entry.effect.event, entry.id)) === "delivered")
          return true;
        const result = await withRetry(() => publishEntry(ctx, self, entry), retryable, { deadlineMs: 10_000 });
        if (result.outcome !== "too_large" || !ctx.deadLetters) return result.outcome === "stored";
        return ctx.deadLetters.put({
          reason: DeadLetterReason.EffectTooLarge,
          detail: `${entry.effect.type}: ${result.detail}`,
          subject: entry.effect.type === "runway.send" ? subjectFor(ctx, entry.effect.to) : entry.effect.type === "runway.publish" ? entry.effect.subject : "",
          headers: { [HEADER_ID]: entry.id },
          data: new Uint8Array(),
          partition: partitionOf(ctx.keyOf(self), ctx.partitions),
          kind: self.kind,
          id: self.id,
          deliveries: 0,
          command: entry.id,
        });
      }),
    );
    if (!results.every((stored) => stored)) return false;
  }
  // Index entries last: an index says a transition happened only once everything it published is out.
  return storeInOrder(ctx, self, indexes);
}

async function storeInOrder(ctx: OutboxContext, self: ActorAddress, effects: readonly StoreEffect[]): Promise<boolean> {
  for (const effect of effects) {
    const stored = await withRetry(() => ctx.store(self, effect), retryable, { deadlineMs: 10_000 });
    if (stored.outcome !== "stored") return false;
  }
  return true;
}

/** An event as published and as read back from the journal: its id first, then what the machine said. */
export function eventBody(id: string, data: unknown): Record<string, unknown> {
  return { id, ...(data && typeof data === "object" ? data : { data }) };
}

function jsonBytes(data: unknown): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(data ?? null));
}

function subjectFor(ctx: OutboxContext, address: ActorAddress): string {
  return mailboxSubject(partitionOf(ctx.keyOf(address), ctx.partitions), address.kind, address.id);
}

async function publishEntry(ctx: OutboxContext, self: ActorAddress, entry: OutboxEntry): Promise<PublishOutcome> {
  const effect = entry.effect;
  const h = makeHeaders();
  h.set(HEADER_ID, entry.id);
  switch (effect.type) {
    case "runway.send":
      return publish(ctx.nc, subjectFor(ctx, effect.to), commandCodec.encode({ event: effect.event }), { headers: h, msgId: entry.id });
    case "runway.publish":
      return publish(ctx.nc, effect.subject, jsonBytes(effect.data), { headers: h, msgId: entry.id });
    case "runway.timer.set": {
      const target = subjectFor(ctx, self);
      const body = commandCodec.encode({ event: effect.event });
      if (effect.at - ctx.now() <= IMMEDIATE_TIMER_MS) return publish(ctx.nc, target, body, { headers: h, msgId: entry.id });
      // One schedule per (actor, timer name): publishing the same subject again replaces it.
      h.set("Nats-Schedule", `@at ${new Date(effect.at).toISOString()}`);
      h.set("Nats-Schedule-Target", target);
      const partition = partitionOf(ctx.keyOf(self), ctx.partitions);
      return publish(ctx.nc, timerSubject(partition, self.kind, self.id, effect.name), body, { headers: h, msgId: entry.id });
    }
    case "runway.timer.cancel": {
      const partition = partitionOf(ctx.keyOf(self), ctx.partitions);
      try {
        const reply = await ctx.nc.request(
          `$JS.API.STREAM.PURGE.${CMD_STREAM}`,
          JSON.stringify({ filter: timerSubject(partition, self.kind, self.id, effect.name) }),
          { timeout: 2_000 },
        );
        const body = JSON.parse(new TextDecoder().decode(reply.data)) as { success?: boolean; error?: { code: number; description?: string } };
        return body.success ? { outcome: "stored", seq: 0, duplicate: false } : { outcome: "unavailable", detail: body.error?.description ?? "purge failed" };
      } catch (err) {
        return { outcome: "unknown", detail: String(err) };
      }
    }
    case "runway.store":
      return ctx.store(self, effect);
    case "runway.event":
    case "runway.answer":
    case "runway.local":
    case "runway.journal":
      return { outcome: "stored", seq: 0, duplicate: false };
  }
}
