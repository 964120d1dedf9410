/**
 * Deciding a batch of commands on one loaded state (the first half of a lane's pass, `cell.ts`
 * the other: the fenced write and what follows it). Each command in turn: a duplicate by its
 * applied mark, parsed unless trusted, prepared (facts read), refused or moved by the machine;
 * the effects of those that moved the state gathered for the one write.
 */
import { hash } from "node:crypto";
import type { AnyMachineSnapshot, EventObject } from "xstate";
import { isFault } from "../errors.js";
import { DeadLetterReason } from "./dead-letters.js";
import type { ActorAddress, ActorDefinition, Effect } from "./define.js";
import type { CellEnvironment, Delivery, Settle } from "./delivery.js";
import { collectEffects, factBytes } from "./emitted.js";
import { sameStateValue, type pureMachine } from "./pure.js";
import type { ActorRecord, CommandAnswer, OutboxEntry } from "./wire.js";

/** The lane a batch is decided for. */
export interface Lane {
  env: CellEnvironment;
  address: ActorAddress;
  /** `<kind>.<id>`, for logs. */
  key: string;
  /** Commands left for the next pass (past the journal budget of this one, or waiting for its hand-overs). */
  requeue(rest: Delivery[]): void;
}

/** What deciding a batch on one loaded state produced: the state to store and what follows once it is. */
export interface Pass {
  snapshot: AnyMachineSnapshot | undefined;
  applied: string[];
  outbox: OutboxEntry[];
  local: Extract<Effect, { type: "runway.local" }>[];
  journal: unknown[];
  decisions: Decision[];
  /** Commands that moved the state (0: nothing to write). */
  changed: number;
  /** Each moving transition's before, after and event, for the kind's `observe` (kept only when it has one). */
  observed?: [AnyMachineSnapshot, AnyMachineSnapshot, EventObject][];
}

/** What the cell decided for one command of a batch, settled after the write. */
export interface Decision {
  delivery: Delivery;
  answer: CommandAnswer;
  how: Settle;
  reason?: string;
  detail?: string;
}

/**
 * What a warm actor keeps between commands: only what the next write reads. Not the record it
 * was loaded from or wrote (its persisted snapshot, published outbox and journal facts would
 * otherwise stay in memory for every cached actor: about half of a parked run's heap).
 */
export interface Cached {
  applied: ActorRecord["applied"];
  transitions: number;
  revision: number;
  generation: number;
  /** The live XState snapshot of the record last read or written, kept so a hot actor is not re-resolved per batch. */
  snapshot: AnyMachineSnapshot;
}

/**
 * What an actor's record keeps of a command it applied, to answer a redelivery `duplicate`: a
 * 72-bit digest of its id, so the window costs the same whatever the ids look like.
 */
export function appliedMark(id: string): string {
  return hash("sha256", id, "base64url").slice(0, 12);
}

/** Journal facts one write carries at most, about (a single command's own facts are never split). */
const JOURNAL_BYTES_PER_WRITE = 24 * 1024;

/**
 * Decides each command of `batch` in turn on `base` (the stored state, or none): duplicates,
 * invalid and refused commands are answered without a change; the others move the snapshot
 * and add their effects to the pass. Commands past the journal budget go back to the queue.
 * Its parts are plain functions that write into `pass`: the hot path allocates nothing more.
 */
export async function decideBatch(lane: Lane, batch: Delivery[], base: Cached | undefined, pure: ReturnType<typeof pureMachine>): Promise<Pass> {
  const { definition, clock } = lane.env;
  const pass: Pass = {
    snapshot: base?.snapshot,
    applied: base ? [...base.applied] : [],
    outbox: [],
    local: [],
    journal: [],
    decisions: [],
    changed: 0,
  };
  // The own keys this batch's commands wrote so far (they land after the record): what `prepare` reads first.
  const ownKeys = new Map<string, unknown>();
  let journalBytes = 0;
  for (let index = 0; index < batch.length; index++) {
    const delivery = batch[index]!;
    // A write carries at most about JOURNAL_BYTES_PER_WRITE of journal facts: the commands
    // after the one that reached it wait for the next write (a batch of large outputs would
    // otherwise make one record too large to store).
    if (journalBytes >= JOURNAL_BYTES_PER_WRITE) {
      lane.requeue(batch.splice(index));
      break;
    }
    const mark = appliedMark(delivery.id);
    const parsed = screen(lane, pass, delivery, mark);
    if (parsed === undefined) continue;
    // Its prepare must see this pass's hand-overs made: it waits for the next pass (after this one's write).
    if (pass.local.length > 0 && definition.readsHandOvers?.(parsed)) {
      lane.requeue(batch.splice(index));
      break;
    }
    const now = clock.now();
    const effects: Effect[] = [];
    if (!pass.snapshot) {
      const [initial, actions] = pure.initial(definition.input?.(lane.address.id));
      pass.snapshot = initial;
      effects.push(...collectEffects(actions));
    }
    const snapshot: AnyMachineSnapshot = pass.snapshot;
    let event: EventObject = { ...parsed, now } as EventObject;
    if (definition.prepare) {
      try {
        event = await prepareWithRetry(definition.prepare, event, snapshot, pass.journal, ownKeys);
      } catch (err) {
        refusePrepared(lane, pass, delivery, err);
        continue;
      }
    }
    if (!transition(lane, pass, pure, base, delivery, snapshot, event, effects)) continue;
    // Only a later command of this batch reads the count (a single command's facts are never split).
    journalBytes += gather(pass, delivery, mark, effects, ownKeys, index < batch.length - 1);
  }
  return pass;
}

/**
 * A command's event, or undefined when it is answered here: a duplicate by its applied mark, or
 * an event its kind's schema refuses (parsed unless trusted).
 */
