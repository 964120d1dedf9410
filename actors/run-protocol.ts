import type { z } from "zod";
import type { ExecutionContext, RunCommandSchema } from "../machines/index.js";
import type { ActorTypes } from "../runtime/index.js";
import type { RunSummary } from "./run-views.js";

/** A report the run no longer takes from this attempt: a newer lease, or a cancel since it began. */
export type StaleAnswer = { outcome: "stale_lease" } | { outcome: "stale_cancel_epoch" };

/** A run as a cancel left it: its summary and cancel record. */
export type CancelledRun = RunSummary & { cancel: unknown };

/** What an attempt's effect commands (`effect.gate`, `.intent`, `.input`, `.task`) answer: see `machines/execution/intents.ts`. */
export type EffectAnswer =
  | StaleAnswer
  /** The intent is recorded: call the tool (with a person's answers, when it asked for input). */
  | { outcome: "recorded"; input?: { responses: Record<string, unknown>; state?: string } }
  /** A completed claim: its stored response, no call. */
  | { outcome: "observed"; value: unknown }
  /** An earlier attempt's call, outcome unknown: ask the server's lookup tool, or call again. */
  | { outcome: "lookup"; tool: string }
  | { outcome: "reconcile" }
  | { outcome: "in_flight" | "needs_approval" | "limit_reached" | "budget_exhausted" | "parked" | "waiting" | "let_finish" }
  | { outcome: "approved"; arguments: unknown }
  | { outcome: "awaiting_approval"; approval: string };

/**
 * The run actor's protocol: its stored context, its commands (as callers build them, before the
 * mailbox parses them) and, per command, the value its `runway.answer` carries. The answers are
 * those the run machine emits (`machines/execution/`); a command it refuses answers `refused`.
 */
export interface RunTypes extends ActorTypes {
  state: ExecutionContext;
  commands: z.input<typeof RunCommandSchema>;
  answers: {
    "run.create":
      | { outcome: "started"; run: RunSummary }
      | { outcome: "invalid_input"; reason: string }
      | { outcome: "parent_cancelled" }
      | { outcome: "parent_gone"; parent_status: string };
    "run.cancel": { outcome: "cancelled" | "cancel_requested"; run: CancelledRun };
    "run.signal": { outcome: "delivered"; nodes: string[] } | { outcome: "run_not_waiting" } | { outcome: "invalid_input"; reason?: string };
    "approval.decide":
      | { outcome: "decided"; approval: string; decision: "approved" | "edited" | "rejected" }
      | { outcome: "approval_not_found" | "run_not_waiting" | "approval_expired" | "already_decided" }
      | { outcome: "invalid_input"; reason: string };
    "effect.settle": { outcome: "settled"; decision: "done" | "retry" | "abandon"; node: string; item?: number } | { outcome: "not_reconciling" };
    "effect.receipt": { outcome: "recorded" } | StaleAnswer;
    "effect.gate": EffectAnswer;
    "effect.intent": EffectAnswer;
    "effect.input": EffectAnswer;
    "effect.task": EffectAnswer;
    "step.result": StaleAnswer;
    "step.heartbeat": StaleAnswer;
  };
}
