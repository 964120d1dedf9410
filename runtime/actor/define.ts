import { z, type ZodType } from "zod";
import type { AnyMachineSnapshot, AnyStateMachine, EventObject } from "xstate";
import { RunwayFault } from "../errors.js";

/**
 * An actor kind: a pure XState machine plus what the host needs to run it. The machine decides and
 * talks to the world only by emitting effects ({@link EffectSchema}); the host does the I/O. Every
 * event carries `now`: machines read no clock. `T` is the kind's protocol ({@link ActorTypes}).
 */
export interface ActorDefinition<TMachine extends AnyStateMachine = AnyStateMachine, T extends ActorTypes = ActorTypes> {
  kind: string;
  machine: TMachine;
  /** The protocol, as a type only (never set): `defineActor<typeof machine, Types>(…)` declares it. */
  readonly types?: T;
  /** Validates events arriving in the mailbox (before `now` is added). */
  events: ZodType<EventObject>;
  /** The partitioning key for an actor id: actors that must share a partition return the same key. Default: the id. */
  key?: (id: string) => string;
  /** Input for the machine when an actor is first addressed. */
  input?: (id: string) => unknown;
  /**
   * Adds what the machine needs but the actor does not store (e.g. a plan by its digest), after
   * validation and before the transition. May do I/O; must be deterministic for an event and
   * snapshot, except what it reads of this process ({@link readsHandOvers}). `pending` / `written`:
   * the journal facts and own keys of commands decided earlier in the same batch, not stored yet, so
   * a read of such a key must look there first. Throwing refuses the command as `invalid_input` (a
   * retryable fault is tried again first).
   */
  prepare?: (
    event: EventObject,
    current: AnyMachineSnapshot | undefined,
    pending: readonly unknown[],
    written: ReadonlyMap<string, unknown>,
  ) => EventObject | Promise<EventObject>;
  /**
   * Whether `event`'s `prepare` reads what this process was handed by the actor's own earlier
   * transitions (`runway.local`: e.g. which attempts this node still holds). Such a command is
   * never decided after another command of its batch that handed something over: it starts the
   * next pass, which follows that pass's write and hand-overs, so `prepare` sees them made.
   */
  readsHandOvers?: (event: EventObject) => boolean;
  /**
   * `journal`: every stored transition stays in the actor key's history (the subject's messages
   * in its partition stream), so the key's history is the actor's append-only journal, and
   * `runway.journal` facts written with a transition can be read back in order (see
   * `readJournal`). Default `latest`: each write rolls up the key's history to itself, so the
   * store keeps one record per actor.
   */
  history?: "journal" | "latest";
  /**
   * Called in this process with the `runway.journal` facts of each stored transition, right
   * after the write and before the next command of this actor is decided (e.g. to keep an
   * in-memory index of what the journal holds).
   */
  onJournal?(address: ActorAddress, facts: readonly unknown[]): void;
  /**
   * Called in this process for each transition of a stored write, right after the write (before
   * its outbox is published): the state before and after and the event that moved it (with its
   * `now`). What it sees is durable; a crash between the write and the call loses the call, never
   * the state. Read-only: it must not throw or change either snapshot. Absent (the default), the
   * host keeps nothing per transition for it (e.g. trace spans derived from a run's head).
   */
  observe?(address: ActorAddress, before: AnyMachineSnapshot, after: AnyMachineSnapshot, event: EventObject): void;
  /**
   * The format version of this kind's stored snapshot (its machine's states and context), a
   * positive integer, default 1. It is versioned apart from the record envelope (`rw.actor@1`),
   * so a kind's context can change shape without touching the envelope or any other kind.
   * Every record the host writes carries it (`version`); a record without one is version 1.
   */
  version?: number;
  /**
   * The kind's migrations: for each earlier version `n`, the pure step from a persisted snapshot of
   * version `n` to `n + 1`, run on every read before anything is decided (a record may be migrated
   * and dropped many times before it is rewritten). Required once `version` is above 1. A record
   * newer than `version` is never decided on: its commands wait for a newer node.
   */
  migrations?: Readonly<Record<number, MigrationStep>>;
  /**
   * Commands applied together in one write when they queue up (default: the host's `maxBatch`).
   * A kind whose `prepare` reads keys its own transitions write sees those of the batch's
   * earlier commands in `written`.
   */
  maxBatch?: number;
  /**
   * `memory`: a `runway.send` to this kind from another kind is applied in memory when this node
   * serves the receiver's partition, right after the sender's write and with the mailbox's id; it
   * stays in the sender's outbox, so a crash redelivers it (deduped). A kind that receives in memory
   * sends only through the mailbox, so a lane waits on at most one other, never in a cycle.
   */
  inbox?: "memory" | "mailbox";
  /**
   * Effects the kind adds to a stored transition, derived from its state before (the machine's
   * initial state for an actor's first command) and after: e.g. index entries kept beside the record. Called only
   * for a transition that is stored; stored in the outbox with the machine's own effects, so a
   * crash after the write publishes them on the next load.
   */
  effects?: (address: ActorAddress, before: AnyMachineSnapshot, after: AnyMachineSnapshot) => Effect[];
  /**
   * How long (ms) a record in this state is kept once written: the write carries `Nats-TTL` and
   * is a subject rollup, so no older revision outlives it, and after it the actor is gone (a
   * load finds nothing). Undefined: kept until overwritten. Needs a bucket that allows
   * per-message TTL (the partition buckets do).
   */
  ttl?: (snapshot: AnyMachineSnapshot) => number | undefined;
  /**
   * Whether an idle actor in this state stays in this node's memory. Default: it does, until the
   * host's least-recently-used bound (`cacheLimit`) drops it. A kind whose actors end and are
   * rarely addressed again (a finished run) says no for those states: the host drops such an
   * actor once its lane is idle after the write, so a node's memory follows the actors it
   * serves, not how many it has served. A later command loads it again from the store.
   */
  keepInMemory?: (snapshot: AnyMachineSnapshot) => boolean;
  /**
   * Called when this node drops an actor from memory (it ended, it was the least recently used,
   * or its partition was released): what the kind keeps in memory beside it can go too.
   */
  onDropped?: (address: ActorAddress) => void;
}

