import { applyStepOp, type StepError } from "../step/index.js";
import { holderOf, offer, parkAttempt, policyOf, pumpMap, retryOrFail, takeOffer, type Holder } from "./attempts.js";
import { onHeartbeat } from "./leases.js";
import { publish, TASK_POLL, type Draft, type TaskPoll } from "./draft.js";
import { advance } from "./progression.js";
import { ceilingDrain, stopHolder } from "./ceilings.js";
import { liveItem, removeItem } from "./items.js";
import { effectOf, keepEffect, stepEffect, type EffectDecision, type EffectEvent, type EffectState, type EffectStep } from "../effect/index.js";
import type { PendingIntent, Receipt, RunContext } from "./types.js";
import type { ExecutionEvent } from "./requests.js";

/**
 * Effect intents and receipts: the journal is the authority on every call that may change the world.
 * An attempt records an intent (fenced by its lease and the cancellation epoch) before the call; the
 * receipt answers it. Asked again for the same key: a stored receipt answers without a call; an
 * intent without one (its attempt lost) is called again only if the tool is safe to repeat, looked
 * up first if its server can, and otherwise held for a person to settle. Those decisions are the
 * effect machine's (`machines/effect/`, for tool calls and model turns alike); this file keeps its
 * states on the run's steps (`intents`, `reconcile`), journals the receipts and answers the attempt.
 */

type On<T extends ExecutionEvent["type"]> = Extract<ExecutionEvent, { type: T }>;

/** An effect key's open reconciliation in the run, if any: the holder that waits on it. */
export function reconciling(run: RunContext | null | undefined, key: string): { node: string; item?: number; holder: Holder } | undefined {
  for (const [id, n] of Object.entries(run?.nodes ?? {})) {
    if (n.s !== "active") continue;
    if (n.reconcile?.key === key) return { node: id, holder: n };
    for (const i in n.map?.live) if (n.map.live[i]!.reconcile?.key === key) return { node: id, item: Number(i), holder: liveItem(n.map, i)! };
  }
  return undefined;
}

/** An intent command as the effect machine's event: with the run's `max_tool_calls` left, and its time. */
function intentEvent(run: RunContext | null | undefined, plan: On<"effect.intent">["plan"] | undefined, e: On<"effect.intent">): EffectEvent {
  const limit = plan?.limits?.max_tool_calls;
  return {
    type: "intent",
    key: e.key,
    attempt: e.attempt,
    server: e.server,
    tool: e.tool,
    class: e.class,
    ...(e.lookup ? { lookup: e.lookup } : {}),
    ...(e.turn ? { turn: true } : {}),
    ...(limit !== undefined ? { calls_left: limit - (run?.usage?.tool_calls ?? 0) } : {}),
    ...(e.budget_exhausted !== undefined ? { budget_exhausted: e.budget_exhausted } : {}),
    at: e.now,
  };
}

/** The effect key's state in the run: its step's waiting intent or reconciliation, else its stored receipt. */
function effectIn(run: RunContext | null | undefined, e: On<"effect.intent">): EffectState {
  const n = run?.nodes[e.node];
  return effectOf((n ? holderOf(n, e.item) : undefined) ?? {}, e.key, e.memory?.receipt(e.key));
}

/** What the effect machine decides on an intent command (its state as the run keeps it). */
export function intentDecision(run: RunContext | null | undefined, e: ExecutionEvent): EffectStep | undefined {
  if (e.type !== "effect.intent") return undefined;
  return stepEffect(effectIn(run, e), intentEvent(run, e.plan, e));
}

/** The stored receipt that completes the claim an intent asks for (the caller gets its response). */
export function completedClaim(run: RunContext | null | undefined, e: ExecutionEvent): { value: unknown } | undefined {
  const step = intentDecision(run, e);
  return step?.decision.decision === "answer_from_receipt" ? { value: step.decision.value } : undefined;
}

/** The intent was already recorded by this same attempt: its call is in flight (one effect, asked twice). */
export function intentInFlight(run: RunContext | null | undefined, e: ExecutionEvent): boolean {
  return intentDecision(run, e)?.decision.decision === "in_flight";
}

