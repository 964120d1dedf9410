import { describe, expect, it } from "vitest";
import { RunFacts, outputValue } from "../../machines/index.js";
import {
  effectOf,
  keepEffect,
  stepEffect,
  NO_EFFECT,
  EFFECT_EVENTS,
  EFFECT_MOVES,
  EFFECT_STATES,
  type EffectEvent,
  type EffectIntent,
  type EffectState,
} from "../../machines/effect/index.js";

/**
 * The effect machine alone (machines/effect/): rows of (state, event) → (next state, decision).
 * Every transition, and events that do not fit their state, which get closed answers.
 */

const KEY = "k1";
const idem: EffectIntent = { server: "s", tool: "get", class: "idempotent", attempt: 1, at: 10 };
const nonIdem: EffectIntent = { server: "s", tool: "charge", class: "non_idempotent", attempt: 1, at: 10 };
const nonIdemLookup: EffectIntent = { ...nonIdem, lookup: "find_charge" };
const turn: EffectIntent = { server: "model", tool: "m", class: "idempotent", attempt: 1, at: 10 };
const observedReceipt = { key: KEY, state: "observed" as const, value: { ok: 1 }, at: 20 };
const failedReceipt = { key: KEY, state: "failed" as const, error: { code: "boom", message: "no" }, at: 20 };

const none: EffectState = NO_EFFECT;
const intended = (intent: EffectIntent): EffectState => ({ s: "intended", intent });
const held = (intent: EffectIntent, since = 30): EffectState => ({ s: "held", intent, since });
const observed: EffectState = { s: "observed", receipt: observedReceipt };
const failed: EffectState = { s: "failed", receipt: failedReceipt };

function ask(attempt: number, of: EffectIntent, extra: Partial<Extract<EffectEvent, { type: "intent" }>> = {}): EffectEvent {
  return {
    type: "intent",
    key: KEY,
    attempt,
    server: of.server,
    tool: of.tool,
    class: of.class,
    ...(of.lookup ? { lookup: of.lookup } : {}),
    at: 30,
    ...extra,
  };
}

type Row = [name: string, state: EffectState, event: EffectEvent, next: EffectState, decision: unknown];