/**
 * An actor kind's protocol, declared once beside its definition (`defineActor<M, T>`): the
 * context its records hold (`state`), the commands it takes, and for each command type the value
 * its `runway.answer` carries. Types only: nothing is checked per command. The kind's machine
 * answers as declared (its tests drive every answer); callers branch on the union without a cast.
 */
export interface ActorTypes {
  state: unknown;
  commands: EventObject;
  /** Command type → answer value. A command missing here answers `unknown`. */
  answers: object;
}

export const KIND_PATTERN = /^[a-z][a-z0-9_-]{0,31}$/;
/** Subject-token and KV-key safe: no dots, wildcards or spaces. */
export const ID_PATTERN = /^[A-Za-z0-9_=-]{1,200}$/;
/** A KV key a `runway.store` effect may name: dot-separated tokens of ID_PATTERN's characters. */
export const STORE_KEY_PATTERN = /^[A-Za-z0-9_=-]+(\.[A-Za-z0-9_=-]+)*$/;
/** A KV bucket a `runway.store` effect may name. */
export const BUCKET_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
const BucketName = z.string().regex(BUCKET_PATTERN);

/** One row of a migration table: a stored snapshot of version `n` brought to version `n + 1`. */
export type MigrationStep = (snapshot: unknown) => unknown;