export function onIntent(d: Draft, e: On<"effect.intent">): void {
  const holder = holderOf(d.run.nodes[e.node]!, e.item)!;
  const state = effectOf(holder, e.key, d.memory.receipt(e.key));
  const { next, decision } = stepEffect(state, intentEvent(d.run, d.plan, e));
  switch (decision.decision) {
    case "hold_for_reconciliation":
      return park(d, e, holder, next.s === "held" ? next.intent : holder.intents![e.key]!);
    case "refuse":
      // A call beyond a ceiling is never made: its attempt stops and the run drains.
      d.effects.push({ type: "runway.answer", value: { outcome: decision.reason } });
      return decision.reason === "limit_reached"
        ? refuseCall(d, e, holder, `max_tool_calls (${d.plan.limits?.max_tool_calls})`, "limit_reached")
        : refuseCall(d, e, holder, `max_cost_cents (${e.budget_exhausted})`, "budget_exhausted");
    case "answer_from_receipt":
      // Guarded before (`claimCompleted`): answered at no write.
      d.effects.push({ type: "runway.answer", value: { outcome: "observed", value: decision.value } });
      return;
    case "in_flight":
      d.effects.push({ type: "runway.answer", value: { outcome: "in_flight" } });
      return;
    case "call":
    case "call_again":
    case "lookup_first":
      return recordCall(d, e, holder, next, decision);
    default:
      // No other decision answers an intent (`stepEffect`): nothing is recorded.
      d.effects.push({ type: "runway.answer", value: { outcome: "in_flight" } });
      return;
  }
}

/** The machine decided a call (new, again, or after a lookup): its count and price, the intent kept, and the attempt's answer. */
function recordCall(
  d: Draft,
  e: On<"effect.intent">,
  holder: Holder,
  next: EffectState,
  decision: Extract<EffectDecision, { decision: "call" | "call_again" | "lookup_first" }>,
): void {
  const again = decision.decision !== "call";
  const usage = d.run.usage ?? { steps: 0, tool_calls: 0 };
  const cost = e.cost_cents ?? 0;
  if ((!again && !e.turn) || cost > 0)
    d.run.usage = {
      ...usage,
      tool_calls: usage.tool_calls + (again || e.turn ? 0 : 1),
      ...(cost > 0 || usage.cost_cents ? { cost_cents: (usage.cost_cents ?? 0) + cost } : {}),
    };
  // The attempt now holds a lease (the intent is its first write), so a lost node's attempt is recovered as lost.
  if (holder.step!.status === "ready") onHeartbeat(d, e, { durable: false });
  keepEffect(holder, e.key, next);
  const where = { node: e.node, ...(e.item !== undefined ? { item: e.item } : {}) };
  // A person answered this tool's request for input: the call is made (again, for a lost attempt's) with the answers.
  const a = e.item === undefined ? d.run.nodes[e.node]!.approval : undefined;
  const answered = a && a.state !== "pending" && a.input && a.id.includes(`:input.${e.server}/${e.tool}.`) ? a.input : undefined;
  const input = answered ? { input: { responses: answered.responses, state: answered.state } } : {};
  if (again) {
    // Safe to call again (the same key goes with the call, so a server that deduplicates sees one
    // effect), or the server can tell whether it happened: ask it first.
    const asks = decision.decision === "lookup_first" ? decision.tool : undefined;
    publish(d, "effect_reconciling", {
      ...where,
      attempt: e.attempt,
      key: e.key,
      server: e.server,
      tool: e.tool,
      class: e.class,
      ...(asks ? { lookup: asks } : {}),
    });
    d.effects.push({ type: "runway.answer", value: asks ? { outcome: "lookup", tool: asks, ...input } : { outcome: "reconcile", ...input } });
    return;
  }
  d.effects.push({
    type: "runway.journal",
    data: {
      t: "intent",
      key: e.key,
      ...where,
      attempt: e.attempt,
      server: e.server,
      tool: e.tool,
      class: e.class,
      arguments: e.arguments ?? null,
      at: d.now,
      ...(e.turn ? { turn: true } : {}),
    },
  });
  publish(d, "effect_intent", { ...where, attempt: e.attempt, key: e.key, server: e.server, tool: e.tool, class: e.class });
  d.effects.push({ type: "runway.answer", value: { outcome: "recorded", ...input } });
}