const rows: Row[] = [
  // A first call.
  ["none + intent → call", none, ask(1, idem), intended({ ...idem, at: 30 }), { decision: "call" }],
  [
    "none + model turn → call (never counted against max_tool_calls)",
    none,
    ask(1, turn, { turn: true, calls_left: 0 }),
    intended({ ...turn, at: 30 }),
    { decision: "call" },
  ],
  ["none + intent past max_tool_calls → refuse limit_reached", none, ask(1, idem, { calls_left: 0 }), none, { decision: "refuse", reason: "limit_reached" }],
  ["none + intent with calls left → call", none, ask(1, idem, { calls_left: 1 }), intended({ ...idem, at: 30 }), { decision: "call" }],
  [
    "none + intent the meter refused → refuse budget_exhausted",
    none,
    ask(1, idem, { budget_exhausted: "5 of 5" }),
    none,
    { decision: "refuse", reason: "budget_exhausted" },
  ],
  // Its receipt.
  [
    "intended + observed receipt → observed, record",
    intended(idem),
    { type: "receipt", receipt: observedReceipt },
    observed,
    { decision: "record", receipt: observedReceipt },
  ],
  [
    "intended + failed receipt → failed, record",
    intended(idem),
    { type: "receipt", receipt: failedReceipt },
    failed,
    { decision: "record", receipt: failedReceipt },
  ],
  [
    "held + late receipt (its call finished after all) → observed, record",
    held(nonIdem),
    { type: "receipt", receipt: observedReceipt },
    observed,
    { decision: "record", receipt: observedReceipt },
  ],
  // Asked again.
  [
    "observed + intent (a later attempt) → answer from the receipt, no call",
    observed,
    ask(2, idem),
    observed,
    { decision: "answer_from_receipt", value: { ok: 1 } },
  ],
  [
    "observed + intent past every ceiling → still answered from the receipt",
    observed,
    ask(2, idem, { calls_left: 0, budget_exhausted: "x" }),
    observed,
    { decision: "answer_from_receipt", value: { ok: 1 } },
  ],
  ["failed + intent → call (it had no effect)", failed, ask(2, idem), intended({ ...idem, attempt: 2, at: 30 }), { decision: "call" }],
  ["failed + intent past max_tool_calls → refuse", failed, ask(2, idem, { calls_left: 0 }), failed, { decision: "refuse", reason: "limit_reached" }],
  ["intended + intent by the same attempt → in flight (one call)", intended(idem), ask(1, idem), intended(idem), { decision: "in_flight" }],
  ["held + intent by the attempt that recorded it → in flight", held(nonIdem), ask(1, nonIdem), held(nonIdem), { decision: "in_flight" }],
  [
    "intended (idempotent) + intent by a later attempt → call again, same key",
    intended(idem),
    ask(2, idem),
    intended({ ...idem, attempt: 2, at: 30 }),
    { decision: "call_again" },
  ],
  [
    "intended (idempotent) + later attempt past max_tool_calls → call again (not a new call)",
    intended(idem),
    ask(2, idem, { calls_left: 0 }),
    intended({ ...idem, attempt: 2, at: 30 }),
    { decision: "call_again" },
  ],
  [
    "intended (model turn) + later attempt → call again",
    intended(turn),
    ask(2, turn, { turn: true }),
    intended({ ...turn, attempt: 2, at: 30 }),
    { decision: "call_again" },
  ],
  [
    "intended (non-idempotent, lookup) + later attempt → lookup first",
    intended(nonIdemLookup),
    ask(2, nonIdemLookup),
    intended({ ...nonIdemLookup, attempt: 2, at: 30 }),
    { decision: "lookup_first", tool: "find_charge" },
  ],
  [
    "intended (non-idempotent, lookup on the intent only) + later attempt → lookup first",
    intended(nonIdemLookup),
    ask(2, nonIdem),
    intended({ ...nonIdemLookup, attempt: 2, at: 30 }),
    { decision: "lookup_first", tool: "find_charge" },
  ],
  [
    "intended (non-idempotent, no lookup) + later attempt → held for reconciliation",
    intended(nonIdem),
    ask(2, nonIdem),
    held(nonIdem),
    { decision: "hold_for_reconciliation" },
  ],
  [
    "intended (non-idempotent, no lookup) + later attempt, budget refused → still held (nothing is called)",
    intended(nonIdem),
    ask(2, nonIdem, { budget_exhausted: "x" }),
    held(nonIdem),
    { decision: "hold_for_reconciliation" },
  ],
  [
    "intended (idempotent) + later attempt the meter refused → refuse",
    intended(idem),
    ask(2, idem, { budget_exhausted: "x" }),
    intended(idem),
    { decision: "refuse", reason: "budget_exhausted" },
  ],
  ["held + intent by another attempt → still held", held(nonIdem), ask(3, nonIdem), held(nonIdem), { decision: "hold_for_reconciliation" }],
  // The server asked a person for input instead of acting: nothing happened.
  ["intended + withdrawn → none, clear", intended(idem), { type: "withdrawn" }, none, { decision: "clear" }],
  ["none + withdrawn → nothing in flight", none, { type: "withdrawn" }, none, { decision: "ignore", reason: "not_in_flight" }],
  [
    "held + withdrawn → nothing in flight (a person settles it)",
    held(nonIdem),
    { type: "withdrawn" },
    held(nonIdem),
    { decision: "ignore", reason: "not_in_flight" },
  ],
  ["observed + withdrawn → nothing in flight", observed, { type: "withdrawn" }, observed, { decision: "ignore", reason: "not_in_flight" }],
  // Its attempt lost (under a requested cancel: nothing may call again).
  ["intended + lost → held", intended(nonIdemLookup), { type: "lost", at: 40 }, held(nonIdemLookup, 40), { decision: "hold_for_reconciliation" }],
  ["held + lost → already held", held(nonIdem), { type: "lost", at: 40 }, held(nonIdem), { decision: "ignore", reason: "already_held" }],
  ["none + lost → nothing in flight", none, { type: "lost", at: 40 }, none, { decision: "ignore", reason: "not_in_flight" }],
  ["observed + lost → nothing in flight", observed, { type: "lost", at: 40 }, observed, { decision: "ignore", reason: "not_in_flight" }],
  // A requested cancel with the call in flight.
  [
    "intended (idempotent) + cancel → failed abandoned_by_cancel",
    intended(idem),
    { type: "cancel", key: KEY, by: "ann", at: 50 },
    { s: "failed", receipt: { key: KEY, state: "failed", error: { code: "abandoned_by_cancel", message: "the run was cancelled by ann" }, at: 50, by: "ann" } },
    {
      decision: "record",
      receipt: { key: KEY, state: "failed", error: { code: "abandoned_by_cancel", message: "the run was cancelled by ann" }, at: 50, by: "ann" },
    },
  ],
  [
    "intended (non-idempotent) + cancel → let finish",
    intended(nonIdem),
    { type: "cancel", key: KEY, by: "ann", at: 50 },
    intended(nonIdem),
    { decision: "let_finish" },
  ],
  [
    "held + cancel → the cancel waits on its person (let finish)",
    held(nonIdem),
    { type: "cancel", key: KEY, by: "ann", at: 50 },
    held(nonIdem),
    { decision: "let_finish" },
  ],
  ["observed + cancel → not in flight", observed, { type: "cancel", key: KEY, by: "ann", at: 50 }, observed, { decision: "ignore", reason: "not_in_flight" }],
  // A person settles a held key.
  [
    "held + settle done → observed, then offer",
    held(nonIdem),
    { type: "settle", key: KEY, decision: "done", result: { id: 7 }, by: "ann", at: 60 },
    { s: "observed", receipt: { key: KEY, state: "observed", value: { id: 7 }, at: 60, by: "ann" } },
    { decision: "settled", receipt: { key: KEY, state: "observed", value: { id: 7 }, at: 60, by: "ann" }, then: "offer" },
  ],
  [
    "held + settle done without a result → observed null",
    held(nonIdem),
    { type: "settle", key: KEY, decision: "done", by: "ann", at: 60 },
    { s: "observed", receipt: { key: KEY, state: "observed", value: null, at: 60, by: "ann" } },
    { decision: "settled", receipt: { key: KEY, state: "observed", value: null, at: 60, by: "ann" }, then: "offer" },
  ],
  [
    "held + settle retry → failed settled_not_done, then offer (called again)",
    held(nonIdem),
    { type: "settle", key: KEY, decision: "retry", by: "ann", at: 60 },
    {
      s: "failed",
      receipt: {
        key: KEY,
        state: "failed",
        error: { code: "settled_not_done", message: "ann settled it as not done: the call is made again" },
        at: 60,
        by: "ann",
      },
    },
    {
      decision: "settled",
      receipt: {
        key: KEY,
        state: "failed",
        error: { code: "settled_not_done", message: "ann settled it as not done: the call is made again" },
        at: 60,
        by: "ann",
      },
      then: "offer",
    },
  ],
  [
    "held + settle abandon → failed effect_abandoned, then the step fails",
    held(nonIdem),
    { type: "settle", key: KEY, decision: "abandon", by: "ann", at: 60 },
    { s: "failed", receipt: { key: KEY, state: "failed", error: { code: "effect_abandoned", message: "ann abandoned it" }, at: 60, by: "ann" } },
    {
      decision: "settled",
      receipt: { key: KEY, state: "failed", error: { code: "effect_abandoned", message: "ann abandoned it" }, at: 60, by: "ann" },
      then: "fail_step",
    },
  ],
  [
    "held + settle retry under a cancel → failed abandoned_by_cancel, then the cancel is enforced",
    held(nonIdem),
    { type: "settle", key: KEY, decision: "retry", by: "ann", at: 60, cancelled: true },
    {
      s: "failed",
      receipt: { key: KEY, state: "failed", error: { code: "abandoned_by_cancel", message: "ann settled it under the run's cancel" }, at: 60, by: "ann" },
    },
    {
      decision: "settled",
      receipt: { key: KEY, state: "failed", error: { code: "abandoned_by_cancel", message: "ann settled it under the run's cancel" }, at: 60, by: "ann" },
      then: "enforce_cancel",
    },
  ],
  [
    "held + settle done under a cancel → observed, then the cancel is enforced",
    held(nonIdem),
    { type: "settle", key: KEY, decision: "done", result: 1, by: "ann", at: 60, cancelled: true },
    { s: "observed", receipt: { key: KEY, state: "observed", value: 1, at: 60, by: "ann" } },
    { decision: "settled", receipt: { key: KEY, state: "observed", value: 1, at: 60, by: "ann" }, then: "enforce_cancel" },
  ],
  // Events out of order: closed answers, nothing changes.
  [
    "none + receipt (an unknown key) → ignored: no intent",
    none,
    { type: "receipt", receipt: observedReceipt },
    none,
    { decision: "ignore", reason: "no_intent" },
  ],
  [
    "observed + late receipt (after reconciliation) → ignored: already settled",
    observed,
    { type: "receipt", receipt: failedReceipt },
    observed,
    { decision: "ignore", reason: "already_settled" },
  ],
  [
    "failed + second receipt → ignored: already settled",
    failed,
    { type: "receipt", receipt: observedReceipt },
    failed,
    { decision: "ignore", reason: "already_settled" },
  ],
  [
    "none + settle → not reconciling",
    none,
    { type: "settle", key: KEY, decision: "done", by: "ann", at: 60 },
    none,
    { decision: "ignore", reason: "not_reconciling" },
  ],
  [
    "intended + settle → not reconciling (its call is in flight)",
    intended(nonIdem),
    { type: "settle", key: KEY, decision: "abandon", by: "ann", at: 60 },
    intended(nonIdem),
    { decision: "ignore", reason: "not_reconciling" },
  ],
  [
    "observed + settle (settled twice) → not reconciling",
    observed,
    { type: "settle", key: KEY, decision: "retry", by: "ann", at: 60 },
    observed,
    { decision: "ignore", reason: "not_reconciling" },
  ],
  [
    "failed + settle → not reconciling",
    failed,
    { type: "settle", key: KEY, decision: "done", by: "ann", at: 60 },
    failed,
    { decision: "ignore", reason: "not_reconciling" },
  ],
  // The rest of the table: events that leave their state as it is.
  ["none + cancel → nothing in flight", none, { type: "cancel", key: KEY, by: "ann", at: 50 }, none, { decision: "ignore", reason: "not_in_flight" }],
  ["failed + cancel → nothing in flight", failed, { type: "cancel", key: KEY, by: "ann", at: 50 }, failed, { decision: "ignore", reason: "not_in_flight" }],
  ["failed + lost → nothing in flight", failed, { type: "lost", at: 40 }, failed, { decision: "ignore", reason: "not_in_flight" }],
  ["failed + withdrawn → nothing in flight", failed, { type: "withdrawn" }, failed, { decision: "ignore", reason: "not_in_flight" }],
  [
    "held + failed receipt → failed, record",
    held(nonIdem),
    { type: "receipt", receipt: failedReceipt },
    failed,
    { decision: "record", receipt: failedReceipt },
  ],
];

