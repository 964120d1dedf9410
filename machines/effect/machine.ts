import type { ToolClass } from "../tools/index.js";

/**
 * One effect key's lifecycle: intent → call → receipt, and what happens when its attempt is lost.
 * Every call that may change the world goes through it, a tool call and an agent's model turn
 * alike (a turn is an intent of server `model`). Pure: time and ids arrive in events; the run's
 * walk (`execution/intents.ts`, `execution/cancel.ts`) keeps the state on the step that owns the
 * key (its `intents` and `reconcile`) and the receipts in its journal, and does what a decision
 * says (journal, events, answers).
 *
 *   none ──intent──▶ intended ──receipt──▶ observed | failed
 *                       │  ├──withdrawn (the server asks a person for input: nothing happened)──▶ none
 *                       │  └──intent (a later attempt: the outcome is unknown)──▶ call again | lookup first | held
 *                       └──lost (its attempt gone under a cancel)──▶ held ──settle──▶ observed | failed
 *
 * A decision is a closed value: an event that does not fit the state (a receipt for no intent, a
 * late one after reconciliation, a settle of a key nobody holds) gets one too, never a throw.
 */

/** An intent waiting for its receipt. */
export interface EffectIntent {
  server: string;
  tool: string;
  class: ToolClass;
  /** A tool of the same server that tells whether this call happened (asked before calling a non-idempotent tool again). */
  lookup?: string;
  /** The attempt that recorded it (or last reconciled it by calling again). */
  attempt: number;
  at: number;
}

/** What a receipt says: the call's response is known (`observed`), or it is known that it had no effect (`failed`). */
export type EffectReceipt =
  | { key: string; state: "observed"; value: unknown; at: number; by?: string }
  | { key: string; state: "failed"; error: { code: string; message: string }; at: number; by?: string };

export type EffectState =
  /** Nothing was asked for this key. */
  | { s: "none" }
  /** Its intent is recorded and its call made (or being made) by `intent.attempt`. */
  | { s: "intended"; intent: EffectIntent }
  /** Nobody knows whether the call happened and it must not be made again blindly: a person settles it. */
  | { s: "held"; intent: EffectIntent; since: number }
  /** Its receipt is stored: the call's response. */
  | { s: "observed"; receipt: Extract<EffectReceipt, { state: "observed" }> }
  /** Its receipt is stored: the call had no effect (a later intent calls again). */
  | { s: "failed"; receipt: Extract<EffectReceipt, { state: "failed" }> };

export type EffectEvent =
  /**
   * An attempt asks for the call. `calls_left`: the run's `max_tool_calls` left (absent: no
   * ceiling); `budget_exhausted`: the meter refused its price; `turn`: a model turn (not counted as a call).
   */
  | {
      type: "intent";
      key: string;
      attempt: number;
      server: string;
      tool: string;
      class: ToolClass;
      lookup?: string;
      turn?: boolean;
      calls_left?: number;
      budget_exhausted?: string;
      at: number;
    }
  | { type: "receipt"; receipt: EffectReceipt }
  /** The server answered without acting: it asks a person for input (the next attempt records the intent again and calls with the answers). */
  | { type: "withdrawn" }
  /** The attempt that made the call is gone without its receipt, and nothing may call again (a requested cancel). */
  | { type: "lost"; at: number }
  /** The run's cancel is requested: a call safe to leave unknown is abandoned now, any other is let finish. */
  | { type: "cancel"; key: string; by: string; at: number }
  /** A person's decision on a held key; `cancelled`: under the run's cancel (nothing is called again). */
  | { type: "settle"; key: string; decision: "done" | "retry" | "abandon"; result?: unknown; by: string; at: number; cancelled?: boolean };

export type EffectDecision =
  /** A new call: record the intent, then call. */
  | { decision: "call" }
  /** A lost attempt's call that is safe to repeat: call again with the same key (a server that deduplicates sees one effect). */
  | { decision: "call_again" }
  /** A lost attempt's non-idempotent call whose server can tell whether it happened: ask `tool` first. */
  | { decision: "lookup_first"; tool: string }
  /** The stored receipt answers: no call. */
  | { decision: "answer_from_receipt"; value: unknown }
  /** This attempt's own call is in flight already (one effect, asked twice): nothing is recorded. */
  | { decision: "in_flight" }
  /** The outcome is unknown and the call is not safe to repeat: nothing is called, a person settles it. */
  | { decision: "hold_for_reconciliation" }
  /** A ceiling refuses the call: it is never made. */
  | { decision: "refuse"; reason: "limit_reached" | "budget_exhausted" }
  /** Store this receipt (the key's outcome). */
  | { decision: "record"; receipt: EffectReceipt }
  /** A person settled it: store `receipt`; `then`: what the step does next. */
  | { decision: "settled"; receipt: EffectReceipt; then: "offer" | "fail_step" | "enforce_cancel" }
  /** The call's intent is cleared: nothing happened. */
  | { decision: "clear" }
  /** A requested cancel lets the call finish (its receipt still accepted), or waits on a held key's person. */
  | { decision: "let_finish" }
  /** The event does not apply to this key's state; `reason` says why (nothing changes). */
  | { decision: "ignore"; reason: "no_intent" | "already_settled" | "not_in_flight" | "already_held" | "not_reconciling" };