/**
 * A call a ceiling refuses (`max_tool_calls`, or the tree's money): it is not made, the asking attempt stops (a map
 * item at this input position: the map keeps the items before it), and the run drains.
 */
function refuseCall(d: Draft, e: On<"effect.intent">, holder: Holder, which: string, reason: "limit_reached" | "budget_exhausted"): void {
  const n = d.run.nodes[e.node]!;
  if (holder.step!.status === "ready") takeOffer(d, holder);
  stopHolder(holder, d.now);
  if (e.item !== undefined) {
    removeItem(n.map!, String(e.item));
    n.map!.stopped_at = Math.min(n.map!.stopped_at ?? e.item, e.item);
  } else n.s = "cancelled";
  publish(d, "step_stopped", { node: e.node, ...(e.item !== undefined ? { item: e.item } : {}), reason });
  ceilingDrain(d, which, reason);
  advance(d);
}

/**
 * An intent of a lost attempt on a tool that must not be called twice: the asking attempt ends
 * (its step goes back to ready, not counted against its retries) and the step is held until a
 * person settles the intent. Nothing is called.
 */
function park(d: Draft, e: On<"effect.intent">, holder: Holder, pending: PendingIntent): void {
  const error: StepError = {
    code: "needs_reconciliation",
    message: `the outcome of ${pending.server}/${pending.tool} (${e.key}) is unknown and the tool is not safe to call again: a person must settle it`,
    retryable: true,
  };
  const attempt = parkAttempt(d, holder, d.byId.get(e.node)!, error);
  holder.reconcile = { key: e.key, server: pending.server, tool: pending.tool, since: d.now };
  publish(d, "step_needs_reconciliation", {
    node: e.node,
    ...(e.item !== undefined ? { item: e.item } : {}),
    attempt,
    key: e.key,
    server: pending.server,
    tool: pending.tool,
  });
  d.effects.push({ type: "runway.answer", value: { outcome: "parked" } });
}

/** Stores a receipt for one of the holder's waiting intents (a receipt for no waiting intent is dropped: it was settled). */
export function recordReceipt(d: Draft, node: string, item: number | undefined, holder: Holder, receipt: Receipt, cost_cents = 0): boolean {
  const pending = holder.intents?.[receipt.key];
  // The key as the step keeps it (a receipt for it stored already is not asked for: its intent is gone).
  const { next, decision } = stepEffect(effectOf(holder, receipt.key), { type: "receipt", receipt });
  // Recorded only for a waiting intent (a held key whose intent a late receipt answered has none left).
  if (decision.decision !== "record" || !pending) return false;
  keepEffect(holder, receipt.key, next);
  d.effects.push({ type: "runway.journal", data: { t: "receipt", ...receipt, ...(cost_cents > 0 ? { cost_cents } : {}) } });
  d.run.receipts = (d.run.receipts ?? 0) + 1;
  publish(d, receipt.state === "observed" ? "effect_observed" : "effect_failed", {
    node,
    ...(item !== undefined ? { item } : {}),
    key: receipt.key,
    server: pending.server,
    tool: pending.tool,
    ...(receipt.state === "failed" ? { error: receipt.error } : {}),
    ...(receipt.by !== undefined ? { by: receipt.by } : {}),
  });
  return true;
}

/**
 * The call became an MCP task: its id is journaled, the attempt's worker is free (the executor
 * ends the attempt), and a durable timer polls the task at the server's interval. The attempt
 * keeps its lease: the task's result is its result, fenced like any other.
 */
export function onTask(d: Draft, e: On<"effect.task">): void {
  const holder = holderOf(d.run.nodes[e.node]!, e.item)!;
  if (holder.step!.status === "ready") onHeartbeat(d, e, { durable: false });
  holder.task = {
    key: e.key,
    id: e.task_id,
    server: e.server,
    tool: e.tool,
    wire: e.wire,
    poll_ms: e.poll_ms,
    since: d.now,
    ...(e.writes !== undefined ? { writes: e.writes } : {}),
  };
  // The task's poll timer follows it now: no worker holds the attempt, so no lease can lapse.
  delete holder.lease_expires_at;
  d.effects.push({ type: "runway.journal", data: { t: "task", key: e.key, id: e.task_id, server: e.server, tool: e.tool, wire: e.wire, at: d.now } });
  publish(d, "tool_task_started", {
    node: e.node,
    ...(e.item !== undefined ? { item: e.item } : {}),
    attempt: e.attempt,
    key: e.key,
    task: e.task_id,
    server: e.server,
    tool: e.tool,
  });
  taskTimer(d, e.node, e.item, holder);
  d.effects.push({ type: "runway.answer", value: { outcome: "waiting" } });
}