describe("effect machine: (state, event) → (next state, decision)", () => {
  it.each(rows)("%s", (_name, state, event, next, decision) => {
    const step = stepEffect(state, event);
    expect(step.decision).toEqual(decision);
    expect(step.next).toEqual(next);
  });

  it("never leaves its table, and the rows above cover every move the table allows", () => {
    const hit = new Set<string>();
    for (const [name, state, event] of rows) {
      const to = stepEffect(state, event).next.s;
      expect(EFFECT_MOVES[state.s][event.type], name).toContain(to);
      hit.add(`${state.s} ${event.type} ${to}`);
    }
    for (const s of EFFECT_STATES)
      for (const e of EFFECT_EVENTS) for (const to of EFFECT_MOVES[s][e]) expect(hit.has(`${s} ${e} ${to}`), `${s} + ${e} → ${to} has no row`).toBe(true);
  });

  it("is total: every state takes every kind of event with a closed decision, never a throw", () => {
    const states = [none, intended(idem), intended(nonIdem), intended(nonIdemLookup), held(nonIdem), observed, failed];
    const events: EffectEvent[] = [
      ask(1, idem),
      ask(2, nonIdem, { calls_left: 0, budget_exhausted: "x" }),
      { type: "receipt", receipt: observedReceipt },
      { type: "receipt", receipt: failedReceipt },
      { type: "lost", at: 1 },
      { type: "withdrawn" },
      { type: "cancel", key: KEY, by: "b", at: 1 },
      { type: "settle", key: KEY, decision: "abandon", by: "b", at: 1 },
    ];
    const closed = new Set([
      "call",
      "call_again",
      "lookup_first",
      "answer_from_receipt",
      "in_flight",
      "hold_for_reconciliation",
      "refuse",
      "record",
      "settled",
      "clear",
      "let_finish",
      "ignore",
    ]);
    for (const s of states)
      for (const e of events) {
        const step = stepEffect(s, e);
        expect(closed.has(step.decision.decision)).toBe(true);
        // An ignored event leaves the state as it was.
        if (step.decision.decision === "ignore") expect(step.next).toBe(s);
      }
  });

  it("does not change the state it is given", () => {
    const s = intended(nonIdem);
    const copy = structuredClone(s);
    stepEffect(s, ask(2, nonIdem));
    stepEffect(s, { type: "lost", at: 9 });
    expect(s).toEqual(copy);
  });
});