export function defineActor<TMachine extends AnyStateMachine, T extends ActorTypes = ActorTypes>(
  definition: ActorDefinition<TMachine, T>,
): ActorDefinition<TMachine, T> {
  if (!KIND_PATTERN.test(definition.kind)) throw new RunwayFault("invalid_kind", `actor kind ${JSON.stringify(definition.kind)} must match ${KIND_PATTERN}`);
  const version = definition.version ?? 1;
  if (!Number.isInteger(version) || version < 1) throw new RunwayFault("invalid_version", `actor kind ${definition.kind}: version must be a positive integer`);
  for (let from = 1; from < version; from++)
    if (!definition.migrations?.[from])
      throw new RunwayFault("invalid_version", `actor kind ${definition.kind}: version ${version} needs a migration step from version ${from}`);
  return definition;
}

export const AddressSchema = z.object({ kind: z.string().regex(KIND_PATTERN), id: z.string().regex(ID_PATTERN) });
export type ActorAddress = z.infer<typeof AddressSchema>;

const EventSchema = z.object({ type: z.string().min(1) }).passthrough();
const TimerName = z.string().regex(/^[A-Za-z0-9_-]{1,200}$/);

/** What a machine may ask the host to do, as emitted events. */
export const EffectSchema = z.discriminatedUnion("type", [
  /**
   * Deliver `event` to another actor's mailbox, after this transition is stored. `last`: only
   * once the transition's other durable entries are out, so a receiver that acts on hearing it
   * (a tenant that drops the run from what recovery reads) never hears it before them.
   */
  z.object({ type: z.literal("runway.send"), to: AddressSchema, event: EventSchema, last: z.literal(true).optional() }),
  /**
   * Publish `data` (JSON) to a subject captured by a stream, durably: the command that caused
   * the transition is acknowledged only once it is stored (e.g. audit records).
   */
  z.object({ type: z.literal("runway.publish"), subject: z.string().min(1), data: z.unknown() }),
  /**
   * A progress event: `data` (JSON) published live on `subject` after the transition is stored,
   * as a plain NATS message, never awaited. It is durable as an entry of the stored record (a
   * journaled actor's history keeps it), published with the id `<revision>.<index>`, and read
   * back from the journal with that id (see LiveEvents).
   */
  z.object({ type: z.literal("runway.event"), subject: z.string().min(1), data: z.unknown() }),
  /** Wake this actor with `event` at `at` (ms); setting a name again replaces the earlier timer. */
  z.object({ type: z.literal("runway.timer.set"), name: TimerName, at: z.number(), event: EventSchema }),
  z.object({ type: z.literal("runway.timer.cancel"), name: TimerName }),
  /**
   * Write `value` (JSON; `null` purges) under `key` after the transition is stored. Without
   * `bucket`: in the actor's own partition bucket through the fenced log, `key` under
   * `<kind>.<id>.`; with `bucket`: a plain put, for idempotent indexes. Applied in outbox order and
   * again on every load, so the last entry for a key wins and each must be idempotent. `last`: after
   * everything else, not awaited (an index entry that must outlive what the transition sent).
   */
  z.object({
    type: z.literal("runway.store"),
    key: z.string().max(1_000).regex(STORE_KEY_PATTERN),
    value: z.unknown(),
    ttl_ms: z.number().int().positive().optional(),
    bucket: BucketName.optional(),
    last: z.literal(true).optional(),
  }),
  /** The answer to the command that caused this transition, for a requester waiting on it. */
  z.object({ type: z.literal("runway.answer"), value: z.unknown() }),
  /**
   * Hand `payload` to an in-process handler of `channel` after the transition is stored (e.g.
   * start a step on this node). Not stored and not re-published: whoever relies on it must be
   * able to recover when the process dies between the write and the hand-over.
   */
  z.object({ type: z.literal("runway.local"), channel: z.string().min(1), payload: z.unknown() }),
  /**
   * A fact kept with this transition in the actor's journal (a step's output, a tool's receipt):
   * stored once, in the same fenced write, never re-published. Meaningful for `history: "journal"`.
   */
  z.object({ type: z.literal("runway.journal"), data: z.unknown() }),
]);
export type Effect = z.infer<typeof EffectSchema>;