function taskTimer(d: Draft, node: string, item: number | undefined, holder: Holder): void {
  const s = holder.step!;
  d.effects.push({
    type: "runway.timer.set",
    name: `task-${node}-${item ?? "x"}`,
    at: d.now + holder.task!.poll_ms,
    event: { type: "timer.fired", kind: "task", node, ...(item !== undefined ? { item } : {}), attempt: s.attempt, lease_epoch: s.lease_epoch },
  });
}

/**
 * A task's poll is due: this node's executor asks the server (a local hand-over) and reports
 * the task's result when it ended. The next poll is armed now, so a poll lost with its node is
 * made again by whoever serves the run next.
 */
export function pollTask(d: Draft, node: string, item: number | undefined): void {
  const holder = holderOf(d.run.nodes[node]!, item)!;
  const s = holder.step!;
  taskTimer(d, node, item, holder);
  const r = d.run;
  d.effects.push({
    type: "runway.local",
    channel: TASK_POLL,
    payload: <TaskPoll>{
      run: r.id,
      root: r.root_run_id,
      tenant: r.tenant,
      node,
      ...(item !== undefined ? { item } : {}),
      attempt: s.attempt,
      lease_epoch: s.lease_epoch,
      cancellation_epoch: r.cancellation_epoch,
      task: holder.task!,
    },
  });
}

export function onReceipt(d: Draft, e: On<"effect.receipt">): void {
  const holder = holderOf(d.run.nodes[e.node]!, e.item)!;
  const cost = e.cost_cents ?? 0;
  if (recordReceipt(d, e.node, e.item, holder, e.receipt, cost) && cost > 0) {
    // A priced model turn: what the meter settled it to, counted once (a receipt is recorded once).
    const usage = d.run.usage ?? { steps: 0, tool_calls: 0 };
    d.run.usage = { ...usage, cost_cents: (usage.cost_cents ?? 0) + cost };
  }
  d.effects.push({ type: "runway.answer", value: { outcome: "recorded" } });
}

/**
 * A person settles an intent whose outcome was unknown. `done`: the call happened and returned
 * `result` (stored as its receipt; the step's next attempt gets it without a call). `retry`: it
 * did not happen (the step's next attempt calls again). `abandon`: the step fails
 * `effect_abandoned`, whatever its retries.
 */
export function onSettle(d: Draft, e: On<"effect.settle">): void {
  const found = reconciling(d.run, e.key)!;
  const { node: id, item, holder } = found;
  const node = d.byId.get(id)!;
  const { decision } = stepEffect(effectOf(holder, e.key), { type: "settle", key: e.key, decision: e.decision, result: e.result, by: e.by, at: d.now });
  delete holder.reconcile;
  if (decision.decision !== "settled") return;
  recordReceipt(d, id, item, holder, decision.receipt);
  d.effects.push({ type: "runway.answer", value: { outcome: "settled", decision: e.decision, node: id, ...(item !== undefined ? { item } : {}) } });
  if (decision.then === "fail_step") {
    const minted = applyStepOp(holder.step!, { op: "lease", now: d.now });
    if (minted.outcome === "moved") {
      const error: StepError = { code: "effect_abandoned", message: `the intent ${e.key} was abandoned by ${e.by}`, retryable: false };
      const r = applyStepOp(minted.state, {
        op: "fail",
        now: d.now,
        attempt: minted.state.attempt,
        lease_epoch: minted.state.lease_epoch,
        error,
        policy: policyOf(node),
      });
      if (r.outcome === "moved") holder.step = r.state;
      retryOrFail(d, node, item, error);
    }
  } else if (node.kind === "map") pumpMap(d, node);
  else offer(d, node, holder, undefined);
  advance(d);
}
