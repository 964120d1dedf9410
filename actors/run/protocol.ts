import type { z } from "zod";
import type { ExecutionContext, RunAnswer, RunCommandSchema } from "../../machines/index.js";
import type { ActorTypes } from "../../runtime/index.js";

/** The run machine's answers with these outcomes. */
type Answer<O extends RunAnswer["outcome"]> = Extract<RunAnswer, { outcome: O }>;

/** Answers declared per command, each checked to be one the run machine gives ({@link RunAnswer}). */
type FromMachine<T extends { [command: string]: RunAnswer | null }> = T;

/** A report the run no longer takes from this attempt: a newer lease, or a cancel since it began. */
export type StaleAnswer = Answer<"stale_lease" | "stale_cancel_epoch">;

/** What an attempt's effect commands (`effect.gate`, `.intent`, `.input`, `.task`) answer: see `machines/execution/intents.ts`. */
export type EffectAnswer = Answer<
  | "stale_lease"
  | "stale_cancel_epoch"
  | "recorded"
  | "observed"
  | "lookup"
  | "reconcile"
  | "in_flight"
  | "needs_approval"
  | "limit_reached"
  | "budget_exhausted"
  | "parked"
  | "waiting"
  | "let_finish"
  | "approved"
  | "rejected"
  | "awaiting_approval"
>;

/**
 * The run actor's protocol: its stored context, its commands (as callers build them, before the
 * mailbox parses them) and, per command, the value its `runway.answer` carries, picked from the
 * machine's closed {@link RunAnswer}. A command it refuses answers `refused`.
 */
export interface RunTypes extends ActorTypes {
  state: ExecutionContext;
  commands: z.input<typeof RunCommandSchema>;
  answers: FromMachine<{
    "run.create": Answer<"started" | "parent_cancelled" | "parent_gone"> | { outcome: "invalid_input"; reason: string };
    "run.cancel": Answer<"cancelled" | "cancel_requested">;
    "run.signal": Answer<"delivered" | "run_not_waiting" | "invalid_input">;
    "approval.decide": Answer<"decided" | "run_not_waiting" | "approval_expired" | "already_decided"> | { outcome: "invalid_input"; reason: string };
    "effect.settle": Answer<"settled" | "not_reconciling">;
    "effect.receipt": Answer<"recorded"> | StaleAnswer;
    "effect.gate": EffectAnswer;
    "effect.intent": EffectAnswer;
    "effect.input": EffectAnswer;
    "effect.task": EffectAnswer;
    /** An agent's subagent call: the child's stored end, the child running (the step parked), or a refusal. */
    "effect.child": Answer<"observed" | "awaiting_subagent" | "refused"> | StaleAnswer;
    "step.result": StaleAnswer;
    "step.heartbeat": StaleAnswer;
  }>;
}
