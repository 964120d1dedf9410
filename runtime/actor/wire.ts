import { z } from "zod";
import { versionedCodec } from "../codec.js";
import { EffectSchema } from "./define.js";

/** A mailbox command: the event for the actor named by the subject. */
export const CommandSchema = z.object({ event: z.object({ type: z.string().min(1) }).passthrough() });
export type Command = z.infer<typeof CommandSchema>;
export const commandCodec = versionedCodec({ schema: "rw.cmd", version: 1, body: CommandSchema });

/** Headers of a mailbox message. */
export const HEADER_ID = "Rw-Id";
export const HEADER_REPLY = "Rw-Reply";

/** Closed answer to a command, sent to `Rw-Reply` when the command asked for one. */
export const CommandAnswerSchema = z.discriminatedUnion("outcome", [
  z.object({ outcome: z.literal("applied"), revision: z.number(), value: z.unknown().optional() }),
  z.object({ outcome: z.literal("duplicate") }),
  z.object({ outcome: z.literal("refused"), state: z.unknown() }),
  z.object({ outcome: z.literal("invalid_input"), reason: z.string() }),
  z.object({ outcome: z.literal("unknown_kind"), kind: z.string() }),
]);
export type CommandAnswer = z.infer<typeof CommandAnswerSchema>;
export const answerCodec = versionedCodec({ schema: "rw.answer", version: 1, body: CommandAnswerSchema });

export const OutboxEntrySchema = z.object({ id: z.string(), effect: EffectSchema });
export type OutboxEntry = z.infer<typeof OutboxEntrySchema>;

/**
 * What the host stores for one actor (envelope schema `rw.actor`, version 1): the machine's
 * persisted snapshot and its format version, the ids of the last commands it applied (so a
 * redelivery is applied at most once), and the outbox of the last stored transition
 * (re-published when the record is loaded by a host that did not write it).
 */
export const ActorRecordSchema = z.object({
  kind: z.string(),
  id: z.string(),
  snapshot: z.unknown(),
  applied: z.array(z.string()),
  outbox: z.array(OutboxEntrySchema),
  /** The `runway.journal` facts of this transition (an actor with `history: "journal"` keeps every record: its journal). */
  journal: z.array(z.unknown()).optional(),
  transitions: z.number().int().nonnegative(),
  writer: z.object({ node: z.string(), epoch: z.number() }),
  at: z.number(),
  /**
   * The format version of `snapshot` (the kind's `ActorDefinition.version`), apart from the
   * envelope's schema version. Absent in records written before it existed: version 1.
   */
  version: z.number().int().positive().optional(),
});
export type ActorRecord = z.infer<typeof ActorRecordSchema>;
export const actorRecordCodec = versionedCodec({ schema: "rw.actor", version: 1, body: ActorRecordSchema });
/** Commands an actor's record remembers as applied; a host applies at most this many in one write (its batch), so a redelivered batch is always recognised. */
export const APPLIED_WINDOW = 32;
