import type { NatsConnection } from "@nats-io/transport-node";
import { publish, withRetry, type PublishOutcome } from "../nats/jetstream.js";
import { partitionOf } from "../partitions/hash.js";
import { CMD_STREAM, mailboxSubject, timerSubject } from "../topology.js";
import { DeadLetterReason, type DeadLetterBox } from "./dead-letters.js";
import type { ActorAddress, Effect } from "./define.js";
import { eventId, type LiveEvents } from "./live-events.js";
import { commandCodec, HEADER_ID, type OutboxEntry } from "./wire.js";
import { sentHeaders } from "../nats/headers.js";

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
  /** Stores several of the actor's own keys (no bucket) in order as one write (see ActorKeys.storeOwn); without it, one `store` after another. */
  storeOwn?(self: ActorAddress, effects: readonly StoreEffect[]): Promise<PublishOutcome>;
  /** Sends between this process's actors applied in memory (see `ActorDefinition.inbox`). */
  deliver?: InMemorySends;
}

export interface InMemorySends {
  /** Whether a send from `self` to `to` is applied here in memory rather than published. */
  mayTake(self: ActorAddress, to: ActorAddress): boolean;
  /** Applies it: `delivered` once the receiver stored (or answered) it; `publish` when it must go through the mailbox after all. */
  deliver(to: ActorAddress, event: unknown, id: string): Promise<"delivered" | "publish">;
}

export type StoreEffect = Extract<Effect, { type: "runway.store" }>;

function retryable(o: PublishOutcome): boolean {
  return o.outcome === "unavailable" || o.outcome === "unknown";
}

/** What a caller waits for after publishing a stored transition's outbox (see {@link publishOutbox}). */
export interface PublishedOutbox {
  /** Every entry out but the sends applied in memory (false: some durable entry was not published): what a caller in this process waits for. */
  durable: Promise<boolean>;
  /** Every entry out, the sends applied in memory too: what acknowledging a mailbox command waits for. */
  all: Promise<boolean>;
}

const ALL_OUT = Promise.resolve(true);

/**
 * The outbox of most transitions (a step's result, a counter's increment): live events at most,
 * out before {@link publishOutbox} returns. A caller given this has nothing to wait for, and
 * settles its commands without an empty async stage (and its turns of the microtask queue) each.
 */
export const NOTHING_TO_WAIT_FOR: PublishedOutbox = { durable: ALL_OUT, all: ALL_OUT };

/**
 * Publishes a stored transition's effects. Each has a deterministic id (command id + position), so a
 * re-publish after a crash is dropped by the stream's duplicate window or the receiver's applied
 * window. Live events go first and never wait; then own keys, durable entries, indexes (`durable`
 * resolves), in-memory sends, `last` sends and indexes (`all` resolves), so a caller here is not held
 * by another actor's queue. An entry over the max payload is dead-lettered, so the actor is not wedged.
 */
export function publishOutbox(
  ctx: OutboxContext,
  self: ActorAddress,
  entries: readonly OutboxEntry[],
  revision: number,
  /** The actor's own keys went out with the record (ActorCell.commit): not stored again. */
  ownStored = false,
): PublishedOutbox {
  const durable: OutboxEntry[] = [];
  const inMemory: OutboxEntry[] = [];
  const lastSends: OutboxEntry[] = [];
  const own: StoreEffect[] = [];
  const indexes: StoreEffect[] = [];
  const last: StoreEffect[] = [];
  let events = 0;
  for (const entry of entries) {
    const effect = entry.effect;
    if (effect.type === "runway.event") ctx.events.publish(effect.subject, eventBody(eventId(revision, events++), effect.data));
    else if (effect.type === "runway.store") {
      if (effect.bucket) (effect.last ? last : indexes).push(effect);
      else if (!ownStored) own.push(effect);
    } else if (effect.type === "runway.send" && ctx.deliver?.mayTake(self, effect.to)) inMemory.push(entry);
    else if (effect.type === "runway.send" && effect.last) lastSends.push(entry);
    else durable.push(entry);
  }
  const noneLast = inMemory.length === 0 && lastSends.length === 0 && last.length === 0;
  if (noneLast && own.length === 0 && durable.length === 0 && indexes.length === 0) return NOTHING_TO_WAIT_FOR;
  const out = publishDurable(ctx, self, own, durable, indexes);
  if (noneLast) return { durable: out, all: out };
  return {
    durable: out,
    all: out.then(async (ok) => ok && (await deliverAll(ctx, self, inMemory)) && (await publishAll(ctx, self, lastSends)) && storeInOrder(ctx, self, last)),
  };
}

async function publishDurable(
  ctx: OutboxContext,
  self: ActorAddress,
  own: readonly StoreEffect[],
  durable: readonly OutboxEntry[],
  indexes: readonly StoreEffect[],
): Promise<boolean> {
  // State kept beside the record first, in order (a later entry for a key must land last).
  if (own.length > 0 && ctx.storeOwn) {
    const stored = await withRetry(() => ctx.storeOwn!(self, own), retryable, { deadlineMs: 10_000 });
    if (stored.outcome !== "stored") return false;
  } else if (!(await storeInOrder(ctx, self, own))) return false;
  if (!(await publishAll(ctx, self, durable))) return false;
  // Index entries last: an index says a transition happened only once everything it published is out.
  return storeInOrder(ctx, self, indexes);
}

async function publishAll(ctx: OutboxContext, self: ActorAddress, entries: readonly OutboxEntry[]): Promise<boolean> {
  if (entries.length === 0) return true;
  return (await Promise.all(entries.map((entry) => publishOrFile(ctx, self, entry)))).every((stored) => stored);
}

/** Sends applied in memory where the receiver takes them; the mailbox for any it does not (kept, or no longer served here). */
async function deliverAll(ctx: OutboxContext, self: ActorAddress, entries: readonly OutboxEntry[]): Promise<boolean> {
  const results = await Promise.all(
    entries.map(async (entry) => {
      const send = entry.effect as Extract<Effect, { type: "runway.send" }>;
      if ((await ctx.deliver!.deliver(send.to, send.event, entry.id)) === "delivered") return true;
      return publishOrFile(ctx, self, entry);
    }),
  );
  return results.every((stored) => stored);
}

async function publishOrFile(ctx: OutboxContext, self: ActorAddress, entry: OutboxEntry): Promise<boolean> {
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
  const h = sentHeaders();
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