export const EFFECT_STATES = ["none", "intended", "held", "observed", "failed"] as const;
export const EFFECT_EVENTS = ["intent", "receipt", "withdrawn", "lost", "cancel", "settle"] as const;
type S = (typeof EFFECT_STATES)[number];

/**
 * The machine's table: where each event may take each state (a state to itself: the event is
 * answered and nothing moves). `stepEffect` never leaves it; its tests are generated from it.
 */
export const EFFECT_MOVES: Readonly<Record<S, Readonly<Record<(typeof EFFECT_EVENTS)[number], readonly S[]>>>> = {
  none: { intent: ["intended", "none"], receipt: ["none"], withdrawn: ["none"], lost: ["none"], cancel: ["none"], settle: ["none"] },
  intended: {
    intent: ["intended", "held"],
    receipt: ["observed", "failed"],
    withdrawn: ["none"],
    lost: ["held"],
    cancel: ["failed", "intended"],
    settle: ["intended"],
  },
  held: { intent: ["held"], receipt: ["observed", "failed"], withdrawn: ["held"], lost: ["held"], cancel: ["held"], settle: ["observed", "failed"] },
  observed: { intent: ["observed"], receipt: ["observed"], withdrawn: ["observed"], lost: ["observed"], cancel: ["observed"], settle: ["observed"] },
  failed: { intent: ["intended", "failed"], receipt: ["failed"], withdrawn: ["failed"], lost: ["failed"], cancel: ["failed"], settle: ["failed"] },
};

export interface EffectStep {
  next: EffectState;
  decision: EffectDecision;
}

const NONE: EffectState = { s: "none" };
export { NONE as NO_EFFECT };

/** The key's next state and what to do, for one event. Total: every (state, event) has a closed answer. */
export function stepEffect(state: EffectState, e: EffectEvent): EffectStep {
  switch (e.type) {
    case "intent":
      return onIntent(state, e);
    case "receipt":
      return onReceipt(state, e.receipt);
    case "withdrawn":
      return state.s === "intended"
        ? { next: NONE, decision: { decision: "clear" } }
        : { next: state, decision: { decision: "ignore", reason: "not_in_flight" } };
    case "lost":
      return state.s === "intended"
        ? { next: { s: "held", intent: state.intent, since: e.at }, decision: { decision: "hold_for_reconciliation" } }
        : { next: state, decision: { decision: "ignore", reason: state.s === "held" ? "already_held" : "not_in_flight" } };
    case "cancel":
      // A held key waits for its person: the cancel waits on it as on a call let finish.
      if (state.s === "held") return { next: state, decision: { decision: "let_finish" } };
      if (state.s !== "intended") return { next: state, decision: { decision: "ignore", reason: "not_in_flight" } };
      if (state.intent.class === "non_idempotent") return { next: state, decision: { decision: "let_finish" } };
      return onReceipt(state, {
        key: e.key,
        state: "failed",
        error: { code: "abandoned_by_cancel", message: `the run was cancelled by ${e.by}` },
        at: e.at,
        by: e.by,
      });
    case "settle":
      return onSettle(state, e);
  }
}