describe("effect machine: a key's state as a step keeps it (effectOf, keepEffect)", () => {
  it.each([
    ["nothing", {}, undefined, none],
    ["a waiting intent", { intents: { [KEY]: idem } }, undefined, intended(idem)],
    ["another key's intent", { intents: { other: idem } }, undefined, none],
    [
      "a waiting intent the step is held on",
      { intents: { [KEY]: nonIdem }, reconcile: { key: KEY, server: "s", tool: "charge", since: 30 } },
      undefined,
      held(nonIdem),
    ],
    ["an observed receipt (the claim is complete, whatever else)", { intents: { [KEY]: idem } }, observedReceipt, observed],
    ["a failed receipt and a new intent", { intents: { [KEY]: { ...idem, attempt: 2 } } }, failedReceipt, intended({ ...idem, attempt: 2 })],
    ["a failed receipt only", {}, failedReceipt, failed],
  ] as const)("%s", (_name, holder, stored, state) => {
    expect(effectOf(holder, KEY, stored)).toEqual(state);
  });

  it("writes a next state back: intended and held keep the intent, held the step's reconciliation, a settled key leaves", () => {
    const holder: { intents?: Record<string, EffectIntent>; reconcile?: { key: string; server: string; tool: string; since: number } } = {
      intents: { other: idem },
    };
    keepEffect(holder, KEY, intended(nonIdem));
    expect(holder).toEqual({ intents: { other: idem, [KEY]: nonIdem } });
    keepEffect(holder, KEY, held(nonIdem, 40));
    expect(holder).toEqual({ intents: { other: idem, [KEY]: nonIdem }, reconcile: { key: KEY, server: "s", tool: "charge", since: 40 } });
    keepEffect(holder, KEY, observed);
    expect(holder).toEqual({ intents: { other: idem }, reconcile: { key: KEY, server: "s", tool: "charge", since: 40 } });
    keepEffect(holder, "other", NO_EFFECT);
    expect(holder.intents).toBeUndefined();
  });

  it("a step held on a key whose intent a late receipt answered is still held (a person settles it)", () => {
    expect(effectOf({ reconcile: { key: KEY, server: "s", tool: "charge", since: 30 } }, KEY)).toEqual({
      s: "held",
      intent: { server: "s", tool: "charge", class: "non_idempotent", attempt: 0, at: 30 },
      since: 30,
    });
  });
});