function screen(lane: Lane, pass: Pass, delivery: Delivery, mark: string): EventObject | undefined {
  // A record written before marks were digests holds the ids themselves.
  if (pass.applied.includes(mark) || pass.applied.includes(delivery.id)) {
    lane.env.stats.duplicates++;
    pass.decisions.push({ delivery, answer: { outcome: "duplicate" }, how: "ack" });
    return undefined;
  }
  if (delivery.trusted) return delivery.event as EventObject;
  const parsed = lane.env.definition.events.safeParse(delivery.event);
  if (parsed.success) return parsed.data as EventObject;
  lane.env.stats.invalid++;
  const reason = parsed.error.issues.map((i) => `${i.path.join(".") || "event"}: ${i.message}`).join("; ");
  pass.decisions.push({ delivery, answer: { outcome: "invalid_input", reason }, how: "term", reason: `invalid_input: ${reason}` });
  return undefined;
}

/** A `prepare` that threw: a retryable fault keeps the command for a later delivery rather than lose it; any other refuses it. */
function refusePrepared(lane: Lane, pass: Pass, delivery: Delivery, err: unknown): void {
  if (isFault(err) && err.kind === "retryable") {
    pass.decisions.push({ delivery, answer: { outcome: "invalid_input", reason: "unavailable" }, how: "keep", reason: "prepare unavailable" });
    return;
  }
  lane.env.stats.invalid++;
  const reason = err instanceof Error ? err.message : String(err);
  pass.decisions.push({ delivery, answer: { outcome: "invalid_input", reason }, how: "term", reason: `invalid_input: ${reason}` });
}

/**
 * The machine's transition of `event`: true when it moved the state (`pass.snapshot` and
 * `effects` updated); false when the command was answered without a change (refused, answered
 * as is, or a machine fault dead-lettered).
 */
function transition(
  lane: Lane,
  pass: Pass,
  pure: ReturnType<typeof pureMachine>,
  base: Cached | undefined,
  delivery: Delivery,
  snapshot: AnyMachineSnapshot,
  event: EventObject,
  effects: Effect[],
): boolean {
  try {
    // A guard that throws is the machine's fault like any other.
    const [next, actions] = pure.transition(snapshot, event);
    const produced = collectEffects(actions);
    if (next.context === snapshot.context && sameStateValue(next.value, snapshot.value) && produced.every((e) => e.type === "runway.answer")) {
      // Nothing moved: the event was refused (no transition takes it) or answered without a
      // change. Only now is it asked which: a change means a transition took it, so the common
      // case selects the transitions once, not twice.
      if (!snapshot.can(event)) {
        lane.env.stats.refused++;
        pass.decisions.push({ delivery, answer: { outcome: "refused", state: snapshot.value }, how: "ack" });
        return false;
      }
      // Answered without a change (e.g. a stale report): nothing to store, nothing to fence.
      const answer = produced.find((e) => e.type === "runway.answer");
      pass.decisions.push({
        delivery,
        answer: { outcome: "applied", revision: base?.revision ?? 0, ...(answer ? { value: answer.value } : {}) },
        how: "ack",
      });
      return false;
    }
    effects.push(...produced, ...(lane.env.definition.effects?.(lane.address, snapshot, next) ?? []));
    if (lane.env.definition.observe) (pass.observed ??= []).push([snapshot, next, event]);
    pass.snapshot = next;
    return true;
  } catch (err) {
    // A machine that throws or emits nonsense is a bug; the command must not wedge the actor.
    // Deterministic, so not tried again: kept in the dead-letter stream for after the fix.
    lane.env.logger.error("machine fault", { actor: lane.key, command: delivery.id, error: String(err) });
    pass.decisions.push({
      delivery,
      answer: { outcome: "invalid_input", reason: DeadLetterReason.MachineFault },
      how: "dead",
      reason: DeadLetterReason.MachineFault,
      detail: String(err),
    });
    return false;
  }
}

/**
 * Adds the effects of a command that moved the state to the pass (answer, hand-overs, journal
 * facts, outbox entries numbered in effect order) and marks it applied. Returns the bytes of
 * journal facts it added when `counted` (a later command of the batch reads the budget).
 */
function gather(pass: Pass, delivery: Delivery, mark: string, effects: Effect[], ownKeys: Map<string, unknown>, counted: boolean): number {
  let answer: Extract<Effect, { type: "runway.answer" }> | undefined;
  let bytes = 0;
  let entry = 0;
  for (const e of effects) {
    if (e.type === "runway.answer") answer ??= e;
    else if (e.type === "runway.local") pass.local.push(e);
    else if (e.type === "runway.journal") {
      pass.journal.push(e.data);
      if (counted) bytes += factBytes(e.data);
    } else {
      if (e.type === "runway.store" && !e.bucket) ownKeys.set(e.key, e.value);
      pass.outbox.push({ id: `${delivery.id}/${entry++}`, effect: e });
    }
  }
  pass.applied.push(mark);
  pass.changed++;
  pass.decisions.push({ delivery, answer: { outcome: "applied", revision: 0, ...(answer ? { value: answer.value } : {}) }, how: "ack" });
  return bytes;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function prepareWithRetry(
  prepare: NonNullable<ActorDefinition["prepare"]>,
  event: EventObject,
  snapshot: AnyMachineSnapshot,
  pending: readonly unknown[],
  written: ReadonlyMap<string, unknown>,
): Promise<EventObject> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await prepare(event, snapshot, pending, written);
    } catch (err) {
      if (!(isFault(err) && err.kind === "retryable") || attempt >= 5) throw err;
      await sleep(Math.min(50 * 2 ** attempt, 1_000));
    }
  }
}