function onIntent(state: EffectState, e: Extract<EffectEvent, { type: "intent" }>): EffectStep {
  // A lookup tool named by the lost attempt's intent still answers for it.
  const lookup = e.lookup ?? (state.s === "intended" || state.s === "held" ? state.intent.lookup : undefined);
  const intent: EffectIntent = { server: e.server, tool: e.tool, class: e.class, ...(lookup ? { lookup } : {}), attempt: e.attempt, at: e.at };
  if (state.s === "observed") return { next: state, decision: { decision: "answer_from_receipt", value: state.receipt.value } };
  // The attempt that recorded the intent asks again (its command sent twice): one call, in flight.
  if ((state.s === "intended" || state.s === "held") && state.intent.attempt === e.attempt) return { next: state, decision: { decision: "in_flight" } };
  if (state.s === "held") return { next: state, decision: { decision: "hold_for_reconciliation" } };
  if (state.s === "intended") {
    // A later attempt asks again: its predecessor was lost before the receipt, so nobody knows whether the call happened.
    if (state.intent.class === "non_idempotent" && !lookup)
      return { next: { s: "held", intent: state.intent, since: e.at }, decision: { decision: "hold_for_reconciliation" } };
    if (e.budget_exhausted !== undefined) return { next: state, decision: { decision: "refuse", reason: "budget_exhausted" } };
    const asks = state.intent.class === "non_idempotent" ? lookup : undefined;
    return { next: { s: "intended", intent }, decision: asks ? { decision: "lookup_first", tool: asks } : { decision: "call_again" } };
  }
  // none, or a failed receipt (the call had no effect): a new call, within the ceilings.
  if (!e.turn && e.calls_left !== undefined && e.calls_left <= 0) return { next: state, decision: { decision: "refuse", reason: "limit_reached" } };
  if (e.budget_exhausted !== undefined) return { next: state, decision: { decision: "refuse", reason: "budget_exhausted" } };
  return { next: { s: "intended", intent }, decision: { decision: "call" } };
}

function onReceipt(state: EffectState, receipt: EffectReceipt): EffectStep {
  if (state.s === "none") return { next: state, decision: { decision: "ignore", reason: "no_intent" } };
  if (state.s === "observed" || state.s === "failed") return { next: state, decision: { decision: "ignore", reason: "already_settled" } };
  return { next: settledBy(receipt), decision: { decision: "record", receipt } };
}

function onSettle(state: EffectState, e: Extract<EffectEvent, { type: "settle" }>): EffectStep {
  if (state.s !== "held") return { next: state, decision: { decision: "ignore", reason: "not_reconciling" } };
  const receipt: EffectReceipt =
    e.decision === "done"
      ? { key: e.key, state: "observed", value: e.result ?? null, at: e.at, by: e.by }
      : {
          key: e.key,
          state: "failed",
          error: e.cancelled
            ? { code: "abandoned_by_cancel", message: `${e.by} settled it under the run's cancel` }
            : e.decision === "retry"
              ? { code: "settled_not_done", message: `${e.by} settled it as not done: the call is made again` }
              : { code: "effect_abandoned", message: `${e.by} abandoned it` },
          at: e.at,
          by: e.by,
        };
  const then = e.cancelled ? "enforce_cancel" : e.decision === "abandon" ? "fail_step" : "offer";
  return { next: settledBy(receipt), decision: { decision: "settled", receipt, then } };
}

function settledBy(receipt: EffectReceipt): EffectState {
  return receipt.state === "observed" ? { s: "observed", receipt } : { s: "failed", receipt };
}

/** Where a step keeps its keys' states: its waiting intents, and the one key it is held on (if any). */
export interface EffectHolder {
  intents?: Record<string, EffectIntent>;
  reconcile?: { key: string; server: string; tool: string; since: number };
}

/**
 * Writes a key's next state back on the step that keeps it (a draft the caller copied for write):
 * a waiting intent while intended or held, the step's reconciliation once held. A receipt is the
 * caller's to journal; a settled key leaves the intents (its reconciliation is the caller's to end).
 */
export function keepEffect(holder: EffectHolder, key: string, next: EffectState): void {
  if (next.s === "intended" || next.s === "held") holder.intents = { ...holder.intents, [key]: next.intent };
  else if (holder.intents?.[key]) {
    const { [key]: _done, ...rest } = holder.intents;
    if (Object.keys(rest).length > 0) holder.intents = rest;
    else delete holder.intents;
  }
  if (next.s === "held" && holder.reconcile?.key !== key) holder.reconcile = { key, server: next.intent.server, tool: next.intent.tool, since: next.since };
}

/**
 * A key's state as a step keeps it: an observed receipt (the claim is complete), else its waiting
 * intent (held when the step's reconciliation is on this key), else a failed receipt, else none.
 */
export function effectOf(holder: EffectHolder, key: string, stored?: EffectReceipt): EffectState {
  if (stored?.state === "observed") return { s: "observed", receipt: stored };
  const intent = holder.intents?.[key];
  const r = holder.reconcile;
  if (r?.key === key)
    return { s: "held", intent: intent ?? { server: r.server, tool: r.tool, class: "non_idempotent", attempt: 0, at: r.since }, since: r.since };
  if (intent) return { s: "intended", intent };
  return stored ? settledBy(stored) : NONE;
}