describe("a tool step's output names its receipt (journaled once)", () => {
  const receipt = { t: "receipt" as const, key: "r1", state: "observed" as const, value: { big: "answer" }, at: 1 };
  const output = { t: "output" as const, node: "call", receipt: "r1" };

  it("the run's memory reads the receipt's value as the output, rebuilt from the journal or pending in a batch", () => {
    const stored = new RunFacts();
    stored.add({ t: "input", value: {} });
    stored.add(receipt);
    stored.add(output);
    expect(stored.output("call")).toEqual({ big: "answer" });
    const base = new RunFacts();
    base.add({ t: "input", value: {} });
    expect(base.with([receipt, output]).output("call")).toEqual({ big: "answer" });
    // Its receipt stored in an earlier write, the output in this batch.
    const earlier = new RunFacts();
    earlier.add(receipt);
    expect(earlier.with([output]).output("call")).toEqual({ big: "answer" });
  });

  it("an output naming no observed receipt reads null (never a throw)", () => {
    expect(outputValue(output, () => undefined)).toBeNull();
    expect(outputValue(output, () => ({ key: "r1", state: "failed", error: { code: "x", message: "y" }, at: 1 }))).toBeNull();
    expect(outputValue({ t: "output", node: "call", value: 3 }, () => undefined)).toBe(3);
  });
});
